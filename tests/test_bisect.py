"""`flybench bisect SERIES GOOD BAD`: the series named, the range, the search, the rules, and real probes.

The search and its rules run on fake probes (a planted step, skipped
commits); the range on a small git repository made here; a real compile
and a real asv run of one tiny case on this CPU; and, when
FLYBENCH_FLYDSL_SRC names a full FlyDSL clone, a real bisection over
FlyDSL's history, checked against the compile history committed under
results/flydsl/cpu-compile/:

    FLYBENCH_FLYDSL_SRC=/path/to/FlyDSL python -m pytest tests/test_bisect.py -s
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
import os
import random
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from flybench import envvars
from flybench.cli import main
from flybench.errors import FlybenchError
from flybench.regress import bisect as b

ROOT = Path(__file__).resolve().parents[1]
FLYDSL_BENCHMARKS = ROOT / "results" / "flydsl" / "benchmarks.json"
VGPRS = "compile_metrics.Amd.track_vgprs(flash_attn_gfx950:causal, gfx950)"


@pytest.fixture(autouse=True)
def _own_compile_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Exported trees, wheels and compiles go to a temporary cache, never into the checkout."""
    if not os.environ.get(envvars.COMPILE_CACHE):
        monkeypatch.setenv(envvars.COMPILE_CACHE, str(tmp_path_factory.getbasetemp() / "compile-cache"))


def _series(text: str = VGPRS, subject: str = "flydsl") -> b.Series:
    path = ROOT / "results" / subject / "benchmarks.json"
    return b.parse_series(text, subject, b.load_benchmarks(path), path)


TIMING = _series("diffusion_attention.Quick.track_time(llama3-8b-b8-ctx4k-d32-p64-bidir, triton, bf16)")


def _fake(values: list[float | None], spread: float = 0.0):
    """A probe over commits named "0".."n": values[i], None where the commit cannot be measured."""
    calls: list[int] = []

    def probe(commit: str) -> b.Measurement:
        calls.append(int(commit))
        v = values[int(commit)]
        if v is None:
            return b.Measurement(None, "does not compile")
        return b.Measurement(float(v), spread=(v - spread, v + spread) if spread else None)

    return probe, calls


def _commits(values: list) -> list[str]:
    return [str(i) for i in range(len(values))]


def _exact(good: b.Measurement, bad: b.Measurement) -> b.Rule:
    return b.rule_for(_series(), good, bad)


def _timed(good: b.Measurement, bad: b.Measurement) -> b.Rule:
    return b.rule_for(TIMING, good, bad)


# --- the search --------------------------------------------------------------------------------------------------


def test_a_planted_step_is_found_in_ceil_log2_n_probes_at_every_position() -> None:
    for n in range(1, 70):
        for step in range(1, n + 1):
            values = [252] * step + [246] * (n + 1 - step)
            probe, calls = _fake(values)
            found = b.search(_commits(values), probe, _exact)
            assert (found.status, found.last_good, found.first_bad) == ("found", step - 1, step), (n, step)
            assert found.probes - 2 <= math.ceil(math.log2(n)), (n, step, calls)
            assert len(calls) == len(set(calls)) == found.probes  # no commit measured twice
            assert calls[:2] == [0, n]  # GOOD and BAD first


def test_a_noisy_timing_step_is_found_with_the_nearer_to_bad_rule() -> None:
    rng = random.Random(7)
    for n, step, after in ((300, 137, 1.25), (300, 1, 1.25), (300, 300, 1.25), (97, 60, 0.8)):  # 0.8: an improvement
        values = [rng.gauss(1.0 if i < step else after, 0.01) for i in range(n + 1)]
        probe, _ = _fake(values, spread=0.01)
        found = b.search(_commits(values), probe, _timed)
        assert (found.status, found.first_bad) == ("found", step)
        assert found.probes - 2 <= math.ceil(math.log2(n))
        assert isinstance(found.rule, b.NearerToBad)
        for s in found.steps:
            assert (s.position > 0.5) == (s.verdict == "bad") and -0.5 < s.position < 1.5


