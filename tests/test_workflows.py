"""The CI workflows parse, and every flybench, study and asv command they run exists and accepts its arguments."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from flybench.cli import build_parser
from flybench.compile import history
from flybench.regress import report
from flybench.regress.config import load_config

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
EXPRESSION = re.compile(r"\$\{\{[^}]*\}\}|\$\([^)]*\)|\"?\$\{?[A-Z_]+\}?\"?")
NUMERIC_OPTIONS = {"--rounds", "--max-rounds", "--budget-minutes"}
ARRAY = re.compile(r'"\$\{[a-z_]+\[@\]\}"')
GATE = ROOT / ".github" / "workflows" / "gate.yml"
RENDER = ["flybench", "render"]
"""The command that renders a saved JSON comparison again (the comment, the job summary)."""


def run_blocks(path: Path) -> list[str]:
    workflow = yaml.safe_load(path.read_text())
    return [step["run"] for job in workflow["jobs"].values() for step in job.get("steps", []) if "run" in step]


def commands(block: str) -> list[list[str]]:
    """Shell commands of a run block that call Python: continuations joined, `( ... && ... )` split, VAR= dropped,
    redirections (`2> file`, `>> file`) dropped.

    Expressions (`${{ }}`, `$(...)`, `$VAR`) become one placeholder word.
    """
    found = []
    block = ARRAY.sub("", block)  # "${name[@]}": options a step builds from its inputs; the rest must parse
    for line in block.replace("\\\n", " ").splitlines():
        if "flybench" not in line and "python -m" not in line:
            continue
        lexer = shlex.shlex(EXPRESSION.sub("X", line), posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words: list[str] = []
        tokens = iter([*lexer, ";"])
        for token in tokens:
            if token in (">", ">>", "<"):
                next(tokens)  # the file
                if words and words[-1].isdigit():
                    words.pop()  # the descriptor, `2>`
            elif token and set(token) <= set("();&|"):
                while words and "=" in words[0] and not words[0].startswith("-"):
                    words = words[1:]  # VAR=value prefixes
                if words:
                    found.append(words)
                words = []
            else:
                words.append(token)
    return found


def project_commands() -> list[tuple[str, list[str]]]:
    return [(path.name, words) for path in WORKFLOWS for block in run_blocks(path) for words in commands(block)
            if words[0] == "flybench" or words[:2] in (["python", "-m"], ["python", "-c"])]


def option(words: list[str], name: str, default: str | None = None) -> str | None:
    return words[words.index(name) + 1] if name in words else default


def test_workflows_exist_and_parse():
    assert {p.name for p in WORKFLOWS} >= {"nightly.yml", "pr.yml"}
    for path in WORKFLOWS:
        workflow = yaml.safe_load(path.read_text())
        assert workflow["jobs"], path
        for job in workflow["jobs"].values():
            assert (job.get("steps") and job.get("runs-on")) or job.get("uses"), path


def test_nightly_runs_on_both_amd_architectures_and_a_cpu_runner():
    nightly = yaml.safe_load((ROOT / ".github/workflows/nightly.yml").read_text())
    assert nightly["jobs"]["gpu"]["strategy"]["matrix"]["arch"] == ["gfx942", "gfx950"]
    assert nightly["jobs"]["gpu"]["runs-on"] == ["self-hosted", "${{ matrix.arch }}"]
    assert nightly["jobs"]["compile"]["runs-on"] == "ubuntu-latest"


@pytest.mark.parametrize("where,words", project_commands(), ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_every_command_exists_and_its_arguments_parse(where, words):
    # a placeholder for an expression (a repository variable) after a numeric option stands for a number
    words = ["1" if w == "X" and words[i - 1] in NUMERIC_OPTIONS else w for i, w in enumerate(words)]
    if words[0] == "flybench" or words[2:3] == ["flybench"]:
        build_parser().parse_args(words[1:] if words[0] == "flybench" else words[3:])
    elif words[2] == "flybench.compile.history":
        history.build_parser().parse_args(words[3:])
    elif words[2] == "asv":
        assert words[3] in ("run", "machine"), words
        if "--bench" in words:
            assert (ROOT / "benchmarks" / f"{words[words.index('--bench') + 1]}.py").is_file()
    else:
        pytest.fail(f"{where}: unknown command {' '.join(words)}")


def test_workflows_install_only_extras_that_exist():
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    for path in WORKFLOWS:
        for named in re.findall(r"-e '\.\[([^\]]+)\]'", path.read_text()):
            assert set(named.split(",")) <= extras, (path.name, named)


def test_pull_request_thresholds_load():
    config = load_config(ROOT / ".github" / "flybench-pr.toml")
    assert config.relative == 0.03 and config.p_threshold == 0.001
    assert config.is_subject("triton") and config.is_subject("torch")  # flybench's own PRs: every provider


def pr_jobs() -> dict[str, list[dict]]:
    """The steps of each job of the gate workflow (which pull requests call) that compares base and head."""
    workflow = yaml.safe_load(GATE.read_text())
    return {name: job["steps"] for name, job in workflow["jobs"].items()
            if any("flybench gate" in step.get("run", "") for step in job.get("steps", []))}


def step_commands(step: dict) -> list[list[str]]:
    return commands(step.get("run", ""))


def only(found: list) -> Any:
    assert len(found) == 1, found
    return found[0]


@pytest.mark.parametrize("job", sorted(pr_jobs()))
def test_pull_request_comment_is_found_by_the_marker_its_report_starts_with(job):
    steps = pr_jobs()[job]
    renders = [words for step in steps for words in step_commands(step) if words[:2] == RENDER]
    comment_file = only([option(w, "--output") for w in renders if "--limit" not in w])
    name = only(sorted({option(w, "--comment-name", "") for w in renders}))
    comment = only([s for s in steps if "gh api" in s.get("run", "")])
    # the step looks for what the report writes first: the same constant, through the same function
    assert comment["env"]["MARKER"] == report.comment_marker(name)
    assert report.comment_marker("") == report.COMMENT_MARKER
    assert "startswith(env.MARKER)" in comment["run"] and "/issues/$PR/comments" in comment["run"]
    assert "--method PATCH" in comment["run"] and "--method POST" in comment["run"]  # edited in place, else created
    assert comment["run"].count(f"body=@{comment_file}") == 2
    assert "gh pr comment" not in GATE.read_text()  # that one adds a comment a push


def test_pull_request_jobs_keep_their_own_comment():
    names = [option(w, "--comment-name", "") for steps in pr_jobs().values() for step in steps
             for w in step_commands(step) if w[:2] == RENDER and "--limit" not in w]
    assert len(names) == len(set(names)) == len(pr_jobs()) >= 2


@pytest.mark.parametrize("job", sorted(pr_jobs()))
def test_pull_request_uploads_the_json_report_and_writes_the_job_summary(job):
    steps = pr_jobs()[job]
    judge = only([w for s in steps for w in step_commands(s) if w[:2] == ["flybench", "gate"]])
    saved = option(judge, "--json")
    upload = only([s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@")
                   and s["with"]["path"] == saved])
    renders = [w for s in steps for w in step_commands(s) if w[:2] == RENDER]
    assert {w[2] for w in renders} == {saved}
    run = only([s["run"] for s in steps if any(w[:2] == RENDER for w in step_commands(s))])
    assert f"steps.{upload['id']}.outputs.artifact-url" in run and run.count("--full-report-url") == len(renders)
    summary = only([w for w in renders if "--limit" in w])
    assert report.MARKDOWN_LIMIT < int(option(summary, "--limit")) <= 1024 * 1024  # the job summary holds 1 MiB
    assert f'cat {option(summary, "--output")} >> "$GITHUB_STEP_SUMMARY"' in run


@pytest.mark.parametrize("job", sorted(pr_jobs()))
def test_pull_request_check_tells_bad_input_from_a_regression(job):
    steps = pr_jobs()[job]
    compare = only([s for s in steps if s.get("id") == "compare"])
    assert "set +e" in compare["run"] and 'echo "status=$status" >> "$GITHUB_OUTPUT"' in compare["run"]
    reported = "steps.compare.outputs.status == '0' || steps.compare.outputs.status == '1'"
    for step in steps[steps.index(compare) + 1:]:
        if "upload-artifact" in step.get("uses", "") or "gh api" in step.get("run", "") \
                or " ".join(RENDER) in step.get("run", ""):
            # a report exists only when compare got that far (the ISA diffs also only where code changed)
            assert step["if"] == reported or step["if"].startswith(f"({reported}) && "), step
    bad = only([s for s in steps if s.get("if") == "steps.compare.outputs.status != '0' && "
                                                   "steps.compare.outputs.status != '1'"])
    assert "bad input, not a regression" in bad["run"] and bad["run"].rstrip().endswith("exit 2")
    failing = only([s for s in steps if s.get("if") == "steps.compare.outputs.status == '1'"])
    assert failing["run"].rstrip().endswith("exit 1")  # a regression (timing) or a kernel that broke (compile)
    assert ("regression" if job == "timing" else "broke") in failing["name"]


def test_the_render_commands_run(tmp_path):
    from flybench.regress.compare import CaseResult, Comparison

    case = CaseResult("moe.Quick.track_time", {"case": "mixtral-8x7b-tokens-4096", "provider": "flydsl", "dtype": "bf16"},
                      "py", "seconds", 1e-3, 2e-3, "regression", "ci-99")
    comparison = Comparison("pr-runner", "a" * 40, "b" * 40, 0.002, [case])
    for steps in pr_jobs().values():
        for words in [w for s in steps for w in step_commands(s) if w[:2] == RENDER]:
            (tmp_path / words[2]).write_text(report.to_json(comparison))
            args = [("https://example.invalid/artifact" if word == "X" else word) for word in words[2:]]
            done = subprocess.run([sys.executable, "-m", "flybench", "render", *args], cwd=tmp_path,
                                  capture_output=True, text=True, check=False)
            assert done.returncode == 0, done.stderr
            text = (tmp_path / option(words, "--output")).read_text()
            assert text.startswith(report.comment_marker(option(words, "--comment-name", "")) + "\n")
            assert "mixtral-8x7b-tokens-4096" in text


@pytest.mark.skipif(not shutil.which("jq"), reason="needs jq to stand in for gh's --jq")
@pytest.mark.parametrize("existing", [True, False])
def test_comment_step_edits_the_marked_comment_else_creates_one(tmp_path, existing):
    """The comment step run by bash as GitHub runs it, with a `gh` that answers from a file and logs the rest."""
    step = only([s for s in pr_jobs()["timing"] if "gh api" in s.get("run", "")])
    marker = step["env"]["MARKER"]
    comments = [{"id": 11, "body": "LGTM"}, {"id": 12, "body": f"> {marker}\n> quoted in a reply"}]
    if existing:
        comments += [{"id": 13, "body": f"{marker}\n### flybench: an older push"}]
    (tmp_path / "comments.json").write_text(json.dumps(comments))
    (tmp_path / "comment.md").write_text(f"{marker}\n### flybench: this push\n")
    fake = tmp_path / "bin" / "gh"
    fake.parent.mkdir()
    fake.write_text('#!/bin/bash\n'
                    'if [[ " $* " == *" --paginate "* ]]; then\n'
                    '  while [ "$1" != --jq ]; do shift; done; jq -r "$2" "$FAKE_DIR/comments.json"\n'
                    'else echo "$*" >> "$FAKE_DIR/calls"; fi\n')
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{fake.parent}{os.pathsep}{os.environ['PATH']}", "FAKE_DIR": str(tmp_path),
           "MARKER": marker, "PR": "7", "GITHUB_REPOSITORY": "o/r", "GH_TOKEN": "unused"}
    done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=tmp_path,
                          env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    (call,) = (tmp_path / "calls").read_text().splitlines()
    if existing:
        assert call.startswith("api --method PATCH repos/o/r/issues/comments/13 -F body=@comment.md")
    else:
        assert call.startswith("api --method POST repos/o/r/issues/7/comments -F body=@comment.md")


def test_the_counter_pass_is_opt_in_on_a_manual_nightly():
    nightly = yaml.safe_load((ROOT / ".github/workflows/nightly.yml").read_text())
    counters = nightly[True]["workflow_dispatch"]["inputs"]["counters"]  # YAML reads the key `on` as True
    assert counters["type"] == "boolean" and counters["default"] is False
    runs = {s["if"]: s["run"] for s in nightly["jobs"]["measure"]["steps"] if "flybench run" in s.get("run", "")}
    assert set(runs) == {"${{ !inputs.counters }}", "${{ inputs.counters }}"}  # exactly one of the two runs
    assert "--counters" in runs["${{ inputs.counters }}"] and "--counters" not in runs["${{ !inputs.counters }}"]


def test_the_gate_is_a_reusable_workflow_and_pr_yml_one_of_its_callers():
    gate = yaml.safe_load(GATE.read_text())
    call = gate[True]["workflow_call"]  # YAML reads the key `on` as True
    declared = set(call["inputs"])
    assert {"subject", "gpu-runner", "rounds", "budget-minutes", "thresholds", "kernels"} <= declared
    assert call["outputs"]["verdict"]["value"] == "${{ jobs.verdict.outputs.verdict }}"
    pr = yaml.safe_load((ROOT / ".github/workflows/pr.yml").read_text())
    (job,) = pr["jobs"].values()
    assert job["uses"] == "./.github/workflows/gate.yml" and set(job["with"]) <= declared
    assert job["with"]["subject"] == "flybench" and (ROOT / job["with"]["thresholds"]).is_file()
    assert job["permissions"]["pull-requests"] == "write"


def test_the_callers_in_the_adoption_page_pass_only_declared_inputs():
    declared = set(yaml.safe_load(GATE.read_text())[True]["workflow_call"]["inputs"])
    blocks = re.findall(r"```yaml\n(.*?)```", (ROOT / "docs" / "gate.md").read_text(), re.S)
    callers = [yaml.safe_load(b) for b in blocks]
    jobs = [job for c in callers for job in c["jobs"].values() if "uses" in job]
    assert jobs  # FlyDSL's
    for job in jobs:
        assert job["uses"].startswith("flybench/flybench/.github/workflows/gate.yml@")
        assert set(job.get("with", {})) <= declared and job["with"]["subject"] in ("flydsl", "flybench")


@pytest.mark.parametrize("compile_status,timing,expected", [
    ("0", "skipped", "pass"), ("1", "skipped", "regression"), ("0", "1", "regression"), ("2", "0", "error"),
    ("1", "", "error"), ("0", "0", "pass")])
def test_the_gates_verdict_reads_each_halfs_exit_status(tmp_path, compile_status, timing, expected):
    step = only(yaml.safe_load(GATE.read_text())["jobs"]["verdict"]["steps"])
    output = tmp_path / "out"
    env = {**os.environ, "COMPILE": compile_status, "TIMING": "0" if timing == "skipped" else timing,
           "GITHUB_OUTPUT": str(output)}
    subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], env=env, check=True)
    assert output.read_text() == f"verdict={expected}\n"


def test_aiters_caller_gates_the_two_flydsl_releases_its_pull_request_pins(tmp_path):
    """The adoption page's AITER caller: its first job reads FLYDSL_VERSION from setup.py at both commits (run by
    bash on a repository shaped like AITER's), and hands the two release tags to the gate as its sides."""
    blocks = re.findall(r"```yaml\n(.*?)```", (ROOT / "docs" / "gate.md").read_text(), re.S)
    (aiter,) = [yaml.safe_load(b) for b in blocks if "flydsl-base" in b]
    assert aiter["jobs"]["flybench"]["with"]["flydsl-head"] == "${{ needs.pins.outputs.head }}"
    step = only([s for s in aiter["jobs"]["pins"]["steps"] if s.get("id") == "pin"])
    repo = tmp_path / "aiter"
    repo.mkdir()
    shas = []
    for version in ("0.3.2", "0.5.0"):
        (repo / "setup.py").write_text(f'import os\nFLYDSL_VERSION = "flydsl=={version}"\nsetup()\n')
        for words in (["init", "-q"] if not shas else [], ["add", "-A"],
                      ["-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", version]):
            if words:
                subprocess.run(["git", *words], cwd=repo, check=True)
        shas.append(subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True,
                                   check=True).stdout.strip())
    output = tmp_path / "out"
    env = {**os.environ, "BASE_SHA": shas[0], "HEAD_SHA": shas[1], "GITHUB_OUTPUT": str(output)}
    subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=repo, env=env,
                   check=True)
    assert output.read_text() == "base=v0.3.2\nhead=v0.5.0\n"


