"""Merging asv results trees (workers of a node, shards of a pool) into one tree, through asv's own Results API.

Each source is a results tree: `<machine>/machine.json`, asv's results
files `<machine>/<commit8>-<env>.json`, their record files beside them
(`.cases.jsonl`, `.counters.jsonl`) and `benchmarks.json`. The destination
gets one results file per commit, machine and environment, which asv's
`compare` and `publish` read, and one record file of each kind beside it.

What a source measured is what asv stored a value or a failure for; asv
stores NaN for a parameter combination it did not run (or could not: n/a),
and that never replaces anything. The rules:

- Sources are taken in the order given, after what the destination already
  holds: a case measured by two sources keeps the later one's result and
  records (the earlier source's records of that case are left out), and the
  merge names every such case. The same result twice (a tree copied twice)
  is no conflict.
- A benchmark that failed as a whole in a source (asv stored no value for any
  of its parameters: its suite did not import) fills in only the cases no
  other source measured.
- Samples replace those the destination held, or are added to them with
  `append_samples` (`flybench run --append-samples`).
- A benchmark's `duration` is the sum over the runs whose results the file
  holds, each counted once: what the destination held, plus each source that
  brought a result the file did not hold as it is; its `started_at` is the
  last such source's. A source whose results the destination (or an earlier
  source) already holds adds nothing, so a tree copied twice, or merged into
  a tree that holds it (the committed results), changes no byte: a results
  file that gains nothing is not rewritten, nor is benchmarks.json when its
  definitions are the same.
- A record line already in the destination, or given twice, is written once,
  so merging the same trees again changes nothing.
- Sources whose benchmarks.json define one benchmark differently (another
  version or parameters) measured different code: bad input.
"""

from __future__ import annotations

import ast
import datetime
import itertools
import json
import math
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flybench import benchmark_names, jsonl
from flybench.counters import record as counter_records
from flybench.errors import FlybenchError
from flybench.file_kinds import describe
from flybench.measure import record as records
from flybench.measure.record import CaseKey
from flybench.model import roles

BENCHMARKS = "benchmarks.json"
MACHINE = "machine.json"
SIDECARS = (records.SUFFIX, counter_records.SUFFIX, roles.SUFFIX)
"""Record files beside a results file, copied with it; case records (the first) also follow its conflicts."""


@dataclass
class Report:
    """What one merge wrote."""

    files: list[Path] = field(default_factory=list)
    cases: int = 0  # parameter combinations measured (a value or a failure) by the sources
    records: int = 0  # record lines copied
    replaced: list[str] = field(default_factory=list)  # "benchmark(params): kept <later source>"
    unchanged: list[Path] = field(default_factory=list)  # files of `files` that held every result already

    def summary(self) -> str:
        text = (f"merged {self.cases} measured cases and {self.records} record lines into {len(self.files)} "
                f"results file{'s' if len(self.files) != 1 else ''}")
        if self.unchanged:
            text += f" ({len(self.unchanged)} of them held every result already: left as they were)"
        return text + (f"; {len(self.replaced)} measured twice, the later source kept" if self.replaced else "")


def results_files(tree: Path) -> list[Path]:
    """asv's results files of a tree (relative paths `<machine>/<file>.json`)."""
    return sorted(p.relative_to(tree) for p in tree.glob("*/*.json") if p.name != MACHINE)


def check_sources(sources: Sequence[Path]) -> None:
    """Bad input before anything is written: a source that is no results tree, or holds no results."""
    if not sources:
        raise FlybenchError("name at least one results tree to merge")
    for source in sources:
        if not source.is_dir():
            raise FlybenchError(f"{source} is not a folder: name asv results trees (the folders holding "
                                f"<machine>/machine.json and the results files), one per runner or worker")
        if not results_files(source):
            raise FlybenchError(f"{source} holds no asv results files (<machine>/<commit>-<env>.json): name the "
                                f"results_dir of a run, as the runner left it")
        for path in _files_read(source):
            _check_readable(path)


def _files_read(tree: Path) -> list[Path]:
    """Every file a merge reads from `tree`: results files, the record files and machine.json beside them, and
    benchmarks.json (where present: a link or a FIFO counts as present)."""
    found = [tree / BENCHMARKS]
    for relative in results_files(tree):
        found += [tree / relative, tree / relative.parent / MACHINE,
                  *(tree / relative.with_name(relative.stem + suffix) for suffix in SIDECARS)]
    return [p for p in dict.fromkeys(found) if os.path.lexists(p)]


def _check_readable(path: Path) -> None:
    """A file to read must be a regular file that opens: a dangling link, a symlink loop, a FIFO or an unreadable
    file in a source is refused before anything is written, rather than failing the merge halfway."""
    what = describe(path)
    if what != "a regular file":
        raise FlybenchError(f"{path} is {what}, not a file asv or flybench wrote: nothing was merged; remove it "
                            "from its tree, or copy the tree again from its runner")
    try:
        path.open("rb").close()
    except OSError as exc:
        raise FlybenchError(f"cannot read {path} ({exc.strerror or exc}): nothing was merged; make it readable "
                            "(chmod u+r), or copy the tree again from its runner") from exc


