"""`flybench render REPORT.json`: render a comparison saved by `flybench compare --format json` again.

The pull-request workflow saves one JSON comparison and renders it twice:
the comment (under --limit characters, pointing to --full-report-url when
rows are left out) and the job summary. A regression does not fail a
rendering: exit 0, or 2 when the report cannot be read.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from flybench.cli._output import output_path
from flybench.errors import FlybenchError
from flybench.regress import report


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "render", help="render a saved JSON comparison again (PR comment, job summary, terminal)",
        description="Render a comparison saved by `flybench compare --format json` again: the pull-request "
                    "comment (under --limit characters, pointing to --full-report-url when rows are left out), "
                    "the job summary, or a terminal table. Exit status: 0, or 2 when the report cannot be read.")
    parser.add_argument("report", type=Path, help="the JSON report")
    parser.add_argument("--format", choices=report.FORMATS, default="markdown")
    parser.add_argument("--output", type=output_path, help="write here instead of stdout")
    parser.add_argument("--limit", type=_limit, default=report.MARKDOWN_LIMIT,
                        help=f"the markdown stays under this many characters (default {report.MARKDOWN_LIMIT:,}; "
                             "a GitHub comment holds 65,536, a job summary 1 MiB)")
    parser.add_argument("--full-report-url", help="where the full JSON report is (the uploaded artifact's URL)")
    parser.add_argument("--link", action="append", default=[], metavar="TEXT=URL",
                        help="a link to add after the notes (repeatable), e.g. the ISA diffs' artifact")
    parser.add_argument("--comment-name", default="",
                        help="a marker of its own, for a second comment on the same pull request")
    return parser


def main(args: argparse.Namespace) -> int:
    links = [_link(text) for text in args.link]
    full = args.full_report_url
    if full is not None and full.startswith(("http://", "https://")):  # else the report's name, shown as code
        full = report.link_address(full, "--full-report-url")
    try:
        comparison = report.from_json(args.report.read_text(encoding="utf-8"))
    except OSError as exc:
        raise FlybenchError(f"cannot read {args.report}: {exc.strerror or exc}") from exc
    report.write(comparison, args.format, args.output, limit=args.limit, full_report=full,
                 marker=report.comment_marker(args.comment_name), links=links)
    return 0


def _link(text: str) -> tuple[str, str]:
    """`--link TEXT=URL` as (text, url); the URL must be an http(s) address a link can hold (report.link_address)."""
    label, found, rest = text.partition("=http")  # a URL's own query may hold "=" too
    url = "http" + rest
    if not (label and found and url.startswith(("http://", "https://"))):
        raise FlybenchError(f"--link {text!r} is not TEXT=URL with an http(s) URL: write e.g. "
                            "--link 'ISA diffs=https://github.com/o/r/actions/runs/1/artifacts/2'")
    return label, report.link_address(url, "--link")


MIN_LIMIT = 2_000
"""The least --limit: room for a comment's title and the note that says what was left out and where the full
report is (under 1,000 characters with every verdict counted and an artifact's URL), with room to spare for
the sections' titles. A report whose own title and pointer need more (a very long --full-report-url) is
refused when it is rendered, with the limit it needs."""


def _limit(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of characters") from None
    if value < MIN_LIMIT:
        raise argparse.ArgumentTypeError(f"{value} is too small: a comment needs at least {MIN_LIMIT:,} characters "
                                         "for its title and the pointer to the full report (allowed: "
                                         f"{MIN_LIMIT:,} characters or more)")
    return value