def test_the_nightly_keeps_its_store_so_alerts_outlive_the_runner():
    """Alerts are state in the store: the nightly restores the last night's store before it ingests and saves it
    after the report, under one key per architecture."""
    steps = yaml.safe_load((ROOT / ".github/workflows/nightly.yml").read_text())["jobs"]["gpu"]["steps"]
    names = [s.get("name", "") for s in steps]
    restore = only([s for s in steps if s.get("uses", "").startswith("actions/cache/restore")])
    save = only([s for s in steps if s.get("uses", "").startswith("actions/cache/save")])
    assert names.index(restore["name"]) < names.index("Ingest") < names.index("Regressions") < names.index(save["name"])
    assert restore["with"]["path"] == save["with"]["path"] == "results/flybench.duckdb"
    assert restore["with"]["restore-keys"] == "flybench-store-${{ matrix.arch }}-" and \
        save["with"]["key"].startswith(restore["with"]["restore-keys"])


def _step_script(name: str, arch: str) -> str:
    steps = yaml.safe_load((ROOT / ".github/workflows/nightly.yml").read_text())["jobs"]["gpu"]["steps"]
    script = only([s for s in steps if s.get("name") == name])["run"]
    return script.replace("${{ matrix.arch }}", arch).replace("${{ runner.name }}", "runner-1")