def test_commits_that_cannot_be_measured_are_skipped_for_a_neighbour() -> None:
    values = [252] * 20 + [246] * 21
    values[10] = values[11] = values[30] = None  # the first probes land on them
    probe, calls = _fake(values)
    found = b.search(_commits(values), probe, _exact)
    assert (found.status, found.first_bad) == ("found", 20)
    assert calls[:5] == [0, 40, 20, 10, 9]  # 10 cannot be measured: its nearest neighbour is next
    assert {s.index for s in found.skipped} == {10, 11, 30} & set(calls) and 11 not in calls[:5]
    assert all(s.measurement.reason == "does not compile" for s in found.skipped)


def test_a_change_among_unmeasurable_commits_is_reported_as_undecided() -> None:
    values = [252] * 20 + [246] * 21
    values[17:20] = [None, None, None]
    probe, _ = _fake(values)
    found = b.search(_commits(values), probe, _exact)
    assert (found.status, found.last_good, found.first_bad, found.between) == ("untestable", 16, 20, [17, 18, 19])
    # the skip limit stops the search with what is still undecided
    values = [252] + [None] * 30 + [246]
    probe, calls = _fake(values)
    found = b.search(_commits(values), probe, _exact, max_skips=3)
    assert found.status == "stopped" and len(found.skipped) == 3 and len(calls) == 5
    assert (found.last_good, found.first_bad) == (0, 31) and found.between == list(range(1, 31))


def test_good_or_bad_without_a_value_and_ends_that_cannot_be_told_apart_are_refused() -> None:
    probe, _ = _fake([None, 1, 2])
    with pytest.raises(FlybenchError, match="GOOD 0 cannot be measured: does not compile"):
        b.search(["0", "1", "2"], probe, _exact)
    probe, _ = _fake([252, 252, 252])
    with pytest.raises(FlybenchError, match="is 252 at GOOD and at BAD: nothing changed"):
        b.search(["0", "1", "2"], probe, _exact)
    probe, _ = _fake([1.0, 1.0, 1.004], spread=0.01)  # inside each other's interquartile range
    with pytest.raises(FlybenchError, match="within the noise of one measurement"):
        b.search(["0", "1", "2"], probe, _timed)
    with pytest.raises(FlybenchError, match="needs GOOD and BAD"):
        b.search(["0"], probe, _exact)


def test_the_rules() -> None:
    exact = b.rule_for(_series(), b.Measurement(252), b.Measurement(246))
    assert isinstance(exact, b.DifferentFromGood)
    assert [exact.is_bad(b.Measurement(v)) for v in (252, 246, 250, 260)] == [False, True, True, True]
    timed = b.rule_for(TIMING, b.Measurement(1.0, spread=(0.99, 1.01)), b.Measurement(2.0, spread=(1.98, 2.02)))
    assert isinstance(timed, b.NearerToBad) and timed.position(b.Measurement(1.25)) == 0.25
    assert [timed.is_bad(b.Measurement(v)) for v in (0.5, 1.4, 1.6, 3.0)] == [False, False, True, True]
    assert "past 1.5" in timed.describe() and "differs from GOOD's (252)" in exact.describe()


def test_a_value_that_moves_twice_stops_at_the_first_move_and_says_so(tmp_path: Path) -> None:
    values = [252] * 5 + [250] * 5 + [246] * 5
    probe, _ = _fake(values)
    found = b.search(_commits(values), probe, _exact)
    commits = [b.CommitInfo(str(i), "2026-08-01", f"commit {i}") for i in range(len(values))]
    result = b.Bisection(_series(), tmp_path, commits, found, 1.0, "fake")
    assert result.first_bad.hash == "5" and result.value_at(5).value == 250
    assert any("moved again" in n for n in result.notes())
    data = json.loads(b.render(result, "json"))
    assert data["first_bad"]["value"] == 250 and data["last_good"]["value"] == 252 and data["status"] == "found"
    for fmt in ("terminal", "markdown"):
        assert "first bad commit" in b.render(result, fmt)


# --- the series --------------------------------------------------------------------------------------------------


