"""The machine code of FlyDSL's history: per main commit, kernel and target, a hash of the code that commit's FlyDSL
emits for the registered kernels its CI ops run.

    python -m flybench.compile.code_history --flydsl-repo CLONE --history HISTORY.json.gz --out results/flydsl

FlyDSL is a compiler, and its CI builds it from the commit under test, so a
change to `python/flydsl` can change a kernel's code as surely as a change
to `kernels/`. For each main commit the history measured (records without
a pull request), oldest first, this compiles every registered kernel that
a CI op runs (`registry.KernelCase.ci_op`), for gfx942 and gfx950, with the
FlyDSL of that commit, and appends one record per (commit, kernel, target)
to `<out>/machine-code.jsonl`, which `flybench ingest` stores in the
`machine_code` table:

- the library: the wheel built from the commit where one was published
  (`flydsl 0.2.3`); otherwise the nearest published wheel by FlyDSL's
  commit count with the commit's `python/flydsl` tree laid over the
  wheel's package (`flydsl 0.2.4 + python/flydsl of 1a2b3c4d`). The C++
  dialects and passes (`lib/`, `include/`) are the wheel's: where they
  differ from the commit's, the record says so in `detail`;
- `code_hash`: sha256 of the kernel's machine code (`isa.code_lines`, what
  the gate's ISA diff compares: no addresses, paths or comments), or none
  with status `failed` (the compiler's reason: an overlay that does not
  import, a builder of another API) or `unavailable` (the kernel's module
  does not exist at that commit). A hash is never made up.

Compiles are cached by content: a record's key is the wheel, the git tree
of `python/flydsl` laid over it, the kernel's own source files (its module
and what it imports from `kernels/`), the target, the configuration and
the driver that builds it. A commit whose key equals an earlier record's
takes that record's hash without compiling. The file is resumable: records
already in it are skipped.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from flybench import jsonl, revisions, write_target
from flybench.compile import history, machine_code, sources
from flybench.compile.machine_code import FILE, FORMAT, STATUSES
from flybench.compile.cache import ROOT, entry_dir, hash_files
from flybench.compile.isa import code_lines
from flybench.compile.registry import AMD_ARCHES, CHECKOUT_CASES, KernelCase
from flybench.compile.runner import source_files
from flybench.errors import FlybenchError
from flybench.file_kinds import describe
from flybench.subject_code import work_root

STAND_IN = "flybench stand-in"
DRIVER = Path(__file__).with_name("flydsl_upstream.py")
"""The code that calls each kernel's builder: part of every key, since it decides what is compiled."""
CI_KERNELS = tuple(case for case in CHECKOUT_CASES if case.ci_op)
COMPILER_PATHS = ("lib", "include", "CMakeLists.txt", "thirdparty", "cmake")
"""What a wheel compiled in C++: an overlay of `python/flydsl` cannot carry a change there."""


@dataclass(frozen=True)
class Library:
    """The FlyDSL a commit's kernels compile with: a published wheel, with the commit's `python/flydsl` laid over
    it unless the wheel was built from the commit itself."""

    wheel: str
    wheel_commit: str | None  # the commit the wheel was built from, where a tag names it
    commit: str
    tree: str  # git tree id of the commit's python/flydsl
    exact: bool
    cxx: str  # what the wheel's C++ lacks of the commit's, in a sentence ("" when nothing or exact)

    @property
    def label(self) -> str:
        return f"flydsl {self.wheel}" + ("" if self.exact else f" + python/flydsl of {self.commit[:8]}")


def main_commits(path: Path) -> list[str]:
    """The commits a FlyDSL CI history measured on main (records without a pull request), by first record."""
    from flybench.importers.flydsl_ci.read import read_history

    first: dict[str, Any] = {}
    for record in read_history(path).records:
        if record.pr is None and record.raw["arch"] in AMD_ARCHES:
            first[record.commit] = min(first.get(record.commit, record.ts), record.ts)
    return sorted(first, key=lambda commit: first[commit])


def published_wheels(repo: Path, versions: list[str]) -> dict[str, tuple[int, str | None]]:
    """Each wheel's commit count (`history.wheel_counts`) and, where a tag `v<version>` names it, its build commit."""
    counts = history.wheel_counts(repo, versions)
    return {version: (count, revisions.commit(repo, f"v{version}", "a wheel's tag")) for version, count in
            counts.items()}


