"""Compile-only metrics over FlyDSL's history: the static suite at each upstream commit, into asv results.

    python -m flybench.compile.history --flydsl-repo ~/FlyDSL --limit 40

For every commit of the clone that touches the kernels measured here
(`kernels/attention`, `kernels/moe` by default), oldest first, this exports
the commit's `kernels/` tree, installs the FlyDSL wheel of that time, and
runs the `compile_metrics` asv suite with `--set-commit-hash` under the
FlyDSL subject's asv config (`results/flydsl/asv.conf.json`, the clone
standing in for its `repo` so asv reads commit dates from it). Results land
in `results/flydsl/<machine>/`; `flybench ingest results/flydsl` stores
them apart from flybench's own commits.

Why a wheel per commit: the kernels import the `flydsl` package of their
own time, and its Python API moves (kernels of July 2026 import names that
0.5.0 no longer has). FlyDSL's wheels are numbered by the count of commits
they were built from (`0.3.1.dev804` is commit 804 of main; a release counts
as its tag), so a commit gets the first wheel built at or after it. The
wheel used is recorded with every result (the toolchain versions of the
compile records and asv's environment), and a commit whose kernels do not
compile with it is stored as failed with the compiler's reason.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from flybench import envvars, revisions
from flybench.compile.cache import ROOT, cache_root
from flybench.compile.registry import CHECKOUT_CASES
from flybench.errors import FlybenchError

CONFIG = ROOT / "results" / "flydsl" / "asv.conf.json"
PATHS = ("kernels/attention", "kernels/moe")


@dataclass(frozen=True)
class Commit:
    hash: str
    count: int  # commits reachable from it, the number FlyDSL's dev wheels carry
    date: str
    subject: str


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise FlybenchError(f"git {' '.join(args)} in {repo} failed: {done.stderr.strip()}")
    return done.stdout


def touching_commits(repo: Path, paths: tuple[str, ...], ref: str = "HEAD") -> list[Commit]:
    """The first-parent commits of `ref` that change `paths`, oldest first."""
    lines = git(repo, "log", "--first-parent", "--format=%H%x09%cs%x09%s", full_hash(repo, ref, "--ref"), "--",
                *paths).splitlines()
    commits = []
    for line in reversed(lines):
        sha, date, subject = line.split("\t", 2)
        commits.append(Commit(sha, int(git(repo, "rev-list", "--count", sha)), date, subject))
    return commits


def named_commits(repo: Path, names: list[str]) -> list[Commit]:
    """The commits given by name (hash, branch, tag), in the order given."""
    commits = []
    for name in names:
        sha, date, subject = git(repo, "log", "-1", "--format=%H%x09%cs%x09%s",
                                 full_hash(repo, name, "--commit")).strip().split("\t", 2)
        commits.append(Commit(sha, int(git(repo, "rev-list", "--count", sha)), date, subject))
    return commits


def full_hash(repo: Path, name: str, flag: str) -> str:
    """The commit `name` (given with `flag`) names in `repo`, checked by `revisions` before git reads it."""
    full = revisions.commit(repo, name, flag)
    if full is None:
        raise FlybenchError(f"{flag} {name!r} is not a commit of {repo}: give a hash, branch or tag of that clone")
    return full


def wheel_counts(repo: Path, versions: list[str]) -> dict[str, int]:
    """Each wheel's build commit count: `X.devN` is N; a release is its tag's count (unknown tags left out)."""
    tags = set(git(repo, "tag", "--list", "v*").split())
    counts = {}
    for version in versions:
        if match := re.fullmatch(r"[\d.]+\.dev(\d+)", version):
            counts[version] = int(match.group(1))
        elif f"v{version}" in tags:
            counts[version] = int(git(repo, "rev-list", "--count", f"v{version}"))
    return counts


def wheel_for(commit: Commit, counts: dict[str, int]) -> str:
    """The first wheel built at or after the commit; the newest one for commits past every wheel."""
    later = [(count, version) for version, count in counts.items() if count >= commit.count]
    return min(later)[1] if later else max((c, v) for v, c in counts.items())[1]


def published_versions() -> list[str]:
    done = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "--pre", "flydsl"],
                          capture_output=True, text=True)
    match = re.search(r"Available versions: (.*)", done.stdout)
    if not match:
        raise FlybenchError(f"cannot list FlyDSL's published wheels with pip: {done.stderr.strip()[-400:]}")
    return [v.strip() for v in match.group(1).split(",")]


def install_wheel(version: str, root: Path) -> Path:
    """flydsl==version, alone, in its own directory (reused when already there)."""
    target = root / f"flydsl-{version}"
    if not (target / ".complete").exists():
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
                               str(target), f"flydsl=={version}"], capture_output=True, text=True)
        if done.returncode != 0:
            raise FlybenchError(f"cannot install flydsl=={version}: {done.stderr.strip()[-400:]}")
        (target / ".complete").write_text(version)
    return target


def export_kernels(repo: Path, commit: Commit, root: Path) -> Path:
    """The commit's kernels/ tree, as files (a work tree of its own is not needed to compile)."""
    dest = root / commit.hash[:12]
    if not (dest / "kernels").is_dir():
        dest.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(repo), "archive", commit.hash, "kernels"], capture_output=True,
                                 check=True)
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest


