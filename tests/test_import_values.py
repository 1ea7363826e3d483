"""Values no kernel can have, in FlyDSL's CI history: rejected at import, counted and named, never stored as ok.

Records of -5 or 1e308 TFLOPS were stored as ok rows (and charted, and judged). A value of 0 is what FlyDSL
prints for a rate below its precision (its tiniest attention cases, 752 records of the 2026-06/07 month): it is
stored, as missing, never as an ok value of 0.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_import_faults import history, record, rows

from flybench.cli import main
from flybench.importers.flydsl_ci import import_file

DATA = Path("/work/shared/data/flydsl-ci-history-2026-06-11_2026-07-12.json.gz")
"""FlyDSL's own CI month (imported data, FlyDSL's measurements), where it is at hand."""
COMMIT, OTHER = "42ae6972b00dd3d2936c5b80a2c96ae4d2fd6608", "11c4174d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"


def _with(value: float, run_id: int, metric: str = "TFLOPS", commit: str = COMMIT) -> dict:
    return {**record(commit, run_id), "value": value, "metric": metric}


def test_impossible_values_are_rejected_with_a_count_and_never_stored(tmp_path: Path, capsys) -> None:
    path = history(tmp_path / "history.json", _with(512.5, 1), _with(-5, 2), _with(1e308, 3), _with(0.0, 4, commit=OTHER),
                   _with(-1.0, 5, "TB/s"), _with(1e9, 6, "speedup"))
    db = tmp_path / "store.duckdb"
    assert main(["import", "flydsl-ci", str(path), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "2 records read, 2 new, 0 already stored, 4 rejected" in err
    assert "record 1: value -5 TFLOPS is no measurement a kernel can have (0 to 503,300 TFLOPS)" in err
    assert "record 2: value 1e+308 TFLOPS is no measurement a kernel can have" in err
    assert "record 4: value -1.0 TB/s is no measurement a kernel can have (0 to 800 TB/s)" in err
    assert "record 5: value 1000000000.0 speedup is no measurement a kernel can have (0 to 10,000 speedup)" in err
    assert "Traceback" not in err
    stored = rows(db, "SELECT run_id, status, value FROM results ORDER BY run_id")
    assert stored == [("1", "ok", 512.5), ("4", "missing", None)]  # the 0 is no ok value
    (reason,) = rows(db, "SELECT reason FROM results WHERE run_id = '4'")[0]
    assert "printed 0.0 TFLOPS: a rate below the precision it prints" in reason


@pytest.mark.skipif(not DATA.is_file(), reason="FlyDSL's CI month is not at hand")
def test_flydsls_month_imports_whole_with_no_ok_value_of_zero(tmp_path: Path) -> None:
    db = tmp_path / "store.duckdb"
    report = import_file(DATA, db)
    assert report.ok and report.new == report.records == 18071
    assert rows(db, "SELECT count(*) FROM results WHERE status = 'ok' AND value <= 0") == [(0,)]
    assert rows(db, "SELECT count(*) FROM results WHERE status = 'missing' AND reason LIKE '%printed 0.0%'") == [(744,)]  # its 752 records of 0, a row a case and job
    assert "  752 new record(s) printed 0 by FlyDSL's CI (a rate below the precision it prints) stored as missing, " \
           "not as ok values" in report.summary().splitlines()
