"""An accepted change of a compile-only resource is closed: gone from the report, shown as accepted with
`--closed` (it used to vanish from both). The committed compile history (results/flydsl) is the store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flybench.cli import main
from flybench.store.ingest import ingest

TREE = Path(__file__).resolve().parents[1] / "results" / "flydsl"
SERIES = "compile_metrics.Amd.track_agprs(flash_attn_generic:noncausal_m128, gfx942)"


@pytest.mark.skipif(not (TREE / "cpu-compile").is_dir(), reason="the committed compile history is not here")
def test_an_accepted_compile_metric_change_is_listed_as_accepted_only_with_closed(tmp_path: Path, capsys) -> None:
    db = tmp_path / "store.duckdb"
    ingest(TREE, db)

    def report(*extra: str) -> list[dict]:
        capsys.readouterr()
        main(["regressions", "--db", str(db), "--include-others", "--format", "json", *extra])
        return [r for r in json.loads(capsys.readouterr().out) if r["benchmark"] == "compile_metrics.Amd.track_agprs"
                and r["params"] == {"kernel": "flash_attn_generic:noncausal_m128", "arch": "gfx942"}]

    [change] = [r for r in report() if r["step"]["worse"]]
    assert main(["accept", SERIES, change["step"]["first_bad"], "--reason", "more AGPRs, fewer spills",
                 "--db", str(db)]) == 0
    assert not [r for r in report() if r["step"]["first_bad"] == change["step"]["first_bad"]]
    [closed] = [r for r in report("--closed") if r["step"]["first_bad"] == change["step"]["first_bad"]]
    assert closed["state"] == "accepted"
