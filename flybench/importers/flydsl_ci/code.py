"""Which of FlyDSL's commits changed the code each CI op runs: the history scan's code attribution.

A step in an imported series is FlyDSL's regression only if something the
op runs changed between the two main runs around it. What an op runs is read
from the clone, at every measured main commit, the way FlyDSL's CI runs it:

- `scripts/run_benchmark.sh` names, for each op it emits rows for, the test
  script that measures it (the nearest `tests/kernels/<name>.py` before the
  op's emit in the script); the script itself is the op's configuration
  (shapes, tiles, flags), so a change to it touches every op;
- the test script and everything it imports from the repository's `kernels`
  and `tests` packages, followed import by import (the kernel modules, the
  shared kernel helpers, the measuring harness);
- data files (tuning tables, dispatch configurations) beside those kernel
  modules, which the kernels read at run time.

The compiler itself (`python/flydsl`, `lib`, `include`) is not followed here:
it reaches every kernel, so whether a compiler change touched an op is a
question for the machine code it emitted (`machine_code`, compiled by
`flybench.compile.code_history`). The scan reads each commit's changed
files, and counts the compiler's as code only where no machine code says
otherwise (docs/alerts.md).

The importer stores every first-parent main commit between the oldest and
newest measured main commits (`code_changes`: position, pull request, title,
changed files) and, per imported series, the commits that touched its op
(`code_touches`). A commit's touches depend on that commit alone, so an
import attributes only the commits it has not attributed before. The scan
(`flybench.regress.scan`) reads only those tables; it never reads a clone.
"""

from __future__ import annotations

import ast
import functools
import re
import subprocess
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from flybench.errors import FlybenchError
from flybench.importers.git_history import main_history

BENCH_SCRIPT = "scripts/run_benchmark.sh"
_EMIT = re.compile(r"(?:_emit_row|_py_parse_and_emit|_emit_moe_s2_rows)\s+\"?([a-z][a-z0-9_]*)")
_TEST = re.compile(r"tests[/.]kernels[/.]([A-Za-z0-9_]+)(?:\.py)?")
FOLLOWED = ("kernels", "tests")
"""Top-level packages of the repository whose modules an op's test script is followed into."""


@dataclass(frozen=True)
class Change:
    """One first-parent commit of main: its place, its pull request and the files it changed."""

    hash: str
    position: int
    merged_pr: int | None
    title: str
    files: tuple[str, ...]


@dataclass(frozen=True)
class CodeHistory:
    """Main's commits over the imported span, and per op the commits that changed what it runs."""

    changes: list[Change]
    touches: dict[str, dict[str, tuple[str, ...]]]  # op -> commit -> the changed files the op runs


def read(repo: str | Path, main_ref: str | None, measured: Iterable[str], ops: Iterable[str],
         done: Collection[str] = ()) -> CodeHistory:
    """Main's first-parent commits from the oldest to the newest of `measured` (full hashes on main), and which
    of them touched each of `ops`, leaving out the commits in `done` (attributed before).

    A commit touches an op when it changed a file the op runs at that commit or at its first parent: a fact of the
    commit alone, so a commit is attributed the same whichever nights measured the commits around it, and a
    nightly attributes only its new commits."""
    root = Path(repo)
    history = main_history(root, main_ref)
    wanted = set(measured)
    known = [i for i, info in enumerate(history) if info.hash in wanted]
    if not known:
        return CodeHistory([], {})
    span = [i for i in range(known[0], known[-1] + 1) if history[i].hash not in done]
    changes = [Change(history[i].hash, history[i].main_position or 0, history[i].merged_pr, history[i].title,
                      _changed_files(root, history[i].hash)) for i in span]
    ops = set(ops)
    touches: dict[str, dict[str, tuple[str, ...]]] = {op: {} for op in ops}
    with _Blobs(root) as blobs:
        for i, change in zip(span, changes):
            ran = op_files(blobs, history[i].hash, ops)
            if i > 0:
                for op, files in op_files(blobs, history[i - 1].hash, ops).items():
                    ran[op] = ran[op] | files
            for op, files in ran.items():
                if hit := tuple(f for f in change.files if f in files):
                    touches[op][change.hash] = hit
    return CodeHistory(changes, touches)


