"""`flybench merge` as the README shows it, over the committed results: a tree merged twice, or into a tree that
already holds it, changes no byte.

Merging two copies of the committed dev-h200 tree into it once doubled every benchmark's `duration` (234.84 ->
469.68) and rewrote ten committed results files in asv's own layout, so `git status` listed files nobody
measured. The role splits beside a results file were not merged at all.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from flybench.cli import main

COMMITTED = Path(__file__).resolve().parents[1] / "results" / "flybench"
STEMS = ("53056f0b-existing-py_opt_torch_.venv_bin_python3", "c956a724-existing-py_opt_torch_.venv_bin_python3")
"""Two committed results files: one with hardware counter records beside it, one with role splits."""


def _copy(root: Path) -> Path:
    """The committed tree, cut to STEMS and the files beside them (record files, machine.json, benchmarks.json)."""
    (root / "dev-h200").mkdir(parents=True)
    shutil.copyfile(COMMITTED / "benchmarks.json", root / "benchmarks.json")
    shutil.copyfile(COMMITTED / "dev-h200" / "machine.json", root / "dev-h200" / "machine.json")
    for stem in STEMS:
        for path in (COMMITTED / "dev-h200").glob(f"{stem}.*"):
            shutil.copyfile(path, root / "dev-h200" / path.name)
    return root


def _bytes(tree: Path) -> dict[str, bytes]:
    return {str(p.relative_to(tree)): p.read_bytes() for p in sorted(tree.rglob("*")) if p.is_file()}


def _durations(tree: Path) -> dict[str, float]:
    found = {}
    for stem in STEMS:
        data = json.loads((tree / "dev-h200" / f"{stem}.json").read_text())
        column = data["result_columns"].index("duration")
        found.update({f"{stem[:8]} {name}": row[column] for name, row in data["results"].items()})
    return found


@pytest.fixture
def committed(tmp_path: Path) -> Path:
    if not all((COMMITTED / "dev-h200" / f"{stem}.json").is_file() for stem in STEMS):
        pytest.skip("the committed dev-h200 results are not in this checkout")
    return _copy(tmp_path / "committed")


def test_merging_copies_into_the_tree_that_holds_them_changes_no_byte(committed: Path, tmp_path: Path,
                                                                      capsys) -> None:
    before = _bytes(committed)
    runners = [_copy(tmp_path / "runner1"), _copy(tmp_path / "runner2")]
    assert main(["merge", *map(str, runners), "--into", str(committed)]) == 0
    out = capsys.readouterr().out
    assert _bytes(committed) == before  # no duration doubled, no file rewritten in another layout
    assert "into 2 results files (2 of them held every result already: left as they were)" in out


def test_merging_the_same_runners_twice_gives_the_committed_durations_once(committed: Path, tmp_path: Path,
                                                                           capsys) -> None:
    runners = [_copy(tmp_path / "runner1"), _copy(tmp_path / "runner2")]
    merged = tmp_path / "merged"
    assert main(["merge", *map(str, runners), "--into", str(merged)]) == 0
    first = _bytes(merged)
    assert _durations(merged) == _durations(committed) and len(_durations(committed)) > 2
    assert main(["merge", *map(str, runners), "--into", str(merged)]) == 0
    assert _bytes(merged) == first
    roles = f"dev-h200/{STEMS[1]}.roles.jsonl"  # the role splits come along, each line once
    assert first[roles].splitlines() and len(first[roles].splitlines()) == len(_bytes(committed)[roles].splitlines())
    capsys.readouterr()