def _fake_flybench(tmp_path: Path, body: str) -> None:
    """A `.venv` whose activate puts a `flybench` running the shell `body` first on PATH."""
    venv = tmp_path / ".venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "flybench").write_text(f"#!/bin/sh\n{body}\n")
    (venv / "flybench").chmod(0o755)
    (venv / "activate").write_text(f'PATH="{venv}:$PATH"\n')


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(cwd), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("git") is None, reason="needs bash and git")
def test_the_nightly_pairs_last_nights_flydsl_commit_with_tonights(tmp_path: Path) -> None:
    """The same-job check reads last night's FlyDSL commit from this architecture's published results commit and
    gates it against tonight's with the nightly config; with no earlier night, or FlyDSL unmoved, it measures
    nothing."""
    flydsl = tmp_path / "FlyDSL"
    flydsl.mkdir()
    _git(flydsl, "init", "-q")
    _git(flydsl, "commit", "-q", "--allow-empty", "-m", "last night")
    last = _git(flydsl, "rev-parse", "HEAD")
    _git(flydsl, "commit", "-q", "--allow-empty", "-m", "tonight")
    tonight = _git(flydsl, "rev-parse", "HEAD")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "commit", "-q", "--allow-empty", "-m", f"nightly results: FlyDSL {last[:7]} on gfx950")
    _git(tmp_path, "commit", "-q", "--allow-empty", "-m", "nightly results: FlyDSL 0000000 on gfx942")
    calls = tmp_path / "calls"
    _fake_flybench(tmp_path, f'echo "$@" >> {calls}\nexit 1')
    output = tmp_path / "github_output"
    env = {**os.environ, "GITHUB_OUTPUT": str(output)}

    def run(arch: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-e", "-c", _step_script("Same-job check against last night's FlyDSL commit",
                                                                  arch)], cwd=tmp_path, env=env, text=True,
                              capture_output=True)

    assert run("gfx950").returncode == 0
    argv = calls.read_text().split()
    assert argv[:3] == ["gate", last[:7], tonight] and "--no-compile" in argv
    assert argv[argv.index("--config") + 1] == ".github/flybench-nightly.toml"
    assert argv[argv.index("--flydsl-repo") + 1] == "FlyDSL"
    assert output.read_text() == "status=1\n"  # the gate's verdict reaches the alert step
    calls.unlink()
    assert run("gfx90a").returncode == 0 and not calls.exists()  # no earlier night on this architecture
    _git(flydsl, "reset", "-q", "--hard", last)
    result = run("gfx950")
    assert result.returncode == 0 and not calls.exists() and "nothing to pair" in result.stdout
    assert load_config(ROOT / ".github/flybench-nightly.toml").is_control("xla")


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize(("history", "paired", "status"), [("0", "1", "1"), ("0", "0", "0"), ("1", "0", "1"),
                                                            ("0", "", "0"), ("2", "1", "2")])
