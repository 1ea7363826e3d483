"""The pages on what a new user loads first, in a real browser: the committed results ingested (the machine code
history among them) and FlyDSL's CI month imported with a clone. Each test waits for what it reads.

Skipped, saying why, without chromium and Playwright, the shared CI history or a FlyDSL clone.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from test_dashboard_db import DashboardDB, dash_db  # noqa: F401  (the fixture)

from browser.harness import REPO, load, serve
from browser.test_dashboard_browser import tab  # noqa: F401  (the fixture)

FLYDSL_CLONE = Path("/work/.mirror/ROCm+FlyDSL/repo")
"""A clone of FlyDSL with main's history, where this machine has one (the import's code attribution)."""
WAIT_MS = 120_000


@pytest.fixture(scope="module")
def month_store(dash_db: DashboardDB, tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: F811
    """The fixture database, FlyDSL CI's month imported with the clone, and the committed compile-only and machine
    code history ingested (`flybench ingest` stores results/flydsl/machine-code.jsonl)."""
    from test_import_flydsl_ci import DATA as FLYDSL_CI

    from flybench.importers.flydsl_ci import import_file
    from flybench.regress import stored
    from flybench.store import ingest

    if not FLYDSL_CI.is_file():
        pytest.skip(f"{FLYDSL_CI} not found (the shared data folder)")
    if not (FLYDSL_CLONE / "HEAD").is_file():
        pytest.skip(f"no FlyDSL clone at {FLYDSL_CLONE}")
    if not (REPO / "results" / "flydsl" / "machine-code.jsonl").is_file():
        pytest.skip("no committed machine code history in this checkout")
    db = Path(shutil.copy(dash_db.path, tmp_path_factory.mktemp("month") / "month.duckdb"))
    assert import_file(FLYDSL_CI, db, flydsl_repo=FLYDSL_CLONE).ok
    assert ingest(REPO / "results" / "flydsl", db).ok
    stored.refresh(db)
    return db


@pytest.fixture(scope="module")
def month(month_store: Path, dash_db: DashboardDB, tab: Any) -> Iterator[tuple[str, Any, Path]]:  # noqa: F811
    with serve(month_store, dash_db.asv_config) as url:
        yield url, tab, month_store


def main_text(page: Any) -> str:
    return page.locator("[data-testid=stMainBlockContainer]").inner_text()


def wait_for_text(page: Any, text: str) -> None:
    """Until `text` shows in the page's main block (a rerun a click started has drawn it)."""
    page.locator("[data-testid=stMainBlockContainer]").get_by_text(text).first.wait_for(timeout=WAIT_MS)


def test_a_compiler_only_pull_request_lists_the_kernels_whose_code_it_changed(month: tuple[str, Any, Path]) -> None:
    """#762 (a compiler-only change: its files reach no kernel) changed one kernel's machine code: rmsnorm on
    gfx942; every other kernel x target pair compiled at both ends is identical (35 of 36 when the round began,
    40 of 41 once the MoE families joined the machine code history)."""
    url, page, _ = month
    load(page, url, "pull_request", "?pr=762", 0, timeout_ms=WAIT_MS)
    wait_for_text(page, "Machine code #762 changed")
    csv = _table_csv(page, "pr-762-machine-code")
    changed = [row for row in csv if row["verdict"] == "changed"]
    assert [(r["kernel"], r["arch"]) for r in changed] == [("rmsnorm:bf16_32768x8192", "gfx942")]
    identical = sum(r["verdict"] == "identical" for r in csv)
    assert identical >= 35
    assert (f"1 of {identical + 1} kernel x target pairs compiled at both ends changed (f5c50f45 → 93579ae5)"
            in main_text(page))