def op_files(blobs: _Blobs, commit: str, ops: Iterable[str]) -> dict[str, set[str]]:
    """The files each op runs at `commit`: the benchmark script, the op's test script and what it imports from
    FOLLOWED packages, and the data files beside the kernel modules among them. An op the script does not
    emit gets the script alone."""
    script = blobs.text(commit, BENCH_SCRIPT) or ""
    tests = script_tests(script)
    found = {}
    for op in ops:
        emitted = max((name for name in tests if op == name or op.startswith(name + "_")), key=len, default=None)
        modules = _closure(blobs, commit, [f"tests/kernels/{t}.py" for t in tests.get(emitted, ())])
        data = {path for module in modules if module.startswith("kernels/")
                for path in blobs.listing(commit, str(PurePosixPath(module).parent)) if not path.endswith(".py")}
        found[op] = {BENCH_SCRIPT, *modules, *data}
    return found


def script_tests(script: str) -> dict[str, set[str]]:
    """Per op name the benchmark script emits, the test scripts named before the emit in the same function."""
    tests: dict[str, set[str]] = {}
    recent: list[str] = []
    for line in script.splitlines():
        if re.match(r"^\s*(?:function\s+)?[A-Za-z_][A-Za-z0-9_]*\s*\(\)\s*\{", line):
            recent = []  # a new shell function: its own test script
        recent += _TEST.findall(line)
        for op in _EMIT.findall(line):
            if recent:
                tests.setdefault(op, set()).add(recent[-1])
    return tests


def _closure(blobs: _Blobs, commit: str, roots: list[str]) -> set[str]:
    """The repository files `roots` import, transitively, within FOLLOWED packages (roots included)."""
    seen: set[str] = set()
    todo = [r for r in roots if blobs.exists(commit, r)]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for module in _imports(blobs.text(commit, path) or "", path):
            for candidate in (f"{module.replace('.', '/')}.py", f"{module.replace('.', '/')}/__init__.py"):
                if blobs.exists(commit, candidate) and candidate not in seen:
                    todo.append(candidate)
    return seen


@functools.lru_cache(maxsize=None)
def _imports(source: str, path: str) -> frozenset[str]:
    """Dotted modules a file imports that lie in FOLLOWED packages (relative imports made absolute; each
    `from x import y` also as `x.y`, which may be a module). Remembered by content: most files are the same at
    every measured commit."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return frozenset()
    package = PurePosixPath(path).parent.parts
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package[:len(package) - node.level + 1], *([base] if base else [])])
            found |= {base} | {f"{base}.{alias.name}" for alias in node.names}
    return frozenset(m for m in found if m.split(".")[0] in FOLLOWED)


def _changed_files(root: Path, commit: str) -> tuple[str, ...]:
    """The files a main commit changed against its first parent."""
    return tuple(sorted(set(_git(root, "diff-tree", "--no-commit-id", "--name-only", "-r", "-m", "--first-parent",
                                 commit).split())))


class _Blobs:
    """File contents and listings at commits, through one `git cat-file --batch` process."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._texts: dict[tuple[str, str], str | None] = {}
        self._trees: dict[str, set[str]] = {}
        self._folders: dict[str, dict[str, list[str]]] = {}

    def __enter__(self) -> _Blobs:
        self._proc = subprocess.Popen(["git", "-C", str(self._root), "cat-file", "--batch"], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE)
        return self

    def __exit__(self, *exc: object) -> None:
        self._proc.stdin.close()
        self._proc.wait()

    def _tree(self, commit: str) -> set[str]:
        if commit not in self._trees:
            self._trees[commit] = set(_git(self._root, "ls-tree", "-r", "--name-only", commit).split("\n"))
        return self._trees[commit]

    def exists(self, commit: str, path: str) -> bool:
        return path in self._tree(commit)

    def listing(self, commit: str, folder: str) -> list[str]:
        """The files directly in `folder` at `commit`."""
        if commit not in self._folders:
            folders: dict[str, list[str]] = {}
            for path in self._tree(commit):
                folders.setdefault(str(PurePosixPath(path).parent), []).append(path)
            self._folders[commit] = folders
        return self._folders[commit].get(folder, [])

    def text(self, commit: str, path: str) -> str | None:
        key = (commit, path)
        if key not in self._texts:
            self._texts[key] = self._read(f"{commit}:{path}") if self.exists(commit, path) else None
        return self._texts[key]

    def _read(self, spec: str) -> str | None:
        self._proc.stdin.write(spec.encode() + b"\n")
        self._proc.stdin.flush()
        header = self._proc.stdout.readline().split()
        if len(header) < 3 or header[1] == b"missing":
            return None
        data = self._proc.stdout.read(int(header[2]) + 1)[:-1]
        return data.decode("utf-8", "replace")


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise FlybenchError(f"{root}: git {args[0]} failed: {done.stderr.strip() or done.returncode}")
    return done.stdout
