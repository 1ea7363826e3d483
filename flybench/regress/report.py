"""Renderers for comparisons and regressions: terminal (rich), markdown (a PR comment), JSON.

Plus the exit-code rule shared by the CLI verbs: 1 on a regression, 0
otherwise, 2 on bad input (the CLI catches FlybenchError for that).
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from asv.util import human_value
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from flybench.regress.compare import CONTEXT, VERDICTS, CaseResult, Comparison, ResourceChange
from flybench.regress.history import Regression

EXIT_OK, EXIT_REGRESSION = 0, 1  # and 2 for bad input: flybench.cli.main maps FlybenchError to it

# Compile-metric names as the AMDGPU ISA metadata spells them, as an engineer reads them.
METRIC_LABELS = {
    "vgpr_count": "VGPRs", "agpr_count": "AGPRs", "sgpr_count": "SGPRs",
    "group_segment_fixed_size": "LDS bytes", "private_segment_fixed_size": "scratch bytes",
    "vgpr_spill_count": "VGPR spills", "sgpr_spill_count": "SGPR spills",
}
_LABELS = {"regression": "regression", "broken": "broken", "improvement": "improvement", "fixed": "fixed",
           "incomparable": "not comparable", "skipped": "not measured", "unchanged": "unchanged"}
_STYLE = {"regression": "bold red", "broken": "bold red", "improvement": "green", "fixed": "green",
          "incomparable": "yellow", "skipped": "dim", "unchanged": ""}

Outcome = Comparison | Sequence[Regression]
FORMATS = ("terminal", "markdown", "json")


def exit_code(outcome: Outcome) -> int:
    """1 when the outcome holds a regression (or a case that broke), else 0."""
    if isinstance(outcome, Comparison):
        return EXIT_REGRESSION if outcome.failing else EXIT_OK
    return EXIT_REGRESSION if any(r.step.worse for r in outcome) else EXIT_OK


def markdown(outcome: Outcome) -> str:
    """A comment ready to post on a pull request (or an issue, for history regressions)."""
    return _comparison_md(outcome) if isinstance(outcome, Comparison) else _regressions_md(outcome)


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
            "cases": [{**asdict(c), "relative": _finite(c.relative)} for c in outcome.cases],
            "resources": [asdict(r) for r in outcome.resources],
        }
    else:
        data = [{**asdict(r), "relative": _finite(r.step.relative), "absolute": r.step.absolute} for r in outcome]
    return json.dumps(data, indent=2, default=str, allow_nan=False)


def write(outcome: Outcome, fmt: str, output: Path | None = None) -> None:
    """Render in one of FORMATS to `output` (a file, e.g. the PR comment CI posts) or stdout."""
    with output.open("w", encoding="utf-8") if output else contextlib.nullcontext(sys.stdout) as stream:
        if fmt == "terminal":
            Console(file=stream, width=160 if output else None).print(terminal(outcome))  # a file has no width
        else:
            stream.write((markdown(outcome) if fmt == "markdown" else to_json(outcome)) + "\n")


def summary_line(comparison: Comparison) -> str:
    """'2 regressions, 1 improvement, 5 unchanged on m1 (base abc12345 -> head def67890)'."""
    counts = [(v, len(comparison.having(v))) for v in VERDICTS]
    parts = [_plural(n, _LABELS[v]) if v in ("regression", "improvement") else f"{n} {_LABELS[v]}"
             for v, n in counts if n or v in ("regression", "improvement", "unchanged")]
    if comparison.resources:
        parts.append(_plural(len(comparison.resources), "resource change"))
    return (f"{', '.join(parts)} on {comparison.machine} "
            f"(base {comparison.base[:8]} -> head {comparison.head[:8]})")


def value_text(value: float | None, unit: str | None) -> str:
    """asv's human units for times and bytes; other units printed after the number."""
    if value is None:
        return "-"
    if unit in ("seconds", "bytes"):
        return human_value(value, unit)
    return f"{value:.4g}" + (f" {unit}" if unit else "")


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


