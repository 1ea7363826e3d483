"""`flybench ingest` without a path stores every subject's committed results tree apart: flybench's and FlyDSL's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parents[1]


def test_default_ingest_reads_each_subject_tree_with_its_own_commits(tmp_path):
    db = tmp_path / "all.duckdb"
    done = subprocess.run([sys.executable, "-m", "flybench", "ingest", "--db", str(db)], cwd=ROOT,
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert "(flybench)" in done.stdout and "(flydsl)" in done.stdout
    flydsl_commits = {json.loads(p.read_text())["commit_hash"]
                      for p in (ROOT / "results" / "flydsl").glob("*/*.json") if p.name != "machine.json"}
    with duckdb.connect(str(db), read_only=True) as conn:
        stored = dict(conn.execute("SELECT subject, list(hash) FROM commits GROUP BY subject").fetchall())
        machines = {m for (m,) in conn.execute("SELECT DISTINCT machine FROM results WHERE subject = 'flydsl'").fetchall()}
    assert set(stored["flydsl"]) == flydsl_commits and len(flydsl_commits) >= 30
    assert not set(stored["flydsl"]) & set(stored["flybench"])
    assert machines == {"cpu-compile"}
