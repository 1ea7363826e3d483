"""The CI workflows parse, and every flybench, study and asv command they run exists and accepts its arguments."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest
import yaml

from flybench.cli import build_parser
from flybench.compile import history
from flybench.regress.config import load_config

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
EXPRESSION = re.compile(r"\$\{\{[^}]*\}\}|\$\([^)]*\)|\"?\$\{?[A-Z_]+\}?\"?")


def run_blocks(path: Path) -> list[str]:
    workflow = yaml.safe_load(path.read_text())
    return [step["run"] for job in workflow["jobs"].values() for step in job["steps"] if "run" in step]


def commands(block: str) -> list[list[str]]:
    """Shell commands of a run block that call Python: continuations joined, `( ... && ... )` split, VAR= dropped.

    Expressions (`${{ }}`, `$(...)`, `$VAR`) become one placeholder word.
    """
    found = []
    for line in block.replace("\\\n", " ").splitlines():
        if "flybench" not in line and "python -m" not in line:
            continue
        lexer = shlex.shlex(EXPRESSION.sub("X", line), posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words: list[str] = []
        for token in [*lexer, ";"]:
            if token and set(token) <= set("();&|"):
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
            if words[0] == "flybench" or words[:2] == ["python", "-m"]]


def test_workflows_exist_and_parse():
    assert {p.name for p in WORKFLOWS} >= {"nightly.yml", "pr.yml"}
    for path in WORKFLOWS:
        workflow = yaml.safe_load(path.read_text())
        assert workflow["jobs"], path
        for job in workflow["jobs"].values():
            assert job["steps"] and job["runs-on"], path


def test_nightly_runs_on_both_amd_architectures_and_a_cpu_runner():
    nightly = yaml.safe_load((ROOT / ".github/workflows/nightly.yml").read_text())
    assert nightly["jobs"]["gpu"]["strategy"]["matrix"]["arch"] == ["gfx942", "gfx950"]
    assert nightly["jobs"]["gpu"]["runs-on"] == ["self-hosted", "${{ matrix.arch }}"]
    assert nightly["jobs"]["compile"]["runs-on"] == "ubuntu-latest"


@pytest.mark.parametrize("where,words", project_commands(), ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_every_command_exists_and_its_arguments_parse(where, words):
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
    assert config.relative == 0.05 and config.p_threshold == 0.002
