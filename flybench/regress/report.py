"""Renderers for comparisons and regressions: terminal (rich), markdown (a PR comment), JSON.

Plus the exit-code rule shared by the CLI verbs: 1 on a regression, 0
otherwise, 2 on bad input (the CLI catches FlybenchError for that).

The terminal and markdown reports list one row per case that needs a look
(regressions and broken cases, then improvements and fixed ones, then the
ones not comparable), count the unchanged ones, and summarise the cases not
measured on both sides by provider and reason. The markdown stays under
MARKDOWN_LIMIT, leaving rows out with a line that says how many and where
the full report is; the JSON report always holds every case. `main`
re-renders a saved JSON comparison, as the pull-request workflow does once
the JSON report is uploaded.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import shlex
import statistics
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from asv.util import human_value
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from flybench import benchmark_names
from flybench.console import print_rich
from flybench.errors import FlybenchError
from flybench.regress.compare import CONTEXT, VERDICTS, CaseResult, Comparison, ResourceChange
from flybench.regress.episodes import ENVIRONMENT, UNCONFIRMED
from flybench.regress.history import CLOSED, Regression
from flybench.regress.verdict import detectable_at, interval_text, size_text

EXIT_OK, EXIT_REGRESSION = 0, 1  # and 2 for bad input: flybench.cli.main maps FlybenchError to it

# Compile-metric names as the AMDGPU ISA metadata spells them, as an engineer reads them.
METRIC_LABELS = {
    "vgpr_count": "VGPRs", "agpr_count": "AGPRs", "sgpr_count": "SGPRs",
    "group_segment_fixed_size": "LDS bytes", "private_segment_fixed_size": "scratch bytes",
    "vgpr_spill_count": "VGPR spills", "sgpr_spill_count": "SGPR spills",
    # the same, as `python -m flybench.compile` names them (the gate's compile half)
    "vgprs": "VGPRs", "agprs": "AGPRs", "sgprs": "SGPRs", "lds_static": "static LDS bytes",
    "lds_dynamic": "dynamic LDS bytes", "scratch": "scratch bytes", "vgpr_spills": "VGPR spills",
    "sgpr_spills": "SGPR spills", "occupancy": "waves per SIMD", "mfma": "MFMA instructions",
    "ds_read_b64_tr": "ds_read_b64_tr instructions", "code_size": "code bytes", "registers": "registers",
    "spill_bytes": "spill bytes", "smem_static": "static shared memory bytes",
    "smem_dynamic": "dynamic shared memory bytes",
    **{f"{name}_instructions": f"{label} instructions" for name, label in (
        ("valu", "VALU"), ("salu", "SALU"), ("vmem", "VMEM"), ("smem", "SMEM"), ("lds", "LDS"),
        ("waitcnt", "s_waitcnt"), ("branch", "branch"), ("other", "other"))},
}
_LABELS = {"regression": "regression", "broken": "broken", "improvement": "improvement", "fixed": "fixed",
           "environment": "environment", "ambiguous": "ambiguous", "incomparable": "not comparable",
           "skipped": "not measured", "unchanged": "unchanged"}
_STYLE = {"regression": "bold red", "broken": "bold red", "improvement": "green", "fixed": "green",
          "environment": "yellow", "ambiguous": "yellow", "incomparable": "yellow", "skipped": "dim", "unchanged": ""}

Outcome = Comparison | Sequence[Regression]
FORMATS = ("terminal", "markdown", "json")

LISTED = ("regression", "broken", "improvement", "fixed", "environment", "ambiguous", "incomparable")
"""Verdicts the reports list a row per case, in this order; unchanged and not-measured cases are counted."""
SETTLED = ("regression", "broken", "improvement", "fixed", "environment", "unchanged")
"""Verdicts that settle a case; ambiguous and not comparable ones do not."""
TERMINAL_WIDTH = 160
"""Columns the gate's terminal report fits in, on a terminal and in a CI log alike (`write(..., width=)`): its
cells fold onto more lines. `flybench compare` and `render` keep each row on one line in a log, for grep."""
MARKDOWN_LIMIT = 60_000
"""A markdown report is shorter than this many UTF-8 bytes (so characters): a GitHub comment holds 65,536."""
COMMENT_MARKER = "<!-- flybench-compare -->"
"""The first line of a comparison's markdown, hidden on GitHub: the workflow finds its pull-request comment by it."""


COMMENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
"""What a comment's own name may hold: it is written inside an HTML comment, which `-->` or `<` would end."""


def comment_marker(name: str = "") -> str:
    """COMMENT_MARKER, or a marker of its own for a second comment on the same pull request (`resources`)."""
    if name and not COMMENT_NAME.fullmatch(name):
        raise FlybenchError(f"comment name {name!r} must be letters, digits, '_', '.' or '-' (at most 64, starting "
                            "with a letter or digit), e.g. resources")
    return COMMENT_MARKER.replace(" -->", f": {name} -->") if name else COMMENT_MARKER


def exit_code(outcome: Outcome) -> int:
    """1 when the outcome holds a regression (or a case that broke), else 0."""
    if isinstance(outcome, Comparison):
        return EXIT_REGRESSION if outcome.failing else EXIT_OK
    return EXIT_REGRESSION if any(r.regressed for r in outcome) else EXIT_OK