def library_for(repo: Path, commit: str, wheels: dict[str, tuple[int, str | None]]) -> Library:
    """The wheel built from `commit` if there is one; else the wheel whose C++ is nearest the commit's (fewest files
    of `COMPILER_PATHS` differ; then the nearest commit count, the later wheel on a tie), with the commit's
    python/flydsl laid over it: the Python of a commit must meet the compiled dialects it was written for."""
    tree = history.git(repo, "rev-parse", f"{commit}:python/flydsl").strip()
    exact = [version for version, (_, built) in wheels.items() if built == commit]
    if exact:
        return Library(exact[0], commit, commit, tree, True, "")
    count = int(history.git(repo, "rev-list", "--count", commit))
    changed = {version: (history.git(repo, "diff", "--name-only", built, commit, "--", *COMPILER_PATHS).split()
                         if built else None) for version, (_, built) in wheels.items()}
    version = min(wheels, key=lambda v: (changed[v] is None, len(changed[v] or ()), abs(wheels[v][0] - count),
                                         -wheels[v][0]))
    built, files = wheels[version][1], changed[version]
    if built is None:
        cxx = f"the commit flydsl {version} was built from is not known here: C++ changes (lib/, include/) not told"
    else:
        cxx = (f"C++ differs between the wheel's commit {built[:8]} and this one ({len(files)} files under "
               f"{', '.join(sorted({p.split('/')[0] for p in files}))}): those changes are not compiled" if files
               else "")
    return Library(version, built, commit, tree, False, cxx)


def library_dir(repo: Path, library: Library, work: Path) -> Path:
    """A directory for PYTHONPATH holding the library: the installed wheel, or a copy of it made of links with the
    commit's python/flydsl files laid over its `flydsl` package (the compiled parts stay the wheel's)."""
    wheel = history.install_wheel(library.wheel, work / "wheels")
    if library.exact:
        return wheel
    target = work / "libraries" / f"{library.wheel}+{library.tree[:12]}"
    if (target / ".complete").exists():
        return target
    with_tree = work / "libraries" / f".{library.tree[:12]}.{os.getpid()}"
    with_tree.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(repo), "archive", library.commit, "python/flydsl"], capture_output=True,
                             check=True)
    subprocess.run(["tar", "-x", "-C", str(with_tree)], input=archive.stdout, check=True)
    laid = with_tree / "python" / "flydsl"
    overlay = {p.relative_to(laid) for p in laid.rglob("*") if p.is_file()}
    _mirror(wheel, target, {Path("flydsl") / p for p in overlay})
    for relative in overlay:
        destination = target / "flydsl" / relative
        if destination.is_symlink():
            destination.unlink()
        destination.parent.mkdir(parents=True, exist_ok=True)
        (laid / relative).replace(destination)
    subprocess.run(["rm", "-rf", "--", str(with_tree)], check=True)
    (target / ".complete").write_text(library.label)
    return target


def _mirror(source: Path, target: Path, replaced: set[Path], relative: Path = Path()) -> None:
    """`target` as links to `source`'s entries; folders holding a file of `replaced` are made, not linked, so their
    files can be replaced one by one (the wheel's shared libraries stay where they are, reached by a link)."""
    target.mkdir(parents=True, exist_ok=True)
    for entry in (source / relative).iterdir():
        inner = relative / entry.name
        if entry.name == "__pycache__" or (target / inner).exists() or (target / inner).is_symlink():
            continue
        if entry.is_dir() and any(inner in path.parents for path in replaced):
            (target / inner).mkdir()
            _mirror(source, target, replaced, inner)
        else:
            (target / inner).symlink_to(entry)


