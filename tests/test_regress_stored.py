"""Stored regressions: `flybench ingest` keeps the history scan's answer (its alerts, and the steps that are not
alerts), and reading it gives what replaying the history in memory gives; the same scan keeps each series' history
noise, and `compare` reading it gives the answer it computes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fixtures.asv_project import MACHINE, PROJECT, STEP_AT, AsvProject, build

from flybench.cli import main
from flybench.regress import RegressConfig, accepted, noise, stored
from flybench.regress.compare import Comparison, compare
from flybench.store import connect

ROOT = Path(__file__).resolve().parents[1]
SERIES = "attention.Quick.track_time(c1, flydsl, bf16)"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> AsvProject:
    return build(tmp_path_factory.getbasetemp() / "asv_toy")


@pytest.fixture
def db(project: AsvProject, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """The toy history ingested by the verb, with a compile-only kernel whose VGPRs change at the step."""
    path = tmp_path / "store.duckdb"
    with connect(path) as conn:
        for commit, vgprs in zip(project.commits[2:4], (238, 256)):
            conn.execute("INSERT INTO compile_metrics VALUES (?, ?, 'compile-box', 'flash_attn', 'gfx950', "
                         "'vgpr_count', ?, 'registers', NULL)", [PROJECT, commit, vgprs])
    assert main(["ingest", str(project.results_dir), "--db", str(path), "--branch", "main"]) == 0
    assert "step detection rerun and stored for 2 machine(s)" in capsys.readouterr().out
    return path


def stored_rows(db: Path, table: str = "regression_steps") -> list[tuple]:
    with connect(db, read_only=True) as conn:
        return conn.execute(f"SELECT machine, benchmark, first_bad FROM {table} ORDER BY ALL").fetchall()


def replayed(db: Path, **scope: object) -> list:
    """What a reader answers with nothing stored: the history replayed in memory (on a copy of the store)."""
    copy = db.with_name("replayed.duckdb")
    copy.write_bytes(db.read_bytes())
    with connect(copy) as conn:
        conn.execute("DELETE FROM regression_scans")
    return stored.regressions(copy, **scope)


def test_ingest_stores_the_steps_and_readers_read_them(db: Path, project: AsvProject) -> None:
    assert stored_rows(db, "alerts") == sorted([
        (MACHINE, "attention.Quick.track_time", project.commits[STEP_AT]),
        (MACHINE, "attention.Rates.track_tflops", project.commits[STEP_AT])])
    assert stored_rows(db) == [("compile-box", "flash_attn", project.commits[3])]  # changes are not alerts
    for scope in ({}, {"machine": MACHINE}, {"machine": "compile-box"}, {"benchmark": "*track_time"},
                  {"subject": PROJECT, "benchmark": "flash_*"}):
        assert stored.regressions(db, **scope) == replayed(db, **scope)
    with connect(db) as conn:  # a stored answer is what readers return: no refit while the rows are unchanged
        conn.execute("UPDATE alerts SET confidence = 0.5 WHERE benchmark = 'attention.Quick.track_time'")
    [step] = [r for r in stored.regressions(db) if r.series == SERIES]
    assert step.step.confidence == 0.5 and step.runs == "main"
    assert stored.refresh(db) == []


def test_changed_rows_are_recomputed_until_the_next_ingest_stores_them(db: Path, project: AsvProject) -> None:
    with connect(db) as conn:  # flatten the planted step (a write that did not refresh the stored steps)
        conn.execute("UPDATE results SET value = 1e-3 WHERE benchmark = 'attention.Quick.track_time'")
    # the alerts are a function of the history: a history without the step has no alert, stored or not
    assert SERIES not in [r.series for r in stored.regressions(db)]
    assert stored.refresh(db) == [(PROJECT, MACHINE)]  # the compile-only machine's rows did not change
    assert stored.regressions(db) == replayed(db) and len(stored_rows(db, "alerts")) == 1


def test_new_thresholds_take_effect_without_an_ingest(db: Path, tmp_path: Path) -> None:
    strict = RegressConfig(step_floor=0.6)  # above the planted 50% step
    assert stored.regressions(db, config=strict) == replayed(db, config=strict) != stored.regressions(db)
    assert SERIES not in [r.series for r in stored.regressions(db, config=strict)]
    toml = tmp_path / "flybench.toml"
    toml.write_text("[regress]\nstep_floor = 0.6\n")
    assert stored.regressions(db, config=toml) == stored.regressions(db, config=strict)
    assert sorted(stored.refresh(db, strict)) == [(PROJECT, "compile-box"), (PROJECT, MACHINE)]
    assert stored.refresh(db, strict) == [] and stored.regressions(db, config=strict) == replayed(db, config=strict)


def test_acceptances_apply_when_read(db: Path, project: AsvProject, tmp_path: Path) -> None:
    file = tmp_path / "accepted.json"
    assert main(["accept", SERIES, project.commits[STEP_AT][:8], "--reason", "exact lse costs this",
                 "--db", str(db), "--accepted", str(file)]) == 0
    levels = accepted.load(file)
    found = stored.regressions(db, accepted=levels)
    assert found == replayed(db, accepted=levels) and SERIES not in [r.series for r in found]
    assert SERIES in [r.series for r in stored.regressions(db)]
    early = [{**json.loads(file.read_text())["accepted"][0], "commit": project.commits[1]}]
    file.write_text(json.dumps({"version": 1, "accepted": early}))  # accepted before the step: still open
    assert SERIES in [r.series for r in stored.regressions(db, accepted=accepted.load(file))]


def test_the_verb_answers_as_before(db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "found.json"
    assert main(["regressions", "--db", str(db), "--format", "json", "--output", str(out)]) == 1
    with connect(db) as conn:
        conn.execute("DELETE FROM regression_scans")  # nothing stored: the same answer, computed
    again = tmp_path / "computed.json"
    assert main(["regressions", "--db", str(db), "--format", "json", "--output", str(again)]) == 1
    assert json.loads(out.read_text()) == json.loads(again.read_text())


@pytest.mark.skipif(not (ROOT / "results" / "flydsl" / "cpu-compile").is_dir(), reason="no committed results")
def test_the_committed_results_read_back_as_replayed(tmp_path: Path) -> None:
    db = tmp_path / "real.duckdb"
    assert main(["ingest", str(ROOT / "results" / "flybench"), "--config", str(ROOT / "asv.conf.json"),
                 "--db", str(db)]) == 0
    assert main(["ingest", str(ROOT / "results" / "flydsl"), "--db", str(db)]) == 0
    found = stored.regressions(db)
    assert "change" in {r.kind for r in found}  # compile-only resources' changes beside the alerts
    assert found == replayed(db)


def pair(db: Path, project: AsvProject) -> Comparison:
    """The planted step's commit against the one before it, on the machine whose history has the noise."""
    return compare(db, MACHINE, project.commits[STEP_AT - 1], project.commits[STEP_AT])


