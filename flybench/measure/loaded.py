"""Which of the project's files a case loaded: the list its record keeps, which the gate selects cases by.

Reading a provider's imports says what its cases *could* load: every branch
of every function, for every workload it serves. What a case did load is in
its process: the modules in `sys.modules`. A case's files are

- the modules first loaded while it was built and run (the `sys.modules`
  difference: the kernel modules a provider imports when it builds a case);
- its provider's and its workload's modules, which the measuring process had
  loaded before the case began (asv imports the suites, and with them every
  provider and workload, to list the parameters), with the modules they
  import that are loaded in the process: those imports ran, or a loaded
  module is what they would find;
- the `__init__.py` of every package of those, which ran before them.

The registries' other members (the providers and workloads the case did not
run) are loaded too, only to be listed: they are neither counted nor
followed. Files are repository-relative: flybench's own as `flybench/...`,
FlyDSL's kernels (from FLYBENCH_FLYDSL_SRC) as `kernels/...`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from pathlib import Path

from flybench import envvars
from flybench.imports import imported_files, package_inits

FLYBENCH_ROOT = Path(__file__).resolve().parents[2]
"""The folder that holds the `flybench` package: the root its files are named from."""


def files(before: Iterable[str], own: Iterable[str], others: Iterable[str]) -> list[str]:
    """The repository-relative files of the case (see the module's docstring), sorted.

    `before`: the names in `sys.modules` when the case began; `own`: the
    modules of its provider and workload; `others`: the registries' modules
    that the case did not run.
    """
    roots = _roots()
    loaded = {path: root for name, module in list(sys.modules.items())
              if (path := _file_of(module)) is not None and (root := _root_of(path, roots)) is not None}
    by_name = {name: path for name, module in list(sys.modules.items())
               if (path := _file_of(module)) is not None and path in loaded}
    left_out = {by_name[name] for name in others if name in by_name} - {by_name[name] for name in own if name in by_name}
    seen: set[Path] = set()
    todo = [by_name[name] for name in own if name in by_name]
    todo += [path for name, path in by_name.items() if name not in set(before)]
    while todo:
        path = todo.pop()
        if path in seen or path in left_out:
            continue
        seen.add(path)
        top, package = loaded[path]
        found = [*package_inits(top, path), *imported_files(top, path, package, runtime_only=True)]
        todo.extend(file for file in (f.resolve() for f in found) if file in loaded)
    return sorted(path.relative_to(loaded[path][0]).as_posix() for path in seen)


def _roots() -> list[tuple[Path, str]]:
    """(the folder files are named from, the package under it whose files count)."""
    roots = [(FLYBENCH_ROOT, "flybench")]
    if os.environ.get(envvars.FLYDSL_SRC):
        roots.append((Path(os.environ[envvars.FLYDSL_SRC]).resolve(), "kernels"))
    return roots


def _file_of(module: object) -> Path | None:
    name = getattr(module, "__file__", None)
    return Path(name).resolve() if isinstance(name, str) and name.endswith(".py") else None


def _root_of(path: Path, roots: list[tuple[Path, str]]) -> tuple[Path, str] | None:
    for top, package in roots:
        if path.is_relative_to(top / package):
            return top, package
    return None
