"""`flybench regressions --closed --format markdown`: the closed alerts are counted as closed, not as "other
resource changes" (an accepted alert was titled "1 other resource change")."""

from __future__ import annotations

import re
from pathlib import Path

from fixtures.asv_project import STEP_AT, AsvProject
from test_regress_alert import SERIES, db, project  # noqa: F401  (fixtures: a store with one open regression)

from flybench.cli import main


def _title(path: Path) -> str:
    return next(line for line in path.read_text().splitlines() if line.startswith("### "))


def test_an_accepted_alert_is_counted_as_closed(db: Path, project: AsvProject, tmp_path: Path,  # noqa: F811
                                                capsys) -> None:
    file = tmp_path / "accepted.json"
    assert main(["accept", SERIES, project.commits[STEP_AT][:8], "--reason", "slower kernel, exact lse",
                 "--db", str(db), "--accepted", str(file)]) == 0
    argv = ["regressions", "--db", str(db), "--benchmark", "attention.Quick.*", "--accepted", str(file),
            "--format", "markdown"]
    opened, closed = tmp_path / "open.md", tmp_path / "closed.md"
    main([*argv, "--output", str(opened)])
    main([*argv, "--closed", "--output", str(closed)])
    capsys.readouterr()
    before, after = _title(opened), _title(closed)
    assert "other resource change" not in after and ", 1 closed (recovered, accepted or undone)" in after
    assert after.startswith(before.split(" in the history")[0])  # the regressions counted as before
    row = next(line for line in closed.read_text().splitlines() if "c1, flydsl, bf16" in line)
    assert re.search(r"\| accepted\b", row)