def record_key(library: Library, case: KernelCase, arch: str, source_hash: str) -> str:
    """What decides the code a compile emits: the wheel, the python/flydsl tree, the kernel's sources, the target,
    the configuration and the driver that calls its builder."""
    blob = json.dumps({"wheel": library.wheel, "tree": library.tree, "kernel": case.name, "arch": arch,
                       "config": case.config, "source": source_hash, "driver": hash_files([DRIVER])},
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def code_hash(isa: str) -> str:
    return hashlib.sha256("".join(code_lines(isa)).encode()).hexdigest()


@dataclass
class Tally:
    """What one run did, for its closing line and the docs."""

    records: int = 0
    compiles: int = 0
    reused: int = 0
    statuses: dict[str, int] | None = None
    compile_s: float = 0.0

    def add(self, record: dict[str, Any]) -> None:
        self.records += 1
        self.statuses = self.statuses or {}
        self.statuses[record["status"]] = self.statuses.get(record["status"], 0) + 1
        if record["compiled"]:
            self.compiles += 1
            self.compile_s += record.get("compile_s") or 0.0
        else:
            self.reused += 1


@dataclass(frozen=True)
class CommitPlan:
    """What one commit's kernels compile from: the library, the exported kernels/ tree, each applicable (kernel,
    target)'s key, and per kernel what was done to find its module (`flat_layout`)."""

    library: Library
    src: Path
    keys: dict[tuple[str, str], str]
    notes: dict[str, str]


def plan_commit(repo: Path, commit: str, cases: list[KernelCase], arches: list[str],
                wheels: dict[str, tuple[int, str | None]], work: Path) -> CommitPlan:
    library = library_for(repo, commit, wheels)
    src = history.export_kernels(repo, history.Commit(commit, 0, "", ""), work / "machine-code-trees")
    keys, notes = {}, {}
    for case in cases:
        notes[case.name] = flat_layout(src, case.module)
        source = hash_files(source_files(case, src), base=src)
        keys.update({(case.name, arch): record_key(library, case, arch, source) for arch in arches
                     if arch in case.arches})
    return CommitPlan(library, src, keys, notes)


def run_commit(repo: Path, commit: str, cases: list[KernelCase], arches: list[str], done: set[tuple[str, str, str]],
               known: dict[str, dict[str, Any]], wheels: dict[str, tuple[int, str | None]], work: Path, jobs: int,
               timeout_s: float) -> list[dict[str, Any]]:
    """The new records of one commit: reused where an earlier record has the same key, compiled otherwise."""
    plan = plan_commit(repo, commit, cases, arches, wheels, work)
    records, pending = [], []
    for case in cases:
        for arch in arches:
            key = plan.keys.get((case.name, arch))
            if key is None or (commit, case.name, arch) in done:
                continue
            earlier = known.get(key)
            if earlier is not None:
                records.append(_record(commit, case.name, arch, plan.library, key, earlier["status"],
                                       earlier.get("reason", earlier["detail"]), earlier.get("code_hash"),
                                       earlier.get("metrics"), None, compiled=False))
            else:
                pending.append((case, arch, key))
    if pending:
        records += _compile(repo, plan.library, plan.src, pending, work, jobs, timeout_s, commit)
    for record in records:  # what this commit's record rests on, then what the compile said
        record["detail"] = "; ".join(d for d in (plan.notes[record["kernel"]], plan.library.cxx, record["reason"]) if d)
    return records


def flat_layout(src: Path, module: str) -> str:
    """Before FlyDSL moved its kernels into domain packages (#807, 2026-07-07: `kernels/flash_attn_generic.py` became
    `kernels/attention/flash_attn_generic.py`, the code unchanged), a kernel's module lay in `kernels/` itself. For
    such a tree, a module of two lines at the registry's path stands for the old one (importing it yields the old
    module), so the same driver builds it. What was done, in a sentence; "" when the module is where the registry
    says, or nowhere."""
    path = PurePosixPath(module)
    note = f"{module} lay at kernels/{path.stem} before #807 (compiled from there)"
    found = sources.module_file(src, module)
    if found is not None:  # where the registry says, or the stand-in of an earlier run on this tree
        return note if found.read_text(errors="replace").startswith(f"# {STAND_IN}") else ""
    old = f"kernels.{path.stem}"
    if len(path.parts) < 3 or sources.module_file(src, old.replace(".", "/")) is None:
        return ""
    target = src / path.parent / f"{path.stem}.py"
    for package in list(path.parents)[:-2]:
        init = src / package / "__init__.py"
        if not init.exists():
            init.parent.mkdir(parents=True, exist_ok=True)
            init.write_text("")
    target.write_text(f"# {STAND_IN}: the module lay at kernels/{path.stem} before #807 moved it\n"
                      f"import sys\nimport {old} as _module\nsys.modules[__name__] = _module\n")
    return note


def _compile(repo: Path, library: Library, src: Path, pending: list[tuple[KernelCase, str, str]], work: Path,
             jobs: int, timeout_s: float, commit: str) -> list[dict[str, Any]]:
    """Compile the pending (kernel, target) pairs with `python -m flybench.compile` under the library, one compile
    cache per library (its toolchain key cannot tell an overlay from the wheel)."""
    try:
        path = library_dir(repo, library, work)
    except (FlybenchError, subprocess.CalledProcessError, OSError) as exc:
        reason = f"the library could not be laid out: {exc}"
        return [_record(commit, case.name, arch, library, key, "failed", reason, None, None, None)
                for case, arch, key in pending]
    cache = work / "machine-code-cache" / f"{library.wheel}+{library.tree[:12]}"
    command = [sys.executable, "-m", "flybench.compile", "--flydsl-src", str(src), "--format", "json", "--jobs",
               str(jobs), "--timeout", str(timeout_s), *[a for n in sorted({c.name for c, _, _ in pending})
                                                         for a in ("-k", n)],
               *[a for arch in sorted({a for _, a, _ in pending}) for a in ("--arch", arch)]]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(path), str(ROOT)]), "FLYBENCH_COMPILE_CACHE": str(cache)}
    done = subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    why = "the compile gave no record of it"
    try:
        found = {(r["kernel"], r["arch"]): r for r in json.loads(done.stdout)}
    except (ValueError, TypeError, KeyError):
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
        found, why = {}, f"the compile gave no records (exit {done.returncode}): {tail}"
    records = []
    for case, arch, key in pending:
        got = found.get((case.name, arch))
        if got is None:
            records.append(_record(commit, case.name, arch, library, key, "failed", why, None, None, None))
            continue
        records.append(_outcome(commit, case.name, arch, library, key, got, cache))
    return records