def test_an_alert_links_to_its_kernels_machine_code_change_on_its_own_architecture(
        month: tuple[str, Any, Path]) -> None:
    """The MI355X (gfx950) gemm_async alert at #768's range: its machine code column names gfx950 code, and its
    link opens the instruction counts and resources at the two commits on gfx950."""
    url, page, db = month
    series = "gemm_async.FlydslCI.track_tflops(8192x8192x8192_tile128x256x128_2tg, flydsl, fp8)"
    load(page, url, "regressions", "?" + urlencode({"series": series}), 0, timeout_ms=WAIT_MS)
    wait_for_text(page, "Evidence in full")
    rows = _table_csv(page, "regressions")
    assert len(rows) == 1 and rows[0]["machine"] == "linux-flydsl-mi355-1"
    assert rows[0]["machine_code"].startswith("changed on gfx950: preshuffle_gemm:fp8_async")
    link = rows[0]["code_diff"]
    assert "code_arch=gfx950" in link
    load(page, url, "resources", "?" + link.split("?", 1)[1].split("#")[0], 1, timeout_ms=WAIT_MS)
    wait_for_text(page, "counts moved")
    text = main_text(page)
    assert "93579ae5 → 3f5846bf on gfx950" in text
    diff = _table_csv(page, "machine-code-diff-gfx950")
    assert diff and any(r["delta"] not in ("", "0", "0.0") for r in diff)  # the counts that moved, at both ends
    assert {"VGPRs", "instructions"} <= {r["metric"] for r in diff}


def test_kernel_resources_covers_the_imported_month(month: tuple[str, Any, Path]) -> None:
    """rmsnorm, which the compile-only results never compiled, has its month from the machine code history: the
    change #762 made on gfx942 is listed, and the machine code section lists it with its pull request."""
    url, page, _ = month
    load(page, url, "resources", "?" + urlencode({"kernel": "rmsnorm:bf16_32768x8192"}), 1, timeout_ms=WAIT_MS)
    wait_for_text(page, "Machine code")
    steps = _table_csv(page, "machine-code-steps")
    assert any(r["arch"] == "gfx942" and r["verdict"] == "changed" and r["pull_requests"] == "#762" for r in steps)
    changes = _table_csv(page, "resources-changes")
    assert any(r["commits"] == "f5c50f45..93579ae5" and r["arch"] == "gfx942" for r in changes)


def test_accept_and_unaccept_on_the_regressions_page_write_where_flybench_accept_writes(
        month: tuple[str, Any, Path]) -> None:
    """Accepting an open alert with a reason writes the store's acceptances file (as `flybench accept --db`); the
    alert closes, History names the step as accepted; un-accepting opens it again. The store is not written."""
    from flybench.regress import accepted

    url, page, db = month
    file = accepted.beside(db)
    series = "gemm.FlydslCI.track_tflops(9728x8192x8320, tile64x256x128, flydsl, int8)"
    before = db.stat().st_mtime_ns
    load(page, url, "regressions", "?" + urlencode({"series": series}), 0, timeout_ms=WAIT_MS)
    page.get_by_text("Accept an open alert's new level").click()
    page.get_by_label("Reason (kept with the acceptance)").fill("the int8 retune is intended")
    page.get_by_role("button", name="Accept this level").click()
    wait_for_text(page, "Accepted linux-flydsl-mi325-1")
    entries = json.loads(file.read_text())["accepted"]
    assert [(e["machine"], e["reason"], e["commit"][:8]) for e in entries] == \
        [("linux-flydsl-mi325-1", "the int8 retune is intended", "3f5846bf")]
    wait_for_text(page, "1 accepted level")
    load(page, url, "history", "?" + urlencode({"benchmark": "gemm.FlydslCI.track_tflops",
                                                 "params": "9728x8192x8320, tile64x256x128, int8"}), 1,
         timeout_ms=WAIT_MS)
    wait_for_text(page, "1 accepted alert")
    load(page, url, "regressions", "", 0, timeout_ms=WAIT_MS)
    page.get_by_text("Un-accept a level").click()
    page.get_by_role("button", name="Un-accept: open its alert again").click()
    wait_for_text(page, "its alert is open again")
    assert json.loads(file.read_text())["accepted"] == []
    assert db.stat().st_mtime_ns == before  # the store itself stays read-only


