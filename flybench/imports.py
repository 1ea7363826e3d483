"""Which files of a package a Python file imports, read with `ast`: every `import` statement, at any depth.

One reader for three uses: the files a kernel is built from (a FlyDSL
kernel's compile key, `flybench.compile.sources`), the files a case loaded
(`flybench.measure.loaded`, over the modules its process holds), and the
check that flybench's modules import each other one way
(tests/test_import_structure.py). A leaf: it imports nothing of flybench,
so a measuring process can use it without loading the compile machinery.
"""

from __future__ import annotations

import ast
from pathlib import Path

def module_file(src: Path, module: str) -> Path | None:
    """`kernels/x/y` (a module under `src`) as a file: `y.py`, or the package `y/__init__.py` (a module that
    became a package)."""
    base = src / module.removesuffix(".py")
    for candidate in (base.with_name(base.name + ".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def package_inits(src: Path, path: Path) -> list[Path]:
    """The `__init__.py` of every package above `path` (under `src`): importing a module runs them first."""
    inits = []
    for parent in path.relative_to(src).parents:
        init = src / parent / "__init__.py"
        if parent.parts and init.is_file():
            inits.append(init)
    return inits


def imported_files(src: Path, path: Path, top: str, runtime_only: bool = False) -> list[Path]:
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
