"""The history scan's checkpoint as data: a `scan.Replay` written as versioned JSON and read back only after checks.

A store is a file people copy (the nightly's cache, a CI artifact, a
colleague's store), so what it holds is data and is never run: the
checkpoint was a pickle, and a pickle of someone else's making runs their
code when it is loaded. The state is plain JSON instead (numbers, texts,
lists), FORMAT names it and VERSION its layout, and `load` rebuilds the
replay from it through the scan's own constructors. Anything that is not
exactly that (another version's layout, a damaged blob, another machine's or
subject's replay, commits that are not the ones the row says were judged)
reads as None: the scan then replays from the first commit.

What is kept is what the next commit's judgement reads (`scan.Replay`): each
series' runs so far (trimmed), its printed digit, the deterministic series'
points, the alerts with their levels, events and the environment's steps.
The thresholds are not kept: they come from the configuration, whose
fingerprint the row holds.
"""

from __future__ import annotations

import json
import math
from typing import Any

from flybench.benchmark_names import workload_of
from flybench.regress import alerts, scan
from flybench.regress.config import RegressConfig
from flybench.regress.history import Point, Regression, Step

FORMAT = "flybench scan checkpoint"
VERSION = 1
"""Bump when the layout below changes: a checkpoint of another version is replayed from the first commit."""


class Invalid(ValueError):
    """The blob is not a checkpoint this version wrote for this (subject, machine)."""


def dump(replay: scan.Replay) -> bytes:
    """The replay's state as UTF-8 JSON (call it on a trimmed replay: `scan.Replay.trimmed`)."""
    state = replay.state
    document = {
        "format": FORMAT, "version": VERSION, "subject": replay.subject, "machine": replay.machine,
        "commits": replay.commits,
        "series": [{"key": list(s.key), "params": s.params, "params_text": s.params_text, "unit": s.unit,
                    "resolution": s.resolution, "commits": s.commits, "values": s.values, "nets": s.nets,
                    "runs": s.runs} for s in replay.series.values()],
        "changes": [{"key": list(key), "env": c.env, "benchmark": c.benchmark, "params": c.params, "unit": c.unit,
                     "points": [[p.commit, p.value] for p in c.points], "runs": c.runs}
                    for key, c in replay.changes.items()],
        "alerts": [_alert(a) for a in state.alerts],
        "levels": [list(level) for level in state.levels],
        "events": [{"alert": _alert(e.alert), "event": e.event, "through": e.through, "detail": e.detail}
                   for e in state.events],
        "environment": [_regression(r) for r in state.environment],
    }
    return json.dumps(document, separators=(",", ":")).encode()


def load(blob: object, subject: str, machine: str, commits: list[str], cfg: RegressConfig) -> scan.Replay:
    """The replay `blob` holds, checked against the (subject, machine) and judged `commits` its row is stored
    under; Invalid where it is anything else."""
    if not isinstance(blob, (bytes, bytearray, memoryview, str)):
        raise Invalid("not a text")
    try:
        document = json.loads(bytes(blob) if not isinstance(blob, str) else blob)
    except (UnicodeDecodeError, ValueError) as exc:
        raise Invalid("not JSON") from exc
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise Invalid("not a scan checkpoint")
    if document.get("version") != VERSION:
        raise Invalid(f"written in layout {document.get('version')!r}, this version reads {VERSION}")
    if (document.get("subject"), document.get("machine")) != (subject, machine):
        raise Invalid(f"the replay of {document.get('machine')!r} ({document.get('subject')!r}), stored under "
                      f"{machine} ({subject})")
    if document.get("commits") != list(commits):
        raise Invalid("its commits are not the ones its row says were judged")
    try:
        return _replay(document, subject, machine, cfg)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise Invalid(f"damaged ({type(exc).__name__})") from exc


