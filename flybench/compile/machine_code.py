"""The machine code record file: one JSON object a line, per (commit, kernel, target), what that commit's FlyDSL
emitted for a registered kernel (`flybench.compile.code_history` writes it, `flybench ingest` stores it).

    {"format": 1, "hash": "<commit>", "kernel": "flash_attn_generic:causal_m128", "arch": "gfx942",
     "status": "ok", "code_hash": "<sha256 of the machine code>", "library": "flydsl 0.2.4 + python/flydsl of 1a2b3c4d",
     "detail": "", "reason": "", "metrics": {"vgprs": 250, ...}, "key": "<sha256 of the compile's inputs>",
     "compiled": true, "compile_s": 4.5}

`status` is ok (with `code_hash`), failed (the compiler's reason in
`detail`) or unavailable (the kernel's module does not exist at that
commit); only an ok record has a hash. `detail` also says what the record
rests on (an overlay's C++ left out, a module found where it lay before
FlyDSL's move into domain packages); `reason` is the compile's words alone. `key` is what decides the code (the
wheel, the python/flydsl tree laid over it, the kernel's sources, target,
configuration, driver); `compiled` is false where the record took an
earlier record's outcome for the same key. The file lies at the top of a
subject's results tree (`results/flydsl/machine-code.jsonl`), beside
`commits.jsonl`: a folder there would be read as a machine's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flybench import jsonl

FILE = "machine-code.jsonl"
FORMAT = 1
STATUSES = ("ok", "failed", "unavailable")
_TEXT = ("hash", "kernel", "arch", "status", "library", "detail", "key")


def read(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The file's records, checked, and a message for each line that is none (the good lines are kept); a later
    line for the same (commit, kernel, target) replaces an earlier one."""
    if not path.is_file():
        return [], []
    records, errors = jsonl.read(path, check)
    latest = {(r["hash"], r["kernel"], r["arch"]): r for r in records}
    return list(latest.values()), errors


def check(record: dict[str, Any]) -> None:
    """ValueError saying what is wrong when `record` is no machine code record of this format."""
    if record.get("format") != FORMAT:
        raise ValueError(f"format {record.get('format')!r}: this flybench reads machine code records of format "
                         f"{FORMAT} (rebuild the file with python -m flybench.compile.code_history)")
    for name in _TEXT:
        if not isinstance(record.get(name), str):
            raise ValueError(f"field {name!r} must be a string, got {record.get(name)!r}")
    if len(record["hash"]) != 40 or any(c not in "0123456789abcdef" for c in record["hash"]):
        raise ValueError(f"field 'hash' is not a full commit hash: {record['hash']!r}")
    if record["status"] not in STATUSES:
        raise ValueError(f"status {record['status']!r} is none of {', '.join(STATUSES)}")
    if (record["status"] == "ok") != isinstance(record.get("code_hash"), str):
        raise ValueError("an ok record has a code_hash string, and only an ok record has one")
    if not isinstance(record.get("compiled"), bool):
        raise ValueError(f"field 'compiled' must be true or false, got {record.get('compiled')!r}")
    seconds = record.get("compile_s")
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float))):
        raise ValueError(f"field 'compile_s' must be a number of seconds or null, got {seconds!r}")
    if record.get("metrics") is not None and not isinstance(record["metrics"], dict):
        raise ValueError("field 'metrics' must be an object or null")
