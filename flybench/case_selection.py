"""Which timed cases a pull request can affect: by the files each case loaded, where its record says, else by
the files its provider and workload import.

A case's record (`CaseRecord.loaded`, `flybench.measure.loaded`) lists the
project's files its process loaded to build and run it. That is what the
gate selects by: a case whose record says it never loaded a changed file is
not measured, though its provider's module could import that file in a
branch the case never takes (`jax_custom_call` for a kernel case, the
Triton MoE module for an attention case). A record counts only where it
can speak for the base commit: it measured a case that ran (`ok`), and none
of the files it lists changed between the commit it measured and the base
(a new import is a change to a file that imports, so it shows there). Where
no record counts, the static reading (`affected.case_files`: every import of
the provider's and workload's modules) stands in, and the report says which
of the two chose each case.

The measuring harness (`affected.flybench_timing_shared`) reaches every
case either way, and documentation none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from flybench.compile.affected import is_doc, some
from flybench.measure import record as records
from flybench.rounds import Selection

Key = tuple[str, str, str, str]
"""(workload, case, provider, dtype)."""
RECORDS, IMPORTS = "case records", "static imports"


def recorded_files(trees: Iterable[Path], shape_set: str, unchanged_since: Callable[[str, set[str]], bool]
                   ) -> dict[Key, set[str]]:
    """Per case of `shape_set`, the files its usable records loaded (their union): the `ok` records under
    `trees` (results trees, or record files) whose `loaded` list `unchanged_since(commit, files)` accepts."""
    found: dict[Key, set[str]] = {}
    for tree in trees:
        paths = [tree] if tree.is_file() else sorted(tree.rglob(f"*{records.SUFFIX}"))
        for path in paths:
            for record in records.read(path)[0]:
                loaded = record.get("loaded")
                if (record["status"] != "ok" or record["shape_set"] != shape_set or not isinstance(loaded, list)
                        or not unchanged_since(str(record.get("commit") or ""), set(map(str, loaded)))):
                    continue
                key = (record["workload"], record["case"], record["provider"], record["dtype"])
                found.setdefault(key, set()).update(map(str, loaded))
    return found


@dataclass
class Chosen:
    """The cases a change selects, with why, and the ones it leaves out."""

    selected: list[Key]
    left_out: list[Key]
    by: dict[Key, str]  # each case: RECORDS or IMPORTS
    why: dict[Key, list[str]] = field(default_factory=dict)  # a selected case: the changed files it loads
    shared: list[str] = field(default_factory=list)  # changed files that reach every case
    cannot_run: dict[tuple[str, str, str], str] = field(default_factory=dict)  # selected (workload, provider,
    # dtype) that do not run on this machine, and why

    def runnable(self) -> list[Key]:
        """The selected cases this machine can measure."""
        return [key for key in self.selected if _combination(key) not in self.cannot_run]

    def lines(self) -> list[str]:
        """What the report says: what was selected, by what, from which files, and what cannot run here."""
        pairs = _pairs(self.selected + self.left_out)
        total = (f"{_count(len(self.selected) + len(self.left_out), 'case')} in "
                 f"{_count(len(pairs), 'workload/provider pair')}")
        by = {how: sum(1 for key in self.by if self.by[key] == how) for how in (RECORDS, IMPORTS)}
        basis = (f"selected by what each case loaded (its case record) for {_count(by[RECORDS], 'case')}, by static "
                 f"imports for {by[IMPORTS]} (no usable record)")
        if self.shared:
            lines = [f"timing selection: all {total}: shared code changed ({some(self.shared)})"]
        elif not self.selected:
            lines = [f"timing selection: none of the {total} loads a changed file", basis]
        else:
            chosen = _pairs(self.selected)
            lines = [f"timing selection: {len(self.selected)} of {total}: " + "; ".join(
                f"{pair} ({len(keys)} of {len(pairs[pair])} cases, by {_how(keys, self.by)}: "
                f"{some(sorted({f for k in keys for f in self.why.get(k, [])}))})" for pair, keys in chosen.items()),
                basis]
            left = [pair for pair in pairs if pair not in chosen]
            if left:
                lines.append(f"left out, none of their cases loads a changed file: {some(left, 12)}")
        if self.cannot_run:
            reasons: dict[str, list[str]] = {}
            for (w, p, d), reason in self.cannot_run.items():
                reasons.setdefault(reason, []).append(f"{w}/{p} {d}")
            lines.append("selected but cannot run on this machine: " + "; ".join(
                f"{', '.join(which)} ({reason})" for reason, which in reasons.items()))
        return lines


def choose(keys: Iterable[Key], recorded: dict[Key, set[str]], static: Callable[[str, str], set[str]],
           changed: Iterable[str], shared: Callable[[str], bool], cannot_run: dict[tuple[str, str, str], str]
           ) -> Chosen:
    """The cases of `keys` that `changed` can affect: by their recorded files, else by `static(workload,
    provider)`; `cannot_run` holds the (workload, provider, dtype) combinations that do not run here, and why."""
    changed = sorted(set(changed))
    keys = sorted(set(keys))
    by = {key: RECORDS if key in recorded else IMPORTS for key in keys}
    common = [path for path in changed if not is_doc(path) and shared(path)]
    if common:
        return Chosen(keys, [], by, shared=common, cannot_run=_reasons(keys, cannot_run))
    why = {}
    for key in keys:
        files = recorded[key] if key in recorded else static(key[0], key[2])
        hit = [path for path in changed if path in files]
        if hit:
            why[key] = hit
    selected = [key for key in keys if key in why]
    return Chosen(selected, [key for key in keys if key not in why], by, why,
                  cannot_run=_reasons(selected, cannot_run))


def selections(keys: list[Key], controls: dict[str, list[str]]) -> list[Selection]:
    """The measuring processes for `keys`, one per workload and set of cases: each provider's cases and dtypes
    as one Selection, providers that share them together, and each workload's drift `controls` measured over the
    union of that workload's selected cases."""
    grouped: dict[tuple[str, tuple[str, ...], tuple[str, ...]], list[str]] = {}
    for (workload, provider), cases in _by_provider(keys).items():
        names = tuple(sorted({c for c, _ in cases}))
        dtypes = tuple(sorted({d for _, d in cases}))
        if len(cases) != len(names) * len(dtypes):  # not a product: one process per dtype
            for dtype in dtypes:
                names_d = tuple(sorted(c for c, d in cases if d == dtype))
                grouped.setdefault((workload, names_d, (dtype,)), []).append(provider)
        else:
            grouped.setdefault((workload, names, dtypes), []).append(provider)
    out: list[Selection] = []
    for workload in sorted({w for w, _, _ in grouped}):
        groups = [(names, dtypes, providers) for (w, names, dtypes), providers in grouped.items() if w == workload]
        extra = controls.get(workload, [])
        if len(groups) == 1:  # the usual case: the controls join the one process
            names, dtypes, providers = groups[0]
            out.append(Selection(workload, tuple(providers + extra), dtypes, names))
            continue
        out += [Selection(workload, tuple(providers), dtypes, names) for names, dtypes, providers in groups]
        if extra:
            out.append(Selection(workload, tuple(extra), tuple(sorted({d for _, dtypes, _ in groups for d in dtypes})),
                                 tuple(sorted({n for names, _, _ in groups for n in names}))))
    return out


def _by_provider(keys: Iterable[Key]) -> dict[tuple[str, str], list[tuple[str, str]]]:
    found: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for workload, case, provider, dtype in keys:
        found.setdefault((workload, provider), []).append((case, dtype))
    return found


def _pairs(keys: Iterable[Key]) -> dict[str, list[Key]]:
    found: dict[str, list[Key]] = {}
    for key in sorted(keys):
        found.setdefault(f"{key[0]}/{key[2]}", []).append(key)
    return found


def _combination(key: Key) -> tuple[str, str, str]:
    return key[0], key[2], key[3]


def _reasons(keys: Iterable[Key], cannot_run: dict[tuple[str, str, str], str]) -> dict[tuple[str, str, str], str]:
    return {c: cannot_run[c] for c in sorted({_combination(k) for k in keys}) if c in cannot_run}


def _how(keys: list[Key], by: dict[Key, str]) -> str:
    found = sorted({by[key] for key in keys})
    return " and ".join(found)



def _count(n: int, thing: str) -> str:
    return f"{n} {thing}{'s' if n != 1 else ''}"
