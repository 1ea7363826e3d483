"""`flybench run --one-process`: asv's cases run one after another in one measuring process, and a case that ends
that process costs only itself (the next case gets a fresh one)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BENCH = '''
import os


class Suite:
    params = [["a", "b", "c", "d"]]
    param_names = ["x"]

    def setup(self, x):
        if x == "b":
            os._exit(9)  # a case that crashes its process

    def track_pid(self, x):
        return os.getpid()
'''


def _asv(repo: Path, env: dict[str, str], *words: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flybench.asv_main", *words], cwd=repo, env=env,
                          capture_output=True, text=True)


def test_every_case_runs_in_one_process_and_a_crash_costs_only_its_case(tmp_path: Path) -> None:
    repo = tmp_path / "project"
    (repo / "benchmarks").mkdir(parents=True)
    (repo / "benchmarks" / "__init__.py").write_text("")
    (repo / "benchmarks" / "bench.py").write_text(BENCH)
    (repo / "asv.conf.json").write_text(json.dumps({"version": 1, "project": "p", "repo": ".",
                                                    "benchmark_dir": "benchmarks", "results_dir": "results",
                                                    "environment_type": "existing"}))
    for words in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "p"]):
        subprocess.run(["git", *words], cwd=repo, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    env = {**os.environ, "HOME": str(tmp_path), "FLYBENCH_ONE_PROCESS": "1"}
    assert _asv(repo, env, "machine", "--yes", "--machine", "m").returncode == 0
    done = _asv(repo, env, "run", "--python=same", "--set-commit-hash", head, "--machine", "m", "--show-stderr")
    assert done.returncode in (0, 2), done.stdout + done.stderr
    (results,) = [p for p in (repo / "results" / "m").glob("*.json") if p.name != "machine.json"]
    stored = json.loads(results.read_text())["results"]
    a, b, c, d = stored["bench.Suite.track_pid"][0]
    assert b is None  # the crash is that case's failure
    assert c == d and a != c  # the cases after it share a fresh process
    assert os.getpid() not in (a, c)
    assert "the measuring process ended during this case (exit status 9)" in done.stdout + done.stderr