def _replay(document: dict[str, Any], subject: str, machine: str, cfg: RegressConfig) -> scan.Replay:
    replay = scan.Replay(subject, machine, cfg)
    replay.commits = _texts(document["commits"])
    for item in _list(document["series"]):
        key = _key(item["key"])
        params = _params(item["params"])
        unit = _optional_text(item["unit"])
        if alerts.canonical(params) != key[2] or _text(item["params_text"]) != key[2]:
            raise ValueError("a series whose params are not its key's")
        thresholds = cfg.thresholds(key[1], ", ".join(map(str, params.values())), unit)
        resolution = item["resolution"]
        if resolution is not None and not (_number(resolution) and resolution >= 0):
            raise ValueError("a printed digit that is not a number")
        s = scan._Series(key, params, key[2], unit, thresholds, (key[0], workload_of(key[1])), resolution,
                         _texts(item["commits"]), _numbers(item["values"]), _numbers(item["nets"]),
                         _texts(item["runs"]))
        if not len(s.commits) == len(s.values) == len(s.nets) == len(s.runs):
            raise ValueError("a series whose columns differ in length")
        replay.series[key] = s
    for item in _list(document["changes"]):
        key = _key(item["key"])
        params = _params(item["params"])
        unit = _optional_text(item["unit"])
        benchmark = _text(item["benchmark"])
        thresholds = cfg.thresholds(benchmark, ", ".join(map(str, params.values())), unit)
        points = [Point(_text(c), None if v is None else _float(v)) for c, v in _list(item["points"])]
        runs = {_text(c): _text(r) for c, r in _dict(item["runs"]).items()}
        replay.changes[key] = scan._Changes(_text(item["env"]), benchmark, params, unit, thresholds, points, runs)
    state = replay.state
    for item in _list(document["alerts"]):
        state.alerts.append(_to_alert(item))
    state.levels = [(_float(old), _float(new)) for old, new in _list(document["levels"])]
    if len(state.levels) != len(state.alerts):
        raise ValueError("alerts and levels differ in length")
    for i, a in enumerate(state.alerts):
        state._alerts_of[alerts.series_key(a.regression)[2:]].append(i)
    for item in _list(document["events"]):
        state.events.append(alerts.Event(_to_alert(item["alert"]), _text(item["event"]), _text(item["through"]),
                                         _text(item["detail"])))
    for item in _list(document["environment"]):
        r = _to_regression(item)
        state.environment.append(r)
        state._environment_of[alerts.series_key(r)[2:]].append(r)
    return replay


def _alert(a: alerts.Alert) -> dict[str, Any]:
    return {"regression": _regression(a.regression), "status": a.status, "opened_through": a.opened_through,
            "closed_by": a.closed_by, "flips": a.flips}


def _regression(r: Regression) -> dict[str, Any]:
    s = r.step
    return {"subject": r.subject, "machine": r.machine, "env_name": r.env_name, "benchmark": r.benchmark,
            "params": r.params, "unit": r.unit, "kind": r.kind, "runs": r.runs, "evidence": r.evidence,
            "state": r.state, "step": [s.last_good, s.first_bad, s.before, s.after, s.noise, s.confidence, s.worse]}


def _to_alert(item: dict[str, Any]) -> alerts.Alert:
    flips = item["flips"]
    if not isinstance(flips, int) or isinstance(flips, bool) or flips < 0:
        raise ValueError("flips that are not a count")
    return alerts.Alert(_to_regression(item["regression"]), _text(item["status"]), _text(item["opened_through"]),
                        _optional_text(item["closed_by"]), flips)


def _to_regression(item: dict[str, Any]) -> Regression:
    last_good, first_bad, before, after, noise, confidence, worse = _list(item["step"])
    if not isinstance(worse, bool):
        raise ValueError("a step's direction that is not true or false")
    step = Step(_text(last_good), _text(first_bad), _float(before), _float(after), _float(noise),
                _float(confidence), worse)
    return Regression(_text(item["subject"]), _text(item["machine"]), _text(item["env_name"]),
                      _text(item["benchmark"]), _params(item["params"]), _optional_text(item["unit"]), step,
                      _text(item["kind"]), _text(item["runs"]), _text(item["evidence"]), _text(item["state"]))


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _float(value: object) -> float:
    if not _number(value):
        raise ValueError("a number that is not one")
    return float(value)


def _numbers(values: object) -> list[float]:
    found = [_float(v) for v in _list(values)]
    if not all(math.isfinite(v) for v in found):
        raise ValueError("a run that is not a finite number")
    return found


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError("a text that is not one")
    return value


def _optional_text(value: object) -> str | None:
    return None if value is None else _text(value)


def _texts(values: object) -> list[str]:
    return [_text(v) for v in _list(values)]


def _list(value: object) -> list:
    if not isinstance(value, list):
        raise ValueError("a list that is not one")
    return value


def _dict(value: object) -> dict:
    if not isinstance(value, dict):
        raise ValueError("a mapping that is not one")
    return value


def _params(value: object) -> dict[str, Any]:
    return _dict(value)


def _key(value: object) -> tuple[str, str, str]:
    key = _texts(value)
    if len(key) != 3:
        raise ValueError("a series key of other than three parts")
    return key[0], key[1], key[2]
