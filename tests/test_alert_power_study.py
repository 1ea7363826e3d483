"""The alert-power study's judging step: planted heads against base as the PR check would judge them."""

from __future__ import annotations

import gzip
import json
import random

from studies import alert_power


def _line(case: str, level_s: float, spread: float, changes: dict[str, float]) -> dict:
    rng = random.Random(case)

    def rounds(factor: float) -> list[list[int]]:
        return [[round(level_s * factor * rng.gauss(1, spread) * 1e9) for _ in range(200)] for _ in range(2)]

    return {"workload": "diffusion_attention", "case": case, "provider": "triton", "dtype": "bf16", "status": "ok",
            "contract": json.dumps({"graph": True}),
            "samples_ns": {"base": rounds(1.0), **{name: rounds(1 + c) for name, c in changes.items()}}}


PLANTS = {"aa": 0.0, "0.03": 0.03, "0.05": 0.05, "0.1": 0.10}


def test_a_steady_case_is_caught_at_10_percent_and_quiet_in_its_aa_pair():
    verdicts = alert_power.judge_line(_line("steady", 70e-6, 0.002, PLANTS), alert_power.gates())
    by_size = {v["planted"]: v for v in verdicts}
    assert not by_size[0.0]["pr"] and not by_size[0.0]["pr-2%"]
    assert by_size[0.1]["pr"] and by_size[0.05]["pr-2%"] and by_size[0.03]["pr-2%"]
    assert not by_size[0.03]["pr"]  # 3% is under the PR config's 5% by construction
    assert not by_size[0.1]["old-20%-10us"]  # 7 us under the old 10 us floor: the miss the study is about
    assert by_size[0.05]["flydsl-3%"] and not by_size[0.0]["flydsl-3%"]
    assert abs(by_size[0.1]["measured"] - 0.10) < 0.005


def test_a_case_whose_rounds_disagree_is_listed_below_its_detectable_change(tmp_path):
    steady = _line("steady", 300e-6, 0.002, PLANTS)
    noisy = _line("noisy", 300e-6, 0.002, PLANTS)
    noisy["samples_ns"]["base"][1] = [round(s * 1.15) for s in noisy["samples_ns"]["base"][1]]  # a round 15% off
    path = tmp_path / "samples.jsonl.gz"
    path.write_bytes(gzip.compress("\n".join(json.dumps(x) for x in (steady, noisy)).encode()))
    out = tmp_path / "report.json"
    assert alert_power.main(["report", str(path), "--json", str(out)]) == 0
    summary = json.loads(out.read_text())["summary"]["by_size"]["0.1"]["pr"]
    assert summary["below_detectable"] == ["diffusion_attention/noisy/triton/bf16"]
    assert summary["within_reach"] == 1 and summary["caught_within_reach"] == 1
