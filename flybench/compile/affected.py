"""Which registered kernels and timed cases a change can affect, from the files each is built from: no
hand-written map.

A kernel's code can change only when one of its source files does
(`runner.source_files`: a FlyDSL kernel's module and everything it imports
from `kernels/`, read from the checkout at each side), or when shared code
does: the compiler, the build, the compile machinery. Documentation and
tests change no kernel. A change whose files are none of these leaves every
kernel out, and the report says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

DOCS = (".md", ".rst", ".txt", ".png", ".svg")
"""Suffixes of files that never change a kernel's code."""
DOC_DIRS = ("docs", "tests", ".github")


@dataclass
class Selection:
    """The kernels to compile on both sides, and why."""

    selected: list[str]
    left_out: list[str]
    why: dict[str, list[str]] = field(default_factory=dict)  # kernel -> the changed files it is built from
    shared: list[str] = field(default_factory=list)  # changed files that select every kernel

    def lines(self, half: str = "compile", things: str = "kernels") -> list[str]:
        """The selection in a few lines for the report."""
        total = len(self.selected) + len(self.left_out)
        if self.shared:
            return [f"{half} selection: all {total} {things}: shared code changed ({some(self.shared)})"]
        if not self.selected:
            return [f"{half} selection: none of {total} {things} is built from a changed file"]
        reasons = "; ".join(f"{name} ({some(files)})" for name, files in self.why.items())
        return [f"{half} selection: {len(self.selected)} of {total} {things}, built from changed files: {reasons}",
                f"left out, none of their files changed: {some(self.left_out, 12)}"]


def select(files: dict[str, set[str]], changed: Iterable[str], shared: Callable[[str], bool]) -> Selection:
    """The kernels of `files` (kernel -> its source files, repository-relative) that `changed` can affect.

    `shared` says which changed files reach all kernels, whether or not some kernel also imports them (every
    timed case runs through the measuring harness, and some import it too).
    """
    changed = sorted(set(changed))
    common = [path for path in changed if not is_doc(path) and shared(path)]
    if common:
        return Selection(sorted(files), [], shared=common)
    why = {name: sorted(set(changed) & paths) for name, paths in sorted(files.items())}
    why = {name: hit for name, hit in why.items() if hit}
    return Selection(sorted(why), sorted(set(files) - set(why)), why)


def case_files(root: Path, workload: str, provider: str) -> set[str]:
    """The files of a flybench checkout at `root` that the cases of (workload, provider) are built from: the
    provider's module and the workload's, with every `flybench` file each imports for that workload
    (`sources.workload_sources`)."""
    from flybench.compile.sources import workload_sources
    from flybench.providers import get_provider
    from flybench.workloads import get_workload

    def module(obj: object) -> str:
        return type(obj).__module__.replace(".", "/") + ".py"

    starts = [module(get_provider(provider)), module(get_workload(workload))]
    return {path.relative_to(root).as_posix() for path in workload_sources(root, starts, workload)}


def flydsl_case_files(src: Path, workload: str, provider: str, shape_set: str, dtypes: Iterable[str]) -> set[str]:
    """The files of a FlyDSL tree `src` that the timed cases of (workload, provider) load: the entry points the
    provider says each case launches (`Provider.entry_points`: "kernels.x.y.fn", or "path.py:fn"), as their
    modules with every file of `kernels/` those import."""
    from flybench.compile.sources import kernel_sources
    from flybench.providers import get_provider
    from flybench.workloads import get_workload

    chosen, load = get_provider(provider), get_workload(workload)
    entries = {entry for case in load.cases(shape_set) for dtype in dtypes
               for entry in chosen.entry_points(case, dtype)}
    files: set[str] = set()
    for entry in entries:
        parts = entry.split(":")[0].removesuffix(".py").replace(".", "/").split("/") if ":" in entry \
            else entry.split(".")
        while len(parts) > 1 and not kernel_sources(src, "/".join(parts)):
            parts.pop()  # from "kernels.moe.moe_gemm_2stage.compile_moe_gemm1" to its module
        files |= {path.relative_to(src).as_posix() for path in kernel_sources(src, "/".join(parts))}
    return files


KERNEL_CONFIGURATION = "flybench/kernels/triton/config_table.py"
"""The Triton kernels' configuration table: data that reaches a case only through its launches (constants,
launch options, and planning values such as split sizes, which show in grids and arguments)."""


def kernel_code_only(path: str, before: str | None, after: str | None) -> bool:
    """Whether a change to `path` (its text at base and at head; None where it does not exist) reaches a case only
    through the Triton kernels it launches: the configuration table, or a module of the kernel package whose host
    code (all but its `@triton.jit` functions' bodies, comments and docstrings left out) is the same at both
    sides. Such a change is judged by compiling the launches (`case_launches.compare`), not by the file."""
    from flybench.compile.case_launches import KERNEL_PACKAGE, normalized_source

    if not path.startswith(KERNEL_PACKAGE) or not path.endswith(".py") or before is None or after is None:
        return False
    if path == KERNEL_CONFIGURATION:
        return True
    return normalized_source(before, without_kernels=True) == normalized_source(after, without_kernels=True)


def flybench_timing_shared(path: str) -> bool:
    """flybench: the measuring harness, the suites asv runs and the packaging reach every timed case."""
    return path.startswith(("flybench/measure/", "benchmarks/")) or path in (
        "flybench/suite.py", "flybench/benchmark_names.py", "pyproject.toml", "asv.conf.json")


def is_doc(path: str) -> bool:
    """Documentation, tests and CI files; a build's text files (CMakeLists.txt, requirements*.txt) are not."""
    parts = PurePosixPath(path).parts
    name = parts[-1] if parts else ""
    if name == "CMakeLists.txt" or name.startswith("requirements"):
        return False
    return path.endswith(DOCS) or bool(parts and parts[0] in DOC_DIRS)


FLYDSL_COMPILER = ("python/", "lib/", "include/", "cmake/", "thirdparty/", "tools/")
FLYDSL_BUILD = ("CMakeLists.txt", "setup.py", "pyproject.toml", "MANIFEST.in")


def flydsl_shared(path: str) -> bool:
    """FlyDSL: the compiler (its Python package, its C++ dialects and passes, their tools and third-party code)
    and the build reach every kernel; scripts, examples and editor files outside `kernels/` reach none."""
    return path.startswith(FLYDSL_COMPILER) or path in FLYDSL_BUILD


def flybench_shared(path: str) -> bool:
    """flybench: its compile machinery and its packaging reach every one of its own kernels."""
    return path.startswith("flybench/compile/") or path == "pyproject.toml"


def some(items: list[str], most: int = 4) -> str:
    """The first `most` items, and how many more: a list a report line can hold."""
    return ", ".join(items[:most]) + (f" and {len(items) - most} more" if len(items) > most else "")
