"""The replay's line-up with FlyDSL CI's `vs_main`: which run, which figure, which outcome."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest

from studies.replay_lineup import MOVED_PCT, changed_kernels, ci_moves, lineup, markdown

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "flydsl-ci-history-2026-06-11_2026-07-12.json.gz"


def record(pr: int, run: int, ts: str, op: str, arch: str, delta: float | None, shape: str = "s") -> dict:
    return {"pr": pr, "run_id": run, "ts": ts, "op": op, "arch": arch, "status": "ok", "shape": shape,
            "vs_main": None if delta is None else {"label": "main", "ratio": 1 + delta / 100, "delta_pct": delta}}


def test_ci_moves_take_the_median_of_an_ops_shapes_in_the_pull_requests_last_run_on_amd() -> None:
    records = [record(7, 1, "2026-06-20T00:00:00Z", "flash_attn", "gfx950", -30.0),  # an earlier push
               record(7, 2, "2026-06-21T00:00:00Z", "flash_attn", "gfx950", -8.0, "a"),
               record(7, 2, "2026-06-21T00:00:00Z", "flash_attn", "gfx950", -6.0, "b"),
               record(7, 2, "2026-06-21T00:00:00Z", "flash_attn", "gfx950", 1.0, "c"),
               record(7, 2, "2026-06-21T00:00:00Z", "gemm", "gfx1201", -50.0),  # Navi: not the targets compiled
               record(7, 2, "2026-06-21T00:00:00Z", "gemm", "gfx942", None)]  # no main baseline in that job
    assert ci_moves(records) == {7: {("flash_attn", "gfx950"): -6.0}}


def test_each_pull_request_is_put_in_one_outcome() -> None:
    rows = [{"commit": "a" * 40, "code": "machine code changed in 2 kernels: flash_attn_generic:causal_m128 "
                                         "(gfx942, gfx950); rmsnorm:bf16_32768x8192 (gfx950); ISA diffs in x",
             "resources": ["flash_attn_generic:causal_m128 vgprs 128 -> 136 on gfx942"]},
            {"commit": "b" * 40, "code": "", "resources": []},
            {"commit": "c" * 40, "code": "", "resources": []},
            {"commit": "d" * 40, "code": "", "resources": []}]
    assert changed_kernels(rows[0]) == ["flash_attn_generic:causal_m128", "rmsnorm:bf16_32768x8192"]
    subjects = {"a" * 40: ("2026-06-20", "Faster attention (#1)"), "b" * 40: ("2026-06-21", "Docs (#2)"),
                "c" * 40: ("2026-06-22", "Runner (#3)"), "d" * 40: ("2026-06-23", "Not in CI (#4)")}
    moves = {1: {("flash_attn", "gfx950"): 9.0}, 2: {("gemm", "gfx942"): MOVED_PCT / 2},
             3: {("gemm", "gfx942"): -MOVED_PCT}}
    found = {f["pr"]: f for f in lineup(rows, subjects, moves)}
    assert set(found) == {1, 2, 3}  # #4 has no CI run in the history
    assert found[1]["kind"] == "both moved" and found[1]["code_ops"] == ["flash_attn", "rmsnorm"]
    assert found[2]["kind"] == "neither" and found[3]["kind"] == "time alone"
    text = markdown(list(found.values()), Path("history.json.gz"))
    assert text.startswith("Imported: FlyDSL's own CI results, `history.json.gz`")
    assert "| #1 Faster attention (#1) | 2026-06-20 | flash_attn_generic:causal_m128; rmsnorm:bf16_32768x8192 " \
           "(flash_attn, rmsnorm) |" in text and "flash_attn gfx950 +9.0% | both moved |" in text


@pytest.mark.skipif(not DATA.is_file(), reason=f"{DATA} not found (the shared data folder)")
def test_the_imported_month_gives_each_pull_request_a_finite_change_per_op() -> None:
    with gzip.open(DATA, "rt") as f:
        moves = ci_moves(json.load(f)["records"])
    assert len(moves) >= 20
    assert all(arch in ("gfx942", "gfx950") and math.isfinite(pct)
               for per_op in moves.values() for (_, arch), pct in per_op.items())