def _outcome(commit: str, kernel: str, arch: str, library: Library, key: str, got: dict[str, Any],
             cache: Path) -> dict[str, Any]:
    """One compile record of `python -m flybench.compile` as a machine code record."""
    seconds = got.get("compile_time_s")
    reason = (got.get("reason") or "").strip()
    if got["status"] == "ok":
        isa = entry_dir(cache, kernel, arch, got["key"]) / (got.get("isa_file") or "kernel.s")
        try:
            text = isa.read_text(errors="replace")
        except OSError as exc:
            return _record(commit, kernel, arch, library, key, "failed", f"its ISA could not be read ({exc})", None,
                           None, seconds)
        suspect = "; ".join(f"suspect: {s}" for s in got.get("suspect") or [])
        metrics = {k: v for k, v in (got.get("metrics") or {}).items() if k != "compile_time"}
        return _record(commit, kernel, arch, library, key, "ok", suspect, code_hash(text),
                       metrics, seconds)
    status = "unavailable" if got["status"] == "unavailable" else "failed"
    return _record(commit, kernel, arch, library, key, status, reason.splitlines()[0][:500] if reason else
                   f"compile {got['status']} without a reason", None, None, seconds)


def _record(commit: str, kernel: str, arch: str, library: Library, key: str, status: str, reason: str,
            code: str | None, metrics: dict[str, Any] | None, seconds: float | None, *,
            compiled: bool = True) -> dict[str, Any]:
    return {"format": FORMAT, "hash": commit, "kernel": kernel, "arch": arch, "status": status,
            "code_hash": code, "library": library.label, "detail": reason, "reason": reason, "metrics": metrics,
            "key": key, "compiled": compiled, "compile_s": seconds}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m flybench.compile.code_history",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--flydsl-repo", type=Path, help="a clone of github.com/ROCm/FlyDSL")
    parser.add_argument("--history", type=Path, help="a FlyDSL CI history (JSON or gzip'd JSON)")
    parser.add_argument("--out", type=Path, required=True, help=f"folder of {FILE} (e.g. results/flydsl)")
    parser.add_argument("--kernel", "-k", action="append", help="only kernels matching this glob (repeatable)")
    parser.add_argument("--arch", action="append", choices=AMD_ARCHES, help="only this target (repeatable)")
    parser.add_argument("--limit", type=int, help="only the first N main commits of the history")
    parser.add_argument("--jobs", type=int, default=2, help="compile workers (default 2)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds a compile may take (default 600)")
    parser.add_argument("--wheels", help="FlyDSL's published versions, comma-separated, instead of asking pip")
    parser.add_argument("--summary", action="store_true",
                        help=f"print what {FILE} in --out holds (commits, compiles against reuses, statuses) and stop")
    parser.add_argument("--redo", action="append", metavar="GLOB",
                        help="compile the kernels matching this glob again at every commit, though the file holds "
                             "their records (after a change to their configuration; the new records replace the old "
                             "when read); repeatable")
    parser.add_argument("--skip-missing", action="store_true",
                        help="leave out, and name, main commits the clone lacks instead of stopping")
    return parser


