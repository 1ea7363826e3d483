"""The machine code history of FlyDSL's CI month: the record file and its ingest, the content key that lets a commit
reuse an earlier commit's code, which registered kernels each CI series runs, and the command's bad input."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from flybench.compile import ci_ops, code_history, machine_code
from flybench.compile.registry import CHECKOUT_CASES
from flybench.store import ingest, queries

ROOT = Path(__file__).resolve().parents[1]
CLONE = Path("/work/.mirror/ROCm+FlyDSL/repo")
MONTH = Path("/work/shared/data/flydsl-ci-history-2026-06-11_2026-07-12.json.gz")  # FlyDSL's own CI data, imported
WHEELS = ["0.2.1", "0.2.2", "0.2.3", "0.2.4", "0.2.5.dev732"]
needs_clone = pytest.mark.skipif(not (CLONE / "HEAD").exists(), reason="no FlyDSL clone here")
needs_month = pytest.mark.skipif(not MONTH.is_file(), reason="FlyDSL's CI month is not here")


def record(commit: str = "a" * 40, kernel: str = "flash_attn_generic:causal_m128", arch: str = "gfx942",
           **fields: object) -> dict:
    return {"format": 1, "hash": commit, "kernel": kernel, "arch": arch, "status": "ok", "code_hash": "c" * 64,
            "library": "flydsl 0.2.4 + python/flydsl of aaaaaaaa", "detail": "", "reason": "", "metrics": {"vgprs": 250},
            "key": "k" * 64, "compiled": True, "compile_s": 4.5, **fields}


def tree(tmp_path: Path, lines: list[str]) -> Path:
    """A FlyDSL results tree (one compile results file and its machine) with `lines` as its machine code file."""
    source = ROOT / "results" / "flydsl"
    target = tmp_path / "flydsl"
    (target / "cpu-compile").mkdir(parents=True)
    for name in ("asv.conf.json", "benchmarks.json"):
        shutil.copy(source / name, target / name)
    shutil.copy(source / "cpu-compile" / "machine.json", target / "cpu-compile" / "machine.json")
    shutil.copy(next((source / "cpu-compile").glob("*-existing-*.json")), target / "cpu-compile")
    (target / machine_code.FILE).write_text("".join(line + "\n" for line in lines))
    return target


def test_ingest_stores_the_records_once_however_often_it_runs(tmp_path: Path) -> None:
    lines = [json.dumps(record()), json.dumps(record(arch="gfx950", code_hash="d" * 64)),
             json.dumps(record(kernel="hgemm:fp16_2048", arch="gfx950", status="failed", code_hash=None,
                               detail="TypeError: Invalid attribute value for the key \"blgp\""))]
    results, db = tree(tmp_path, lines), tmp_path / "store.duckdb"
    for _ in range(2):
        report = ingest(results, db)
        assert report.ok and report.machine_code_rows == 3
    stored = queries.machine_code(db, "flydsl").sort_values(["kernel", "arch"])
    assert list(stored.columns) == ["hash", "kernel", "arch", "code_hash", "status", "library", "detail"]
    assert len(stored) == 3
    failed = stored[stored["status"] == "failed"].iloc[0]
    assert failed["kernel"] == "hgemm:fp16_2048" and queries.is_null(failed["code_hash"]) and "blgp" in failed["detail"]
    assert set(stored.loc[stored["status"] == "ok", "code_hash"]) == {"c" * 64, "d" * 64}


def test_a_bad_line_is_refused_with_its_number_and_the_rest_stored(tmp_path: Path) -> None:
    lines = [json.dumps(record()), "{torn", json.dumps(record(arch="gfx950", status="ok", code_hash=None)),
             json.dumps(record(kernel="softmax:bf16_32768x8192", format=2)),
             json.dumps(record(kernel="mla_decode:fp8_b32_ctx8192", status="unavailable", code_hash=None))]
    results, db = tree(tmp_path, lines), tmp_path / "store.duckdb"
    report = ingest(results, db)
    assert not report.ok
    messages = [e.message for e in report.errors]
    assert any(m.startswith("line 2 skipped") for m in messages)
    assert any(m.startswith("line 3 skipped") and "only an ok record has one" in m for m in messages)
    assert any(m.startswith("line 4 skipped") and "format 2" in m for m in messages)
    assert "error: " in report.summary() and "machine-code.jsonl" in report.summary()
    stored = queries.machine_code(db, "flydsl")
    assert sorted(stored["kernel"]) == ["flash_attn_generic:causal_m128", "mla_decode:fp8_b32_ctx8192"]


@needs_clone
def test_a_docs_only_commit_reuses_every_key_and_a_compiler_change_none(tmp_path: Path) -> None:
    wheels = code_history.published_wheels(CLONE, WHEELS)
    cases = [c for c in code_history.CI_KERNELS if c.name.startswith(("flash_attn", "preshuffle_gemm"))]

    def keys(commit: str) -> dict:
        full = subprocess.run(["git", "-C", str(CLONE), "rev-parse", commit], capture_output=True, text=True,
                              check=True).stdout.strip()
        return code_history.plan_commit(CLONE, full, cases, ["gfx942", "gfx950"], wheels, tmp_path).keys

    # a7e7f845 changed .github and README.md only; #762 (93579ae5) changed python/flydsl/expr/typing.py and tests
    docs, docs_parent = keys("a7e7f845ce"), keys("a7e7f845ce^1")
    assert docs == docs_parent and len(docs) == 20
    compiler, compiler_parent = keys("93579ae580"), keys("93579ae580^1")
    assert compiler.keys() == compiler_parent.keys()
    assert all(compiler[pair] != compiler_parent[pair] for pair in compiler)


@needs_clone
def test_a_commit_whose_keys_are_known_compiles_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wheels = code_history.published_wheels(CLONE, WHEELS)
    cases = [c for c in code_history.CI_KERNELS if c.name == "preshuffle_gemm:fp8_decode"]
    commit = subprocess.run(["git", "-C", str(CLONE), "rev-parse", "a7e7f845ce"], capture_output=True, text=True,
                            check=True).stdout.strip()
    plan = code_history.plan_commit(CLONE, commit, cases, ["gfx942", "gfx950"], wheels, tmp_path)
    known = {key: record(kernel=kernel, arch=arch, key=key, code_hash=f"{arch}-code", reason="")
             for (kernel, arch), key in plan.keys.items()}

    def compile_nothing(*args: object, **kwargs: object) -> list:
        raise AssertionError("a known key was compiled again")

    monkeypatch.setattr(code_history, "_compile", compile_nothing)
    records = code_history.run_commit(CLONE, commit, cases, ["gfx942", "gfx950"], set(), known, wheels, tmp_path,
                                      1, 60)
    assert {(r["arch"], r["code_hash"], r["compiled"]) for r in records} == {("gfx942", "gfx942-code", False),
                                                                             ("gfx950", "gfx950-code", False)}
    assert all(r["library"] == "flydsl 0.2.3 + python/flydsl of a7e7f845" for r in records)
    assert all("kernels/gemm/preshuffle_gemm.py lay at kernels/preshuffle_gemm before #807" in r["detail"]
               for r in records)


@needs_clone
def test_the_library_is_the_commits_own_wheel_or_the_nearest_with_its_python_laid_over() -> None:
    wheels = code_history.published_wheels(CLONE, WHEELS)
    own = code_history.library_for(CLONE, wheels["0.2.3"][1], wheels)
    assert own.exact and own.label == "flydsl 0.2.3" and own.cxx == ""
    full = subprocess.run(["git", "-C", str(CLONE), "rev-parse", "55ba145786"], capture_output=True, text=True,
                          check=True).stdout.strip()
    overlaid = code_history.library_for(CLONE, full, wheels)  # count 739, but its C++ is 0.2.4's plus 4 files
    assert overlaid.label == "flydsl 0.2.4 + python/flydsl of 55ba1457"
    assert overlaid.cxx.startswith("C++ differs between the wheel's commit 145a8765 and this one (4 files")


@needs_month
def test_each_series_of_the_month_maps_to_the_kernels_its_op_and_shape_run() -> None:
    records = json.loads(gzip.open(MONTH).read())["records"]
    series = {(r["op"], r["shape"], r["dtype"], r["arch"]) for r in records if r["arch"] in ("gfx942", "gfx950")}
    found = {s: ci_ops.kernels_for(*s) for s in series}

    def names(*key: str) -> dict[str, bool]:
        return {k.kernel: k.exact for k in found[key]}

    assert names("flash_attn", "B4S8192H64Hkv64D128_causal", "bf16", "gfx942") == {
        "flash_attn_generic:causal_m128": True, "flash_attn_generic:causal_m256": True}
    assert names("flash_attn", "B1S64H4Hkv4D128_nocausal", "bf16", "gfx950") == {
        "flash_attn_generic:noncausal_m128": False, "flash_attn_gfx950:noncausal": False}
    assert names("gemm", "5120x5120x8320_tile64x256x128", "bf16", "gfx950") == {"preshuffle_gemm:bf16_prefill": True}
    assert names("gemm_async", "256x2112x7168_tile64x64x256_2tg", "fp8", "gfx950") == {
        "preshuffle_gemm:fp8_async_m256": True, "preshuffle_gemm:fp8_async_prefill": False}
    assert names("moe_gemm2_reduce", "t64-d6144x1024-e128k8", "fp8", "gfx942") == {
        "moe_gemm_2stage:stage2_reduce_prefill": False, "moe_gemm_2stage:stage2_reduce_decode": True}
    assert names("hgemm", "2048x2048x2048_tile128x128x64_sk1", "fp16", "gfx950") == {
        "hgemm:fp16_2048": True, "hgemm_splitk:fp16_2048": True}  # the month's hgemm was hgemm_splitk's
    assert names("hgemm", "32x384x7168_tile16x64x128_sk14", "bf16", "gfx942") == {"hgemm_splitk:bf16_splitk14": True}
    assert names("moe_w4a16_s1", "t128-d7168x256-e384k8", "int4_bf16", "gfx942") == {"moe_w4a16:stage1_t128": True}
    assert names("moe_fp4_s2_reduce", "t16-d7168x256-e257k9", "fp4", "gfx950") == {
        "mixed_moe:fp4_stage2_reduce": False}
    # the month's fp4 MoE was mixed_moe_gemm_2stage's; mxfp_moe's (from #892 on) builds the same op
    assert names("moe_fp4_s1", "t2048-d7168x256-e257k9", "fp4", "gfx950") == {
        "mixed_moe:fp4_stage1": True, "mxfp_moe:fp4_stage1": True}
    for uncovered in (("gemm", "9728x8192x8320_tile64x256x128", "int4", "gfx950"),
                      ("moe_fp4_s2_atomic", "t16-d7168x256-e257k9", "-", "gfx950")):
        assert found[uncovered] == []
    every = {k.kernel for ks in found.values() for k in ks}
    assert every == {c.name for c in CHECKOUT_CASES if c.ci_op}  # every kernel a CI op runs is some series' kernel
    # 154 of the 217 (op, shape, dtype, target) series run a registered kernel, 51 at the registered shape itself
    assert sum(bool(ks) for ks in found.values()) == 154 and len(series) == 217
    assert sum(any(k.exact for k in ks) for ks in found.values()) == 51


@needs_month
def test_the_importer_stores_which_kernels_each_series_runs(tmp_path: Path) -> None:
    data = json.loads(gzip.open(MONTH).read())
    wanted = {("gemm", "16x40960x5120_tile16x128x256"), ("moe_w4a16_s1", "t128-d7168x256-e384k8")}
    kept = [r for r in data["records"] if (r["op"], r["shape"]) in wanted and r["metric"] == "TFLOPS"]
    path = tmp_path / "slice.json"
    path.write_text(json.dumps({**data, "records": kept}))
    from flybench.importers.flydsl_ci.store import import_file

    report = import_file(path, tmp_path / "store.duckdb")
    assert report.ok and report.covered == (4, 4)
    assert "machine code: 4 of 4 series (per target) run a registered kernel" in report.summary()
    mapped = queries.series_kernels(tmp_path / "store.duckdb", "flydsl")
    assert set(map(tuple, mapped[["benchmark", "kernel", "arch"]].values)) == {
        ("gemm.FlydslCI.track_tflops", f"preshuffle_gemm:fp8_{tile}", arch)
        for tile in ("decode", "m256", "prefill") for arch in ("gfx942", "gfx950")} | {
        ("moe_stage.FlydslCI.track_tflops", "moe_w4a16:stage1_t128", arch) for arch in ("gfx942", "gfx950")}
    assert json.loads(mapped["params"].iloc[0])["case"] == "16x40960x5120"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flybench.compile.code_history", *args], capture_output=True,
                          text=True, cwd=ROOT)


@needs_month
def test_bad_input_exits_2_with_what_to_do(tmp_path: Path) -> None:
    out = ["--out", str(tmp_path / "out")]
    missing = run("--flydsl-repo", str(tmp_path / "none"), "--history", str(MONTH), *out)
    assert missing.returncode == 2 and "does not exist" in missing.stderr and "Traceback" not in missing.stderr
    other = run("--flydsl-repo", str(ROOT), "--history", str(MONTH), *out)
    assert other.returncode == 2 and "is not a clone of FlyDSL" in other.stderr
    junk = tmp_path / "junk.json"
    junk.write_text("{not json")
    bad = run("--flydsl-repo", str(CLONE), "--history", str(junk), *out)
    assert bad.returncode == 2 and "not valid JSON" in bad.stderr and "Traceback" not in bad.stderr
    if (CLONE / "HEAD").exists():
        lacking = run("--flydsl-repo", str(CLONE), "--history", str(MONTH), *out)
        assert lacking.returncode == 2 and "of the 34 main commits" in lacking.stderr
        assert "--skip-missing" in lacking.stderr and not (tmp_path / "out").exists()
        dash = json.loads(gzip.open(MONTH).read())
        dash["records"] = [{**dash["records"][0], "commit": "-" + "a" * 39, "pr": None}]
        (tmp_path / "dash.json").write_text(json.dumps(dash))
        refused = run("--flydsl-repo", str(CLONE), "--history", str(tmp_path / "dash.json"), *out)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr


def test_the_summary_counts_commits_compiles_against_reuses_and_statuses(tmp_path: Path) -> None:
    lines = [record(), record(commit="b" * 40, compiled=False),
             record(commit="b" * 40, arch="gfx950", status="failed", code_hash=None, detail="TypeError: x",
                    library="flydsl 0.2.3", compile_s=2.0)]
    (tmp_path / machine_code.FILE).write_text("".join(json.dumps(line) + "\n" for line in lines))
    done = run("--summary", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "3 records: 2 commits x 2 kernel x target pairs (4 if every commit had every pair)",
        "compiled 2, reused by key 1 (6 s of compile time in the compiled ones)",
        "statuses: 2 ok, 1 failed, 0 unavailable",
        "libraries: 0 commits with their own wheel, 2 with python/flydsl laid over the nearest"]


def test_the_summary_refuses_a_record_without_compiled_by_its_line(tmp_path: Path) -> None:
    lines = [record(), {k: v for k, v in record(commit="b" * 40).items() if k != "compiled"}]
    (tmp_path / machine_code.FILE).write_text("".join(json.dumps(line) + "\n" for line in lines))
    done = run("--summary", "--out", str(tmp_path))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "line 2" in done.stderr and "'compiled'" in done.stderr
    assert done.stdout.splitlines()[0].startswith("1 records: 1 commits")


def test_an_out_that_is_a_file_or_cannot_be_written_is_refused_before_any_work(tmp_path: Path) -> None:
    history = tmp_path / "history.json"
    history.write_text(json.dumps({"schema": 1, "records": []}))
    not_a_clone = ["--flydsl-repo", str(tmp_path / "no-clone"), "--history", str(history)]
    a_file = tmp_path / "out.jsonl"
    a_file.write_text("")
    for args in (["--out", str(a_file)], ["--out", str(a_file), "--summary"]):
        done = run(*not_a_clone, *args)
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert f"{a_file} is a regular file, not a folder" in done.stderr
    # /sys takes no new folder, not even root's: the compile that would come first must not be started
    done = run(*not_a_clone, "--out", "/sys/flybench-machine-code")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "cannot be written" in done.stderr and "/sys/flybench-machine-code" in done.stderr
    assert not (tmp_path / "no-clone").exists()


def test_a_history_that_is_no_regular_file_is_refused_unread(tmp_path: Path) -> None:
    fifo = tmp_path / "history.json.gz"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.json"
    zero.symlink_to("/dev/zero")
    for path, kind in ((fifo, "a FIFO"), (zero, "a character device")):
        done = subprocess.run([sys.executable, "-m", "flybench.compile.code_history", "--flydsl-repo", str(ROOT),
                               "--history", str(path), "--out", str(tmp_path / "out")], capture_output=True,
                              text=True, cwd=ROOT, timeout=120)  # a guard against a hang, not a timing
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert f"--history {path} is {kind}" in done.stderr
