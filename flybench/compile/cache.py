"""The compile cache: one directory per (kernel, target, source hash, configuration, toolchain).

Each entry keeps the record (`record.json`) and the ISA it was read from
(`kernel.s`, or `kernel.ptx` for NVIDIA), so a dashboard or a PR comment
can link or diff the code behind a number. asv runs every tracked value in
a fresh process; all of them read the one compile from here instead of
compiling again. Failures are cached too: a compile that fails fails the
same way for the same inputs, and retrying it in every process would cost
a compile per metric.

Layout: `<root>/<kernel>/<arch>/<key[:16]>/`. The root is
$FLYBENCH_COMPILE_CACHE, else `results/compile-cache/` of this checkout,
which ignores itself for git (it writes a `.gitignore` of `*`).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from flybench import envvars
from flybench.compile.record import CompileRecord

ROOT = Path(__file__).resolve().parents[2]
DRIVER_FILES = [Path(__file__).with_name(f"{name}.py") for name in (
    "amd", "capture", "elf", "flydsl_driver", "flydsl_upstream", "hip_stub", "isa", "occupancy", "record",
    "triton_driver", "worker")]
"""The code that produces a record is part of every key: a parser fix must not serve old numbers."""


def cache_root() -> Path:
    """The cache directory, created (with its .gitignore) if needed."""
    root = Path(os.environ.get(envvars.COMPILE_CACHE) or ROOT / "results" / "compile-cache")
    root.mkdir(parents=True, exist_ok=True)
    ignore = root / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# compile outputs are rebuilt on demand; never committed\n*\n")
    return root


def hash_files(paths: list[Path], base: Path | None = None) -> str:
    """sha256 over the names (relative to `base`) and bytes of `paths`, in sorted order."""
    digest = hashlib.sha256()
    for path in sorted(paths):
        name = str(path.relative_to(base)) if base else path.name
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def make_key(kernel: str, arch: str, config: dict[str, Any], source_hash: str, toolchain: dict[str, str]) -> str:
    """The cache key: everything that can change what the compiler emits, and the driver that reads it."""
    blob = json.dumps({"kernel": kernel, "arch": arch, "config": config, "source": source_hash,
                       "toolchain": toolchain, "driver": hash_files(DRIVER_FILES)}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def entry_dir(root: Path, kernel: str, arch: str, key: str) -> Path:
    return root / _safe(kernel) / arch / key[:16]


def load(root: Path, kernel: str, arch: str, key: str) -> CompileRecord | None:
    """The cached record of this key, or None (also for an unreadable entry, which is then recompiled)."""
    path = entry_dir(root, kernel, arch, key) / "record.json"
    try:
        record = CompileRecord.from_json(path.read_text())
    except (OSError, ValueError, TypeError):
        return None
    return record if record.key == key else None


def store(root: Path, record: CompileRecord, files: dict[str, str]) -> Path:
    """Write the ISA files, then the record (last, so a half-written entry is never read as complete)."""
    directory = entry_dir(root, record.kernel, record.arch, record.key)
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        _write(directory / name, text)
    _write(directory / "record.json", record.to_json())
    return directory


def _write(path: Path, text: str) -> None:
    aside = path.with_name(f".{path.name}.{os.getpid()}")
    aside.write_text(text)
    os.replace(aside, path)


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)