def _plan(args: argparse.Namespace) -> tuple[Path, list[str], list[KernelCase]]:
    """The clone, the commits and the kernels, every one checked; FlybenchError on bad input."""
    if args.flydsl_repo is None or args.history is None:
        raise FlybenchError("give --flydsl-repo CLONE and --history FILE (or --summary to read --out)")
    repo = revisions.clone(args.flydsl_repo.expanduser().resolve(), "--flydsl-repo")
    if revisions.commit(repo, "HEAD", "HEAD") is None or subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", "HEAD:python/flydsl"],
            capture_output=True).returncode != 0:
        raise FlybenchError(f"--flydsl-repo {repo} is not a clone of FlyDSL (its HEAD has no python/flydsl): give "
                            "the folder of `git clone https://github.com/ROCm/FlyDSL`")
    if args.limit is not None and args.limit < 1:
        raise FlybenchError(f"--limit {args.limit}: give a number of commits, 1 or more")
    if args.jobs < 1:
        raise FlybenchError(f"--jobs {args.jobs}: give 1 or more workers")
    commits = main_commits(args.history)
    if not commits:
        raise FlybenchError(f"{args.history} holds no main runs on {' or '.join(AMD_ARCHES)} (records without a pull "
                            "request): nothing to compile")
    full = {commit: revisions.commit(repo, commit, f"commit of {args.history.name}") for commit in commits}
    missing = [commit for commit, found in full.items() if found is None]
    if missing and not args.skip_missing:
        shallow = history.git(repo, "rev-parse", "--is-shallow-repository").strip() == "true"
        raise FlybenchError(f"{len(missing)} of the {len(commits)} main commits of {args.history.name} are not in "
                            f"{repo} ({', '.join(c[:10] for c in missing[:6])}{' ...' if len(missing) > 6 else ''}): "
                            + ("it is a shallow clone: `git fetch --unshallow` there" if shallow else
                               "`git fetch` there (or pass --skip-missing to compile the others)"))
    for commit in missing:
        print(f"left out: {commit[:10]} is not in {repo}", file=sys.stderr)
    kept = [full[c] for c in commits if full[c] is not None][:args.limit]
    cases = [c for c in CI_KERNELS if not args.kernel or any(fnmatch.fnmatchcase(c.name, p) for p in args.kernel)]
    if not cases:
        raise FlybenchError(f"no kernel a CI op runs matches {', '.join(args.kernel)}; they are: "
                            f"{', '.join(c.name for c in CI_KERNELS)}")
    return repo, kept, cases


def summary(records: list[dict[str, Any]]) -> str:
    """What a record file holds, in a few lines: the figures docs/compile-metrics.md reports."""
    commits = {r["hash"] for r in records}
    pairs = {(r["kernel"], r["arch"]) for r in records}
    compiled = [r for r in records if r["compiled"]]
    statuses = {s: sum(r["status"] == s for r in records) for s in STATUSES}
    seconds = sum(r.get("compile_s") or 0.0 for r in compiled)
    overlaid = {r["hash"] for r in records if "+ python/flydsl of" in r["library"]}
    return "\n".join([
        f"{len(records)} records: {len(commits)} commits x {len(pairs)} kernel x target pairs "
        f"({len(commits) * len(pairs)} if every commit had every pair)",
        f"compiled {len(compiled)}, reused by key {len(records) - len(compiled)} "
        f"({seconds:.0f} s of compile time in the compiled ones)",
        "statuses: " + ", ".join(f"{n} {s}" for s, n in statuses.items()),
        f"libraries: {len(commits) - len(overlaid)} commits with their own wheel, {len(overlaid)} with python/flydsl "
        f"laid over the nearest"])


