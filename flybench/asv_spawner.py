"""asv's way of starting a case, replaced for `flybench run --one-process`: every case in one measuring process.

asv runs each benchmark through a spawner: `spawn` starts a process per
case, `forkserver` forks one per case from a process that imported the
suites. `OneProcess` keeps one process (`flybench.asv_server`) for the
whole invocation and has it run the cases one after another, so a pull
request's round of many millisecond kernels costs what its kernels cost,
not a context, the JIT compiles and the warm-up per case
(`flybench.rounds`).

Faults still cost only the case in flight: when the process dies during a
case (a crash, a hang ended by the case's deadline or asv's timeout), that
case gets the process's exit status as asv's forked child would give it,
and the next case starts a fresh process.

`flybench.asv_main` installs it when `FLYBENCH_ONE_PROCESS` is set, which
`flybench run --one-process` does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from asv import runner, util

SERVER = Path(__file__).with_name("asv_server.py")
TIMED_OUT = 124
"""`flybench.asv_server`'s exit status when a case outlived asv's timeout."""


class OneProcess(runner.Spawner):
    """A spawner whose cases share one process, started again after a case that ended it."""

    def __init__(self, env, benchmark_dir) -> None:
        super().__init__(env, benchmark_dir)
        self.tmp = Path(tempfile.mkdtemp(prefix="flybench-one-process-"))
        self.process: subprocess.Popen | None = None
        self.answers = None
        self.log = self.tmp / "server.log"

    def _start(self) -> None:
        read, write = os.pipe()
        env = {**os.environ, **self.env.env_vars}
        with self.log.open("a") as log:
            self.process = subprocess.Popen([sys.executable, str(SERVER), self.benchmark_dir, str(write)],
                                            stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, env=env,
                                            pass_fds=(write,), text=True)  # in asv's group: a Ctrl-C reaches it
        os.close(write)
        self.answers = os.fdopen(read)

    def _send(self, command: dict) -> int | None:
        """Send one command; its exit code, or None when the process ended before answering."""
        if self.process is None or self.process.poll() is not None:
            self._start()
        try:
            self.process.stdin.write(json.dumps(command) + "\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            return None
        line = self.answers.readline()
        return json.loads(line)["errcode"] if line else None

    def _ended(self) -> int:
        """The exit status of a process that ended in a case (asv's convention: -N for a signal)."""
        code = self.process.wait()
        self.answers.close()
        self.process = None
        return code if code != 0 else 1

    def preimport(self) -> tuple[bool, str]:
        output = self.tmp / "preimport.out"
        errcode = self._send({"action": "preimport", "output": str(output)})
        text = output.read_text(errors="replace") if output.is_file() else ""
        if errcode is None:
            self._ended()
            return False, f"{text}\nflybench: the measuring process ended while importing the suites"
        return True, text

    def run(self, name, params_str, profile_path, result_file_name, timeout, cwd):
        output = self.tmp / "case.out"
        errcode = self._send({"action": "run", "benchmark_id": name, "params_str": params_str,
                              "profile_path": profile_path, "result_file": result_file_name, "timeout": timeout,
                              "cwd": cwd, "output": str(output)})
        text = output.read_text(errors="replace") if output.is_file() else ""
        if errcode is None:
            errcode = self._ended()
            if errcode == TIMED_OUT:
                errcode = util.TIMEOUT_RETCODE
            text += (f"\nflybench: the measuring process ended during this case (exit status {errcode}); the next "
                     "case starts a fresh one")
        return text, errcode

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None and self.interrupted:
            self.process.kill()  # Ctrl-C: the case in flight is not waited for
            self.process.wait()
        if self.process is not None and self.process.poll() is None:
            try:
                self.process.stdin.write(json.dumps({"action": "quit"}) + "\n")
                self.process.stdin.close()
                self.process.wait(timeout=30)
            except (BrokenPipeError, OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()
        if self.answers is not None:
            self.answers.close()
        util.long_path_rmtree(str(self.tmp), True)


def install() -> None:
    """Have asv start every case of this invocation in one process."""
    runner.get_spawner = lambda env, benchmark_dir, launch_method: OneProcess(env, benchmark_dir)