def test_a_series_is_checked_against_benchmarks_json() -> None:
    benchmarks = b.load_benchmarks(FLYDSL_BENCHMARKS)
    series = _series()
    assert series.params == {"kernel": "flash_attn_gfx950:causal", "arch": "gfx950"}
    assert (series.unit, series.metric, series.label, series.deterministic()) == (
        "registers", "vgprs", VGPRS, True)
    entry = benchmarks[series.benchmark]
    names = [f"{series.benchmark}({', '.join(p)})" for p in itertools.product(*entry["params"])]
    assert [n for n in names if re.search(series.asv_regex, n)] == [
        "compile_metrics.Amd.track_vgprs('flash_attn_gfx950:causal', 'gfx950')"]
    assert (TIMING.unit, TIMING.deterministic()) == ("seconds", False)
    cases = {
        "compile_metrics.Amd.track_vgpr_count(flash_attn_generic, gfx950)": "did you mean compile_metrics.Amd.track_vgprs",
        "compile_metrics.Amd.track_vgprs(flash_attn_generic, gfx950)": r"has no kernel 'flash_attn_generic' "
                                                                       r"\(did you mean flash_attn_generic:",
        "compile_metrics.Amd.track_vgprs(flash_attn_gfx950:causal)": r"takes 2 parameters \(kernel, arch\), 1 given",
        "compile_metrics.Amd.track_vgprs(flash_attn_gfx950:causal, gfx951)": "has no arch 'gfx951'",
        "attention.Quick.track_time(x, flydsl, bf16)": "has no case 'x'; its cases: ",
        "nowhere.Quick.track_time(a, b, c)": "no benchmark 'nowhere.Quick.track_time' in",
        "attention.Quick.track_time(": "is not a series",
    }
    for text, message in cases.items():
        with pytest.raises(FlybenchError, match=message):
            b.parse_series(text, "flydsl", benchmarks, FLYDSL_BENCHMARKS)


# --- the range ---------------------------------------------------------------------------------------------------


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
                          capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """main: c0 c1 c2 c3 m(c3 + side s1) c4 c5; side: s1 (from c2); other: o1 (from c1). Hashes by name."""
    path = tmp_path_factory.mktemp("subject")
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    (path / "kernels" / "attention").mkdir(parents=True)
    (path / "kernels" / "attention" / "flash_attn_interface.py").write_text("# marker\n")
    names: dict[str, str] = {"path": str(path)}

    def commit(name: str) -> None:
        (path / f"{name}.txt").write_text(name)
        _git(path, "add", "-A")
        _git(path, "commit", "-q", "-m", name)
        names[name] = _git(path, "rev-parse", "HEAD")

    for name in ("c0", "c1", "c2"):
        commit(name)
    _git(path, "checkout", "-q", "-b", "side")
    commit("s1")
    _git(path, "checkout", "-q", "main")
    commit("c3")
    _git(path, "merge", "-q", "--no-ff", "-m", "merge side", "side")
    names["m"] = _git(path, "rev-parse", "HEAD")
    for name in ("c4", "c5"):
        commit(name)
    _git(path, "checkout", "-q", "-b", "other", names["c1"])
    commit("o1")
    _git(path, "checkout", "-q", "main")
    return names


def test_the_range_is_the_first_parent_line(repo: dict[str, str]) -> None:
    path = Path(repo["path"])
    commits = b.first_parent_range(path, repo["c0"][:8], "main")
    assert [c.hash for c in commits] == [repo[n] for n in ("c0", "c1", "c2", "c3", "m", "c4", "c5")]
    assert commits[-1].subject == "c5" and commits[0].subject == "c0"
    assert len(b.first_parent_range(path, repo["c4"], repo["c5"])) == 2
    errors = {
        (repo["c5"], repo["c0"]): "is older than GOOD .*: swap them",
        (repo["c2"], repo["c2"]): "are the same commit",
        (repo["s1"], repo["c5"]): "not on its first-parent line \\(it came in through a merge\\)",
        (repo["o1"], repo["c5"]): "not an ancestor of BAD .*different branches",
        ("0123abcd", repo["c5"]): "GOOD '0123abcd' is not a commit of",
        (repo["c0"], "nosuchbranch"): "BAD 'nosuchbranch' is not a commit of",
    }
    for (good, bad), message in errors.items():
        with pytest.raises(FlybenchError, match=message):
            b.first_parent_range(path, good, bad)


# --- the verb ----------------------------------------------------------------------------------------------------