def merge(sources: Sequence[Path], dest: Path, append_samples: bool = False) -> Report:
    """Merge the results trees `sources`, in order, into the tree `dest` (created if need be).

    A write that fails (a full disk, a folder that cannot hold files, such
    as one under /proc) is bad input: what was merged before it stays, and
    merging the same trees again changes nothing that is already there.
    """
    check_sources(sources)
    if dest.is_dir():
        for path in _files_read(dest):
            _check_readable(path)
    benchmarks = _merged_benchmarks(dest, sources)
    try:
        return _merge_into(sources, dest, benchmarks, append_samples)
    except OSError as exc:
        where = exc.filename or dest
        raise FlybenchError(f"cannot write {where} ({exc.strerror or exc}): name a folder of a file system "
                            "that holds files (--into), or free space; then merge again (what is merged already "
                            "is not merged twice)") from exc


def _merge_into(sources: Sequence[Path], dest: Path, benchmarks: dict[str, Any], append_samples: bool) -> Report:
    dest.mkdir(parents=True, exist_ok=True)
    report = Report()
    for relative in sorted({p for source in sources for p in results_files(source)}):
        holding = [s for s in sources if (s / relative).is_file()]
        _merge_file(relative, holding, dest, append_samples, report)
        machine = relative.parent
        if not (dest / machine / MACHINE).is_file():
            first = next((s / machine / MACHINE for s in holding if (s / machine / MACHINE).is_file()), None)
            if first is not None:
                shutil.copyfile(first, dest / machine / MACHINE)
    if benchmarks and benchmarks != _definitions(dest):  # the same definitions are not written again
        (dest / BENCHMARKS).write_text(json.dumps({**benchmarks, "version": 2}, indent=4, sort_keys=True))
    return report


def _merged_benchmarks(dest: Path, sources: Sequence[Path]) -> dict[str, Any]:
    """The destination's benchmark definitions, updated with the union of the sources' (as asv replaces them with
    each run's); one benchmark defined two ways by two sources is refused."""
    found = {name: d for name, d in _definitions(dest).items()}
    where: dict[str, Path] = {}
    for source in sources:
        for name, definition in _definitions(source).items():
            if name in where and (found[name].get("version"), found[name].get("params")) != \
                    (definition.get("version"), definition.get("params")):
                raise FlybenchError(f"{name} is defined differently in {where[name] / BENCHMARKS} and "
                                    f"{source / BENCHMARKS} (another version or parameters): those runs measured "
                                    "different code; merge only trees of one run (one commit of the benchmarks)")
            found[name] = definition
            where.setdefault(name, source)
    return found


def _definitions(tree: Path) -> dict[str, Any]:
    path = tree / BENCHMARKS
    if not path.is_file():
        return {}
    try:
        defined = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise FlybenchError(f"cannot read {path}: {exc}; copy the tree again from its runner") from exc
    if type(defined) is not dict:
        raise FlybenchError(f"{path} is not asv's benchmarks.json (no object of definitions); copy it again")
    return {name: d for name, d in defined.items() if name != "version" and type(d) is dict}


def _load(path: Path):
    from asv.results import Results
    from asv.util import UserError

    try:
        return Results.load(str(path))
    except (UserError, OSError, ValueError, KeyError, TypeError) as exc:
        raise FlybenchError(f"{path} is not an asv results file asv can read ({exc}); copy it again from its "
                            "runner, or leave that tree out") from exc