def test_evidence_reads_in_full_and_units_as_the_docs_spell_them(month: tuple[str, Any, Path]) -> None:
    """The evidence a table cell cuts off is there whole; no page prints FlyDSL CI's TFLOPS."""
    from flybench.regress import stored

    url, page, db = month
    longest = max((r for r in stored.regressions(db) if r.regressed), key=lambda r: len(r.evidence))
    load(page, url, "regressions", "", 1, timeout_ms=WAIT_MS)
    page.get_by_text("Evidence in full").click()
    tail = longest.evidence[-60:].replace("#", "")
    wait_for_text(page, tail)
    for name, query in (("regressions", ""), ("pull_request", "?pr=762"), ("overview", "")):
        load(page, url, name, query, 0, timeout_ms=WAIT_MS)
        assert "TFLOPS" not in main_text(page), name


def test_historys_step_labels_do_not_draw_over_each_other(month: tuple[str, Any, Path]) -> None:
    """The 8192 fp8 gemm has a step on each runner and others nearby: no two labels of a panel overlap."""
    url, page, _ = month
    load(page, url, "history", "?" + urlencode({"benchmark": "gemm.FlydslCI.track_tflops",
                                                 "params": "8192x8192x8192, tile128x256x128, fp8"}), 1,
         timeout_ms=WAIT_MS)
    boxes = page.evaluate("""() => [...document.querySelectorAll('.vega-embed svg g.mark-text text')]
        .filter(t => /seen at|#\\d/.test(t.textContent)).map(t => { const r = t.getBoundingClientRect();
            return [r.left, r.top, r.right, r.bottom]; })""")
    assert boxes
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1], (a, b)


def test_compare_opens_on_a_pair_with_cases_in_common_and_a_judged_metric(month: tuple[str, Any, Path]) -> None:
    """After an import, Compare opens on a runner's timed rates (not the compile-only machine's durations), the
    newest pair of commits that share cases: some are unchanged, few are not measured."""
    url, page, _ = month
    load(page, url, "compare", "", 1, timeout_ms=WAIT_MS)
    wait_for_text(page, "unchanged on")
    summary = page.locator("[data-testid=stMarkdown] strong").filter(has_text="unchanged on").first.inner_text()
    assert "cpu-compile" not in summary and "linux-flydsl" in summary
    unchanged = int(summary.split(" unchanged")[0].rsplit(" ", 1)[-1])
    assert unchanged > 0


def test_the_model_lane_headline_names_its_stored_run(month: tuple[str, Any, Path], dash_db: DashboardDB) -> None:
    """One figure, from a stored run, with its commit and date beside it."""
    if not dash_db.has_h200:
        pytest.skip("no committed H200 results in this checkout")
    url, page, _ = month
    load(page, url, "model", "", 0, timeout_ms=WAIT_MS)
    wait_for_text(page, "The Triton MoE over ragged_dot")
    headline = page.locator("[data-testid=stMarkdown] strong").filter(has_text="over ragged_dot").first.inner_text()
    assert "prefill" in headline and "decode" in headline and "stored run at c956a724, 2026-12-02" in headline


def _table_csv(page: Any, name: str) -> list[dict[str, str]]:
    """The rows of the table `ui.table` named `name`, from its CSV download (what the grid holds, uncut)."""
    import csv
    import io

    button = page.locator(f".st-key-download-{name} button").first  # `ui.download`'s key names the element
    button.wait_for(timeout=WAIT_MS)
    with page.expect_download(timeout=WAIT_MS) as download:
        button.click()
    return list(csv.DictReader(io.StringIO(Path(download.value.path()).read_text())))