def test_compare_reads_the_stored_noise_and_answers_as_computing_it_does(
        db: Path, project: AsvProject, monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as patch:  # the store is current: no history is read, no series is fitted
        patch.setattr(noise, "histories", lambda *_: pytest.fail("read the history the store holds the noise of"))
        read = pair(db, project)
    assert {c.noise_source for c in read.cases} == {"history"} and "regression" in {c.verdict for c in read.cases}
    with connect(db) as conn:
        conn.execute("DELETE FROM regression_scans")  # nothing stored: computed from the history
    computed = pair(db, project)
    assert read.cases == computed.cases
    assert [(c.noise, c.detectable, c.verdict) for c in read.cases] == [
        (c.noise, c.detectable, c.verdict) for c in computed.cases]


def test_compare_computes_the_noise_where_the_rows_changed_after_the_scan(db: Path, project: AsvProject) -> None:
    with connect(db) as conn:  # a stored noise no computation gives, to see which one compare answers with
        conn.execute("UPDATE series_noise SET noise = noise * 100")
    planted = pair(db, project)
    assert planted.cases != pair_computed(db, project).cases
    with connect(db) as conn:  # a write that did not rescan: the stored noise is stale
        conn.execute("UPDATE results SET value = value * 1.01 WHERE commit_hash = ?", [project.commits[0]])
    stale = pair(db, project)
    assert stale.cases == pair_computed(db, project).cases != planted.cases
    assert stored.refresh(db) == [(PROJECT, MACHINE)] and pair(db, project).cases == stale.cases


def pair_computed(db: Path, project: AsvProject) -> Comparison:
    """`pair` with nothing stored, on a copy of the store."""
    copy = db.with_name("computed.duckdb")
    copy.write_bytes(db.read_bytes())
    with connect(copy) as conn:
        conn.execute("DELETE FROM regression_scans")
    return pair(copy, project)


def test_a_machine_of_two_subjects_needs_the_subject_named(db: Path, project: AsvProject) -> None:
    """Unnamed, compare's history of such a machine runs both subjects' rows together: no stored answer."""
    assert stored.history_noise(db, MACHINE)
    with connect(db) as conn:
        conn.execute("INSERT INTO results BY NAME SELECT * REPLACE ('other-repo' AS subject) FROM results "
                     "WHERE machine = ? LIMIT 1", [MACHINE])
    assert stored.history_noise(db, MACHINE) == {}
    assert stored.history_noise(db, MACHINE, PROJECT)  # its own rows did not change: its scan is current