def _comparison_md(c: Comparison) -> str:
    mark = ":red_circle:" if c.failing else ":white_check_mark:"
    lines = [f"### {mark} flybench: {summary_line(c)}", ""]
    case_columns = ["benchmark", "parameters", "base", "head", "change", "evidence", "context"]
    sections = [("Regressions", "regression", case_columns), ("Broken: head fails where base passed", "broken", None),
                ("Improvements", "improvement", case_columns), ("Fixed", "fixed", None),
                ("Not compared: measurement contracts differ", "incomparable", None),
                ("Not measured on both sides", "skipped", None)]
    for title, verdict, columns in sections:
        cases = c.having(verdict)
        if cases:
            header = columns or ["benchmark", "parameters", "detail"]
            rows = [_case_cells(x) if columns else [f"`{x.benchmark}`", _params(x.params), x.detail] for x in cases]
            lines += [f"#### {title}", "", *_md_table(header, rows), ""]
    if c.resources:
        lines += ["#### Resource changes", "",
                  *[f"- {resource_text(r)}{' (worse)' if r.worse else ''}" for r in c.resources], ""]
    lines.append(f"<sub>{len(c.having('unchanged'))} unchanged. A regression needs Mann-Whitney p < {c.p_threshold:g} "
                 "on the samples (or 99% intervals apart) and a change beyond the relative and absolute "
                 "thresholds.</sub>")
    return "\n".join(lines)


def _regressions_md(regressions: Sequence[Regression]) -> str:
    worse = [r for r in regressions if r.step.worse]
    title = f"### flybench: {_plural(len(worse), 'regression')} in the history"
    if len(regressions) > len(worse):
        title += f", {_plural(len(regressions) - len(worse), 'other resource change')}"
    header = ["machine", "benchmark", "parameters", "commits (last good..first bad)", "before", "after",
              "change", "confidence"]
    return "\n".join([title, "", *_md_table(header, [_regression_cells(r) for r in regressions])]) + "\n"


def _comparison_rich(c: Comparison) -> Group:
    table = Table(title=summary_line(c), title_justify="left")
    for column in ("verdict", "benchmark", "parameters", "base", "head", "change", "evidence / detail", "context"):
        table.add_column(column)
    for case in c.cases:
        cells = _case_cells(case)
        table.add_row(Text(case.verdict, style=_STYLE[case.verdict]), case.benchmark, *cells[1:5],
                      case.detail or cells[5], cells[6])
    resources = [Text(f"{resource_text(r)}{' (worse)' if r.worse else ''}", style="red" if r.worse else "")
                 for r in c.resources]
    return Group(table, *resources)


def _regressions_rich(regressions: Sequence[Regression]) -> Group:
    table = Table(title=f"{_plural(sum(r.step.worse for r in regressions), 'regression')} in the history",
                  title_justify="left")
    for column in ("machine", "benchmark", "parameters", "commits", "before", "after", "change", "confidence"):
        table.add_column(column, no_wrap=column == "commits")
    for r in regressions:
        cells = _regression_cells(r)
        table.add_row(cells[0], r.benchmark, *cells[2:6], Text(cells[6], style="red" if r.step.worse else "green"),
                      cells[7])
    return Group(table)


def _case_cells(case: CaseResult) -> list[str]:
    if case.test == "mann-whitney":
        evidence = f"Mann-Whitney p={case.p_value:.1e}"
    else:
        evidence = {"ci-99": "99% intervals apart", "none": "no spread recorded"}.get(case.test, case.detail)
    return [f"`{case.benchmark}`", _params(case.params), value_text(case.base, case.unit),
            value_text(case.head, case.unit), change_text(case.base, case.head, case.unit), evidence,
            context_text(case)]


def context_text(case: CaseResult) -> str:
    """'TFLOP/s 512 -> 498, error 3.1e-03': the case's derived facts, base -> head, where recorded."""
    def number(value: float | None, name: str) -> str:
        if value is None:
            return "-"
        return f"{100 * value:.1f}%" if name == "roofline_fraction" else f"{value:.2e}" if name == "error" \
            else f"{value:.4g}"

    return ", ".join(f"{CONTEXT[name]} {number(b, name)} -> {number(h, name)}"
                     for name, (b, h) in case.context.items())


def _regression_cells(r: Regression) -> list[str]:
    s = r.step
    confidence = "exact" if r.kind == "change" else f"{100 * s.confidence:.0f}% (noise {value_text(s.noise, r.unit)})"
    return [r.machine, f"`{r.benchmark}`", _params(r.params), f"{s.last_good[:8]}..{s.first_bad[:8]}",
            value_text(s.before, r.unit), value_text(s.after, r.unit), change_text(s.before, s.after, r.unit),
            confidence]


def _finite(value: float | None) -> float | None:
    """JSON has no infinity: a change from zero (spills 0 -> 12) has no relative size."""
    return value if value is not None and math.isfinite(value) else None


def _params(params: dict[str, Any]) -> str:
    return ", ".join(map(str, params.values())) or "-"


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    escape = str.maketrans({"|": "\\|", "\n": " "})
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *["| " + " | ".join(str(cell).translate(escape) for cell in row) + " |" for row in rows]]


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")
