"""Accepted levels: a regression someone has looked at and accepted as the series' new baseline.

A nightly alert stays open until a later night shows the series back, or
until someone accepts the new level with a reason (`flybench accept`), as
Conbench and CodSpeed let users do. Acceptances live in a JSON file kept
with the results (default `results/accepted.json`, committed like them, so a
rebuilt database keeps them): a versioned object whose `accepted` list holds
one entry per acceptance. A step of that series whose first bad commit is
at or before the accepted commit is no longer reported.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from flybench.errors import FlybenchError

DEFAULT_PATH = Path("results") / "accepted.json"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class Acceptance:
    """One accepted level: the series, the commit whose value is the new baseline, and why."""

    subject: str
    machine: str
    benchmark: str
    params: dict[str, Any]
    commit: str
    reason: str
    accepted_at: str

    def matches(self, subject: str, machine: str, benchmark: str, params: dict[str, Any]) -> bool:
        return (self.subject, self.machine, self.benchmark, self.params) == (subject, machine, benchmark, params)


def load(path: Path | None) -> list[Acceptance]:
    """The acceptances in `path` (none when the file does not exist); a malformed file is an error."""
    file = path or DEFAULT_PATH
    if not file.is_file():
        if path is not None and path != DEFAULT_PATH:
            raise FlybenchError(f"accepted-levels file {file} not found; `flybench accept` creates it")
        return []
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("version") != FORMAT_VERSION:
            raise ValueError(f"expected an object with \"version\": {FORMAT_VERSION}")
        return [Acceptance(**entry) for entry in data["accepted"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise FlybenchError(f"{file} is not an accepted-levels file ({exc}); fix or remove it") from exc


def add(path: Path | None, acceptance: Acceptance) -> Path:
    """Append one acceptance (the file is created if absent) and return the file written."""
    file = path or DEFAULT_PATH
    entries = [asdict(a) for a in (load(file) if file.is_file() else [])] + [asdict(acceptance)]
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(json.dumps({"version": FORMAT_VERSION, "accepted": entries}, indent=1) + "\n",
                    encoding="utf-8")
    return file


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def accepted_through(acceptances: list[Acceptance], subject: str, machine: str, benchmark: str,
                     params: dict[str, Any], commits: list[str]) -> int:
    """The index in `commits` (the series, oldest first) up to which steps are accepted; -1 for none."""
    positions = [commits.index(a.commit) for a in acceptances
                 if a.matches(subject, machine, benchmark, params) and a.commit in commits]
    return max(positions, default=-1)
