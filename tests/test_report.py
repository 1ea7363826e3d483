"""The compare report fits a comment and reads well: markdown under the limit, full names where there is no terminal."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from flybench.cli._summary import print_run_summary
from flybench.measure import record as records
from flybench.regress.compare import VERDICTS, CaseResult, Comparison, ResourceChange
from flybench.regress.report import (
    COMMENT_MARKER,
    MARKDOWN_LIMIT,
    comment_marker,
    from_json,
    literal_markdown,
    markdown,
    print_rich,
    terminal,
    to_json,
    write,
)

PROVIDERS = ["flydsl", "torch", "flex_attention", "triton", "ck_aiter", "cublas", "hipblaslt", "xla_jax"]
UNAVAILABLE = {
    "ck_aiter": "ck_aiter needs AITER on a ROCm build of torch (gfx942/gfx950); this torch is a CUDA build",
    "cublas": "cublas needs an NVIDIA GPU and a CUDA build of torch",
    "hipblaslt": "hipblaslt needs a ROCm build of torch and an AMD Instinct GPU",
    "xla_jax": "xla_jax needs jax with a GPU plugin; jax is not installed",
}
BENCHMARKS = ["diffusion_attention.Full.track_time", "attention.Full.track_time", "moe.Full.track_time"]


def case_name(i: int) -> str:
    return f"llada8b-h32kv32-page64-ragged1k-32k-draftblock64-bidirectional-scratch-region-{i:04d}"


def many_cases(n: int = 300) -> Comparison:
    """8 providers x n cases x 2 dtypes on one GPU: half of it not measured, a few hundred changed."""
    cases = []
    for i in range(n):
        for provider in PROVIDERS:
            for dtype in ("bf16", "fp8_e4m3fnuz"):
                args = (BENCHMARKS[i % 3], {"case": case_name(i), "provider": provider, "dtype": dtype},
                        "existing-py_venv_bin_python3.12", "seconds")
                if provider in UNAVAILABLE:
                    case = CaseResult(*args, None, None, "skipped",
                                      detail=f"base unavailable, head unavailable: {UNAVAILABLE[provider]}")
                elif provider == "triton" and i % 2:
                    case = CaseResult(*args, None, 1e-3, "skipped", detail="measured only in head")
                elif provider == "flydsl" and i % 3 == 0:
                    case = CaseResult(*args, 1e-3, 1.3e-3 + i * 1e-6, "regression", "mann-whitney", 1e-5,
                                      context={"tflops": (512.0, 400.0), "error": (3e-3, 3e-3)})
                elif provider == "torch" and i % 4 == 0:
                    case = CaseResult(*args, 1e-3, 0.7e-3 - i * 1e-7, "improvement", "ci-99")
                elif provider == "flex_attention" and i % 50 == 0:
                    case = CaseResult(*args, 1e-3, None, "broken",
                                      detail="base ok, head failed: max error 0.5 over tolerance 0.02")
                elif provider == "flex_attention" and i % 30 == 1:
                    case = CaseResult(*args, 1e-3, 1e-3, "incomparable",
                                      detail="contracts differ in flush: 'llc' vs 'none'")
                else:
                    case = CaseResult(*args, 1e-3, 1e-3, "unchanged", "mann-whitney", 0.3)
                cases.append(case)
    cases.sort(key=lambda c: (VERDICTS.index(c.verdict), -abs(c.relative or 0)))
    resources = [ResourceChange("flash_attn_generic", "gfx950", "vgpr_count", "registers", 238, 256, True)]
    return Comparison("box-h200", "a" * 40, "b" * 40, 0.002, cases, resources)


def params_text(case: CaseResult) -> str:
    return ", ".join(map(str, case.params.values()))


def params_md(case: CaseResult) -> str:
    """The parameters as the markdown holds them: literal text (`_` escaped; it reads the same)."""
    return literal_markdown(params_text(case))


def listed_rows(text: str, verdicts: tuple[str, ...], comparison: Comparison) -> list[CaseResult]:
    """The cases of these verdicts whose row the markdown holds."""
    return [c for c in comparison.cases if c.verdict in verdicts
            if f"| `{c.benchmark}` | {params_md(c)} |" in text]


@pytest.fixture(scope="module")
def big() -> Comparison:
    return many_cases()


def test_a_big_comparison_fits_a_comment_most_urgent_first(big: Comparison) -> None:
    text = markdown(big)
    assert len(text) < 60_000 and len(text.encode()) < MARKDOWN_LIMIT
    regressions = listed_rows(text, ("regression",), big)
    broken = listed_rows(text, ("broken",), big)
    improvements = listed_rows(text, ("improvement",), big)
    # every regression and broken case is there, and listed before any improvement
    assert len(regressions) == len(big.having("regression")) == 200
    assert len(broken) == len(big.having("broken")) == 12
    assert text.index("#### Regressions (200)") < text.index("#### Broken") < text.index("#### Improvements")
    assert max(text.index(params_md(c)) for c in regressions) < min(text.index(params_md(c)) for c in improvements)
    # the biggest improvements are the ones kept
    assert improvements == big.having("improvement")[:len(improvements)]

    # it says how many rows it left out, and where every case is
    note = re.search(r"(\d+) of (\d+) rows left out \(([^)]*)\)", text)
    assert note, text[:2000]
    left_out, total = int(note[1]), int(note[2])
    listed = [c for c in big.cases if c.verdict in ("regression", "broken", "improvement", "fixed", "incomparable")]
    shown = listed_rows(text, ("regression", "broken", "improvement", "fixed", "incomparable"), big)
    assert total == len(listed) + len(big.resources) + 5  # 5 lines of the not-measured summary
    assert left_out == len(listed) - len(shown) > 0
    assert f"{len(big.having('improvement')) - len(improvements)} improvements" in note[3]
    assert "full JSON report" in text and "--format json" in text
    assert f"_{len(big.having('improvement')) - len(improvements)} more improvements left out here._" in text


def test_not_measured_cases_are_summarised_by_provider_and_reason(big: Comparison) -> None:
    text = markdown(big)
    assert "#### Not measured on both sides (2700 cases), by provider and reason" in text
    for provider, reason in UNAVAILABLE.items():
        said = literal_markdown(f"base unavailable, head unavailable: {reason}")  # a reason is data: literal text
        assert f"| `{provider}` | 600 | {said} |" in text
    assert "| `triton` | 300 | measured only in head |" in text
    assert not listed_rows(text, ("skipped", "unchanged"), big)  # counted, not listed
    assert "1718 unchanged" in text and "2700 not measured" in text
    assert f"- {literal_markdown('flash_attn_generic: VGPRs 238 -> 256 on gfx950 (worse)')}" in text


def test_the_comment_starts_with_its_marker_and_points_to_the_uploaded_report(big: Comparison, tmp_path: Path) -> None:
    out = tmp_path / "comment.md"
    url = "https://github.com/o/r/actions/runs/1/artifacts/2"
    write(big, "markdown", out, full_report=url)
    text = out.read_text()
    assert text.startswith(COMMENT_MARKER + "\n### :red_circle: flybench: 200 regressions, 12 broken")
    assert f"Every case is in [the full JSON report]({url})." in text and len(text) < 60_000
    assert comment_marker() == COMMENT_MARKER and comment_marker("resources") != COMMENT_MARKER
    assert comment_marker("resources").startswith("<!--") and comment_marker("resources").endswith("-->")


@pytest.mark.parametrize("limit", [4_000, 20_000, 59_999, 200_000])
def test_the_markdown_stays_under_any_limit(big: Comparison, limit: int) -> None:
    text = markdown(big, limit=limit, marker=COMMENT_MARKER)
    assert len(text.encode()) < limit
    assert "| `cublas` | 600 |" in text  # the not-measured summary is always there


def test_a_report_that_fits_lists_every_row_and_no_note(big: Comparison) -> None:
    small = Comparison(big.machine, big.base, big.head, big.p_threshold,
                       [c for c in big.cases if c.params["case"] in (case_name(0), case_name(1), case_name(3))])
    text = markdown(small)
    assert "left out" not in text
    shown = listed_rows(text, ("regression", "broken", "improvement", "fixed", "incomparable"), small)
    assert shown == [c for c in small.cases if c.verdict not in ("skipped", "unchanged")] and shown
    full = markdown(big, limit=1_000_000)  # the job summary's room: everything
    assert "left out" not in full and len(listed_rows(full, ("improvement",), big)) == 150


def test_terminal_report_to_a_pipe_keeps_every_full_name(big: Comparison, tmp_path: Path) -> None:
    stream = io.StringIO()
    print_rich(terminal(big), stream)
    text = stream.getvalue()
    assert "…" not in text and "..." not in text
    listed = [c for c in big.cases if c.verdict not in ("skipped", "unchanged")]
    lines = text.splitlines()
    for case in listed:
        assert any(case.benchmark in line and params_text(case) in line for line in lines), case
    for reason in UNAVAILABLE.values():
        assert any(reason in line and "600" in line for line in lines)
    assert not any(c.params["case"] == case_name(2) for c in listed)  # case 2 is all unchanged or not measured
    assert case_name(2) not in text
    out = tmp_path / "report.txt"
    write(big, "terminal", out)  # a file, as `flybench compare --output` writes it
    assert out.read_text() == text


def test_a_narrow_terminal_folds_names_instead_of_cutting_them(monkeypatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setenv("COLUMNS", "80")
    stream = Terminal()
    print_rich(terminal(many_cases(6)), stream)
    text = re.sub(r"\x1b\[[0-9;]*m", "", stream.getvalue())  # a terminal gets colours
    assert "…" not in text and max(map(len, text.splitlines())) <= 80


def test_json_keeps_every_case_and_reads_back(big: Comparison) -> None:
    text = to_json(big)
    assert len(json.loads(text)["cases"]) == len(big.cases) == 4800
    assert from_json(text) == big


def test_the_saved_json_renders_again(big: Comparison, tmp_path: Path, capsys) -> None:
    """`flybench render`, as the pull-request workflow calls it."""
    from flybench.cli import main as flybench

    def main(argv: list[str]) -> int:
        return flybench(["render", *argv])

    saved = tmp_path / "compare.json"
    saved.write_text(to_json(big))
    out = tmp_path / "resources.md"
    assert main([str(saved), "--comment-name", "resources", "--full-report-url", "compare.json", "--limit", "30000",
                 "--output", str(out)]) == 0
    text = out.read_text()
    assert text.startswith(comment_marker("resources") + "\n") and len(text) < 30_000
    assert "Every case is in the full JSON report, `compare.json`." in text
    assert main([str(saved), "--format", "terminal"]) == 0 and case_name(297) in capsys.readouterr().out
    (tmp_path / "bad.json").write_text("[]")
    assert main([str(tmp_path / "bad.json")]) == 2
    assert "not a comparison" in capsys.readouterr().err
    assert main([str(tmp_path / "missing.json")]) == 2 and "cannot read" in capsys.readouterr().err
    text = json.loads(to_json(big))
    text["cases"][0]["base"] = "fast"  # a string where a number goes: a traceback before, exit 1
    (tmp_path / "string.json").write_text(json.dumps(text))
    assert main([str(tmp_path / "string.json")]) == 2
    assert "case 0: base = 'fast', not a number" in capsys.readouterr().err
    url = "https://github.com/o/r/actions/runs/1/artifacts/2?name=isa (diff)"
    assert main([str(saved), "--link", f"ISA diffs [gfx942]={url}", "--output", str(out)]) == 0
    assert "- [ISA diffs \\[gfx942\\]](https://github.com/o/r/actions/runs/1/artifacts/2?name=isa%20%28diff%29)" \
        in out.read_text()  # the text literal, the URL unable to end the link early
    assert main([str(saved), "--comment-name", "x --> <h1>owned</h1>"]) == 2
    assert "must be letters, digits" in capsys.readouterr().err
    assert main([str(saved), "--link", "ISA diffs=file:///etc/passwd"]) == 2
    assert "is not TEXT=URL with an http(s) URL" in capsys.readouterr().err


def run_record(case: str, provider: str, status: str = "ok", reason: str | None = None) -> records.CaseRecord:
    measured = status == "ok"
    return records.CaseRecord(
        run_id="run-1", workload="diffusion_attention", shape_set="full", case=case, provider=provider,
        dtype="bf16", status=status, reason=reason, errors={"out": 1e-3} if measured else {},
        samples_s=[1e-3, 1.1e-3, 1.2e-3] if measured else [], tflops=412.5 if measured else None,
        gbps=1800.0 if measured else None, commit="c" * 40, env="existing-py", machine="box-h200")


def test_run_summary_prints_full_case_names_where_there_is_no_terminal(tmp_path: Path, capsys) -> None:
    path = tmp_path / f"cccccccc-existing-py{records.SUFFIX}"
    names = [case_name(i) + "-llama3-8b-gqa-32-8-causal" for i in range(4)]
    for name in names:
        for provider in ("flydsl", "torch", "triton_autotuned_persistent"):
            records.append(path, run_record(name, provider))
        records.append(path, run_record(name, "cublas", "unavailable", UNAVAILABLE["cublas"]))
    records.append(path, run_record(names[0], "flex_attention", "failed", "max error 0.5 over tolerance 0.02"))
    stream = io.StringIO()
    print_run_summary(tmp_path, "run-1", stream)
    print_run_summary(tmp_path, "run-1")  # stdout, captured: no terminal either
    for text in (stream.getvalue(), capsys.readouterr().out):
        assert "…" not in text
        lines = text.splitlines()
        assert "13 cases measured, 4 unavailable here" in text
        for name in names:
            for provider in ("flydsl", "torch", "triton_autotuned_persistent"):
                assert any(name in line and provider in line for line in lines), (name, provider)
        assert any("failed: max error 0.5 over tolerance 0.02" in line for line in lines)
        # the cases a provider cannot run here: one line for the provider and its reason
        assert [line for line in lines if "cublas" in line] == [
            line for line in lines if UNAVAILABLE["cublas"] in line and re.search(r"\b4\b", line)]


def test_values_read_as_a_person_writes_them() -> None:
    from flybench.regress.report import value_text

    assert value_text(1120.4, "TFLOP/s") == "1,120 TFLOP/s"  # never 1.12e+03
    assert value_text(33700.0, "count") == "33,700 count"
    assert value_text(397.5, "TFLOP/s") == "397.5 TFLOP/s" and value_text(0.01234, None) == "0.01234"
    assert (value_text(33_700, "bytes"), value_text(1.5e9, "bytes"), value_text(512, "bytes")) == (
        "33.7 KB", "1.5 GB", "512 B")