def _merge_file(relative: Path, sources: list[Path], dest: Path, append_samples: bool, report: Report) -> None:
    from asv.runner import BenchmarkResult

    loaded = [(source, _load(source / relative)) for source in sources]
    first = loaded[0][1]
    for source, results in loaded[1:]:
        if (results.commit_hash, results.env_name, results.params.get("machine")) != \
                (first.commit_hash, first.env_name, first.params.get("machine")):
            raise FlybenchError(f"{source / relative} and {sources[0] / relative} share a name but not their commit, "
                                "environment or machine: one of them was renamed; copy them again from their runners")
    target = dest / relative
    merged = _load(target if target.is_file() else sources[0] / relative)
    if not target.is_file():  # the first source's environment and machine, none of its results yet
        for name in list(merged.get_all_result_keys()):
            merged.remove_result(name)
    held = _held(merged)  # what the file holds so far, case by case: a source that brings only these adds nothing
    spent = {name: float(d) for name in {name for name, _ in held} if (d := merged.duration.get(name)) is not None}
    owner: dict[tuple[str, int], tuple[Path, Any, Any]] = {}  # (benchmark, index) -> source, value, samples
    losers: dict[Path, set[CaseKey]] = {}
    changed = False
    for source, results in loaded:
        for name in results.get_all_result_keys():
            params = results.get_result_params(name)
            values = results.get_result_value(name, params)
            samples = results.get_result_samples(name, params)
            stats = results.get_result_stats(name, params)
            whole_failure = all(v is None for v in values)
            taken = set()
            for j, value in enumerate(values):
                if _is_nan(value) or (whole_failure and (name, j) in owner):
                    continue
                earlier = owner.get((name, j))
                if earlier is not None and (earlier[1], earlier[2]) != (value, samples[j]):
                    report.replaced.append(f"{benchmark_names.series_name(name, _values(params, j))}: kept {source}")
                    key = _case_key(name, params, j)
                    if key is not None:
                        losers.setdefault(earlier[0], set()).add(key)
                owner[(name, j)] = (source, value, samples[j])
                taken.add(j)
            fresh = {j for j in taken if held.get((name, j)) != (values[j], samples[j])}
            if not fresh:  # all held already, as they are (a tree copied twice, or merged before): nothing to add
                continue
            held.update({(name, j): (values[j], samples[j]) for j in fresh})
            number = [(s or {}).get("number") if samples[j] is not None else None for j, s in enumerate(stats)]
            result = BenchmarkResult(result=list(values), samples=list(samples), number=number, errcode=0,
                                     stderr="", profile=None)
            version = results.benchmark_version.get(name)
            merged.add_result({"name": name, "params": params, "version": version}, result,
                              started_at=_datetime(results.started_at.get(name)), record_samples=True,
                              append_samples=append_samples, selected_idx=fresh)
            for j in fresh:  # values asv stored without samples keep their own statistics
                if samples[j] is None and values[j] is not None and stats[j] is not None:
                    merged._stats[name][j] = stats[j]  # noqa: SLF001 - add_result computes stats from samples only
            spent[name] = spent.get(name, 0.0) + float(results.duration.get(name) or 0.0)
            merged.duration[name] = spent[name]  # the time of the runs whose results the file holds, each once
            changed = True
    report.cases += len(owner)
    if changed or not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        merged.save(str(dest))
    else:  # a file that gains nothing is left as it is, byte for byte (asv would write it in its own layout)
        report.unchanged.append(target)
    report.files.append(target)
    for suffix in SIDECARS:
        report.records += _merge_sidecar(relative, suffix, sources, dest, losers if suffix == records.SUFFIX else {})


def _held(results: Any) -> dict[tuple[str, int], tuple[Any, Any]]:
    """(benchmark, index) -> (value, samples) of every case asv holds a value or a failure for in `results`."""
    held = {}
    for name in results.get_all_result_keys():
        params = results.get_result_params(name)
        samples = results.get_result_samples(name, params)
        held.update({(name, j): (value, samples[j])
                     for j, value in enumerate(results.get_result_value(name, params)) if not _is_nan(value)})
    return held


def _merge_sidecar(relative: Path, suffix: str, sources: list[Path], dest: Path,
                   losers: dict[Path, set[CaseKey]]) -> int:
    """Append each source's record lines beside the merged file, in source order, leaving out the records of the
    cases a later source measured again and lines the file already holds."""
    target = dest / relative.with_name(relative.stem + suffix)
    check = _has_case if suffix == records.SUFFIX else _any
    written = {_line(r) for r in jsonl.read(target, check)[0]} if target.is_file() else set()
    lines = []
    for source in sources:
        path = source / relative.with_name(relative.stem + suffix)
        if not path.is_file():
            continue
        dropped = losers.get(source, set())
        for record in jsonl.read(path, check)[0]:
            line = _line(record)
            if line in written or (suffix == records.SUFFIX and records.key_of(record) in dropped):
                continue
            lines.append(line)
            written.add(line)
    if lines:
        jsonl.append(target, "\n".join(lines))
    return len(lines)


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, allow_nan=True, sort_keys=True)


def _any(record: dict[str, Any]) -> None:
    """Counter records are copied as they are; their own reader checks them."""


def _has_case(record: dict[str, Any]) -> None:
    records.check_case(record)


def _is_nan(value: Any) -> bool:
    return type(value) is float and math.isnan(value)


def _values(params: list[list[str]], j: int) -> list[Any]:
    """The parameter values of combination `j`, as Python values (asv stores their repr)."""
    combination = next(itertools.islice(itertools.product(*params), j, None)) if params else ()
    values = []
    for text in combination:
        try:
            values.append(ast.literal_eval(text))
        except (ValueError, SyntaxError):
            values.append(text)
    return values


def _case_key(name: str, params: list[list[str]], j: int) -> CaseKey | None:
    parsed = benchmark_names.parse(name)
    values = _values(params, j)
    if parsed is None or len(values) != len(benchmark_names.PARAM_NAMES):
        return None
    return (parsed.workload, parsed.shape_set, *map(str, values))  # type: ignore[return-value]


def _datetime(js_timestamp: Any) -> datetime.datetime | None:
    """asv keeps started_at as a JavaScript timestamp (milliseconds)."""
    if type(js_timestamp) not in (int, float):
        return None
    return datetime.datetime.fromtimestamp(js_timestamp / 1000, datetime.timezone.utc)
