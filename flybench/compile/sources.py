"""The files of a FlyDSL checkout that one kernel is built from: its module and what it imports from `kernels`
(and, given another package, the files of a flybench checkout that one case's provider and workload are built
from: their modules and what they import from `flybench`).

The compile cache keys a checkout kernel by the hash of these files, not of
the whole `kernels/` tree, so walking a checkout's history recompiles only
the kernels a commit really changed (a commit to the MoE code leaves the
attention kernels' records valid). Imports are read statically with `ast`,
every `import` statement anywhere in a file, and followed transitively;
importing a module also runs its packages' `__init__.py`, so those count too.
Anything outside `kernels` (flydsl itself, torch) is covered by the
toolchain part of the key instead.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from flybench.imports import imported_files, module_file, package_inits

PACKAGE = "kernels"


def kernel_sources(src: Path, module: str, package: str = PACKAGE,
                   skip: Callable[[Path], bool] | None = None) -> list[Path]:
    """`module`'s file and every file of `package` (default `kernels`) it imports, directly or not, sorted.

    Files for which `skip` is true are neither listed nor followed.
    """
    start = module_file(src, module)
    if start is None:
        return []
    seen: set[Path] = set()
    todo = [start]
    while todo:
        path = todo.pop()
        if path in seen or (skip is not None and skip(path)):
            continue
        seen.add(path)
        todo.extend(package_inits(src, path))
        todo.extend(imported_files(src, path, package))
    return sorted(seen)


def workload_sources(root: Path, modules: list[str], workload: str) -> set[Path]:
    """The files of a flybench checkout at `root` that `modules` import (package `flybench`) for one workload's
    cases: a module named after another workload (`workloads/moe.py`, `kernels/triton/moe.py` for a
    diffusion-attention case) builds that workload's cases only, so it is neither listed nor followed, though a
    module serving several workloads imports it (lazily, in the branch of its own workload)."""
    from flybench.workloads import WORKLOADS

    others = {f"{name}.py" for name in WORKLOADS if name != workload}
    return {path for module in modules
            for path in kernel_sources(root, module, "flybench", skip=lambda path: path.name in others)}