def test_the_verb_reports_the_first_bad_commit(repo: dict[str, str], monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    order = [repo[n] for n in ("c0", "c1", "c2", "c3", "m", "c4", "c5")]
    values = {h: (252.0 if i < 4 else 246.0) for i, h in enumerate(order)}
    values[repo["c3"]] = None
    import flybench.cli.bisect as verb

    def fake_probe(series, path, config, args):
        return (lambda commit: b.Measurement(values[commit], None if values[commit] else "does not compile",
                                             note="fake")), "a fake probe"

    monkeypatch.setattr(verb, "_probe", fake_probe)
    out = tmp_path / "report.json"
    code = main(["bisect", VGPRS, repo["c0"], "main", "--flydsl-repo", repo["path"], "--format", "json",
                 "--output", str(out)])
    data = json.loads(out.read_text())
    assert code == 1 and data["status"] == "untestable"  # c3 cannot be measured: the change is c3 or m
    assert (data["last_good"]["hash"], data["first_bad"]["hash"]) == (repo["c2"], repo["m"])
    assert [c["hash"] for c in data["undecided"]] == [repo["c3"]]
    values[repo["c3"]] = 252.0
    assert main(["bisect", VGPRS, repo["c0"], "main", "--flydsl-repo", repo["path"], "--format", "json",
                 "--output", str(out)]) == 0
    data = json.loads(out.read_text())
    assert (data["status"], data["first_bad"]["hash"], data["first_bad"]["value"], data["last_good"]["value"]) == (
        "found", repo["m"], 246.0, 252.0)
    assert data["probe_count"] <= 2 + math.ceil(math.log2(6)) and data["rule"] == "differs-from-good"


def test_bad_input_exits_2_with_what_to_do(repo: dict[str, str], monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    monkeypatch.delenv(envvars.FLYDSL_SRC, raising=False)
    monkeypatch.setenv(envvars.DEVICE, "cpu")
    monkeypatch.setenv(envvars.COMPILE_CACHE, str(tmp_path / "cache"))
    not_git = tmp_path / "export"
    not_git.mkdir()
    exported = tmp_path / "kernels-export"
    (exported / "kernels").mkdir(parents=True)
    good, bad, at = repo["c0"], repo["c5"], ["--flydsl-repo", repo["path"]]
    cases = [
        (["compile_metrics.Amd.track_vgpr_count(flash_attn_generic, gfx950)", good, bad, *at],
         "did you mean compile_metrics.Amd.track_vgprs"),
        ([VGPRS, good, bad], "needs a clone of FlyDSL with its history: pass --flydsl-repo"),
        ([VGPRS, good, bad, "--flydsl-repo", str(tmp_path / "none")], "does not exist"),
        ([VGPRS, good, bad, "--flydsl-repo", str(not_git)], "is an empty folder"),
        ([VGPRS, good, bad, "--flydsl-repo", str(exported)], "is in no git repository"),
        ([VGPRS, *at, "--", f"--output={tmp_path / 'written'}", bad], "begins with '-', so git would read it as an option"),
        ([VGPRS, bad, good, *at], "swap them"),
        ([VGPRS, good, bad, "--subject", "nope"], "unknown subject 'nope'; subjects with a results tree here: "),
        ([VGPRS, good, bad, *at, "--max-skips", "-1"], "--max-skips -1 is negative"),
        (["compile_metrics.Amd.track_vgprs(triton_vector_add, gfx950)", good, bad, *at],
         "is not one of FlyDSL's kernels .* --subject flybench"),
        (["compile_metrics.Nvidia.track_registers(triton_vector_add, sm_90)", good, bad, *at],
         "not a compile metric of FlyDSL's kernels"),
        (["attention.Quick.track_time(B4S2048H32Hkv8D128_causal, flydsl, bf16)", good, bad, *at],
         "cannot be measured on this machine .* Bisect a timing on a machine that runs it"),
    ]
    for argv, message in cases:
        assert main(["bisect", *argv]) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("flybench bisect: error: ") and re.search(message, err), (argv, err)
        assert "Traceback" not in err
    assert not (tmp_path / "written").exists()


def test_the_plan_names_each_commit_and_its_wheel(repo: dict[str, str], capsys: pytest.CaptureFixture) -> None:
    assert main(["bisect", VGPRS, repo["c2"], "main", "--flydsl-repo", repo["path"], "--wheel", "0.3.1",
                 "--plan"]) == 0
    out = capsys.readouterr().out
    assert "flydsl 0.3.1" in out and out.count("\n") == 1 + 5 and "GOOD" in out and "BAD" in out


def test_the_alerts_bisect_command_is_accepted(repo: dict[str, str], capsys: pytest.CaptureFixture) -> None:
    from flybench.regress.history import Regression, Step
    from flybench.regress.report import bisect_command

    step = Step(repo["c0"], repo["c5"], 252.0, 246.0, 0.0, 1.0, True)
    alert = Regression("flydsl", "ci7-gfx950", "env", "compile_metrics.Amd.track_vgprs",
                       {"kernel": "flash_attn_gfx950:causal", "arch": "gfx950"}, "registers", step, "change")
    argv = shlex.split(bisect_command(alert))
    assert argv[:2] == ["flybench", "bisect"]
    assert main([*argv[1:], "--flydsl-repo", repo["path"], "--wheel", "0.3.1", "--plan"]) == 0
    assert capsys.readouterr().out.count("\n") == 1 + 7


# --- real probes on this CPU -------------------------------------------------------------------------------------


@pytest.mark.skipif(importlib.util.find_spec("flydsl") is None, reason="needs flydsl: pip install -e '.[compile]'")
def test_a_real_compile_probe(tmp_path: Path) -> None:
    m = b.compile_one("flydsl_vector_add", "gfx942", "vgprs", cwd=ROOT, pythonpath=[str(ROOT)], flydsl_src=None,
                      env={envvars.COMPILE_CACHE: str(tmp_path)})
    assert m.value == 9 and m.note == ""
    again = b.compile_one("flydsl_vector_add", "gfx942", "vgprs", cwd=ROOT, pythonpath=[str(ROOT)], flydsl_src=None,
                          env={envvars.COMPILE_CACHE: str(tmp_path)})
    assert again.value == 9 and again.note == "from the compile cache"
    missing = b.compile_one("flash_attn_gfx950:causal", "gfx942", "vgprs", cwd=ROOT, pythonpath=[str(ROOT)],
                            flydsl_src=None, env={envvars.COMPILE_CACHE: str(tmp_path)})
    assert missing.value is None and missing.reason.startswith(("not applicable", "unavailable"))


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs this repository's git history")
def test_a_real_asv_probe_of_one_tiny_case_at_a_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The timing path's probe for real, on the CPU: a worktree at HEAD, one asv run of exactly one case."""
    monkeypatch.setenv(envvars.DEVICE, "cpu")
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    config = ROOT / "asv.conf.json"
    series = _series("attention.Tiny.track_time(B2S64H4Hkv2D128_causal, torch, bf16)", "flybench")
    probe = b.AsvCase(series, config, ROOT, "bisect-test", flydsl=False, work=tmp_path)
    m = probe(head)
    assert m.ok and m.value > 0 and m.spread[0] <= m.value <= m.spread[1], m
    [results] = (tmp_path / "results" / "bisect-test").glob(f"{head[:8]}-*.json")
    assert set(json.loads(results.read_text())["results"]) == {"attention.Tiny.track_time"}
    unavailable = b.AsvCase(_series("attention.Tiny.track_time(B2S64H4Hkv2D128_causal, flydsl, bf16)", "flybench"),
                            config, ROOT, "bisect-test", flydsl=False, work=tmp_path)(head)
    assert unavailable.value is None and "unavailable: flydsl runs FlyDSL kernels on a ROCm GPU" in unavailable.reason
    worktrees = subprocess.run(["git", "-C", str(ROOT), "worktree", "list"], capture_output=True, text=True,
                               check=True).stdout
    assert str(tmp_path) not in worktrees


# --- a real bisection over FlyDSL's history (needs a clone) ------------------------------------------------------

GOOD, BAD = "7dac0826", "772f0703"  # flash_attn_gfx950:causal on gfx950: 252 VGPRs at GOOD, 246 at BAD


def _flydsl_clone() -> Path | None:
    src = os.environ.get(envvars.FLYDSL_SRC)
    if not src:
        return None
    ok = all(subprocess.run(["git", "-C", src, "rev-parse", "--verify", "--quiet", f"{c}^{{commit}}"],
                            capture_output=True, check=False).returncode == 0 for c in (GOOD, BAD, "149ff32b"))
    return Path(src) if ok else None


needs_clone = pytest.mark.skipif(_flydsl_clone() is None, reason=f"set {envvars.FLYDSL_SRC} to a full clone of "
                                                                 "FlyDSL (with commits 149ff32b..772f0703)")


def _committed_history(series: b.Series) -> dict[str, float | None]:
    """The series' value at each commit of results/flydsl/cpu-compile/, by full hash."""
    values = {}
    for path in (ROOT / "results" / "flydsl" / "cpu-compile").glob("*-*.json"):
        if path.name == "machine.json":
            continue
        data = json.loads(path.read_text())
        result = data["results"].get(series.benchmark)
        if result is None:
            continue
        combos = list(itertools.product(*result[1]))
        i = combos.index(series.param_texts) if series.param_texts in combos else None
        values[data["commit_hash"]] = result[0][i] if i is not None else None
    return values


@needs_clone
def test_a_real_bisection_over_flydsl_finds_the_commit_the_history_shows(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    clone = _flydsl_clone()
    monkeypatch.setenv(envvars.COMPILE_CACHE, str(tmp_path / "cache"))  # compiled afresh, wheels installed afresh
    out = tmp_path / "report.json"
    assert main(["bisect", VGPRS, GOOD, BAD, "--flydsl-repo", str(clone), "--format", "json",
                 "--output", str(out)]) == 0
    data = json.loads(out.read_text())
    n = data["range"]["commits_after_good"]
    assert data["status"] == "found" and data["skipped"] == 0
    assert data["probe_count"] - 2 <= math.ceil(math.log2(n))
    # the committed history: the first of its commits in GOOD..BAD whose value left GOOD's
    history = _committed_history(_series())
    line = subprocess.run(["git", "-C", str(clone), "rev-list", "--first-parent", "--reverse", f"{GOOD}..{BAD}"],
                          capture_output=True, text=True, check=True).stdout.split()
    good_value = data["range"]["good"]["value"]
    changed = next(c for c in line if history.get(c) not in (None, good_value))
    assert data["first_bad"]["hash"] == changed and data["first_bad"]["value"] == history[changed]
    assert data["last_good"]["value"] == good_value == history[data["range"]["good"]["hash"]]
    print(f"\n{n} commits, {data['probe_count']} probes, first bad {data['first_bad']['hash'][:10]} "
          f"({data['last_good']['value']:.0f} -> {data['first_bad']['value']:.0f}), {data['seconds']} s")


@needs_clone
def test_a_real_bisection_skips_commits_that_do_not_compile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """149ff32b..7dac0826: no wheel was published for commits 733-750, whose kernels import what 0.3.0 moved."""
    monkeypatch.setenv(envvars.COMPILE_CACHE, str(tmp_path / "cache"))
    out = tmp_path / "report.json"
    assert main(["bisect", VGPRS, "149ff32b", "7dac0826", "--flydsl-repo", str(_flydsl_clone()), "--max-skips", "3",
                 "--format", "json", "--output", str(out)]) == 1
    data = json.loads(out.read_text())
    assert data["status"] == "stopped" and data["skipped"] == 3
    skipped = [p for p in data["probes"] if p["verdict"] == "skipped"]
    assert all("cannot import name 'buffer_ops'" in p["reason"] for p in skipped)
    assert any("stopped after 3 skipped commits" in n for n in data["notes"])


def test_a_machine_without_the_compile_toolchain_is_told_to_install_it_before_any_probe(
        repo: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """Without ROCm or the compile extra's ld.lld, every compile probe failed and the bisect said, a minute later,
    only that GOOD had no value: it now says what to install before probing anything."""
    from flybench.compile import toolchain

    missing = ("the Python package ziglang is not installed, so there is no ld.lld to link AMDGPU code objects and "
               f"no FlyDSL kernel can be compiled ({toolchain.INSTALL}, or install ROCm)")
    monkeypatch.setattr(toolchain, "rocm_root", lambda cache_dir: toolchain.Toolkit(None, "none", (missing,)))
    probed = []
    monkeypatch.setattr(b.FlydslCompile, "__call__", lambda self, commit: probed.append(commit))
    assert main(["bisect", VGPRS, repo["c0"], "main", "--flydsl-repo", repo["path"]]) == 2
    err = capsys.readouterr().err
    assert "pip install -e '.[compile]'" in err and "ziglang is not installed" in err and "Traceback" not in err
    assert probed == []
