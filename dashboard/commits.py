"""Commit messages and links for the hover text, from the subject's own checkout where one is at hand.

The store keeps hashes and dates only (asv records no messages). The subject
named by an asv config (`flybench dashboard --config`, default
./asv.conf.json, passed as $FLYBENCH_ASV_CONFIG) gets its messages from its
repository's `git log`, and its commit links from asv's `show_commit_url` or
a GitHub/GitLab `project_url`. Other subjects show hash and date only.
"""

from __future__ import annotations

import functools
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import streamlit as st
from asv.util import UserError, load_json
from flybench import envvars



@dataclass(frozen=True)
class Repo:
    """Where one subject's commits can be looked up."""

    subject: str
    path: Path | None
    commit_url: str | None


def repo() -> Repo | None:
    """The subject of the configured asv config, or None when there is no readable config."""
    config = Path(os.environ.get(envvars.ASV_CONFIG) or "asv.conf.json")
    return _read(config, config.stat().st_mtime_ns if config.is_file() else 0)


@functools.lru_cache(maxsize=8)
def _read(config: Path, mtime_ns: int) -> Repo | None:
    """Parsed once per version of the file (asv's commented-JSON reader is slow enough to notice)."""
    try:
        conf = load_json(str(config), js_comments=True)
    except (OSError, ValueError, UserError):  # no config, or not one: hovers simply have no messages
        return None
    repo_dir = (config.parent / str(conf.get("repo", "."))).resolve()
    url = conf.get("show_commit_url") or ""
    project_url = str(conf.get("project_url") or "").rstrip("/")
    if not url and any(host in project_url for host in ("github.com", "gitlab")):
        url = f"{project_url}/commit/"
    return Repo(str(conf.get("project", "")), repo_dir if (repo_dir / ".git").exists() else None, url or None)


@st.cache_data(ttl=300, show_spinner=False)
def log(repo_dir: str) -> dict[str, tuple[str, str]]:
    """Subject line and author of every commit in the repository (cached a few minutes: new commits show up)."""
    done = subprocess.run(["git", "-C", repo_dir, "log", "--all", "--format=%H%x1f%s%x1f%an"],
                          capture_output=True, text=True, check=False)
    return {fields[0]: (fields[1], fields[2]) for fields in (line.split("\x1f") for line in done.stdout.splitlines())
            if len(fields) == 3}


def annotate(frame: pd.DataFrame, titles: pd.DataFrame | None = None) -> pd.DataFrame:
    """A copy with `short` (8 characters), `message` and `author` ('' where unknown) and `url` (None where unknown).

    `titles` (subject, hash, title), as `queries.commit_titles` gives them, name
    the commits of subjects with no checkout at hand (FlyDSL's, when imported);
    authors come from a checkout only.
    """
    out = frame.copy()
    out["short"] = out["commit_hash"].str[:8]
    out["message"] = ""
    out["author"] = ""
    out["url"] = None
    if titles is not None and not titles.empty and not out.empty:
        known = dict(zip(zip(titles["subject"], titles["hash"]), titles["title"]))
        out["message"] = [known.get(k, "") for k in zip(out["subject"], out["commit_hash"])]
    where = repo()
    if where is None or out.empty:
        return out
    mine = out["subject"] == where.subject
    if where.path is not None:
        known = log(str(where.path))
        found = out.loc[mine, "commit_hash"].map(known)
        out.loc[mine, "message"] = [f[0] if isinstance(f, tuple) else "" for f in found]
        out.loc[mine, "author"] = [f[1] if isinstance(f, tuple) else "" for f in found]
    if where.commit_url:
        out.loc[mine, "url"] = where.commit_url + out.loc[mine, "commit_hash"]
    return out
