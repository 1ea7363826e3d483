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

Files only say what a change could reach. Of those cases, the gate times
the ones where what the GPU would run differs (`narrow`): a case whose
changed files are all kernel code (`affected.kernel_code_only`: the Triton
kernels' configuration table, or a kernel module whose host code is the
same at both sides) is timed only when its launches compiled at base and
head differ (`flybench.compile.case_launches`), and says why either way.

A record steers nothing it should not: its commit must be a commit of the
repository and its `loaded` a non-empty list of repository-relative paths;
one that is not is ignored, and the report names it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath, PureWindowsPath

from flybench.compile.affected import is_doc, some
from flybench.measure import record as records
from flybench.rounds import Selection

Key = tuple[str, str, str, str]
"""(workload, case, provider, dtype)."""
RECORDS, IMPORTS = "case records", "static imports"


def recorded_files(trees: Iterable[Path], shape_set: str, commit_of: Callable[[str], str | None],
                   unchanged_since: Callable[[str, set[str]], bool],
                   fits: Callable[[Key, list[str]], str | None] = lambda key, loaded: None,
                   ) -> tuple[dict[Key, set[str]], list[str], int]:
    """Per case of `shape_set`, the files its usable records loaded (their union): the `ok` records under
    `trees` (results trees, or record files) whose commit `commit_of` resolves (to a full hash, else None), whose
    `loaded` list `fits` the case (None; else why not: files the repository does not have, another case's files)
    and `unchanged_since(commit, files)` accepts. Also, a line per record that was ignored because it could steer
    the gate (a commit that is none, `loaded` that is not the case's repository paths) or a file that could not be
    read as records; and how many records are older than the `loaded` field (the repository's own committed
    results, say), which select nothing and are no cause for suspicion."""
    found: dict[Key, set[str]] = {}
    refused: list[str] = []
    older = 0
    for tree in trees:
        paths = [tree] if not tree.is_dir() else sorted(tree.rglob(f"*{records.SUFFIX}"))
        for path in paths:
            if not path.is_file():
                refused.append(f"{path}: not a regular file, not read")
                continue
            for record in records.read(path)[0]:
                if record["status"] != "ok" or record["shape_set"] != shape_set:
                    continue
                key = (record["workload"], record["case"], record["provider"], record["dtype"])
                named = f"{path.name}: {key[0]}/{key[2]} {key[1]} {key[3]}"
                if "loaded" not in record:
                    older += 1
                    continue
                loaded, commit = record.get("loaded"), record.get("commit")
                wrong = _not_repository_paths(loaded)
                if wrong is None and not (isinstance(commit, str) and commit_of(commit)):
                    wrong = f"its commit {commit!r} is not a commit of the repository"
                if wrong is None:
                    wrong = fits(key, loaded)
                if wrong is not None:
                    refused.append(f"{named} ({wrong})")
                    continue
                full = commit_of(commit)
                if full and unchanged_since(full, set(loaded)):
                    found.setdefault(key, set()).update(loaded)
    return found, refused, older


def _not_repository_paths(loaded: object) -> str | None:
    """Why `loaded` is not a non-empty list of repository-relative paths; None when it is."""
    if not isinstance(loaded, list) or not loaded:
        return f"its loaded files {str(loaded)[:60]!r} are not a non-empty list of repository paths"
    for path in loaded:
        if not isinstance(path, str) or not path or path != path.strip() or "\\" in path \
                or any(not c.isprintable() for c in path) or PurePosixPath(path).is_absolute() \
                or PureWindowsPath(path).drive or path.startswith("-") or PurePosixPath(path).as_posix() != path \
                or any(part in ("..", ".") for part in PurePosixPath(path).parts):
            return f"its loaded file {str(path)[:60]!r} is not a path inside the repository"
    return None


NOTHING_CHANGED = "the change alters no compiled kernel and no host code that launches or measures a case"
"""The headline of a gate whose changed files reach cases, none of which would run differently."""
COMPILED_IDENTICALLY = "compiled identically at base and head"
LAUNCHES_NONE = "it launches none of the project's Triton kernels, and only their kernel code changed"
LAUNCHES_NOTHING = "its provider launches no kernel for it"
SHOWN_REFUSED = 3
"""Records ignored that the report names one by one; the rest are counted."""
PER_CASE = 40
"""Up to this many timed cases, the report gives each its own line; more are grouped by reason."""


