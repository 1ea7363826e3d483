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

import ast
from collections.abc import Callable
from pathlib import Path

PACKAGE = "kernels"


def module_file(src: Path, module: str) -> Path | None:
    """`kernels/x/y` as a file: `y.py`, or the package `y/__init__.py` (a module that became a package)."""
    base = src / module.removesuffix(".py")
    for candidate in (base.with_name(base.name + ".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


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
        todo.extend(_package_inits(src, path))
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


def _package_inits(src: Path, path: Path) -> list[Path]:
    inits = []
    for parent in path.relative_to(src).parents:
        init = src / parent / "__init__.py"
        if parent.parts and init.is_file():
            inits.append(init)
    return inits


def imported_files(src: Path, path: Path, top: str = PACKAGE, runtime_only: bool = False) -> list[Path]:
    """The files of package `top` (under `src`) that the import statements of `path` name, anywhere in it.

    `runtime_only` leaves out the imports under `if TYPE_CHECKING:`, which
    never run: what a process can load, and the edges an import cycle is
    made of (tests/test_import_structure.py).
    """
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError):
        return []  # the compile itself will report it
    package = path.relative_to(src).parent.parts  # a module's package; for __init__.py the package itself
    skipped = {id(node) for block in ast.walk(tree) if runtime_only and _type_checking(block)
               for statement in block.body for node in ast.walk(statement)}
    names: list[tuple[str, ...]] = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names.extend(tuple(alias.name.split(".")) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = tuple((node.module or "").split(".")) if node.module else ()
            if node.level:
                base = package[:len(package) - node.level + 1] + base
            names.append(base)
            names.extend(base + (alias.name,) for alias in node.names)  # `from pkg import submodule`
    files = []
    for parts in names:
        if parts and parts[0] == top:
            found = module_file(src, "/".join(parts))
            if found is not None:
                files.append(found)
    return files


def _type_checking(node: ast.AST) -> bool:
    """`if TYPE_CHECKING:` (or `if typing.TYPE_CHECKING:`)."""
    return isinstance(node, ast.If) and isinstance(node.test, (ast.Name, ast.Attribute)) and \
        getattr(node.test, "id", getattr(node.test, "attr", "")) == "TYPE_CHECKING"
