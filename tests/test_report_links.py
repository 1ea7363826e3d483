"""Addresses given to a markdown report, and text from a page's address, never become live content.

`regressions --format markdown --dashboard-url URL` pasted URL into every History link as given: a URL with
`) [Sign in](https://...` added a link of its own to the nightly's report, and `javascript:` was taken. `render`'s
`--full-report-url` went into its link the same way. A value from a dashboard address with line breaks rendered
a list inside the page's warning box. The markdown is read here by markdown-it (the CommonMark parser `rich`
brings), as GitHub and Streamlit read it: what a person sees is the HTML it makes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fixtures.asv_project import AsvProject
from markdown_it import MarkdownIt
from test_regress_alert import db, project  # noqa: F401  (fixtures: a store with one open regression)

from flybench.cli import main
from flybench.regress.report import link_address, literal_markdown

SAVED = Path(__file__).resolve().parents[1] / "docs" / "data" / "flydsl-replay" / "9291e446.json"
"""A comparison saved by `flybench compare --format json` (FlyDSL's merge 9291e446, its compile half)."""
PHISH = "https://dash.example/) [Sign in](https://evil.example/login"
REFUSED = [("javascript:alert(document.cookie)", "is not an http(s) address"),
           ("https://dash.example/\n- [x](https://evil.example)", "holds '\\n', which no address holds"),
           ("https://dash.example/\tx", "holds '\\t', which no address holds"),
           ("dash.example/flybench", "is not an http(s) address"), ("https:///nohost", "is not an http(s) address")]


def anchors(markdown_text: str) -> list[tuple[str, str]]:
    """Every link the markdown renders to: (target, the text a person clicks)."""
    return re.findall(r'<a href="([^"]*)">(.*?)</a>', MarkdownIt("commonmark").render(markdown_text))


def links_in(markdown_text: str) -> list[str]:
    return [target for target, _ in anchors(markdown_text)]


@pytest.mark.parametrize("url, said", REFUSED)
def test_a_dashboard_address_that_is_no_plain_http_address_is_refused(url: str, said: str, db: Path,  # noqa: F811
                                                                       tmp_path: Path, capsys) -> None:
    out = tmp_path / "alert.md"
    code = main(["regressions", "--db", str(db), "--format", "markdown", "--output", str(out),
                 "--dashboard-url", url])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    assert f"--dashboard-url {url!r} {said}" in err and "Traceback" not in err


@pytest.mark.parametrize("given, encoded", [(PHISH, "https://dash.example/%29%20%5BSign%20in%5D%28https://evil.example/login"),
                                            ('https://dash.example/fly<b>"bench"\\', "https://dash.example/fly%3Cb%3E%22bench%22%5C")])
def test_a_dashboard_address_is_percent_encoded_into_each_history_link(given: str, encoded: str, db: Path,  # noqa: F811
                                                                       tmp_path: Path) -> None:
    out = tmp_path / "alert.md"
    assert main(["regressions", "--db", str(db), "--format", "markdown", "--output", str(out),
                 "--dashboard-url", given]) == 1  # the store's regression
    text = out.read_text()
    targets = links_in(text)
    assert targets and all(t.startswith(f"{encoded}/history?") for t in targets)  # one link a row, to the host given
    assert {clicked for _, clicked in anchors(text)} == {"History"}  # no link of the address's own
    assert "<b>" not in text


@pytest.mark.parametrize("url, said", REFUSED[1:3])
def test_render_refuses_a_full_report_or_link_address_that_would_end_its_link(url: str, said: str, tmp_path: Path,
                                                                              capsys) -> None:
    out = tmp_path / "comment.md"
    for argv in (["--full-report-url", url], ["--link", f"ISA diffs={url}"]):
        code = main(["render", str(SAVED), "--output", str(out), "--limit", "2000", *argv])
        err = capsys.readouterr().err
        assert code == 2 and not out.exists(), argv
        assert f"{argv[0]} {url!r} {said}" in err and "Traceback" not in err


def test_a_full_report_name_that_is_no_address_links_nowhere(tmp_path: Path) -> None:
    out = tmp_path / "comment.md"
    name = "javascript:alert(1)\n- [x](https://evil.example)"
    assert main(["render", str(SAVED), "--output", str(out), "--limit", "2000", "--full-report-url", name]) == 0
    text = out.read_text()
    assert "evil.example" not in " ".join(links_in(text)) and "javascript:" not in " ".join(links_in(text))
    assert "`javascript:alert(1) - [x](https://evil.example)`" in text


def test_link_address_keeps_a_plain_address_as_it_is() -> None:
    plain = "https://github.com/ROCm/FlyDSL/actions/runs/28984277713/artifacts/3518820012?x=1&y=%20#top"
    assert link_address(plain, "--link") == plain


def test_a_value_with_line_breaks_renders_no_list_and_no_heading() -> None:
    value = "gfx942\n- [one](https://evil.example)\r\n- two\u2028# Sign in again"
    html = MarkdownIt("commonmark").render(f"Machine {literal_markdown(value)}: nothing on this page for it.")
    assert "<li>" not in html and "<h1>" not in html and "href" not in html
    assert html.count("<p>") == 1


def test_an_address_with_a_bracket_that_opens_no_ipv6_host_is_refused_not_a_traceback(db: Path,  # noqa: F811
                                                                                       tmp_path: Path, capsys) -> None:
    """urlsplit raises ValueError ('Invalid IPv6 URL') on 'https://[x': each flag that takes an address says what
    was wrong, exit 2; a real IPv6 host is taken."""
    url = "https://[dash.example/flybench"
    out = tmp_path / "out.md"
    for argv in (["regressions", "--db", str(db), "--format", "markdown", "--output", str(out), "--dashboard-url",
                  url],
                 ["render", str(SAVED), "--output", str(out), "--full-report-url", url],
                 ["render", str(SAVED), "--output", str(out), "--link", f"ISA diffs={url}"]):
        code = main(argv)
        err = capsys.readouterr().err
        flag = next(word for word in argv if word.startswith("--") and word in (
            "--dashboard-url", "--full-report-url", "--link"))
        assert code == 2 and not out.exists(), argv
        assert f"{flag} {url!r} is not an address" in err and "Traceback" not in err
    assert link_address("https://[::1]:8501/flybench", "--link") == "https://[::1]:8501/flybench"