def test_the_same_job_verdict_goes_into_the_nightly_alert(tmp_path: Path, history: str, paired: str,
                                                          status: str) -> None:
    _fake_flybench(tmp_path, f'echo "history report" > alert.md\nexit {history}')
    if paired:
        (tmp_path / "paired.md").write_text("### flybench gate: same-job verdict\n")
    script = _step_script("Regressions", "gfx950").replace("${{ steps.paired.outputs.status }}", paired) \
        .replace("${{ vars.FLYBENCH_DASHBOARD_URL }}", "")
    output = tmp_path / "github_output"
    result = subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, text=True, capture_output=True,
                            env={**os.environ, "GITHUB_OUTPUT": str(output)})
    assert result.returncode == 0 and output.read_text() == f"status={status}\n"
    alert = (tmp_path / "alert.md").read_text()
    assert alert.startswith("history report") and ("same-job verdict" in alert) == bool(paired)


def test_the_nightly_shards_each_pool_and_uses_every_gpu_then_merges_before_ingest():
    """One shard per runner of an architecture's pool (--shard I/N with N the matrix's shard count), every GPU
    of a node (--gpus all), one asv machine per pool; the shards' trees are kept and merged before the ingest."""
    jobs = yaml.safe_load((ROOT / ".github/workflows/nightly.yml").read_text())["jobs"]
    measure = jobs["measure"]
    shards = measure["strategy"]["matrix"]["shard"]
    assert measure["strategy"]["matrix"]["arch"] == jobs["gpu"]["strategy"]["matrix"]["arch"]
    assert shards == list(range(1, len(shards) + 1)) and measure["runs-on"] == ["self-hosted", "${{ matrix.arch }}"]
    runs = [w for s in measure["steps"] for w in step_commands(s) if w[:2] == ["flybench", "run"]]
    assert len(runs) == 2
    for words in runs:
        assert option(words, "--shard") == f"X/{len(shards)}" and option(words, "--gpus") == "all"
        assert option(words, "--machine") == "nightly-X"
    upload = only([s for s in measure["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")])
    assert upload["if"] == "always()" and "results/flydsl/nightly-${{ matrix.arch }}" in upload["with"]["path"]
    steps = jobs["gpu"]["steps"]
    names = [s.get("name", "") for s in steps]
    download = only([s for s in steps if s.get("uses", "").startswith("actions/download-artifact@")])
    assert download["with"]["pattern"] == "results-${{ matrix.arch }}-*" and upload["with"]["name"].startswith(
        "results-${{ matrix.arch }}-")
    assert jobs["gpu"]["needs"] == ["flydsl", "measure"]
    assert names.index(download["name"]) < names.index("Merge the shards into the results tree") < \
        names.index("Ingest")