@dataclass
class Chosen:
    """The cases a change selects, with why, and the ones it leaves out."""

    selected: list[Key]
    left_out: list[Key]
    by: dict[Key, str]  # each case: RECORDS or IMPORTS
    why: dict[Key, list[str]] = field(default_factory=dict)  # a case a changed file reaches: the files it loads
    shared: list[str] = field(default_factory=list)  # changed files that reach every case
    cannot_run: dict[tuple[str, str, str], str] = field(default_factory=dict)  # selected (workload, provider,
    # dtype) that do not run on this machine, and why
    timed: dict[Key, list[str]] = field(default_factory=dict)  # after `narrow`: why each selected case is timed
    untimed: dict[Key, str] = field(default_factory=dict)  # after `narrow`: why a case the files reach is not
    refused: list[str] = field(default_factory=list)  # records ignored, and why
    older: int = 0  # records written before cases recorded their loaded files: used for nothing

    def runnable(self) -> list[Key]:
        """The selected cases this machine can measure."""
        return [key for key in self.selected if _combination(key) not in self.cannot_run]

    @property
    def nothing_changed(self) -> bool:
        """Changed files reach some cases, and not one of them would run differently."""
        return bool(self.untimed) and not self.selected and not self.shared

    def lines(self) -> list[str]:
        """What the report says: what was selected, by what, from which files, why each case the files reach is
        timed or not, and what cannot run here."""
        everything = self.selected + self.left_out
        pairs = _pairs(everything)
        total = f"{_count(len(everything), 'case')} in {_count(len(pairs), 'workload/provider pair')}"
        by = {how: sum(1 for key in self.by if self.by[key] == how) for how in (RECORDS, IMPORTS)}
        basis = (f"selected by what each case loaded (its case record) for {_count(by[RECORDS], 'case')}, by static "
                 f"imports for {by[IMPORTS]} (no usable record)")
        reached = _pairs(list(self.why))
        files = "; ".join(f"{pair} ({len(keys)} of {len(pairs[pair])} cases, by {_how(keys, self.by)}: "
                          f"{some(sorted({f for k in keys for f in self.why[k]}))})" for pair, keys in reached.items())
        if self.shared:
            lines = [f"timing selection: all {total}: shared code changed ({some(self.shared)})"]
        elif not self.why:
            lines = [f"timing selection: none of the {total} loads a changed file", basis]
        elif self.nothing_changed:
            lines = [f"timing selection: none of the {total}: {NOTHING_CHANGED}",
                     f"changed files reach {_count(len(self.why), 'case')}: {files}", basis]
        elif not self.timed:  # selected by files alone (FlyDSL's cases: `narrow` did not run)
            lines = [f"timing selection: {len(self.selected)} of {total}: {files}", basis]
        else:
            chosen = _pairs(self.selected)
            lines = [f"timing selection: {len(self.selected)} of {total}: " + "; ".join(
                f"{pair} ({len(keys)} of {len(pairs[pair])} cases)" for pair, keys in chosen.items()),
                f"changed files reach {_count(len(self.why), 'case')}: {files}", basis]
        lines += self._timed_lines() + self._untimed_lines()
        left = [pair for pair in pairs if pair not in reached]
        if left and not self.shared and self.why:
            lines.append(f"left out, none of their cases loads a changed file: {some(left, 12)}")
        lines += cannot_run_lines(self.cannot_run)
        if self.older:
            lines.append(f"{_count(self.older, 'case record')} older than the loaded files "
                         f"{'they' if self.older != 1 else 'it'} would list: not used")
        if self.refused:
            lines.append(f"case records ignored ({len(self.refused)}), since they could steer the selection: "
                         + "; ".join(r[:300] for r in self.refused[:SHOWN_REFUSED])
                         + (f"; and {len(self.refused) - SHOWN_REFUSED} more" if len(self.refused) > SHOWN_REFUSED
                            else ""))
        return lines

    def _timed_lines(self) -> list[str]:
        """'timed: ...' for each chosen case this machine measures; 'chosen, cannot run here: ...' for the others,
        which are never called timed."""
        def label(key: Key) -> str:
            return "timed" if _combination(key) not in self.cannot_run else "chosen, cannot run here"

        if len(self.timed) <= PER_CASE:
            return [f"{label(key)}: {_named(key)}: {'; '.join(reasons)}" for key, reasons in sorted(self.timed.items())]
        grouped: dict[tuple[str, str], list[Key]] = {}
        for key, reasons in sorted(self.timed.items()):
            grouped.setdefault((label(key), "; ".join(reasons)), []).append(key)
        return [f"{how} ({_count(len(keys), 'case')}): {reason}: {_grouped(keys)}"
                for (how, reason), keys in grouped.items()]

    def _untimed_lines(self) -> list[str]:
        grouped: dict[str, list[Key]] = {}
        for key, reason in sorted(self.untimed.items()):
            grouped.setdefault(reason, []).append(key)
        return [f"not timed ({_count(len(keys), 'case')}), {reason}: {_grouped(keys)}"
                for reason, keys in grouped.items()]


def cannot_run_lines(cannot_run: dict[tuple[str, str, str], str], how: str = "selected") -> list[str]:
    """'selected but cannot run on this machine: moe/triton bf16, moe/triton fp8 (why)': the (workload,
    provider, dtype) combinations of a selection that do not run here, grouped by reason."""
    reasons: dict[str, list[str]] = {}
    for (w, p, d), reason in sorted(cannot_run.items()):
        reasons.setdefault(reason, []).append(f"{w}/{p} {d}")
    return [f"{how} but cannot run on this machine: " + "; ".join(
        f"{', '.join(which)} ({reason})" for reason, which in reasons.items())] if reasons else []


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