def _check_out(out: Path, *, reading: bool) -> Path:
    """The record file in `out`, checked before anything runs: a compile of the month takes an hour, and an --out
    that names a file, a FIFO or a place that cannot be written must not end it with a traceback. Reading: the
    file must be there and be a regular file; writing: the file opens for appending, or its folder can be made."""
    path = out / FILE
    try:
        write_target.check_folder(out)
        if reading:
            if not out.is_dir() or describe(path) == "nothing":
                raise FlybenchError(f"--out {out} holds no {FILE}: name the folder a run of this command wrote "
                                    "(e.g. results/flydsl)")
            jsonl.check_regular(path)
            return path
        write_target.check_file(path)
        if describe(path) == "a regular file":
            with path.open("a", encoding="utf-8"):
                pass
        else:  # nothing is made yet (bad input found later leaves no folder behind): a probe where it would be
            nearest = next(p for p in (out.absolute(), *out.absolute().parents) if p.is_dir())
            os.rmdir(tempfile.mkdtemp(prefix=".flybench-probe-", dir=nearest))
    except OSError as exc:
        raise FlybenchError(f"--out {out}: {path} cannot be written ({exc.strerror or exc}): name a folder you can "
                            "write") from exc
    return path


def _check_history(path: Path) -> None:
    """The history must be a regular file: a FIFO blocks its read for ever and /dev/zero is read until memory ends."""
    what = describe(path)
    if what != "a regular file":
        raise FlybenchError(f"--history {path} is {what}, not a FlyDSL CI history file: give the .json or .json.gz "
                            "file FlyDSL's CI exported")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.summary:
        try:
            records, errors = machine_code.read(_check_out(args.out, reading=True))
        except FlybenchError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(summary(records))
        for error in errors:
            print(f"error: {error} (the line is not counted above)", file=sys.stderr)
        return 2 if errors else 0
    try:
        if args.history is not None:
            _check_history(args.history)
        out = _check_out(args.out, reading=False)
        repo, commits, cases = _plan(args)
        versions = args.wheels.split(",") if args.wheels else history.published_versions()
        wheels = published_wheels(repo, versions)
        if not wheels:
            raise FlybenchError("no published FlyDSL wheel matches a tag or dev number of the clone: `git fetch "
                                "--tags` there, or pass --wheels")
    except FlybenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    stored, errors = machine_code.read(out)
    for error in errors:
        print(f"warning: {error} (the line stays in the file; its record is compiled again)", file=sys.stderr)
    redo = args.redo or []
    done = {(r["hash"], r["kernel"], r["arch"]) for r in stored
            if not any(fnmatch.fnmatchcase(r["kernel"], pattern) for pattern in redo)}
    known = {r["key"]: r for r in stored}
    arches = args.arch or list(AMD_ARCHES)
    work, tally, began = work_root(), Tally(), time.monotonic()
    for index, commit in enumerate(commits, 1):
        start = time.monotonic()
        records = run_commit(repo, commit, cases, arches, done, known, wheels, work, args.jobs, args.timeout)
        for record in records:
            jsonl.append(out, json.dumps(record, sort_keys=True))
            tally.add(record)
            known.setdefault(record["key"], record)
        counts = {s: sum(r["status"] == s for r in records) for s in STATUSES}
        label = records[0]["library"] if records else "nothing new"
        print(f"[{index}/{len(commits)}] {commit[:10]} {label}: {len(records)} records, "
              f"{sum(r['compiled'] for r in records)} compiled, {sum(not r['compiled'] for r in records)} reused; "
              + ", ".join(f"{n} {s}" for s, n in counts.items() if n) + f" ({time.monotonic() - start:.0f} s)",
              file=sys.stderr, flush=True)
    print(f"{tally.records} new records in {out}: {tally.compiles} compiled ({tally.compile_s:.0f} s of compile "
          f"time), {tally.reused} reused by key; {time.monotonic() - began:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
