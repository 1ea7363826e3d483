"""`flybench --help` imports no verb module; each verb still parses, helps, and names what it is missing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from flybench.cli import build_parser, main, verbs

HEAVY = ("duckdb", "pandas", "scipy", "streamlit", "pyarrow", "torch", "asv")


def python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_top_level_help_imports_no_heavy_package() -> None:
    done = python("import sys\nfrom flybench.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
                  f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "[]"
    listed = done.stdout
    for verb in verbs():
        assert f"    {verb.name} " in listed and verb.summary.split()[0] in listed


def test_each_verb_registers_the_name_its_first_line_gives() -> None:
    subparsers = next(a for a in build_parser()._actions if a.dest == "verb")
    assert list(subparsers.choices) == [v.name for v in verbs()]
    assert [v.name for v in verbs()][:3] == ["run", "ingest", "compare"]  # the data flow's order first


@pytest.mark.parametrize("verb", [v.name for v in verbs()])
def test_verb_help_still_works(verb: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([verb, "--help"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: flybench {verb}")


def test_a_verb_whose_package_is_missing_says_what_to_install() -> None:
    done = python("import sys\nsys.modules['duckdb'] = None\nfrom flybench.cli import main\n"
                  "sys.exit(main(['compare', 'a', 'b']))")
    assert done.returncode == 2
    assert "'flybench compare' needs the Python package 'duckdb'" in done.stderr
    assert "pip install -e '.[store]'" in done.stderr and "Traceback" not in done.stderr


def test_help_names_the_rules_and_the_verbs_as_they_are(capsys: pytest.CaptureFixture[str]) -> None:
    """compare judges Welch's t over round medians (never a rank test on samples); the pull-request check is gate."""

    for argv in (["--help"], ["compare", "--help"]):
        with pytest.raises(SystemExit):
            main(argv)
        said = " ".join(capsys.readouterr().out.split())
        assert "Mann-Whitney" not in said and "the pull-request check" not in said
    assert "Welch's t over the rounds' log medians" in said and "flybench gate" in said


def test_the_acceptances_lock_is_ignored_by_git() -> None:
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(["git", "-C", str(root), "check-ignore", "-q", "results/accepted.json.lock"])
    assert done.returncode == 0