URL_SAFE = ":/?#[]@!$&'*+,;=%~"
"""Characters a link's URL keeps as they are; the rest (spaces, parentheses, quotes, angle brackets, backslashes,
non-ASCII) are percent-encoded so the markdown link cannot end early or become another."""


def link_address(url: str, flag: str) -> str:
    """`url`, given with `flag`, ready to go between a markdown link's parentheses; an error when it cannot be one.

    An address from a flag goes into every link of a report others read (the nightly's issue, a pull request's
    comment): `--dashboard-url 'https://x/) [Sign in](https://evil'` ended each link and added one of its own,
    and `javascript:...` was taken. So only an http(s) address with a host is taken, one holding a line break
    or another control character is refused (no address holds one; in markdown it ends the line), and blanks,
    parentheses and the rest of what markdown could read are percent-encoded (URL_SAFE): the link stays one
    link, to the host given."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # a '[' or ']' that opens no IPv6 host: 'https://[x'
        raise FlybenchError(f"{flag} {url!r} is not an address ({exc}): a '[' belongs only around an IPv6 host, "
                            "as in https://[::1]:8501/; give one such as https://dashboard.example.org/flybench") \
            from exc
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise FlybenchError(f"{flag} {url!r} is not an http(s) address: give one such as "
                            "https://dashboard.example.org/flybench")
    odd = sorted({c for c in url if not c.isprintable()})
    if odd:
        raise FlybenchError(f"{flag} {url!r} holds {', '.join(map(repr, odd))}, which no address holds (it would "
                            "end the line of the link): give the address on one line, without control characters")
    return quote(url, safe=URL_SAFE)


def markdown(outcome: Outcome, *, limit: int = MARKDOWN_LIMIT, full_report: str | None = None,
             marker: str = "", dashboard: str | None = None, links: Sequence[tuple[str, str]] = ()) -> str:
    """A comment ready to post on a pull request (or an issue, for history regressions).

    Under `limit` UTF-8 bytes: past that, rows are left out, the most
    urgent kept, with a line that says how many and points to `full_report`
    (the JSON report's URL or name; a generic pointer without it). A
    comparison's comment starts with `marker` where one is given (`write`
    gives COMMENT_MARKER, so a comment file always carries it). A history
    alert links each regression to `dashboard`'s History view of its series
    where the dashboard's address is given. A comparison's `links` (text,
    http(s) URL), e.g. the ISA diffs' artifact, follow its notes.
    """
    if isinstance(outcome, Comparison):
        return _comparison_md(outcome, limit, full_report, marker, links)
    return _regressions_md(outcome, limit, full_report, dashboard)


def terminal(outcome: Outcome) -> Group:
    """A rich renderable: `rich.print(terminal(outcome))`."""
    return _comparison_rich(outcome) if isinstance(outcome, Comparison) else _regressions_rich(outcome)


def to_json(outcome: Outcome) -> str:
    """Everything the other renderers show, for machines."""
    if isinstance(outcome, Comparison):
        data: Any = {
            "machine": outcome.machine, "base": outcome.base, "head": outcome.head,
            "p_threshold": outcome.p_threshold,
            "summary": {v: len(outcome.having(v)) for v in VERDICTS},
            "inconclusive": inconclusive(outcome),
            "controls": {v: sum(x.verdict == v for x in outcome.controls) for v in VERDICTS},
            "cases": [_finite_only({**asdict(c), "relative": c.relative}) for c in outcome.cases],
            "resources": [_finite_only(asdict(r)) for r in outcome.resources],
            "notes": outcome.notes,
            "unmeasured": outcome.unmeasured,
        }
    else:
        data = [_finite_only({**asdict(r), "relative": r.step.relative, "absolute": r.step.absolute})
                for r in outcome]
    return json.dumps(data, indent=2, default=str, allow_nan=False)


def _finite_only(value: Any) -> Any:
    """`value` with every number JSON cannot hold (an interval's infinite end under heavy noise, a change from
    zero, a NaN) as null: noise must never keep a report from being written."""
    if isinstance(value, float):
        return _finite(value)
    if isinstance(value, dict):
        return {k: _finite_only(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_only(v) for v in value]
    return value


def from_json(text: str) -> Comparison:
    """The Comparison that `to_json` wrote (its derived `relative`, `summary` and `inconclusive` dropped)."""
    try:
        data = json.loads(text)
        known = {f.name for f in fields(CaseResult)}
        numbers = [f.name for f in fields(CaseResult) if str(f.type).startswith("float")]
        for index, case in enumerate(data["cases"]):
            wrong = [n for n in numbers if case.get(n) is not None
                     and (isinstance(case[n], bool) or not isinstance(case[n], (int, float)))]
            if wrong:
                raise ValueError(f"case {index}: {', '.join(f'{n} = {case[n]!r}' for n in wrong)}, not a number")
        cases = [_with_context(CaseResult(**{k: v for k, v in case.items() if k in known})) for case in data["cases"]]
        resources = [ResourceChange(**r) for r in data.get("resources", [])]
        return Comparison(data["machine"], data["base"], data["head"], data["p_threshold"], cases, resources,
                          [str(note) for note in data.get("notes", [])], str(data.get("unmeasured") or ""))
    except (ValueError, KeyError, TypeError) as exc:
        raise FlybenchError(f"not a comparison written by `flybench compare --format json`: {exc}") from exc


def write(outcome: Outcome, fmt: str, output: Path | None = None, *, limit: int = MARKDOWN_LIMIT,
          full_report: str | None = None, marker: str = COMMENT_MARKER, dashboard: str | None = None,
          links: Sequence[tuple[str, str]] = (), width: int | None = None, warnings: Sequence[str] = ()) -> None:
    """Render in one of FORMATS to `output` (a file, e.g. the PR comment CI posts) or stdout; a terminal report
    no wider than `width` columns where given; `warnings` (what the report cannot vouch for) head the terminal and
    markdown reports.

    A comparison's markdown starts with `marker`, by which the pull-request workflow finds its comment.
    """
    text = None  # markdown is rendered before the file opens: a limit it cannot keep leaves no file behind
    if fmt == "markdown":
        text = "".join(f"> **Warning:** {literal_markdown(w)}\n\n" for w in warnings) + markdown(
            outcome, limit=limit, full_report=full_report, marker=marker, dashboard=dashboard, links=links) + "\n"
    try:
        with output.open("w", encoding="utf-8") if output else contextlib.nullcontext(sys.stdout) as stream:
            if fmt == "terminal":
                for warning in warnings:
                    stream.write(f"warning: {warning}\n")
                print_rich(terminal(outcome), stream, most=width)
            else:
                stream.write(text if text is not None else to_json(outcome) + "\n")
    except OSError as exc:
        if output is None or isinstance(exc, BrokenPipeError):
            raise
        raise FlybenchError(f"cannot write {output} ({exc.strerror or exc}): free space or name another "
                            "--output") from exc


def summary_line(comparison: Comparison) -> str:
    """'2 regressions, 1 improvement, 5 unchanged on m1 (base abc12345 -> head def67890)'."""
    counts = [(v, len(comparison.having(v))) for v in VERDICTS]
    parts = [_plural(n, _LABELS[v]) if v in ("regression", "improvement") else f"{n} {_LABELS[v]}"
             for v, n in counts if n or v in ("regression", "improvement", "unchanged")]
    if comparison.controls:
        parts.append(controls_text(comparison))
    if comparison.resources:
        parts.append(_plural(len(comparison.resources), "resource change"))
    return (f"{', '.join(parts)} on {comparison.machine} "
            f"(base {comparison.base[:8]} -> head {comparison.head[:8]})")


def value_text(value: float | None, unit: str | None) -> str:
    """asv's human units for times, bytes as KB, MB and GB; other units printed after the number, which reads
    1,120 from a thousand on (never 1.12e+03) and keeps 4 significant digits below."""
    if value is None:
        return "-"
    if unit == "seconds":
        return human_value(value, unit)
    if unit == "bytes":  # asv writes 33.7k; a person reads 33.7 KB
        text = human_value(value, unit)
        if text[-1:] in ("k", "M", "G", "T", "P"):
            return f"{text[:-1]} {text[-1].upper()}B"
        return f"{text} B" if text[-1:].isdigit() else text  # asv's 'n/a' stays as it is
    number = f"{value:,.0f}" if math.isfinite(value) and abs(value) >= 1000 else f"{value:.4g}"
    return number + (f" {unit}" if unit else "")


def change_text(base: float | None, head: float | None, unit: str | None) -> str:
    if base is None or head is None:
        return "-"
    delta = head - base
    relative = f"{100 * delta / abs(base):+.1f}%" if base else "n/a"
    sign = "+" if delta >= 0 else "-"
    return f"{relative} ({sign}{value_text(abs(delta), unit)})"


def resource_text(change: ResourceChange) -> str:
    """'flash_attn_generic: VGPRs 238 -> 256 on gfx950'."""
    label = METRIC_LABELS.get(change.metric, change.metric)
    where = f" on {change.arch}" if change.arch else ""
    return f"{change.name}: {label} {change.base:g} -> {change.head:g}{where}"


def _comparison_md(c: Comparison, limit: int, full_report: str | None, marker: str,
                   links: Sequence[tuple[str, str]]) -> str:
    mark = ":red_circle:" if c.failing else ":grey_question:" if inconclusive(c) else ":white_check_mark:"

    def n(verdict: str) -> int:
        return len(c.having(verdict))

    case_columns = ["benchmark", "parameters", "base", "head", "change", "evidence", "context"]
    detail_columns = ["benchmark", "parameters", "detail"]
    sections = [
        _Section(f"Regressions ({n('regression')})", ("regression", "regressions"), case_columns,
                 [_md_cells(_case_cells(x)) for x in c.having("regression")]),
        _Section(f"Broken: head fails where base passed ({n('broken')})", ("broken case", "broken cases"),
                 detail_columns, [_md_cells(_detail_cells(x)) for x in c.having("broken")]),
        _Section(f"Improvements ({n('improvement')})", ("improvement", "improvements"), case_columns,
                 [_md_cells(_case_cells(x)) for x in c.having("improvement")]),
        _Section(f"Fixed ({n('fixed')})", ("fixed case", "fixed cases"), detail_columns,
                 [_md_cells(_detail_cells(x)) for x in c.having("fixed")]),
        _Section(f"Environment: the drift controls moved too ({n('environment')})",
                 ("environment change", "environment changes"), case_columns[:-1] + ["controls"],
                 [_md_cells(_case_cells(x)[:-1] + [x.detail]) for x in c.having("environment")]),
        _Section(f"Ambiguous: the rounds cannot tell yet ({n('ambiguous')})", ("ambiguous case", "ambiguous cases"),
                 case_columns[:-1] + ["why"],
                 [_md_cells(_case_cells(x)[:-1] + [x.detail]) for x in c.having("ambiguous")]),
        _Section(f"Not compared: measurement contracts or toolchains differ ({n('incomparable')})",
                 ("case not compared", "cases not compared"), detail_columns,
                 [_md_cells(_detail_cells(x)) for x in c.having("incomparable")]),
        _Section(f"Resource changes ({len(c.resources)})", ("resource change", "resource changes"), None,
                 [[literal_markdown(f"{resource_text(r)}{' (worse)' if r.worse else ''}")] for r in c.resources],
                 summary=True),
        _Section(f"Cases whose noise hides changes of twice their tolerance ({len(noise_limited(c))})",
                 ("noise-limited case", "noise-limited cases"), ["benchmark", "parameters", "detects", "noise"],
                 [_md_cells([x.benchmark, _params(x.params), f"{size_text(x.detectable)} (tolerance "
                             f"{100 * x.threshold:.1f}%)", noise_text(x)]) for x in noise_limited(c)], summary=True),
        _Section(f"Drift controls ({len(c.controls)}): measured in the same rounds, never failing the check",
                 ("control verdict", "control verdicts"), ["verdict", "cases", "median change"],
                 control_rows(c), summary=True),
        _Section(f"Not measured on both sides ({_plural(n('skipped'), 'case')}), by provider and reason",
                 ("provider and reason", "providers and reasons"), ["provider", "cases", "reason"],
                 [_md_cells([provider, str(n), reason]) for (provider, reason), n in not_measured(c)],
                 summary=True),
    ]
    lines = [*(f"- {literal_markdown(note)}" for note in c.notes),
             *(f"- [{literal_markdown(text)}]({quote(url, safe=URL_SAFE)})" for text, url in links)]
    head = [*([marker] if marker else []), f"### {mark} flybench: {literal_markdown(headline(c))}", "",
            *([f"**{literal_markdown(more_rounds_text(c))}**", ""] if inconclusive(c) else [])]
    foot = [(f"<sub>{len(c.having('unchanged'))} unchanged, counted, not listed. Each round is one measuring "
             "process and gives a case one median; a regression needs the "
             f"{100 * (1 - c.p_threshold):g}% interval of the change over those medians (Welch's t; the case's "
             "history noise where a side has one round) to lie above zero and the change to reach the "
             "tolerance. A case whose interval still reaches both sides is ambiguous; \"detects\" is the "
             "change it calls 90% of the time at its rounds. Cases that no run selected are not reported.</sub>")]
    return _fit(head, [*lines, ""] if lines else [], sections, foot, limit, _pointer(full_report, "compare"))


def inconclusive(c: Comparison) -> bool:
    """Subject cases were compared and none settled (each ambiguous or not comparable): the check neither passed
    nor failed, and must not read as a pass."""
    compared = [x for x in c.cases if x.role == "subject" and x.verdict != "skipped"]
    return bool(compared) and not c.failing and not any(x.verdict in SETTLED for x in compared)


def headline(c: Comparison) -> str:
    """The summary line, headed "inconclusive" when no subject case settled, and "nothing measured" when no case
    was timed and no resource changed (a docs-only pull request: it passes, and the notes under it say why; where the
    gate says why it timed nothing, `Comparison.unmeasured`, the headline says it too)."""
    if inconclusive(c):
        return f"inconclusive: no subject case settled; {summary_line(c)}"
    if not c.cases and not c.resources:
        return f"nothing measured{': ' + c.unmeasured if c.unmeasured else ''}; {summary_line(c)}"
    return summary_line(c)


def more_rounds_text(c: Comparison) -> str:
    """What more rounds would buy an inconclusive comparison: the changes its ambiguous cases detect now, and at
    twice their rounds (Welch's t at the doubled rounds, `verdict.detectable_at`), and how many would still miss a
    change of twice their tolerance."""
    ambiguous = c.having("ambiguous")
    judged = [x for x in ambiguous if x.noise_source == "rounds" and x.noise is not None and x.rounds
              and x.threshold is not None and x.detectable is not None]
    parts = []
    if judged:
        rounds = min(min(x.rounds) for x in judged)
        now = [x.detectable for x in judged]
        later = [detectable_at(x.noise, 2 * min(x.rounds), x.threshold, c.p_threshold) for x in judged]
        hidden = sum(d > 2 * x.threshold for d, x in zip(later, judged))
        parts.append(f"at their rounds ({rounds}+{rounds} or more) the {_plural(len(judged), 'ambiguous case')} "
                     f"detect changes of {_span(now)}; twice the rounds would bring that to {_span(later)} against "
                     f"tolerances of {_span([x.threshold for x in judged])}"
                     + (f", and {hidden} of them would still miss a change of twice their tolerance: their noise "
                        "between rounds is too large for more rounds to settle" if hidden else ""))
    unjudged = len(ambiguous) - len(judged)
    if unjudged:
        parts.append(f"{_plural(unjudged, 'case')} had too few rounds to know their noise: a second round a side "
                     "gives them an interval")
    if len(c.having("incomparable")):
        parts.append(f"{_plural(len(c.having('incomparable')), 'case')} could not be compared (see why below), "
                     "which more rounds do not change")
    return "Neither a pass nor a failure: " + ("; ".join(parts) if parts else "no case has an interval yet") + "."


def _span(values: list[float]) -> str:
    """'3.1-7.0%', '5.0%', or '40.2% to more than 100%'."""
    low, high = size_text(min(values)), size_text(max(values))
    if low == high:
        return low
    return f"{low[:-1]}-{high}" if high[0].isdigit() else f"{low} to {high}"


def noise_limited(c: Comparison) -> list[CaseResult]:
    """Compared cases whose own noise (or the absolute floor) lifts their detectable change over the threshold."""
    return sorted((x for x in c.cases if x.noise_limited), key=lambda x: -(x.detectable or 0))


def controls_text(c: Comparison) -> str:
    """'12 controls (median +0.4%)': the drift controls in one phrase."""
    changes = [x.relative for x in c.controls if x.relative is not None]
    median = f" (median {100 * statistics.median(changes):+.1f}%)" if changes else ""
    return f"{_plural(len(c.controls), 'control')}{median}"


def control_rows(c: Comparison) -> list[list[str]]:
    """The controls counted by verdict, with their median change: how the environment moved."""
    rows = []
    for v in VERDICTS:
        group = [x for x in c.controls if x.verdict == v]
        changes = [x.relative for x in group if x.relative is not None]
        if group:
            rows.append([_LABELS[v], str(len(group)),
                         f"{100 * statistics.median(changes):+.1f}%" if changes else "-"])
    return rows


def noise_text(case: CaseResult) -> str:
    """'0.4% between rounds' / '1.2% over its history' / 'unknown (one round, no history)'."""
    if case.noise is None:
        return "unknown (one round a side, no history)"
    where = {"rounds": "between rounds", "history": "over its history"}.get(case.noise_source, case.noise_source)
    return f"{100 * case.noise:.2f}% {where}"


def detectable_text(case: CaseResult) -> str:
    """'detects 5.0% here (noise 0.40% between rounds)': the change this comparison calls 90% of the time."""
    if case.detectable is None:
        return ""
    return f"detects {size_text(case.detectable)} here (noise {noise_text(case)})"


def evidence_text(case: CaseResult) -> str:
    """'3+3 rounds, 99.8% interval +4.1% to +7.9% (welch-t (rounds), p=2.1e-04); rounds' own spread ≤0.5%'."""
    if case.rounds is None:
        return case.detail
    parts = ["one round a side" if tuple(case.rounds) == (1, 1) else f"{case.rounds[0]}+{case.rounds[1]} rounds"]
    if case.interval is not None:
        low, high = case.interval
        p = f", p={case.p_value:.1e}" if case.p_value is not None else ""
        parts.append(f"interval {interval_text(low, high)} ({case.test}{p})")
    if case.round_spread is not None:
        parts.append(f"spread within a round ≤{100 * case.round_spread:.1f}%")
    if case.round_medians is not None and case.verdict != "unchanged":
        base, head = (" ".join(value_text(v, case.unit) for v in side) for side in case.round_medians)
        parts.append(f"round medians {base} -> {head}")
    return ", ".join(parts)


def not_measured(c: Comparison) -> list[tuple[tuple[str, str], int]]:
    """The cases not measured on both sides, counted by (provider, reason): most cases first."""
    counts = Counter((str(x.params.get("provider", "-")), x.detail or "-") for x in c.having("skipped"))
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


def _regressions_md(regressions: Sequence[Regression], limit: int, full_report: str | None,
                    dashboard: str | None) -> str:
    worse = [r for r in regressions if r.regressed]
    environment = sum(r.kind == ENVIRONMENT for r in regressions)
    unconfirmed = sum(r.kind == UNCONFIRMED for r in regressions)
    closed = sum(r.state in CLOSED and r.kind not in (ENVIRONMENT, UNCONFIRMED) for r in regressions)  # --closed
    title = f"### flybench: {_plural(len(worse), 'regression')} in the history{_of_subjects(regressions)}"
    if environment:
        title += f", {_plural(environment, 'step')} the environment made"
    if unconfirmed:
        title += f", {unconfirmed} unconfirmed (files only, nothing separates code from runner)"
    if closed:
        title += f", {closed} closed (recovered, accepted or undone)"
    if len(regressions) > len(worse) + environment + unconfirmed + closed:
        others = len(regressions) - len(worse) - environment - unconfirmed - closed
        title += f", {_plural(others, 'other resource change')}"
    header = ["subject", "machine", "benchmark", "parameters", "commits (last good..first bad)", "before", "after",
              "change", "confidence", "state", "evidence", "measured on", "to act"]
    rows = [[*_md_cells([r.subject, *_regression_cells(r), r.runs or "-"], code=(2,)), _next_steps(r, dashboard)]
            for r in regressions]
    section = _Section("", ("regression", "regressions"), header, rows)
    foot = ["<sub>An alert stays open until a later night shows the series back, or until its new level is "
            "accepted: `flybench accept SERIES COMMIT --reason ...`.</sub>"] if regressions else []
    return _fit([title, ""], [], [section], foot, limit, _pointer(full_report, "regressions")) + "\n"


def history_url(r: Regression, dashboard: str) -> str:
    """The dashboard's History view of the regression's series: its page with the series' filters in the URL."""
    query = {"subject": r.subject, "machine": r.machine, "benchmark": r.benchmark,
             **{k: str(v) for k, v in r.params.items() if k in ("case", "provider", "dtype")}}
    return f"{dashboard.rstrip('/')}/history?{urlencode(query)}"


def bisect_command(r: Regression) -> str | None:
    """The command that finds the first bad commit of the regression's range, every word shell-quoted; None
    where bisect cannot measure the series (imported CI results, foreign benchmarks)."""
    if not benchmark_names.is_measurable(r.benchmark):
        return None
    words = ["flybench", "bisect", r.series, r.step.last_good[:12], r.step.first_bad[:12], "--subject", r.subject,
             "--machine", r.machine]
    return shlex.join(words)


def _next_steps(r: Regression, dashboard: str | None) -> str:
    link = f"[History]({history_url(r, dashboard)})" if dashboard else ""
    command = bisect_command(r)
    return "; ".join(part for part in (link, code_span(command) if command else "") if part) or "-"


def code_span(text: str) -> str:
    """`text` as inline code that no backtick inside it can end: fenced by one more backtick than its longest
    run, and then padded with spaces, which CommonMark strips."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    return f"{fence} {text} {fence}" if longest else f"{fence}{text}{fence}"


@dataclass
class _Section:
    """One part of a markdown report: a title, and a table (or, without a header, a list) of rows."""

    title: str
    noun: tuple[str, str]  # one row, several rows: for the line that says how many were left out
    header: list[str] | None  # None: a list
    rows: list[list[str]]
    summary: bool = False  # a few lines that sum many cases up: kept even when listed rows are left out

    def md_rows(self) -> list[str]:
        return _md_table(self.header, self.rows)[2:] if self.header else [f"- {r[0]}" for r in self.rows]

    def first_row_cost(self) -> int:
        """Bytes the first row brings besides itself: the table header, and a blank line before the tail."""
        return (_size("\n".join(_md_table(self.header, []))) + 1 if self.header else 0) + 1

    def lines(self, kept: int) -> list[str]:
        if not self.rows:
            return []
        title = [f"#### {self.title}", ""] if self.title else []
        body = ([*_md_table(self.header, []), *self.md_rows()[:kept]] if self.header else self.md_rows()[:kept]) \
            if kept else []
        more = len(self.rows) - kept
        tail = [f"_{more} more {self.noun[more != 1]} left out here._"] if more else []
        return [*title, *body, *([""] if kept and tail else []), *tail, ""]


def _fit(head: list[str], notes: list[str], sections: list[_Section], foot: list[str], limit: int,
         pointer: str) -> str:
    """The report with every row if it fits in `limit` bytes, else with the first rows that fit, in order.

    Where not even the sections' titles fit beside the notes and the footnote,
    those two are left out, and then the sections' titles: the least a report
    holds is its title (`head`) and the note that says what was left out and
    where it is. A limit below that is refused (FlybenchError).
    """
    total = sum(len(s.rows) for s in sections)

    def render(kept: list[int], brief: int, under: int = limit) -> str:
        """`brief` 0: every part; 1: without the notes and the footnote; 2: without the sections too."""
        said = []
        left_out = [(s, len(s.rows) - k) for s, k in zip(sections, kept) if len(s.rows) > k]
        if left_out:
            what = ", ".join(f"{n} {s.noun[n != 1]}" for s, n in left_out)
            said.append(f"{total - sum(kept)} of {total} rows left out ({what})")
        dropped = [name for name, part in (("the notes", notes), ("the footnote", foot)) if brief and part]
        if dropped:
            said.append(f"{' and '.join(dropped)} left out")
        text = "; ".join(said)
        note = [(f"> [!NOTE]\n> {text[:1].upper()}{text[1:]} to keep this report under {under:,} characters. "
                 f"Every case is in {pointer}."), ""] if said else []
        body = [] if brief == 2 else [line for s, k in zip(sections, kept) for line in s.lines(k)]
        return "\n".join([*head, *([] if brief else notes), *note, *body, *([] if brief else foot)])

    text = render([len(s.rows) for s in sections], 0)
    if _size(text) < limit:
        return text
    for brief in range(3):
        kept = [0] * len(sections)
        text = render(kept, brief)  # the note is at its longest with every row left out
        if _size(text) >= limit:
            continue
        if brief < 2:
            kept = _rows_that_fit(sections, limit - 1 - _size(text))
            text = render(kept, brief)
        while _size(text) >= limit and any(kept):  # a guard: the room given is already conservative
            kept[max(i for i, k in enumerate(kept) if k)] -= 1
            text = render(kept, brief)
        return text
    need = limit
    while _size(text) >= need:  # the note names the limit: a longer number takes more room
        need = _size(text) + 1  # and the line's end that `write` adds
        text = render([0] * len(sections), 2, need)
    raise FlybenchError(f"a limit of {limit:,} characters is too small for this report: its title and the pointer "
                        f"to the full report take {need:,} characters; pass --limit {need:,} or more")


def _rows_that_fit(sections: list[_Section], room: int) -> list[int]:
    """How many rows of each section fit in `room` bytes.

    Summaries (`_Section.summary`) get up to a quarter of the room first, so
    that they are there however many cases are listed; then the listed rows
    are taken in order until one does not fit, so no row is shown while a
    more urgent one was left out.
    """
    kept = [0] * len(sections)

    def take(i: int, budget: int) -> int:
        """Add rows of section i while they fit in `budget` bytes; the bytes spent."""
        spent = 0
        for row in sections[i].md_rows()[kept[i]:]:
            cost = _size(row) + 1 + (sections[i].first_row_cost() if not kept[i] else 0)
            if spent + cost > budget:
                break
            spent += cost
            kept[i] += 1
        return spent

    for i, s in enumerate(sections):
        if s.summary:
            room -= take(i, room // 4)
    for i, s in enumerate(sections):
        room -= take(i, room)
        if kept[i] < len(s.rows):
            break  # a row did not fit: the less urgent sections get no more, so the order holds
    return kept


def _pointer(full_report: str | None, verb: str) -> str:
    """Where the rows left out are: `full_report` (a URL or a name), else how to get the JSON report."""
    if not full_report:
        return f"the full JSON report (`flybench {verb} --format json`; CI keeps it with the run's artifacts)"
    if full_report.startswith(("http://", "https://")):
        return f"[the full JSON report]({quote(full_report, safe=URL_SAFE)})"
    return f"the full JSON report, {code_span(' '.join(full_report.split()))}"


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


def _comparison_rich(c: Comparison) -> Group:
    parts: list[RenderableType] = [Text(headline(c), style="bold yellow" if inconclusive(c) else "bold")]
    if inconclusive(c):
        parts.append(Text(more_rounds_text(c), style="yellow"))
    parts += [Text(f"- {n}") for n in c.notes]
    listed = [case for verdict in LISTED for case in c.having(verdict)]
    if listed:
        table = _table("verdict", "benchmark", "parameters", "base", "head", "change", "evidence / detail",
                       "context")
        for case in listed:
            cells = _case_cells(case)
            evidence = cells[5] if case.rounds is None or not case.detail else f"{cells[5]}; {case.detail}"
            _add_row(table, Text(case.verdict, style=_STYLE[case.verdict]), case.benchmark, *cells[1:5],
                     evidence, cells[6])
        parts.append(table)
    if c.controls:
        table = _table("verdict", "cases", "median change",
                       title=f"drift controls: {_plural(len(c.controls), 'case')} measured in the same rounds, "
                             "never failing the check")
        for row in control_rows(c):
            _add_row(table, *row)
        parts.append(table)
    parts += [Text(f"{resource_text(r)}{' (worse)' if r.worse else ''}", style="red" if r.worse else "")
              for r in c.resources]
    limited = noise_limited(c)
    if limited:
        table = _table("benchmark", "parameters", "detects", "threshold", "noise",
                       title=f"{_plural(len(limited), 'case')} whose noise keeps them from the threshold")
        for case in limited:
            _add_row(table, case.benchmark, _params(case.params), size_text(case.detectable),
                     f"{100 * case.threshold:.1f}%", noise_text(case))
        parts.append(table)
    skipped = not_measured(c)
    if skipped:
        table = _table("provider", "cases", "reason",
                       title=f"not measured on both sides: {_plural(len(c.having('skipped')), 'case')}")
        table.columns[1].justify = "right"
        for (provider, reason), n in skipped:
            _add_row(table, provider, str(n), reason)
        parts.append(table)
    parts.append(Text(f"{len(c.having('unchanged'))} unchanged and {len(c.having('skipped'))} not measured on both "
                      "sides: counted, not listed (--format json lists every case).", style="dim"))
    return Group(*parts)


def _regressions_rich(regressions: Sequence[Regression]) -> Group:
    title = f"{_plural(sum(r.regressed for r in regressions), 'regression')} in the history{_of_subjects(regressions)}"
    unconfirmed = sum(r.kind == UNCONFIRMED for r in regressions)
    if unconfirmed:
        title += f"; {unconfirmed} unconfirmed, no alert (files only, nothing separates code from runner)"
    table = _table("subject", "machine", "benchmark", "parameters", "commits", "before", "after", "change",
                   "confidence", "state", "evidence", title=title)
    for r in regressions:
        cells = _regression_cells(r)
        style = "red" if r.regressed else "yellow" if r.step.worse else "green"
        _add_row(table, r.subject, cells[0], r.benchmark, *cells[2:6], Text(cells[6], style=style), *cells[7:])
    return Group(table)


def _of_subjects(regressions: Sequence[Regression]) -> str:
    """' of flydsl (45)': whose history the regressions are in, since one store holds several repositories'
    (flybench's own timings, and FlyDSL's compile-only history that comes with the repository)."""
    counts = Counter(r.subject for r in regressions if r.regressed)
    return f" of {', '.join(f'{s} ({n})' for s, n in sorted(counts.items()))}" if counts else ""


def _add_row(table: Table, *cells: RenderableType) -> None:
    """A row whose text cells are shown as they are: rich reads a plain string as markup, so a machine named
    `[link=https://...]x[/link]` would print a live terminal link."""
    table.add_row(*(Text(cell) if isinstance(cell, str) else cell for cell in cells))


def _table(*columns: str, title: str | None = None) -> Table:
    """A table that never cuts a cell with an ellipsis: a narrow terminal folds it onto more lines."""
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    return table


def _detail_cells(case: CaseResult) -> list[str]:
    return [case.benchmark, _params(case.params), case.detail]


def _md_cells(cells: list[str], code: tuple[int, ...] = (0,)) -> list[str]:
    """A row of plain cells as markdown: the `code` columns (a benchmark's name) as code spans, the others as
    literal text. Names, parameters and reasons come from files: none may link, format or break the table."""
    return [code_span(cell) if i in code else literal_markdown(cell) for i, cell in enumerate(cells)]


def _case_cells(case: CaseResult) -> list[str]:
    """A case's cells as plain text (the terminal's; markdown's through `_md_cells`)."""
    evidence = evidence_text(case)
    detects = detectable_text(case)
    return [case.benchmark, _params(case.params), value_text(case.base, case.unit),
            value_text(case.head, case.unit), change_text(case.base, case.head, case.unit),
            f"{evidence}; {detects}" if detects else evidence, context_text(case)]


def context_text(case: CaseResult) -> str:
    """'TFLOP/s 512 -> 498, error 3.1e-03': the case's derived facts, base -> head, where recorded."""
    def number(value: float | None, name: str) -> str:
        if value is None:
            return "-"
        return f"{100 * value:.1f}%" if name == "roofline_fraction" else f"{value:.2e}" if name == "error" \
            else f"{value:.4g}"

    facts = [f"{CONTEXT[name]} {number(b, name)} -> {number(h, name)}" for name, (b, h) in case.context.items()]
    return ", ".join(facts + counter_context(case))


COUNTER_CHANGE = 0.02
"""A counter figure that moved by less than this (relative) is left out of a case's context."""


def counter_context(case: CaseResult) -> list[str]:
    """'DRAM read 1.00 GB -> 1.38 GB': the counter figures that moved between base and head, in DERIVED order."""
    from flybench.counters import DERIVED, format_figure

    moved = []
    for name, figure in DERIVED.items():
        if name not in case.counters:
            continue
        b, h = case.counters[name]
        if b is None or h is None or (b == h) or (b and abs(h - b) / abs(b) < COUNTER_CHANGE):
            continue
        moved.append(f"{figure.label} {format_figure(name, b)} -> {format_figure(name, h)}")
    return moved


def _regression_cells(r: Regression) -> list[str]:
    s = r.step
    confidence = "exact" if r.kind == "change" else f"{100 * s.confidence:.0f}% (noise {value_text(s.noise, r.unit)})"
    return [r.machine, r.benchmark, _params(r.params), f"{s.last_good[:8]}..{s.first_bad[:8]}",
            value_text(s.before, r.unit), value_text(s.after, r.unit), change_text(s.before, s.after, r.unit),
            confidence, state_text(r), evidence_of(r)]


def state_text(r: Regression) -> str:
    """What a row of the history report is: an alert and its state (open, recovered, accepted), the environment's
    step, or a deterministic change."""
    if r.kind == "change":
        return "change, undone later" if r.state == "undone" else "change"
    if r.state:
        return f"{r.state} alert"
    return {ENVIRONMENT: "environment, no alert", UNCONFIRMED: "unconfirmed, no alert"}.get(r.kind, r.kind)


def evidence_of(r: Regression) -> str:
    """What the row rests on besides its size: the scan's evidence (code attribution, a paired run, the
    environment), or, for rows stored before the scan said so, what its kind implies."""
    if r.evidence:
        return r.evidence
    return {ENVIRONMENT: "environment: other workloads or controls moved at this commit too",
            "change": "deterministic: every change is reported"}.get(r.kind, "-")


def _finite(value: float | None) -> float | None:
    """JSON has no infinity: a change from zero (spills 0 -> 12) has no relative size."""
    return value if value is not None and math.isfinite(value) else None


def _params(params: dict[str, Any]) -> str:
    return ", ".join(map(str, params.values())) or "-"


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A GFM table; a pipe in a cell is escaped (in a code span too, where GFM needs it), unless it already is."""
    def cell(text: object) -> str:
        return re.sub(r"(?<!\\)\|", r"\\|", str(text).replace("\n", " "))

    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]]


def literal_markdown(text: str) -> str:
    """Text from data (machine and runner names, file names a pull request changed, kernel names, values from a
    dashboard address) as literal markdown: no link, image, emphasis, math or HTML can come out of it.

    Escaping markdown's characters is not enough: GitHub and Streamlit also make a live link of a bare URL, a
    `www.` name or an e-mail address, and Streamlit renders `$...$` as math. So `$` and `&` are escaped too, and
    a zero-width space goes where such a link would begin (`https:` // `...`, `www` . `...`, before `@`): the
    text reads the same and links nowhere. Its line breaks become spaces: `x\n- a\n- b` from an address was a
    list inside a page's warning box (a line of its own can begin a list, a quote or a heading).
    """
    escaped = re.sub(r"([\\`*\[\]<>!#|~$&])", r"\\\1", " ".join(text.splitlines()))
    escaped = re.sub(r"(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])", r"\\_", escaped)  # flash_attn: no emphasis inside a word
    return _AUTOLINK.sub("\u200b", escaped)


_AUTOLINK = re.compile(r"(?<=:)(?=//)|(?<=www)(?=\.)|(?=@)", re.IGNORECASE)
"""Where GFM's autolinks (a scheme's `://`, `www.`, an e-mail's `@`) are broken by a zero-width space."""


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _with_context(case: CaseResult) -> CaseResult:
    """JSON has no tuples: the context pairs come back as lists."""
    return replace(case, context={name: (pair[0], pair[1]) for name, pair in case.context.items()},
                   counters={name: (pair[0], pair[1]) for name, pair in case.counters.items()},
                   rounds=None if case.rounds is None else (case.rounds[0], case.rounds[1]),
                   round_medians=None if case.round_medians is None else (tuple(case.round_medians[0]),
                                                                          tuple(case.round_medians[1])),
                   interval=None if case.interval is None else (case.interval[0], case.interval[1]))
