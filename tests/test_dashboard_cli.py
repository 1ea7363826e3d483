"""`flybench dashboard`: the command line it runs, and a real start on a free port."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from browser.harness import free_port

from flybench.cli import build_parser
from flybench.cli import dashboard as verb


def test_command_passes_the_database_and_streamlit_options(tmp_path: Path) -> None:
    args = build_parser().parse_args(["dashboard", "--db", str(tmp_path / "x.duckdb"), "--port", "8600",
                                      "--", "--theme.base", "dark"])
    cmd, env = verb.command(args)
    assert cmd[:3] == [sys.executable, str(verb.APP.with_name("serve.py")), "run"] and cmd[3] == str(verb.APP)
    assert cmd[cmd.index("--client.showErrorDetails") + 1] == "type"  # no traceback, no server path, to visitors
    assert cmd[cmd.index("--server.port") + 1] == "8600" and cmd[-2:] == ["--theme.base", "dark"]
    assert env["FLYBENCH_DB"] == str((tmp_path / "x.duckdb").resolve())
    assert env["FLYBENCH_ASV_CONFIG"].endswith("asv.conf.json")


def test_it_serves_with_production_settings_unless_developing(tmp_path: Path) -> None:
    """No file watcher (server CPU on every session, for no user), no rerun on save, no developer menu; the
    browser tests and the speed study start the server through this same command."""
    cmd, _ = verb.command(build_parser().parse_args(["dashboard", "--db", str(tmp_path / "x.duckdb")]))
    settings = dict(zip(cmd[4::2], cmd[5::2]))
    assert settings["--server.fileWatcherType"] == "none" and settings["--server.runOnSave"] == "false"
    assert settings["--global.developmentMode"] == "false" and settings["--client.toolbarMode"] == "viewer"
    cmd, _ = verb.command(build_parser().parse_args(["dashboard", "--db", str(tmp_path / "x.duckdb"), "--dev"]))
    settings = dict(zip(cmd[4::2], cmd[5::2]))
    assert settings["--server.fileWatcherType"] == "auto" and settings["--server.runOnSave"] == "true"


def test_the_checkout_it_is_started_in_is_served(tmp_path: Path, monkeypatch) -> None:
    """A second clone serves its own pages, not those of the checkout flybench was installed from; outside any
    checkout, the pages beside the package."""
    clone = tmp_path / "clone"
    for file in ("dashboard/app.py", "dashboard/serve.py", "flybench/__init__.py"):
        (clone / file).parent.mkdir(parents=True, exist_ok=True)
        (clone / file).write_text("")
    (clone / "docs").mkdir()
    monkeypatch.chdir(clone / "docs")
    cmd, _ = verb.command(build_parser().parse_args(["dashboard", "--db", str(tmp_path / "x.duckdb")]))
    assert cmd[1:4] == [str(clone / "dashboard" / "serve.py"), "run", str(clone / "dashboard" / "app.py")]
    monkeypatch.chdir(tmp_path)
    cmd, _ = verb.command(build_parser().parse_args(["dashboard", "--db", str(tmp_path / "x.duckdb"),
                                                     "--", "--client.showErrorDetails", "full"]))
    assert cmd[3] == str(verb.APP) and cmd.count("--client.showErrorDetails") == 1


def test_dashboard_verb_serves_the_app(tmp_path: Path) -> None:
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "flybench", "dashboard", "--db", str(tmp_path / "none.duckdb"),
                                "--port", str(port), "--address", "127.0.0.1"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1) as response:
                    assert response.status == 200
                    break
            except OSError:
                assert process.poll() is None and time.monotonic() < deadline, "the dashboard did not start"
                time.sleep(0.3)
    finally:
        process.terminate()
        output, _ = process.communicate(timeout=20)
    assert f"http://127.0.0.1:{port}" in output and "no database at" in output
    assert "No runtime found" not in output  # Streamlit's warnings about the caches declared before it ran