def asv_config(repo: Path, directory: Path) -> Path:
    """The subject's committed asv config with the local clone as its repo and absolute paths."""
    config = json.loads(CONFIG.read_text())
    config.update(repo=str(repo), benchmark_dir=str(ROOT / "benchmarks"), results_dir=str(CONFIG.parent),
                  html_dir=str(directory / "html"), env_dir=str(directory / "env"))
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "asv.conf.json"
    path.write_text(json.dumps(config, indent=2))
    return path


def run_commit(commit: Commit, src: Path, wheel: Path, config: Path, machine: str) -> int:
    """One asv run of the compile suite for one commit; asv's exit status."""
    path = os.pathsep.join([str(wheel), str(ROOT)])
    env = {**os.environ, envvars.FLYDSL_SRC: str(src), "PYTHONPATH": path, "ASV_PYTHONPATH": path}
    command = [sys.executable, "-m", "asv", "run", "--config", str(config), "--python=same", "--set-commit-hash",
               commit.hash, "--machine", machine, "--bench", "compile_metrics", "--quick"]
    return subprocess.run(command, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE).returncode


def outcomes(commit: Commit, src: Path, wheel: Path) -> list[dict]:
    """The records of the checkout kernels of one commit under its wheel, as `python -m flybench.compile` reports
    them (from the compile cache once the commit has been run; compiling what is missing otherwise)."""
    path = os.pathsep.join([str(wheel), str(ROOT)])
    names = [arg for case in CHECKOUT_CASES for arg in ("-k", case.name)]
    done = subprocess.run([sys.executable, "-m", "flybench.compile", "--flydsl-src", str(src), "--arch", "gfx942",
                           "--arch", "gfx950", "--format", "json", *names], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": path})
    if done.returncode == 2 or not done.stdout.strip():
        raise FlybenchError(f"{commit.hash[:10]}: python -m flybench.compile failed: {done.stderr.strip()[-300:]}")
    return json.loads(done.stdout)


def summary(plan: list[tuple[Commit, str]], work: Path, repo: Path) -> str:
    """Markdown: per commit, the wheel used and how its checkout kernels fared on gfx942 and gfx950."""
    lines = ["| commit | date | wheel | compiled | failed | absent | n/a | first failure |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | --- |"]
    for commit, version in plan:
        records = outcomes(commit, export_kernels(repo, commit, work / "trees"), install_wheel(version, work / "wheels"))
        count = {s: sum(r["status"] == s for r in records) for s in ("ok", "failed", "unavailable", "not_applicable")}
        reasons = sorted({(r["reason"] or "").split(" (at ")[0][:90] for r in records if r["status"] == "failed"})
        lines.append(f"| `{commit.hash[:8]}` {commit.subject[:48]} | {commit.date} | {version} | {count['ok']} | "
                     f"{count['failed']} | {count['unavailable']} | {count['not_applicable']} | "
                     f"{reasons[0] if reasons else ''} |")
    return "\n".join(lines)


_PR = re.compile(r"\(#(\d+)\)\s*$")
NOTES = CONFIG.parent / "commits.jsonl"
"""What the compile history says of its commits beyond asv's hash and date (flybench.store.commit_notes)."""


def llvm_of(repo: Path, version: str, count: int) -> str | None:
    """The LLVM the wheel `version` was built with: FlyDSL's pinned LLVM commit at its tag, else at main's
    newest commit numbered at most `count` (a dev wheel's build commit, or the clone's head when the wheel is
    newer than the clone); None where that tree does not record it."""
    tags = set(git(repo, "tag", "--list", "v*").split())
    at = f"v{version}" if f"v{version}" in tags else None
    if at is None:
        main = git(repo, "rev-list", "--first-parent", "--reverse", "HEAD").split()
        low, high = 0, len(main)  # the count grows along main's first parents: bisect for the build commit
        while low < high:
            middle = (low + high) // 2
            if int(git(repo, "rev-list", "--count", main[middle])) <= count:
                low = middle + 1
            else:
                high = middle
        at = main[low - 1] if low else None
    if at is None:
        return None
    try:  # thirdparty/llvm-hash.txt until the LLVM bump of #945, llvm-build-info.json from it on
        info = json.loads(git(repo, "show", f"{at}:thirdparty/llvm-build-info.json"))
        return (info.get("upstream") or {}).get("llvm_hash")
    except (FlybenchError, ValueError):
        pass
    try:
        return git(repo, "show", f"{at}:thirdparty/llvm-hash.txt").strip() or None
    except FlybenchError:
        return None


def note(commit: Commit, wheel: str, llvm: str | None, failures: dict[str, tuple[int, str]]) -> dict:
    """One line of `commits.jsonl`: title, pull request, the compiler (wheel and its LLVM), failed compiles."""
    failed, first = failures.get(commit.hash, (None, None))
    pr = _PR.search(commit.subject)
    return {"hash": commit.hash, "title": commit.subject, "pr": int(pr.group(1)) if pr else None, "wheel": wheel,
            "llvm": llvm, "failed_compiles": failed, "first_failure": first or None}


def write_notes(plan: list[tuple[Commit, str]], counts: dict[str, int], repo: Path, path: Path = NOTES,
                failures: dict[str, tuple[int, str]] | None = None) -> Path:
    """`commits.jsonl` for the commits of `plan`, merged into the notes already there (a commit's new note wins)."""
    kept = {}
    if path.is_file():
        kept = {n["hash"]: n for n in map(json.loads, filter(str.strip, path.read_text().splitlines()))}
    llvm = {version: llvm_of(repo, version, count) for version, count in counts.items() if version in {v for _, v in plan}}
    for commit, version in plan:
        old = kept.get(commit.hash, {})
        new = note(commit, version, llvm.get(version), failures or {})
        kept[commit.hash] = {**new, **{k: old[k] for k in ("failed_compiles", "first_failure")
                                       if new[k] is None and old.get(k) is not None}}
    path.write_text("".join(json.dumps(n) + "\n" for n in kept.values()))
    return path


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m flybench.compile.history", description=__doc__.splitlines()[0])
    parser.add_argument("--flydsl-repo", type=Path, required=True, help="a clone of github.com/ROCm/FlyDSL")
    parser.add_argument("--ref", default="HEAD", help="branch or commit whose history to walk (default: HEAD)")
    parser.add_argument("--limit", type=int, default=None, help="only the newest N commits that qualify")
    parser.add_argument("--commit", action="append", help="compile these commits instead of walking the history "
                                                          "(repeatable; e.g. a pull request's base and head)")
    parser.add_argument("--machine", default="cpu-compile", help="asv machine name (default: cpu-compile)")
    parser.add_argument("--path", action="append", help=f"paths a commit must touch (default: {', '.join(PATHS)})")
    parser.add_argument("--plan", action="store_true", help="print commit -> wheel and stop")
    parser.add_argument("--notes", action="store_true",
                        help=f"write each commit's title, pull request and compiler (wheel, LLVM) to {NOTES.name} "
                             "beside the results (flybench ingest stores them), and stop")
    parser.add_argument("--wheels", help="FlyDSL's published versions, comma-separated, instead of asking pip")
    parser.add_argument("--summary", action="store_true",
                        help="print, from the compile cache, how each commit's checkout kernels fared, and stop")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        repo = revisions.clone(args.flydsl_repo.expanduser().resolve(), "--flydsl-repo")
        commits = (named_commits(repo, args.commit) if args.commit else
                   touching_commits(repo, tuple(args.path or PATHS), args.ref)[-(args.limit or 0):])
        counts = wheel_counts(repo, args.wheels.split(",") if args.wheels else published_versions())
    except FlybenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    plan = [(c, wheel_for(c, counts)) for c in commits]
    for commit, version in plan:
        print(f"{commit.hash[:10]} #{commit.count} {commit.date} flydsl=={version}  {commit.subject[:70]}")
    if args.plan:
        return 0
    if args.notes:
        print(f"wrote {write_notes(plan, counts, repo)}")
        return 0
    work = cache_root() / "history"
    if args.summary:
        print(summary(plan, work, repo))
        return 0
    config = asv_config(repo, work)
    subprocess.run([sys.executable, "-m", "asv", "machine", "--yes", "--config", str(config), "--machine",
                    args.machine], cwd=ROOT, capture_output=True, check=True)
    failed = 0
    for index, (commit, version) in enumerate(plan, 1):
        start = time.perf_counter()
        status = run_commit(commit, export_kernels(repo, commit, work / "trees"),
                            install_wheel(version, work / "wheels"), config, args.machine)
        failed += status != 0
        print(f"[{index}/{len(plan)}] {commit.hash[:10]} flydsl=={version}: asv exit {status} "
              f"({time.perf_counter() - start:.0f} s)", flush=True)
    failures = {}
    for commit, version in plan:  # from the cache the run filled: which compiles failed, and the first message
        records = outcomes(commit, export_kernels(repo, commit, work / "trees"), install_wheel(version, work / "wheels"))
        reasons = sorted((r["reason"] or "").split(" (at ")[0][:200] for r in records if r["status"] == "failed")
        failures[commit.hash] = (len(reasons), reasons[0] if reasons else "")
    print(f"wrote {write_notes(plan, counts, repo, failures=failures)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
