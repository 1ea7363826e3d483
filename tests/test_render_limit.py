"""`flybench render --limit N`: every limit it accepts, the comment keeps; the ones it cannot keep are refused.

The comparisons are the compile half's real saved reports (docs/data/flydsl-replay,
`flybench compare --format json` output of FlyDSL merges): their notes alone run
past 2,000 characters, which the smallest accepted limit once overran.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from flybench.cli import main
from flybench.regress.report import COMMENT_MARKER

REPLAY = Path(__file__).resolve().parents[1] / "docs" / "data" / "flydsl-replay"
SAVED = ["3082f456.json", "9291e446.json", "22119227.json", "ca99de5e.json", "7dac0826.json"]
"""The most notes (9291e446: 2,258 characters of them, no case), the most resource changes and the most cases."""
URL = "https://github.com/ROCm/FlyDSL/actions/runs/28984277713/artifacts/3518820012"
LIMITS = [2_000, 2_300, 2_600, 3_000, 3_500, 4_500, 8_000, 60_000]


def render(saved: Path, out: Path, *options: str) -> int:
    return main(["render", str(saved), "--output", str(out), "--full-report-url", URL, *options])


@pytest.mark.parametrize("name", SAVED)
def test_the_comment_stays_within_every_accepted_limit(name: str, tmp_path: Path) -> None:
    saved, out = REPLAY / name, tmp_path / "comment.md"
    assert render(saved, out) == 0
    whole = out.read_text(encoding="utf-8")
    for limit in LIMITS:
        assert render(saved, out, "--limit", str(limit)) == 0
        text = out.read_text(encoding="utf-8")
        assert len(text.encode("utf-8")) <= limit, limit
        assert text.startswith(f"{COMMENT_MARKER}\n### ") and "flybench: " in text.splitlines()[1]
        if text != whole:  # something was left out: the comment says what, and where the rest is
            note = re.search(r"> \[!NOTE\]\n> (.+)", text)
            assert note, limit
            assert f"to keep this report under {limit:,} characters. Every case is in [the full JSON report]({URL})" \
                in note.group(1)
            assert "rows left out" in note.group(1) or "the notes" in note.group(1).lower()


def test_a_report_that_leaves_its_notes_out_says_so(tmp_path: Path) -> None:
    out = tmp_path / "comment.md"
    assert render(REPLAY / "9291e446.json", out, "--limit", "2000") == 0
    text = out.read_text(encoding="utf-8")
    assert "> The notes and the footnote left out to keep this report under 2,000 characters. Every case is in " \
           f"[the full JSON report]({URL})." in text
    assert "#### " not in text or "more" in text


@pytest.mark.parametrize("limit", ["-1", "0", "50", "1999", "many"])
def test_a_limit_below_the_smallest_comment_is_refused(limit: str, tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        render(REPLAY / "3082f456.json", tmp_path / "comment.md", "--limit", limit)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "flybench render: error: argument --limit:" in err and "Traceback" not in err
    if limit != "many":
        assert "allowed: 2,000 characters or more" in err
    assert not (tmp_path / "comment.md").exists()


def test_a_title_and_pointer_longer_than_the_limit_are_refused(tmp_path: Path, capsys) -> None:
    """The least a comment holds is its title and where the rest is: a huge URL leaves no room for even that."""
    out = tmp_path / "comment.md"
    url = URL + "?" + "x" * 2_500
    assert main(["render", str(REPLAY / "3082f456.json"), "--output", str(out), "--full-report-url", url,
                 "--limit", "2000"]) == 2
    err = capsys.readouterr().err
    need = re.search(r"its title and the pointer to the full report take ([\d,]+) characters; pass --limit "
                     r"([\d,]+) or more", err)
    assert need and need.group(1) == need.group(2) and int(need.group(1).replace(",", "")) > 2_500
    assert "Traceback" not in err and not out.exists()
    limit = need.group(1).replace(",", "")
    assert main(["render", str(REPLAY / "3082f456.json"), "--output", str(out), "--full-report-url", url,
                 "--limit", limit]) == 0
    assert len(out.read_bytes()) <= int(limit)
