"""Which run a benchmark process belongs to: run id, commit, asv environment, machine, results folder.

A case record is written beside the asv results file of its run, so the
benchmark process must know that file's commit, environment and machine.
asv gives a benchmark process none of these in an existing environment
(`--python=same`; under its forkserver not even `ASV_ENV_NAME`). Two ways
give them:

- `flybench run` exports it (`exports`), one variable each (flybench.envvars);
- a plain `asv run --set-commit-hash C [--machine M] [--config F]` is found
  among the process's ancestors and its command line read with asv's own
  argument parser, its config read from the folder it runs in, and the
  environment named as asv names this interpreter's (Linux, through
  /proc). Without `--set-commit-hash` asv
  saves no results in an existing environment, so there is nothing to join.

Without either, `current()` is None and the case's record is not written:
asv's own results still hold its time.
"""

from __future__ import annotations

import os
import re
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

from flybench import envvars

_ANCESTORS = 4  # asv -> (forkserver ->) benchmark process, with room for a wrapper


@dataclass(frozen=True)
class RunIdentity:
    run_id: str
    commit: str
    env_name: str
    machine: str
    results_dir: Path


def exports(commit: str, env_name: str, machine: str, results_dir: Path) -> dict[str, str]:
    """The variables `flybench run` sets for the asv invocations of one run (a fresh run id)."""
    return {envvars.RUN_ID: uuid.uuid4().hex, envvars.COMMIT: commit, envvars.ENV_NAME: env_name,
            envvars.MACHINE: machine, envvars.RESULTS_DIR: str(results_dir)}


def current() -> RunIdentity | None:
    """This process's run: from `flybench run`'s variables, else from the `asv run` above it, else None."""
    given = {name: os.environ.get(name) for name in (envvars.COMMIT, envvars.ENV_NAME, envvars.MACHINE,
                                                      envvars.RESULTS_DIR)}
    if all(given.values()):
        return RunIdentity(os.environ.get(envvars.RUN_ID) or f"asv-{os.getppid()}", given[envvars.COMMIT],
                           given[envvars.ENV_NAME], given[envvars.MACHINE], Path(given[envvars.RESULTS_DIR]))
    return _from_asv_invocation()


def _from_asv_invocation() -> RunIdentity | None:
    found = _asv_run_ancestor()
    if found is None:
        return None
    pid, argv = found
    try:
        return _identity(pid, argv, Path(os.readlink(f"/proc/{pid}/cwd")))
    except Exception:  # noqa: BLE001 - an unreadable invocation only costs the record, never the measurement
        return None


def _asv_run_ancestor() -> tuple[int, list[str]] | None:
    """(pid, arguments after `asv`) of the nearest ancestor running `asv run`, if /proc shows one."""
    pid = os.getppid()
    for _ in range(_ANCESTORS):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
            parent = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return None
        for i, arg in enumerate(argv):
            tail = argv[i + 1:]
            named_asv = Path(arg).name == "asv" or (arg == "-m" and tail[:1] == ["asv"])
            if named_asv:
                rest = tail[1:] if arg == "-m" else tail
                if next((a for a in rest if not a.startswith("-")), None) == "run":  # the subcommand
                    return pid, rest
                break
        if parent <= 1:
            return None
        pid = parent
    return None


def _identity(pid: int, argv: list[str], cwd: Path) -> RunIdentity | None:
    """The run of `asv <argv>` started in `cwd` (asv has moved there, into the config's folder, if given one)."""
    from asv.commands import make_argparser
    from asv.config import Config
    from asv.environment import ExistingEnvironment
    from asv.machine import Machine
    from asv.repo import get_repo

    parser, _ = make_argparser()
    args, _ = parser.parse_known_args(argv)
    if getattr(args, "set_commit_hash", None) is None:
        return None
    config = Path(args.config) if args.config else Path("asv.conf.json")
    config = config if config.is_absolute() else cwd / config
    conf = Config.load(str(config))
    commit = args.set_commit_hash
    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        here = os.getcwd()
        os.chdir(cwd)  # asv reads the config's relative paths from its folder
        try:
            commit = get_repo(conf).get_hash_from_name(commit)
        finally:
            os.chdir(here)
    # An existing environment (--python=same or a path) runs this very interpreter; asv names it after it.
    env_name = os.environ.get("ASV_ENV_NAME") or ExistingEnvironment(conf, sys.executable, {}, {}).name
    machine = args.machine or Machine.get_unique_machine_name()
    results_dir = Path(conf.results_dir)
    return RunIdentity(f"asv-{pid}", commit, env_name, machine,
                       results_dir if results_dir.is_absolute() else cwd / results_dir)
