"""dashboard.machine_code: which kernels' code a merged pull request changed, an alert's two ends, the month's
resources; on records shaped as `queries.machine_code_history` returns them."""

from __future__ import annotations

import json

import pandas as pd

from dashboard import machine_code as code

A, B, C = "a" * 40, "b" * 40, "c" * 40


def record(commit: str, position: int, pr: int, kernel: str, arch: str, code_hash: str | None,
           vgprs: int = 100, valu: int = 50, status: str = "ok") -> dict:
    return {"subject": "flydsl", "hash": commit, "kernel": kernel, "arch": arch, "code_hash": code_hash,
            "status": status, "library": "flydsl 0.2.3", "detail": "" if status == "ok" else "it failed",
            "metrics": json.dumps({"vgprs": vgprs, "valu_instructions": valu, "instructions": 200 + valu})
            if status == "ok" else None, "position": position, "date": pd.Timestamp("2026-06-01") +
            pd.Timedelta(days=position), "merged_pr": pr, "title": f"change (#{pr})"}


RECORDS = pd.DataFrame([
    record(A, 1, 10, "rmsnorm", "gfx942", "r1"), record(A, 1, 10, "rmsnorm", "gfx950", "s1"),
    record(A, 1, 10, "gemm", "gfx942", "g1"),
    # B: a compiler-only pull request; rmsnorm's gfx942 code changes, nothing else
    record(B, 3, 12, "rmsnorm", "gfx942", "r2", vgprs=104, valu=58), record(B, 3, 12, "rmsnorm", "gfx950", "s1"),
    record(B, 3, 12, "gemm", "gfx942", "g1"),
    record(C, 4, 13, "rmsnorm", "gfx942", "r2", vgprs=104, valu=58),
    record(C, 4, 13, "rmsnorm", "gfx950", "s1"),
    record(C, 4, 13, "gemm", "gfx942", None, status="failed"),
])
MERGED = pd.DataFrame({"subject": "flydsl", "hash": [A, "d" * 40, B, C], "position": [1, 2, 3, 4],
                       "merged_pr": [10, 11, 12, 13], "title": ["x"] * 4, "date": [pd.Timestamp("2026-06-01")] * 4})


def test_a_pull_request_lists_the_kernels_whose_machine_code_it_changed() -> None:
    base, head, within, pairs = code.pull_request_code(RECORDS, MERGED, 12)
    assert (base, head, within) == (A, B, [11, 12])  # #11 merged between without records: named
    assert list(pairs["verdict"]) == ["changed", "identical", "identical"]
    assert pairs.iloc[0][["kernel", "arch"]].tolist() == ["rmsnorm", "gfx942"]
    table = code.changed_by_pull_request(RECORDS, MERGED).set_index("pr")
    assert table.loc[12, "changed"] == 1 and table.loc[12, "compared"] == 3
    assert table.loc[12, "kernels"] == "rmsnorm (gfx942)" and table.loc[12, "range"] == "#11, #12"
    assert table.loc[13, "changed"] == 0 and table.loc[13, "compared"] == 2  # a failed build is no comparison
    assert code.pull_request_code(RECORDS, MERGED, 10) is None  # nothing recorded before the first commit


def test_an_alerts_ends_on_its_own_architecture() -> None:
    pairs = code.pairs(RECORDS, B, C, "gfx942")
    assert dict(zip(pairs["kernel"], pairs["verdict"])) == {"rmsnorm": "identical",
                                                            "gemm": "fails to build at the head"}
    assert set(code.pairs(RECORDS, A, B, "gfx950")["arch"]) == {"gfx950"}
    assert code.pairs(RECORDS, A, "e" * 40, "gfx942")["verdict"].eq("no record at the head").all()


def test_the_instruction_counts_and_resources_at_both_ends() -> None:
    diff = code.diff(RECORDS, "rmsnorm", "gfx942", A, B).set_index("metric")
    assert diff.loc["vgprs"].tolist() == [100, 104, 4]
    assert diff.loc["valu_instructions"].tolist() == [50, 58, 8]
    assert list(diff.index[:3]) == ["instructions", "valu_instructions", "vgprs"]  # the counts that moved first


def test_the_records_are_kernel_resources_rows_with_their_units() -> None:
    rows = code.resource_rows(RECORDS)
    assert set(rows["machine"]) == {code.MACHINE} and set(rows["origin"]) == {code.ORIGIN}
    vgprs = rows[(rows["metric"] == "vgprs") & (rows["kernel"] == "rmsnorm") & (rows["arch"] == "gfx942")]
    assert vgprs["value"].tolist() == [100, 104, 104] and set(vgprs["unit"]) == {"registers"}
    failed = rows[rows["status"] == "failed"]
    assert len(failed) == 1 and failed["value"].isna().all() and failed["reason"].iloc[0] == "it failed"
    assert set(rows.loc[rows["metric"] == "valu_instructions", "unit"]) == {"instructions"}