def narrow(chosen: Chosen, kernel_code_only: Callable[[str], bool], launches: Callable[[str, str], bool],
           compare: Callable[[list[Key]], dict[Key, list[str]]]) -> Chosen:
    """Of the cases the changed files reach, the ones the GPU would run differently.

    A case is timed when a changed file it loads is host code (`kernel_code_only` is false for it), or when
    `compare` finds its launches' machine code, launch configuration or arguments different at base and head
    (reasons in words; none: it would run the same). A case whose only changed files are kernel code and whose
    provider launches none of the project's kernels (`launches(workload, provider)` is false) is not timed.
    A change to shared code times every case, as before.
    """
    if chosen.shared or not chosen.selected:
        return chosen
    timed: dict[Key, list[str]] = {}
    untimed: dict[Key, str] = {}
    pending = []
    for key in chosen.selected:
        host = [path for path in chosen.why[key] if not kernel_code_only(path)]
        if host:
            timed[key] = [f"host code changed: {some(host)}"]
        elif launches(key[0], key[2]):
            pending.append(key)
        else:
            untimed[key] = LAUNCHES_NONE
    for key, reasons in compare(pending).items():
        if reasons:
            timed[key] = reasons
        else:
            untimed[key] = COMPILED_IDENTICALLY
    selected = [key for key in chosen.selected if key in timed]
    return replace(chosen, selected=selected, left_out=sorted(chosen.left_out + list(untimed)), timed=timed,
                   untimed=untimed, cannot_run=_reasons(selected, chosen.cannot_run))


def narrow_by_code(chosen: Chosen, kernels_of: Callable[[Key], list[str]],
                   compare: Callable[[list[str]], dict[str, list[str]]], unjudged: list[str],
                   registered: Callable[[str], bool], launches: Callable[[Key], bool]) -> Chosen:
    """FlyDSL's cases: of the cases the changed files reach (a change to the compiler reaches all), the ones one of
    whose registered kernels (`kernels_of`: those built from files the case loads) differs at base and head.

    `compare(kernels)` gives, per kernel, what differs (its machine code, its launch configuration, a side it does
    not build at) in words; none: identical. A case is timed when a reason holds for one of its kernels, when no
    registered kernel builds it (nothing to compare), when a changed file it loads under `kernels/` is a source of
    no registered kernel (`registered(path)` is false: an unregistered kernel of the case may have changed), or
    when the change has files the compile cannot carry (`unjudged`: the compiler's C++, which no published wheel
    holds); else it is left out as compiled identically. A case whose provider launches no kernel for it
    (`launches(key)` is false: flydsl's a8w4) is left out, saying so.
    """
    if not chosen.selected:
        return chosen
    why = {key: chosen.why.get(key) or chosen.shared for key in chosen.selected}
    timed: dict[Key, list[str]] = {}
    untimed: dict[Key, str] = {}
    untimed.update({key: LAUNCHES_NOTHING for key in chosen.selected if not launches(key)})
    reached = [key for key in chosen.selected if key not in untimed]
    if unjudged:
        timed = {key: [f"the change is to files its compiled kernels cannot be built with here ({some(unjudged)}): "
                       "timed, not judged by machine code"] for key in reached}
    else:
        kernels = {key: kernels_of(key) for key in reached}
        differ = compare(sorted({k for names in kernels.values() for k in names}))
        for key in reached:
            reasons = [f"{kernel}: {reason}" for kernel in kernels[key] for reason in differ.get(kernel, [])]
            unbuilt = [path for path in chosen.why.get(key, []) if path.startswith("kernels/") and not registered(path)]
            if not kernels[key]:
                timed[key] = ["no registered kernel is built from the files it loads: no machine code to compare"]
            elif unbuilt:
                timed[key] = [f"it loads changed files that build no registered kernel ({some(unbuilt)}): no machine "
                              "code to compare"]
            elif reasons:
                timed[key] = reasons
            else:
                untimed[key] = COMPILED_IDENTICALLY
    selected = [key for key in chosen.selected if key in timed]
    return replace(chosen, selected=selected, left_out=sorted(chosen.left_out + list(untimed)), why=why, shared=[],
                   timed=timed, untimed=untimed, cannot_run=_reasons(selected, chosen.cannot_run))


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


def _named(key: Key) -> str:
    return f"{key[0]}/{key[2]} {key[1]} {key[3]}"


def _grouped(keys: list[Key]) -> str:
    """'moe/triton bf16 (mixtral8x7b-t16, dsv3-tp8-t1); moe/triton fp8 (...)': cases by pair and dtype."""
    found: dict[str, list[str]] = {}
    for workload, case, provider, dtype in keys:
        found.setdefault(f"{workload}/{provider} {dtype}", []).append(case)
    return "; ".join(f"{group} ({some(cases, 8)})" for group, cases in found.items())


def _count(n: int, thing: str) -> str:
    return f"{n} {thing}{'s' if n != 1 else ''}"
