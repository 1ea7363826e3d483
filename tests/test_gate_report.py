"""What a person reads at the top of a gate's report: whether anything was settled, intervals that say something,
and rows that fit a terminal."""

from __future__ import annotations

import json
import tempfile
from dataclasses import replace
from pathlib import Path

from flybench.regress import Comparison, load_config, markdown
from flybench.regress.compare import judge
from flybench.regress.report import TERMINAL_WIDTH, exit_code, to_json, write

CFG = replace(load_config(None), p_threshold=0.001)
TIME = replace(CFG.thresholds("moe.Quick.track_time", "", "seconds"), relative=0.03)


def _side(rounds_us: list[float]) -> dict:
    samples = [r * 1e-6 for r in rounds_us for _ in range(50)]
    return {"value": sorted(samples)[len(samples) // 2], "status": "ok", "samples": samples, "ci_99_a": None,
            "ci_99_b": None, "contract": None, "reason": None, "errors": None, "run_id": "r",
            "rounds": [r * 1e-6 for r in rounds_us], "round_spreads": [0.01] * len(rounds_us)}


def _case(case: str, base: list[float], head: list[float], provider: str = "triton"):
    params = {"case": case, "provider": provider, "dtype": "bf16"}
    return judge("moe.Quick.track_time", params, "env", "seconds", _side(base), _side(head), TIME, CFG)


NOISY = _case("t1", [100, 112, 95], [104, 99, 118])  # host-bound rounds: ambiguous at 3+3
WILD = _case("t4096", [10, 600], [12, 800])  # two rounds a side, medians 60x apart
QUIET = _case("t16", [100, 100.1, 99.9], [100.05, 99.95, 100.0])


def _terminal(comparison: Comparison) -> str:
    """The terminal report as a CI log holds it (written to a file: no terminal to take a width from)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "report.txt"
        write(comparison, "terminal", path, width=TERMINAL_WIDTH)  # as `flybench gate` writes it
        return path.read_text()


def test_a_gate_that_settled_nothing_is_inconclusive_not_a_pass() -> None:
    assert NOISY.verdict == WILD.verdict == "ambiguous" and QUIET.verdict == "unchanged"
    nothing = Comparison("gate-h200", "a" * 40, "b" * 40, 0.001, [NOISY, WILD])
    text = markdown(nothing)
    headline = text.splitlines()[0]
    assert headline.startswith("### :grey_question: flybench: inconclusive: no subject case settled; 0 regressions")
    assert ":white_check_mark:" not in text and ":red_circle:" not in text
    said = text.splitlines()[2]
    assert said.startswith("**Neither a pass nor a failure: at their rounds (2+2 or more) the 2 ambiguous cases "
                           "detect changes of ")
    assert "twice the rounds would bring that to " in said and "against tolerances of 3.0%" in said
    assert "would still miss a change of twice their tolerance" in said  # the 60x case: more rounds will not do
    assert exit_code(nothing) == 0  # not a regression: exit 1 means one
    assert json.loads(to_json(nothing))["inconclusive"] is True  # for a workflow that reads the JSON report
    shown = _terminal(nothing).splitlines()
    assert shown[0].startswith("inconclusive: no subject case settled;") and shown[1].startswith("Neither a pass")
    # one settled case is a pass that lists the ambiguous ones
    some = markdown(Comparison("gate-h200", "a" * 40, "b" * 40, 0.001, [NOISY, QUIET]))
    assert some.splitlines()[0].startswith("### :white_check_mark: flybench: 0 regressions")
    assert "inconclusive" not in some and "Neither a pass" not in some


def test_an_interval_past_100_percent_says_so_instead_of_its_digits() -> None:
    text = markdown(Comparison("gate-h200", "a" * 40, "b" * 40, 0.001, [WILD]))
    assert "interval wider than ±100% (welch-t (rounds)" in text
    assert "the 99.9% interval, wider than ±100%, reaches both sides" in WILD.detail
    assert "detects more than 100% here" in text and "00000000" not in text
    narrow = markdown(Comparison("gate-h200", "a" * 40, "b" * 40, 0.001, [NOISY]))
    assert "wider than" not in narrow and "interval -" in narrow


def test_terminal_rows_fit_160_columns() -> None:
    """A CI log is no terminal: the report used to print at its rows' full width, about 700 columns."""
    many = [_case(f"dsv3-t{2 ** i}", [100, 112 + i, 95], [104, 99, 118 + i]) for i in range(6)]
    notes = ["timing selection: " + "; ".join(f"moe/p{i} (8 of 8 cases, by case records: flybench/x{i}.py)"
                                              for i in range(12))]
    shown = _terminal(Comparison("gate-h200", "a" * 40, "b" * 40, 0.001, [*many, WILD], notes=notes))
    widths = [len(line) for line in shown.splitlines()]
    assert max(widths) <= TERMINAL_WIDTH and max(widths) > 120  # it uses the room it has
    assert "dsv3-t32" in shown and "moe/p11" in shown  # folded and wrapped, nothing cut


def test_noise_never_keeps_the_json_report_from_being_written() -> None:
    """Under load two rounds a side can leave an interval with an infinite end: the JSON report says null there,
    and is written (it once died of `ValueError: Out of range float values are not JSON compliant: inf`)."""
    unbounded = replace(WILD, interval=(float("-inf"), float("inf")), p_value=float("nan"), noise=float("inf"))
    data = json.loads(to_json(Comparison("gate-h200", "a" * 40, "b" * 40, 0.001, [unbounded, QUIET])))
    case = data["cases"][0]
    assert case["interval"] == [None, None] and case["p_value"] is None and case["noise"] is None
    assert data["cases"][1]["interval"] == list(QUIET.interval)


def _compiled(arch: str, **metrics) -> dict:
    return {"kernel": "triton_moe:gate_up_bf16_t16", "arch": arch, "status": "ok", "metrics": metrics}


def test_a_head_kernel_that_cannot_run_is_broken_fails_the_check_and_heads_the_comment() -> None:
    """gfx942 bf16 MoE bucket 0 at BLOCK_N 128 asks for 69,632 bytes of LDS (gfx942 has 64 KiB) and gets 0 waves:
    broken, exit 1, the comment's first line, not the 17th of 22 'worse' resource lines under a pass."""
    from flybench.cli.gate import METRIC_UNITS
    from flybench.regress.compare import compile_changes

    lds = _compiled("gfx942", lds_static=69632, occupancy=0, vgprs=128)
    fits = _compiled("gfx942", lds_static=34816, occupancy=2, vgprs=128)
    spills = _compiled("sm_90", registers=255, spill_bytes=96, smem_dynamic=1024)
    clean = _compiled("sm_90", registers=200, spill_bytes=0, smem_dynamic=1024)
    changes, broken = compile_changes([fits, clean], [lds, spills], METRIC_UNITS, CFG)
    assert [(c.params["arch"], c.verdict) for c in broken] == [("gfx942", "broken"), ("sm_90", "broken")]
    assert broken[0].detail == ("0 waves at head (2 at base): its LDS, 69,632 bytes, exceeds gfx942's 65,536 per "
                                "CU, so it cannot run")
    assert broken[1].detail == "it starts spilling: spill_bytes 0 at base, 96 at head"
    assert changes  # the resources that moved are still listed
    comparison = Comparison("gate-h200", "a" * 40, "b" * 40, 0.001, broken, resources=changes)
    assert exit_code(comparison) == 1
    first = markdown(comparison).splitlines()[0]
    assert ":red_circle:" in first and "broken" in first
    same, none = compile_changes([fits], [fits], METRIC_UNITS, CFG)
    assert same == [] and none == []
