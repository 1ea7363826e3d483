"""Kernel resources: each change of FlyDSL's compile history attributed (message, pull request, compiler, the
failed compiles inside its range), from the commit notes committed beside the results (results/flydsl/commits.jsonl)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from flybench.errors import FlybenchError
from flybench.store import commit_notes, ingest, queries

ROOT = Path(__file__).resolve().parents[1]
TREE = ROOT / "results" / "flydsl"
APP = ROOT / "dashboard" / "app.py"


@pytest.fixture(scope="module")
def history_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not (TREE / commit_notes.FILE).is_file():
        pytest.skip("the compile history's commit notes are not in this checkout")
    db = tmp_path_factory.mktemp("compile-history") / "store.duckdb"
    assert ingest(TREE, db).ok
    return db


def test_ingest_stores_each_commits_title_pull_request_and_compiler(history_db: Path) -> None:
    notes = queries.commit_notes(history_db, "flydsl").set_index("hash")
    assert len(notes) == 39 and notes["wheel"].notna().all() and notes["llvm"].notna().all()
    bump = notes.loc[notes.index.str.startswith("494b2cbd")].iloc[0]
    assert bump["pr"] == 945 and bump["title"].startswith("[LLVM][FlyDSL] Bump up LLVM")
    titles = queries.commit_titles(history_db)  # where every page reads commit messages
    assert set(notes.index) <= set(titles["hash"])


def test_a_change_shows_its_pull_request_compiler_and_failed_compiles(history_db: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLYBENCH_DB", str(history_db))
    at = AppTest.from_file(str(APP), default_timeout=600)  # a bound against a hang, not a time to beat
    at.switch_page("views/resources.py")
    at.query_params.update(kernel="flash_attn_generic:noncausal_m128")
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    changes = next(df.value for df in at.dataframe if "compiler" in df.value.columns).set_index(["arch", "metric"])
    agprs = changes.loc[("gfx942", "AGPRs")]
    assert agprs["commits"] == "cf1db2fe..494b2cbd" and agprs["pr"] == "#945"
    assert agprs["message"].startswith("[LLVM][FlyDSL] Bump up LLVM")
    assert agprs["compiler"] == "changed: FlyDSL 0.3.0 -> 0.3.1, LLVM 7f77ca0d -> e2a39f50"
    assert agprs["failed_between"] == 8 and "RawPtrBufferLoadOp" in agprs["failures"]
    same = changes[changes["commits"] == "e4f2b3cd..d97c20fc"]  # #819: the kernel's own change, one wheel
    assert len(same) and (same["compiler"] == "same: FlyDSL 0.2.4, LLVM 7f77ca0d").all()
    assert (same["failed_between"] == 0).all() and (same["pr"] == "#819").all()
    assert any("span a change of compiler" in c.value for c in at.caption)


def test_a_broken_notes_file_is_refused_with_its_line(tmp_path: Path) -> None:
    (tmp_path / commit_notes.FILE).write_text(json.dumps({"hash": "ab", "pr": 1}) + "\n{not json\n")
    with pytest.raises(FlybenchError, match=r"commits.jsonl:2: not JSON"):
        commit_notes.read(tmp_path)
    (tmp_path / commit_notes.FILE).write_text(json.dumps({"hash": "ab", "pr": "#1"}) + "\n")
    with pytest.raises(FlybenchError, match="pull request number"):
        commit_notes.read(tmp_path)


def test_the_page_opens_on_flydsls_kernel_and_counts_every_commit_without_a_value(
        history_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It opened on a Triton kernel (the project's own baseline), counted only failed compiles inside a range (not
    the commits where the kernel was not compiled), and showed the compiling machine's folders in the messages."""
    from flybench.compile.registry import CHECKOUT_CASES

    monkeypatch.setenv("FLYBENCH_DB", str(history_db))
    at = AppTest.from_file(str(APP), default_timeout=600)  # a bound against a hang, not a time to beat
    at.switch_page("views/resources.py")
    at.run()
    assert at.selectbox(key="kernel").value in {c.name for c in CHECKOUT_CASES}
    at = AppTest.from_file(str(APP), default_timeout=600)  # a bound against a hang, not a time to beat
    at.switch_page("views/resources.py")
    at.query_params.update(kernel="moe_gemm_2stage:stage2_prefill")
    at.run()
    changes = next(df.value for df in at.dataframe if "compiler" in df.value.columns)
    code = changes[(changes["arch"] == "gfx942") & (changes["metric"] == "code bytes")].iloc[0]
    assert code["commits"] == "cf1db2fe..5cb8c3c3" and code["failed_between"] == 10
    assert code["failures"].endswith("; not compiled (unavailable) at 4 commit(s)")
    assert not any("/work/" in f or "/home/" in f for f in changes["failures"])
    at = AppTest.from_file(str(APP), default_timeout=600)  # a bound against a hang, not a time to beat
    at.switch_page("views/resources.py")
    at.query_params.update(kernel="flash_attn_gfx950:causal")
    at.run()
    changes = next(df.value for df in at.dataframe if "compiler" in df.value.columns)
    imports = [f for f in changes["failures"] if "cannot import name 'buffer_ops'" in f]
    assert imports and all("from 'flydsl.expr' (.../" in f and "/work/" not in f for f in imports)
