"""The AMDGPU link toolchain FlyDSL needs, from a ROCm install or built from PyPI packages.

FlyDSL's serializer (MLIR's ROCDL target) links every code object with
`$ROCM_PATH/llvm/bin/ld.lld`, and kernels that call math functions link
`ocml.bc`/`ockl.bc` from `$ROCM_PATH/amdgcn/bitcode`. A CPU-only machine has
no ROCm, but PyPI has both pieces: the `ziglang` wheel carries an LLD that
links AMDGPU objects (`zig ld.lld`), and the `triton` wheel ships the two
bitcode libraries for its own AMD backend. `rocm_root()` lays them out as a
small ROCm-shaped directory and FlyDSL compiles are run with ROCM_PATH set
to it. A real ROCm install, when present, is preferred.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from flybench import envvars

LLD = Path("llvm/bin/ld.lld")
BITCODE = Path("amdgcn/bitcode")
BITCODE_FILES = ("ocml.bc", "ockl.bc")
INSTALL = "pip install -e '.[compile]'"


@dataclass(frozen=True)
class Toolkit:
    """A ROCm-shaped root for FlyDSL (or None) and, if it falls short, what that disables."""

    root: Path | None
    origin: str  # "ROCM_PATH", "/opt/rocm", "pypi" or "none"
    problems: tuple[str, ...] = field(default_factory=tuple)

    @property
    def usable(self) -> bool:
        return self.root is not None


def package_dir(name: str) -> Path | None:
    """Where an installed package lives, found without importing it (importing triton costs time)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _complete(root: Path) -> bool:
    return (root / LLD).is_file() and all((root / BITCODE / f).is_file() for f in BITCODE_FILES)


def rocm_root(cache_dir: Path) -> Toolkit:
    """The root FlyDSL should link with: $ROCM_PATH, /opt/rocm, or one built under `cache_dir` from PyPI."""
    env = os.environ.get("ROCM_PATH")
    if env and _complete(Path(env)):
        return Toolkit(Path(env), "ROCM_PATH")
    if _complete(Path("/opt/rocm")):
        return Toolkit(Path("/opt/rocm"), "/opt/rocm")
    return provision(cache_dir)


def provision(cache_dir: Path) -> Toolkit:
    """Build `<cache_dir>/toolkit-<hash>/` from ziglang's LLD and triton's bitcode; say what is missing."""
    zig_dir, triton_dir = package_dir("ziglang"), package_dir("triton")
    problems = []
    if zig_dir is None or not (zig_dir / "zig").is_file():
        problems.append("the Python package ziglang is not installed, so there is no ld.lld to link AMDGPU code "
                        f"objects and no FlyDSL kernel can be compiled ({INSTALL}, or install ROCm)")
        return Toolkit(None, "none", tuple(problems))
    bitcode = triton_dir / "backends" / "amd" / "lib" if triton_dir else None
    if bitcode is None or not all((bitcode / f).is_file() for f in BITCODE_FILES):
        problems.append("the triton wheel's ocml.bc/ockl.bc are missing (triton not installed?), so FlyDSL kernels "
                        f"that call device math functions will fail to link ({INSTALL})")
    tag = hashlib.sha256(f"{zig_dir}|{version('ziglang')}|{bitcode}|{version('triton')}".encode()).hexdigest()[:12]
    root = cache_dir / f"toolkit-{tag}"
    if not _complete(root) or problems:
        _lay_out(root, zig_dir / "zig", bitcode if not problems else None)
    return Toolkit(root, "pypi", tuple(problems))


def _lay_out(root: Path, zig: Path, bitcode: Path | None) -> None:
    """Write the ld.lld wrapper and link the bitcode; each file appears whole (written aside, then renamed)."""
    (root / LLD).parent.mkdir(parents=True, exist_ok=True)
    (root / BITCODE).mkdir(parents=True, exist_ok=True)
    temporary = root / LLD.with_name(f"ld.lld.{os.getpid()}")
    temporary.write_text(f'#!/bin/sh\nexec "{zig}" ld.lld "$@"\n')
    temporary.chmod(0o755)
    os.replace(temporary, root / LLD)
    for name in BITCODE_FILES if bitcode else ():
        target, aside = root / BITCODE / name, root / BITCODE / f"{name}.{os.getpid()}"
        shutil.copyfile(bitcode / name, aside)
        os.replace(aside, target)


@functools.lru_cache(maxsize=8)
def lld_version(root: Path) -> str | None:
    """`ld.lld --version` of a toolkit, e.g. 'LLD 22.1.8 (compatible with GNU linkers)'."""
    try:
        done = subprocess.run([str(root / LLD), "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout.strip() else None


def versions(toolkit: Toolkit | None = None) -> dict[str, str]:
    """The versions that decide what a compile produces; part of every cache key and record."""
    found = {name: v for name in ("flydsl", "triton", "ziglang") if (v := version(name))}
    if os.environ.get(envvars.FLYDSL_PYTHON) and "flydsl" in found:
        found["flydsl_python"] = os.environ[envvars.FLYDSL_PYTHON]
    if toolkit is not None and toolkit.root is not None:
        found["rocm_toolkit"] = toolkit.origin
        found["ld.lld"] = lld_version(toolkit.root) or "unknown"
    return found
