"""How much of a FlyDSL CI history its machine code covers: per series (op, shape, dtype, target), whether every
main range it was measured over has the machine code of one of its kernels at both ends, and, where not, why.

    python -m studies.machine_code_coverage --history HISTORY.json.gz --machine-code results/flydsl/machine-code.jsonl \
        --flydsl-repo CLONE [--markdown docs/data/machine-code-coverage.md]

A main range is two consecutive main commits at which the series has a value (records without a pull request,
ordered by their first record, as `code_history.main_commits`). The scan can judge a range by machine code when
one of the series' registered kernels (`ci_ops.kernels_for`) built for its target has an ok record at both ends.
A series that is not covered gets the first reason that holds, in this order, each read from the data:

- CI measured it on no main commit (every record skipped or missing), or on one only (no range);
- no registered kernel runs its op and dtype on its target (`ci_ops`);
- an end of a range is a commit the clone lacks (so nothing could be compiled there);
- its kernels did not build at an end: the machine code record's own reason (failed, or unavailable: the module
  did not exist at that commit).

Reads the history and the record file as data; compiles nothing.
"""

from __future__ import annotations

import argparse
import collections
import subprocess
from pathlib import Path

from flybench.compile import ci_ops, code_history, machine_code
from flybench.compile.registry import AMD_ARCHES
from flybench.importers.flydsl_ci.read import read_history

Series = tuple[str, str, str, str]


def coverage(history: Path, records: list[dict], clone: Path) -> dict[Series, list[str]]:
    """Each series and, per main range it was measured over, "" where the range has machine code at both ends,
    else why not; a series measured on fewer than two main commits has one entry, its reason."""
    order = {commit: i for i, commit in enumerate(code_history.main_commits(history))}
    valued: dict[Series, set[str]] = collections.defaultdict(set)
    series: set[Series] = set()
    for record in read_history(history).records:
        raw = record.raw
        if raw["arch"] not in AMD_ARCHES:
            continue
        key = (raw["op"], raw["shape"], raw["dtype"], raw["arch"])
        series.add(key)
        if record.pr is None and isinstance(raw.get("value"), (int, float)) and raw["status"] == "ok":
            valued[key].add(record.commit)
    in_clone = _in_clone(clone, set(order))
    code = {(r["hash"], r["kernel"], r["arch"]): r for r in records}
    result = {}
    for key in sorted(series):
        commits = sorted(valued[key], key=order.__getitem__)
        if not commits:
            result[key] = [NO_VALUES]
        elif len(commits) == 1:
            result[key] = [ONE_RUN]
        else:
            result[key] = [_reason(key, pair, in_clone, code) for pair in zip(commits, commits[1:])]
    return result


NO_VALUES = "CI measured it on no main commit (its records are skips or missing)"
ONE_RUN = "CI measured it on one main commit only: no range"
NOT_YET = "not compiled yet"


def _reason(key: Series, pair: tuple[str, str], in_clone: dict[str, str | None], code: dict) -> str:
    """"" when one of the series' kernels has an ok record at both ends of the range, else the first reason."""
    kernels = ci_ops.kernels_for(*key)
    if not kernels:
        return f"no registered kernel runs {key[0]} {key[2]} on {key[3]}"
    lacking = [c for c in pair if in_clone.get(c) is None]
    if lacking:
        return f"the clone lacks {', '.join(c[:10] for c in lacking)}"
    ends = [[code.get((in_clone[c], k.kernel, k.arch)) for c in pair] for k in kernels]
    if any(all(r is not None and r["status"] == "ok" for r in records) for records in ends):
        return ""
    if any(r is None for records in ends for r in records):
        return NOT_YET
    worst = next(r for records in ends for r in records if r["status"] != "ok")
    return f"{worst['kernel']} {worst['status']} at {worst['hash'][:10]}: {worst['reason'][:160]}"


def _in_clone(clone: Path, commits: set[str]) -> dict[str, str | None]:
    """Each commit's full hash in the clone, or None where it lacks it."""
    found = {}
    for commit in commits:
        done = subprocess.run(["git", "-C", str(clone), "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}"],
                              capture_output=True, text=True)
        found[commit] = done.stdout.strip() if done.returncode == 0 else None
    return found


def markdown(result: dict[Series, list[str]]) -> str:
    ranges = [reason for reasons in result.values() for reason in reasons if reason not in (NO_VALUES, ONE_RUN)]
    full = [key for key, reasons in result.items() if not any(reasons)]
    named = [key for key, reasons in result.items() if NOT_YET not in reasons]
    lines = [f"- main ranges with machine code at both ends: {ranges.count('')} of {len(ranges)} "
             f"(series x consecutive main commits it was measured at)",
             f"- series (op, shape, dtype, target) with machine code at both ends of every main range: {len(full)} "
             f"of {len(result)}",
             f"- series where every range has machine code or a reason below (none is waiting for a compile): "
             f"{len(named)} of {len(result)}", "",
             "| reason a range (or a series) has none | ranges | series | e.g. |", "| --- | ---: | ---: | --- |"]
    grouped: dict[str, list[tuple[Series, str]]] = collections.defaultdict(list)
    for key, reasons in result.items():
        for reason in reasons:
            if reason:
                grouped[_kind(reason)].append((key, reason))
    for kind, found in sorted(grouped.items(), key=lambda item: -len(item[1])):
        counted = "-" if kind in (NO_VALUES, ONE_RUN) else str(len(found))
        example = found[0]
        lines.append(f"| {kind} | {counted} | {len({k for k, _ in found})} | {' '.join(example[0])}: {example[1]} |")
    return "\n".join(lines) + "\n"


def _kind(reason: str) -> str:
    """A reason without its commit, for grouping."""
    words = reason.split(" ")
    if len(words) > 2 and words[1] in machine_code.STATUSES and words[2] == "at":
        return f"{words[0]} {words[1]} at an end ({reason.split(': ', 1)[1][:60]})"
    return "the clone lacks an end" if reason.startswith("the clone lacks") else reason


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history", type=Path, required=True)
    parser.add_argument("--machine-code", type=Path, required=True)
    parser.add_argument("--flydsl-repo", type=Path, required=True)
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args()
    records, errors = machine_code.read(args.machine_code)
    text = markdown(coverage(args.history, records, args.flydsl_repo))
    print(text + "".join(f"refused: {e}\n" for e in errors))
    if args.markdown:
        args.markdown.write_text(text)


if __name__ == "__main__":
    main()
