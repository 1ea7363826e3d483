"""The measuring process of `flybench run --one-process`: asv's benchmarks run one after another in this process.

asv's forkserver imports the suites once and forks a fresh process per
case, so every case pays for the accelerator's context, the JIT compiles
and the framework's warm-up again: 4-29 s a case for kernels that run in
milliseconds. Here each case asv asks for runs in this process, by asv's
own runner (`asv_runner.run._run`: setup, the timed method, teardown, the
result file), so the next case finds the context, the compiled kernels and
the imported suites where the last left them. The statistics are the same:
each case is still measured once per run, by the same timing harness, and
a round is still one process per side.

asv's process talks to this one through `flybench.asv_spawner.OneProcess`:
a JSON line per command on stdin, a JSON line per answer on the file
descriptor given as the second argument (the case's own output goes to a
file, as under the forkserver). A case that kills the process (a crash, or
its record's deadline, `flybench.measure.process`) ends it; the spawner
says so for that case and starts a fresh process for the next.

This file runs by its path, with the measured side's code first on the
path: it imports nothing of flybench (that would be the side's), only
asv_runner and the standard library.

    python flybench/asv_server.py BENCHMARK_DIR ANSWER_FD
"""

import json
import os
import sys
import threading

if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    sys.path.pop(0)  # this file's folder is flybench's package: its modules must not shadow top-level names

from asv_runner._aux import posix_redirect_output, update_sys_path  # noqa: E402
from asv_runner.run import _run  # noqa: E402

TIMED_OUT = 124
"""The exit status when a case outlives asv's timeout (as timeout(1) exits); the spawner reports it as asv does."""


def serve(benchmark_dir: str, answers) -> None:
    update_sys_path(benchmark_dir)
    home = os.getcwd()
    for line in sys.stdin:
        command = json.loads(line)
        action = command["action"]
        if action == "quit":
            return
        with open(command["output"], "w"):
            pass
        if action == "preimport":  # asv's discovery imported every suite already; each case imports its own
            _answer(answers, 0)
            continue
        timer = None
        if command.get("timeout"):
            timer = threading.Timer(float(command["timeout"]), os._exit, (TIMED_OUT,))
            timer.daemon = True
            timer.start()
        errcode = 1
        with posix_redirect_output(command["output"], permanent=False):
            try:
                os.chdir(command["cwd"])
                _run((benchmark_dir, command["benchmark_id"], command["params_str"], command["profile_path"],
                      command["result_file"]))
                errcode = 0
            except KeyboardInterrupt:  # Ctrl-C ends the run, not just the case
                raise SystemExit(130) from None
            except BaseException:  # noqa: BLE001 - as asv's forked child: the case fails, the process goes on
                import traceback

                traceback.print_exc()
            finally:
                os.chdir(home)
        if timer is not None:
            timer.cancel()
        _answer(answers, errcode)


def _answer(answers, errcode: int) -> None:
    answers.write(json.dumps({"errcode": errcode}) + "\n")
    answers.flush()


if __name__ == "__main__":
    with os.fdopen(int(sys.argv[2]), "w") as out:
        serve(sys.argv[1], out)