def test_every_job_of_the_night_measures_the_one_flydsl_commit_resolved_first():
    """The shards, the same-job check and the compile-only job check out the commit the `flydsl` job resolved, so a
    commit landing on FlyDSL's main during the night cannot split one night's results between two commits."""
    jobs = yaml.safe_load((ROOT / ".github/workflows/nightly.yml").read_text())["jobs"]
    resolve = only(jobs["flydsl"]["steps"])
    assert "git ls-remote https://github.com/ROCm/FlyDSL HEAD" in resolve["run"]
    assert jobs["flydsl"]["outputs"]["commit"] == "${{ steps.%s.outputs.commit }}" % resolve["id"]
    checkouts = {name: [s for s in job["steps"] if s.get("with", {}).get("repository") == "ROCm/FlyDSL"]
                 for name, job in jobs.items()}
    fetching = {name for name, found in checkouts.items() if found}
    assert fetching == {"measure", "gpu", "compile"}
    for name in fetching:
        assert "flydsl" in ([jobs[name]["needs"]] if isinstance(jobs[name]["needs"], str) else jobs[name]["needs"])
        assert [s["with"]["ref"] for s in checkouts[name]] == ["${{ needs.flydsl.outputs.commit }}"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_merge_step_merges_every_shard_of_its_architecture(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    _fake_flybench(tmp_path, f'echo "$@" >> {calls}')
    for name in ("results-gfx950-1", "results-gfx950-2", "results-gfx942-1"):
        (tmp_path / "shards" / name).mkdir(parents=True)
    script = _step_script("Merge the shards into the results tree", "gfx950")
    done = subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, text=True, capture_output=True)
    assert done.returncode == 0, done.stderr
    assert calls.read_text().split() == ["merge", "shards/results-gfx950-1", "shards/results-gfx950-2", "--into",
                                         "results/flydsl"]
