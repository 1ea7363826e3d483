"""What `flybench run` tells a new user about the run itself: a busy machine, the summary's count, the exit status."""

from __future__ import annotations

import pytest

from flybench import hardware
from flybench.cli import _summary, main


@pytest.mark.parametrize("load, said", [(8.0, True), (1.6, True), (1.4, False), (0.1, False)])
def test_a_busy_machine_is_said(load: float, said: bool, monkeypatch, capsys) -> None:
    monkeypatch.setattr(hardware.os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(hardware.os, "sched_getaffinity", lambda pid: {0, 1})
    hardware.warn_if_busy("before the run")
    out = capsys.readouterr().out
    assert (f"warning: this machine is busy before the run: load average {load:.1f} on 2 core(s)" in out) == said
    assert ("slower and noisier" in out) == said


def test_one_case_reads_one_case(tmp_path, monkeypatch, capsys) -> None:
    record = {"workload": "gemm", "case": "m64", "provider": "torch", "dtype": "bf16", "status": "ok",
              "median_s": 1e-5, "tflops": 0.00123, "gbps": 10.0, "errors": {"out": 1e-3}}
    monkeypatch.setattr(_summary, "run_records", lambda machine_dir, run_id: [record])
    _summary.print_run_summary(tmp_path, "run")
    out = capsys.readouterr().out
    assert "1 case measured" in out and "1 cases" not in out
    assert "0.00123" in out and " 0.00 " not in out  # a tiny case's rate, not 0.00


def test_the_help_says_what_a_budget_run_exits_with(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "with --max-minutes, the cases left unstarted are named and are no failure" in text
    assert "1 a case that started failed or did not finish" in text
