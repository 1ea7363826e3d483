"""`--output`: a directory or a path under a file is bad input (exit 2, before any work); a missing folder is made."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fixtures.asv_project import AsvProject, build

from flybench.cli import main

VERBS = {  # each verb with --output, with the arguments it needs to get as far as parsing
    "compare": ["a", "b"],
    "regressions": [],
    "bisect": ["attention.Quick.track_time(c1, torch, bf16)", "HEAD~1", "HEAD"],
    "export": ["--format", "csv", "--query", "SELECT 1"],
}


@pytest.mark.parametrize("verb", VERBS)
@pytest.mark.parametrize("where", ["directory", "under a file"])
def test_an_unwritable_output_is_bad_input(verb: str, where: str, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "plain").write_text("")
    output = tmp_path if where == "directory" else tmp_path / "plain" / "report.md"
    with pytest.raises(SystemExit) as exit_info:
        main([verb, *VERBS[verb], "--output", str(output)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    expected = f"{tmp_path} is a directory: name a file" if where == "directory" else \
        f"{tmp_path / 'plain'} is a file, so {output} cannot be written"
    assert f"flybench {verb}: error: argument --output: {expected}" in err


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> AsvProject:
    return build(tmp_path_factory.getbasetemp() / "asv_toy")


def test_a_missing_folder_is_created(project: AsvProject, tmp_path: Path) -> None:
    results = Path(shutil.copytree(project.results_dir, tmp_path / "results"))
    shutil.copy(project.root / "asv.conf.json", tmp_path / "asv.conf.json")
    db = tmp_path / "store.duckdb"
    assert main(["ingest", str(results), "--db", str(db)]) == 0
    report = tmp_path / "reports" / "nightly" / "regressions.json"
    assert main(["regressions", "--db", str(db), "--format", "json", "--output", str(report)]) == 1  # the planted step
    assert json.loads(report.read_text())


def test_list_keeps_its_columns_aligned_for_long_dtype_names(capsys, monkeypatch):
    from flybench.cli import main

    monkeypatch.setenv("FLYBENCH_DEVICE", "cpu")
    assert main(["list", "-w", "moe_stage"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("moe_stage ")]
    starts = {line.index("runs here") if "runs here" in line else line.index("unavailable:") for line in rows}
    assert len(rows) > 8 and len(starts) == 1  # int4_bf16 and bf16 rows put their state in one column


def test_a_reader_that_goes_away_is_not_an_error() -> None:
    """`flybench list | head -1`: the verb's output stops mattering, its work and exit status do not."""
    import subprocess
    import sys

    verb = subprocess.Popen([sys.executable, "-m", "flybench", "list", "--set", "quick"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**__import__("os").environ, "FLYBENCH_DEVICE": "cpu"})
    assert verb.stdout.readline()  # one line, then the reader is gone
    verb.stdout.close()
    assert verb.wait(timeout=600) == 0  # a bound against a hang, not a time to beat
    err = verb.stderr.read()
    assert b"Traceback" not in err and b"BrokenPipe" not in err


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_report_that_cannot_be_written_is_bad_input_with_advice(tmp_path: Path, capsys) -> None:
    from flybench.regress.compare import Comparison
    from flybench.regress.report import to_json

    from flybench.errors import FlybenchError
    from flybench.regress.report import write

    saved = tmp_path / "c.json"
    comparison = Comparison("m", "a" * 40, "b" * 40, 0.001)
    saved.write_text(to_json(comparison))
    with pytest.raises(FlybenchError, match=r"cannot write /dev/full \(No space left on device\)"):
        write(comparison, "json", Path("/dev/full"))  # a full disk, as the write meets it
    with pytest.raises(SystemExit) as exit_:  # the command refuses a device before it writes
        main(["render", str(saved), "--output", "/dev/full"])
    assert exit_.value.code == 2
    assert "/dev/full is a character device, not a regular file" in capsys.readouterr().err
    for limit in ("-1", "0", "50"):
        with pytest.raises(SystemExit) as exit_:
            main(["render", str(saved), "--limit", limit])
        assert exit_.value.code == 2
    assert "a comment needs at least 2,000 characters" in capsys.readouterr().err


def test_install_hints_keep_their_brackets(capsys) -> None:
    """rich read `[jax]` in `pip install -e '.[jax]'` as markup and printed `pip install -e '.'`."""
    from flybench.cli.run import _print_availability
    from flybench.selection import Choice

    _print_availability([Choice("moe", "xla", "bf16", "needs JAX: pip install -e '.[jax]' (or 'jax[cuda13]')")])
    out = capsys.readouterr().out
    assert "pip install -e '.[jax]'" in out and "'jax[cuda13]'" in out


def test_what_cannot_run_is_one_line_per_provider_and_reason(capsys, monkeypatch) -> None:
    """A row per (workload, provider, dtype) was about 370 lines before anything was measured."""
    monkeypatch.setenv("COLUMNS", "250")  # a row per line: no wrapping
    from flybench.cli.run import _print_availability
    from flybench.selection import Choice

    jax = "needs JAX: pip install -e '.[jax]'"
    combos = [Choice(w, "xla", d, jax) for w in ("attention", "moe", "gemm") for d in ("bf16", "fp16")]
    combos += [Choice(w, "torch", "bf16", None) for w in ("attention", "moe")]
    combos += [Choice("moe", "xla-dense", "fp8", "no fp8 here"), Choice("gemm", "xla", "fp8", "no fp8 here")]
    _print_availability(combos)
    rows = [line for line in capsys.readouterr().out.splitlines() if "│" in line and "runs here?" not in line]
    assert len(rows) == 4, rows
    assert "torch" in rows[0] and "yes" in rows[0] and "attention (bf16), moe (bf16)" in rows[0]
    xla = next(r for r in rows if "needs JAX" in r)
    assert "attention (bf16, fp16), moe (bf16, fp16), gemm (bf16, fp16)" in xla
