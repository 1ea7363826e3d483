"""`flybench dashboard`: start the Streamlit app over the DuckDB store (read-only) and keep it running.

The app lives in a checkout's `dashboard/` directory. The one served is the
checkout the command is started in (the working folder or a folder above it
holding `dashboard/app.py` beside `flybench/`), so a second clone serves its
own pages, not those of the checkout flybench was installed from; outside a
checkout, the tree beside this package (an editable install's). The database
path and the asv config (for commit messages and links) reach the app as
environment variables; anything after `--` goes to `streamlit run` unchanged.
Visitors' error boxes show an exception's type, never its traceback (the
server's paths): `--client.showErrorDetails` after `--` overrides it.

It serves with production settings (`PRODUCTION`): Streamlit's file watcher
watches every page's source and module for edits, costs server CPU on every
session (the speed study always timed the server without it) and serves no
user; `--dev` turns it
back on (pages rerun when a source file is saved). The speed study and the
browser tests start the server through `command`, so what they measure is
what users run.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path

from flybench import envvars
from flybench.errors import FlybenchError
from flybench.store import DEFAULT_DB

APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"
"""The app beside this package: served where the command is started outside a checkout."""


def app_for(start: Path) -> Path:
    """The `dashboard/app.py` of the checkout holding `start`, else the one beside this package."""
    for folder in (start, *start.parents):
        if (folder / "dashboard" / "app.py").is_file() and (folder / "flybench" / "__init__.py").is_file():
            return folder / "dashboard" / "app.py"
    return APP


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "dashboard", help="open the Streamlit dashboard over the results database",
        description="Start `streamlit run dashboard/app.py` of the checkout it is started in (else the one "
                    "flybench was installed from) on the results database, read-only, so `flybench ingest` can "
                    "keep updating it; the pages apply the acceptances kept beside the database. Arguments after "
                    "`--` go to streamlit.")
    parser.add_argument("--db", type=Path, default=DEFAULT_DB, help=f"database file (default: {DEFAULT_DB})")
    parser.add_argument("--port", type=int, default=8501, help="port to serve on (default: 8501)")
    parser.add_argument("--address", default="localhost", help="address to listen on (default: localhost)")
    parser.add_argument("--config", type=Path, default=Path("asv.conf.json"),
                        help="asv config of the subject, for commit messages and links (default: asv.conf.json)")
    parser.add_argument("--dev", action="store_true",
                        help="development: watch the pages' source files and rerun a page when one is saved "
                             "(off by default: the watcher costs server CPU on every session)")
    parser.add_argument("streamlit_args", nargs=argparse.REMAINDER, help="after --: passed to streamlit run")
    return parser


PRODUCTION = ["--server.fileWatcherType", "none", "--server.runOnSave", "false", "--global.developmentMode",
              "false", "--client.toolbarMode", "viewer"]
"""No file watcher, no rerun on save, no developer menu: what a served dashboard needs, and what it is timed at."""
DEVELOPMENT = ["--server.fileWatcherType", "auto", "--server.runOnSave", "true", "--client.toolbarMode", "developer"]
"""`--dev`: the watcher reruns a page when its source changes."""


def command(args: argparse.Namespace) -> tuple[list[str], dict[str, str]]:
    """The streamlit command line and environment `main` runs (separate so tests can check them)."""
    app = app_for(Path.cwd().resolve())
    if not app.is_file():
        raise FlybenchError(f"the dashboard app is not at {app}: run flybench from a source checkout "
                            "(pip install -e '.[dashboard]')")
    if importlib.util.find_spec("streamlit") is None:
        raise FlybenchError("'flybench dashboard' needs streamlit: pip install -e '.[dashboard]'")
    if not args.db.is_file():
        print(f"flybench dashboard: no database at {args.db} yet; the app will say how to fill it "
              "(flybench run, then flybench ingest)", file=sys.stderr)
    extra = [a for a in args.streamlit_args if a != "--"]
    details = [] if any(a.startswith("--client.showErrorDetails") for a in extra) \
        else ["--client.showErrorDetails", "type"]  # a traceback shows the server's paths to every visitor
    serve = app.with_name("serve.py")  # `streamlit run`, with the pages' modules imported before the server starts
    cmd = [sys.executable, str(serve), "run", str(app), "--server.port", str(args.port),
           "--server.address", args.address, "--server.headless", "true", "--browser.gatherUsageStats", "false",
           *(DEVELOPMENT if getattr(args, "dev", False) else PRODUCTION), *details, *extra]
    env = {**os.environ, envvars.DB: str(args.db.resolve()), envvars.ASV_CONFIG: str(args.config.resolve())}
    return cmd, env


def main(args: argparse.Namespace) -> int:
    """Becomes the streamlit process (exec), so Ctrl-C and service managers' signals reach it directly."""
    cmd, env = command(args)
    print(f"flybench dashboard: http://{args.address}:{args.port}  (the pages of {Path(cmd[3]).parents[1]}, "
          f"database {env[envvars.DB]}, Ctrl-C to stop)", flush=True)
    os.execve(cmd[0], cmd, env)
    return 0  # not reached
