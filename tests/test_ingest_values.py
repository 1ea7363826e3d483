"""Values no kernel can have, at ingest: counted in the summary a person reads, never stored as ok.

Impossible times were kept as failed rows without a word in the summary; a model-lane role split with step_ms -5
was stored as ok, and the Model lane page showed "MoE share -7.5%".
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest
from fixtures.asv_files import MACHINE, benchmarks_json, machine_json, results_json

from flybench.cli import main

COMMITTED = Path(__file__).resolve().parents[1] / "results" / "flybench" / "dev-h200"
SPLIT = "c956a724-existing-py_opt_torch_.venv_bin_python3"
"""A committed results file of the model lane with its role splits beside it (dev-h200, the H200's run)."""


def _ingest(tree: Path, db: Path, capsys) -> tuple[int, str]:
    code = main(["ingest", str(tree), "--db", str(db), "--subject", "toy", "--no-rescan"])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_impossible_times_are_counted_in_the_summary(tmp_path: Path, capsys) -> None:
    root = tmp_path / "results"
    root.mkdir()
    times = {"b.T.time_zero": 0.0, "b.T.time_negative": -2e-4, "b.T.time_huge": 1e308, "b.T.time_fine": 1e-3}
    benchmarks_json(root, {name: {} for name in times})
    machine_json(root, MACHINE)
    results_json(root, {name: [[t], [], "1", 1767268800000, 0.1] for name, t in times.items()})
    code, said = _ingest(root, tmp_path / "db.duckdb", capsys)
    assert code == 0
    assert ("1 files loaded (4 rows), 0 unchanged, 0 removed, 0 failed; 3 rows with a time no call can take "
            "(0 s or less, an hour or more), stored as failed, not as ok") in said


def test_a_role_split_with_a_negative_step_time_is_skipped_and_said(tmp_path: Path, capsys) -> None:
    if not (COMMITTED / f"{SPLIT}.roles.jsonl").is_file():
        pytest.skip("the committed dev-h200 results are not in this checkout")
    machine = tmp_path / "results" / "dev-h200"
    machine.mkdir(parents=True)
    for name in ("machine.json", f"{SPLIT}.json", f"{SPLIT}.cases.jsonl"):
        shutil.copyfile(COMMITTED / name, machine / name)
    lines = (COMMITTED / f"{SPLIT}.roles.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    assert first["status"] == "ok"
    bad = [{**first, "step_ms": -5}, {**first, "roles_ms": {**first["roles_ms"], "moe": -0.5}}]
    (machine / f"{SPLIT}.roles.jsonl").write_text("\n".join([*map(json.dumps, bad), *lines[1:]]) + "\n")
    db = tmp_path / "db.duckdb"
    code, said = _ingest(machine.parent, db, capsys)
    assert code == 0 and "Traceback" not in said
    assert f"{len(lines) - 1} model-lane role splits" in said
    assert f"{SPLIT}.roles.jsonl, line 1 skipped: ValueError: step_ms -5 is no time a step can take" in said
    assert f"{SPLIT}.roles.jsonl, line 2 skipped: ValueError: roles_ms {{'moe': -0.5}} holds times no kernel " \
           "can take" in said
    with duckdb.connect(str(db), read_only=True) as conn:
        assert conn.execute("SELECT count(*), min(step_ms) > 0 FROM role_splits WHERE status = 'ok'").fetchone() == \
            (len(lines) - 1, True)
