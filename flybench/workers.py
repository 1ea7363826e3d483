"""Running dealt cases: one worker per GPU (or one worker for a shard), each a series of asv invocations.

A worker measures the cases dealt to it (flybench.shard) through asv, one
invocation per workload, every case in a process of its own as always. It is
pinned to its GPU by the vendor's variable (`pin`) and writes into a results
tree of its own, because parallel asv processes must not write one results
file; after each invocation its tree is merged into the run's (flybench.merge)
and emptied, so a job cut by its time limit keeps every finished invocation.

Faults cost the case in flight, never the run:

- a case that crashes or hangs is asv's business as before: its process
  dies, or gives up before asv's timeout with a record saying it timed out
  (flybench.measure.process), and asv goes on with the next case;
- when a worker's asv itself dies (killed, out of memory), its process group
  session is ended, the case in flight is recorded as lost with the reason, and the
  worker's other cases of that invocation, whose results asv never wrote,
  are measured again by a fresh invocation on the same GPU.

One progress display covers all workers (`Progress`): it follows each
worker's case records as they are written.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from flybench import benchmark_names, envvars, jsonl
from flybench.hardware import Gpu
from flybench.measure import record as records
from flybench.measure.process import DIED
from flybench.measure.record import CaseKey, CaseRecord
from flybench.merge import merge, results_files
from flybench.shard import Case

POLL_S = 0.5
"""How often a worker reads its case records while asv runs."""
_ASV_OK = (0, 2)  # asv's exit status when it ran every benchmark it was given: 2 when one of them failed


@dataclass(frozen=True)
class Worker:
    """Worker `number`, pinned to `gpu` (None: no pinning, the device the process would use anyway)."""

    number: int
    gpu: Gpu | None

    @property
    def label(self) -> str:
        return f"GPU {self.gpu.index}" if self.gpu is not None else f"worker {self.number}"


@dataclass
class Plan:
    """What every worker of one run shares."""

    config: Path  # the run's asv config
    asv_args: list[str]  # `asv run`'s options after --config, up to the --bench patterns
    env: dict[str, str]  # the run's environment, run identity included (its results dir is replaced per worker)
    results: Path  # the run's results tree, which the workers' trees are merged into
    machine: str
    commit: str
    env_name: str
    run_id: str
    device_kind: str  # "cuda", "rocm" or "cpu": which variable pins a worker
    scratch: Path  # the workers' own results trees and asv logs go below it
    append_samples: bool = False
    budget_s: float | None = None  # start no invocation expected to end after this many seconds
    batch_s: float | None = None  # split a workload's invocation into parts of about this many expected seconds


@dataclass
class Outcome:
    """What the workers did."""

    done: dict[CaseKey, dict[str, Any]] = field(default_factory=dict)  # each measured case's final record
    lost: list[CaseKey] = field(default_factory=list)  # cases whose worker died with them in flight
    left: list[CaseKey] = field(default_factory=list)  # cases not started within the budget
    wall_s: dict[int, float] = field(default_factory=dict)  # per worker number
    invocations: list[dict[str, Any]] = field(default_factory=list)  # worker, workload, cases, wall_s, status
    errors: list[str] = field(default_factory=list)  # a worker that stopped on an error: why


def pin(kind: str, gpu: Gpu, environ: dict[str, str]) -> dict[str, str | None]:
    """The variables that leave a process `gpu` alone (None: remove the variable).

    `gpu.index` numbers the GPUs as this process's torch sees them, which is
    after any *_VISIBLE_DEVICES the user set; the pin picks that GPU from the
    user's list. NVIDIA: CUDA_VISIBLE_DEVICES. ROCm: ROCR_VISIBLE_DEVICES
    narrows the devices first and HIP_VISIBLE_DEVICES indexes what it left
    (ROCm's order), so ROCR gets the GPU and HIP its only index, 0; HIP also
    reads CUDA_VISIBLE_DEVICES, which is removed.
    """
    def listed(name: str) -> list[str] | None:
        value = environ.get(name, "").strip()
        return [v.strip() for v in value.split(",")] if value else None

    if kind == "cuda":
        visible = listed("CUDA_VISIBLE_DEVICES")
        return {"CUDA_VISIBLE_DEVICES": visible[gpu.index] if visible else str(gpu.index)}
    if kind == "rocm":
        hip = listed("HIP_VISIBLE_DEVICES") or listed("CUDA_VISIBLE_DEVICES")
        rocr = listed("ROCR_VISIBLE_DEVICES")
        among_rocr = int(hip[gpu.index]) if hip else gpu.index
        return {"ROCR_VISIBLE_DEVICES": rocr[among_rocr] if rocr else str(among_rocr), "HIP_VISIBLE_DEVICES": "0",
                "CUDA_VISIBLE_DEVICES": None}
    return {}


def batches(cases: list[Case], batch_s: float | None) -> list[list[Case]]:
    """A worker's invocations: one per workload, the workload with the most expected seconds first; with
    `batch_s`, a workload's cases are cut into parts of about that many expected seconds (at least one case)."""
    by_workload: dict[str, list[Case]] = {}
    for case in cases:
        by_workload.setdefault(case.key[0], []).append(case)
    found = []
    for group in sorted(by_workload.values(), key=lambda g: (-sum(c.seconds for c in g), g[0].key[0])):
        part: list[Case] = []
        for case in group:
            if part and batch_s is not None and sum(c.seconds for c in part) + case.seconds > batch_s:
                found.append(part)
                part = []
            part.append(case)
        found.append(part)
    return found


def bench_patterns(cases: list[Case]) -> list[str]:
    """`--bench` arguments selecting exactly these cases (one pattern per workload, shape set, provider, dtype)."""
    groups: dict[tuple[str, str, str, str], list[str]] = {}
    for (workload, shape_set, case, provider, dtype) in (c.key for c in cases):
        groups.setdefault((workload, shape_set, provider, dtype), []).append(case)
    return [arg for (workload, shape_set, provider, dtype), names in sorted(groups.items())
            for arg in ("--bench", benchmark_names.asv_pattern(workload, shape_set, provider, dtype, sorted(names)))]


def run(plan: Plan, workers: list[Worker], lists: list[list[Case]], progress: Progress) -> Outcome:
    """Run each worker over its list, all at once, and wait for them; Ctrl-C ends every worker's asv."""
    outcome = Outcome()
    lock = threading.Lock()  # merging into the run's tree, and the outcome
    started = time.monotonic()
    groups: dict[int, subprocess.Popen] = {}
    threads = [threading.Thread(target=_work, args=(plan, worker, cases, progress, outcome, lock, started, groups),
                                daemon=True, name=worker.label) for worker, cases in zip(workers, lists)]
    for thread in threads:
        thread.start()
    try:
        while any(t.is_alive() for t in threads):
            progress.refresh()
            time.sleep(POLL_S)
    except KeyboardInterrupt:
        for process in list(groups.values()):
            _end_session(process)
        raise
    finally:
        progress.close()
    return outcome


def _work(plan: Plan, worker: Worker, cases: list[Case], progress: Progress, outcome: Outcome, lock: threading.Lock,
          started: float, groups: dict[int, subprocess.Popen]) -> None:
    try:
        _measure(plan, worker, cases, progress, outcome, lock, started, groups)
    except Exception as exc:  # noqa: BLE001 - one worker's error must not go unseen, nor stop the others
        with lock:
            outcome.errors.append(f"{worker.label}: {type(exc).__name__}: {exc}")
    finally:
        with lock:
            outcome.wall_s[worker.number] = time.monotonic() - started
        progress.finish(worker)


def _measure(plan: Plan, worker: Worker, cases: list[Case], progress: Progress, outcome: Outcome,
             lock: threading.Lock, started: float, groups: dict[int, subprocess.Popen]) -> None:
    tree = plan.scratch / f"worker{worker.number}"
    record_file = records.path_for(tree, plan.machine, plan.commit, plan.env_name)
    env = {**plan.env, envvars.RESULTS_DIR: str(tree)}
    if worker.gpu is not None:
        env.update({envvars.GPU_INDEX: str(worker.gpu.index), envvars.GPU_UUID: worker.gpu.uuid})
        for name, value in pin(plan.device_kind, worker.gpu, plan.env).items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
    log = plan.scratch / f"worker{worker.number}.log"
    command = [sys.executable, "-m", "flybench.asv_main", "run", "--config", str(_worker_config(plan.config, tree)),
               *plan.asv_args]
    tail = _Tail(record_file)
    queue = batches(cases, plan.batch_s)
    first = True
    while queue:
        batch = queue.pop(0)
        expected_end = time.monotonic() - started + sum(c.seconds for c in batch)
        if plan.budget_s is not None and not first and expected_end > plan.budget_s:  # the first always starts,
            # so that repeated calls make progress whatever the estimates say
            with lock:
                outcome.left += [c.key for b in [batch, *queue] for c in b]
            break
        first, begun = False, time.monotonic()
        with log.open("a") as out:
            process = subprocess.Popen(command + bench_patterns(batch), cwd=plan.config.resolve().parent, env=env,
                                       stdout=out,
                                       stderr=subprocess.STDOUT, start_new_session=True)
            groups[worker.number] = process
            while process.poll() is None:
                _follow(tail, plan.run_id, worker, progress, outcome, lock)
                time.sleep(POLL_S)
        groups.pop(worker.number, None)
        _end_session(process)  # a killed asv leaves its forkserver and the case's process behind
        _follow(tail, plan.run_id, worker, progress, outcome, lock)
        status = process.returncode
        with lock:
            outcome.invocations.append({"worker": worker.number, "gpu": worker.gpu.index if worker.gpu else None,
                                        "workload": batch[0].key[0], "cases": len(batch),
                                        "wall_s": time.monotonic() - begun, "status": status})
        if status in _ASV_OK:
            with lock:
                if results_files(tree):
                    merge([tree], plan.results, append_samples=plan.append_samples)
                else:  # asv saved nothing (every case unavailable): the records still count
                    _copy_records(record_file, plan)
                shutil.rmtree(tree / plan.machine, ignore_errors=True)
            tail.reset()
            continue
        keys = [c.key for c in batch]
        in_flight = _in_flight(record_file, plan.run_id, keys)
        why = (f"killed by signal {signal.Signals(-status).name}" if status < 0 and -status in signal.valid_signals()
               else f"exit status {status}")
        gone = in_flight or keys  # nothing in flight: asv died before its first case, which takes the whole batch
        reason = (f"lost: the worker on {worker.label} died ({why}: asv ended) while this case was in flight; the "
                  f"run went on without it" if in_flight else
                  f"not measured: asv on {worker.label} ended ({why}) before measuring it; its log: {log}")
        for key in gone:
            records.append(record_file, _stamped_failure(key, reason, plan, worker))
        _follow(tail, plan.run_id, worker, progress, outcome, lock)
        with lock:
            outcome.lost += gone
        rest = [c for c in batch if c.key not in gone]
        if rest:  # asv wrote no results for this invocation: measured again, on a fresh one, and their records
            queue.insert(0, rest)  # of the measurement asv never saved are dropped
            tail.offset = _drop_records(record_file, {c.key for c in rest})
    with lock:  # the records of a last invocation that died still reach the run's tree
        _copy_records(record_file, plan)


def _drop_records(record_file: Path, keys: set[CaseKey]) -> int:
    """Rewrite a worker's record file without the records of `keys`; its new size."""
    if not record_file.is_file():
        return 0
    kept = [r for r in records.read(record_file)[0] if records.key_of(r) not in keys]
    record_file.write_text("".join(json.dumps(r, allow_nan=True) + "\n" for r in kept))
    return record_file.stat().st_size


def _worker_config(config: Path, tree: Path) -> Path:
    """The run's asv config with the worker's results tree as its results_dir (asv writes its results, machine.json
    and benchmarks.json there). The copy lives beside the tree, so its other paths are made absolute against the
    run's config folder: asv reads a relative `repo` (flybench's own is ".") from the config's folder."""
    conf = json.loads(config.read_text())
    here = config.resolve().parent
    for key in ("repo", "benchmark_dir", "env_dir", "html_dir"):  # relative to the run's config, not this copy
        value = conf.get(key)
        if isinstance(value, str) and "://" not in value and not value.startswith("git@"):
            conf[key] = str((here / value).resolve())
    conf["results_dir"] = str(tree)
    path = tree.with_name(tree.name + ".asv.conf.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(conf, indent=1))
    return path


def _copy_records(record_file: Path, plan: Plan) -> None:
    """A worker's records with no results file beside them, appended to the run's records."""
    if not record_file.is_file():
        return
    found, _ = records.read(record_file)
    if found:
        target = records.path_for(plan.results, plan.machine, plan.commit, plan.env_name)
        jsonl.append(target, "\n".join(json.dumps(r, allow_nan=True) for r in found))
    record_file.unlink()


def _stamped_failure(key: CaseKey, reason: str, plan: Plan, worker: Worker) -> CaseRecord:
    return CaseRecord(plan.run_id, *key, status="failed", reason=reason, commit=plan.commit, env=plan.env_name,
                      machine=plan.machine,
                      started_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                      gpu={"index": worker.gpu.index, "uuid": worker.gpu.uuid} if worker.gpu else None)


def _in_flight(record_file: Path, run_id: str, keys: list[CaseKey]) -> list[CaseKey]:
    """The cases among `keys` whose last record of this run is the placeholder: started, never finished."""
    if not record_file.is_file():
        return []
    last = records.latest(records.read(record_file)[0], run_id)
    return [key for key in keys if key in last and last[key].get("reason") == DIED]


def _end_session(process: subprocess.Popen) -> None:
    """End every process of the asv invocation's session: asv starts its forkserver and benchmark processes in
    process groups of their own, so a killed asv leaves them running (on the GPU) unless the session is ended."""
    members = [process.pid]
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 3 and fields[3] == str(process.pid):  # the session id
            members.append(int(stat.parent.name))
    for pid in members:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    if process.poll() is None:
        process.wait()


def _follow(tail: _Tail, run_id: str, worker: Worker, progress: Progress, outcome: Outcome,
            lock: threading.Lock) -> None:
    for record in tail.read():
        if record.get("run_id") != run_id:
            continue
        if record.get("reason") == DIED:
            progress.started(worker, records.key_of(record))
        else:
            with lock:
                outcome.done[records.key_of(record)] = record
            progress.ended(worker, record)


class _Tail:
    """The complete lines appended to a record file since the last read (a line still being written waits)."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset = path, 0

    def reset(self) -> None:
        self.offset = 0

    def read(self) -> list[dict[str, Any]]:
        try:
            with self.path.open("rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
        except FileNotFoundError:
            return []
        complete = data[:data.rfind(b"\n") + 1]
        self.offset += len(complete)
        found = []
        for line in complete.decode("utf-8", errors="replace").splitlines():
            try:
                record = json.loads(line)
                records.check_case(record)
            except (ValueError, KeyError, TypeError):
                continue  # a torn line: the file's reader reports it
            found.append(record)
        return found


class Progress:
    """One display for all workers: on a terminal a table rewritten in place (a row per worker: cases done of
    dealt, the case in flight and for how long); elsewhere (a CI log) a line per case that ends, which names
    its worker, its status and, on failure, the reason. Names are shown as literal text."""

    def __init__(self, workers: list[Worker], dealt: list[int], stream: IO[str] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.workers, self.stream, self.clock = workers, stream or sys.stdout, clock
        self.total = sum(dealt)
        self.dealt = dict(zip((w.number for w in workers), dealt))
        self.finished: dict[int, set[CaseKey]] = {w.number: set() for w in workers}
        self.failed: dict[int, int] = {w.number: 0 for w in workers}
        self.flight: dict[int, tuple[CaseKey, float] | None] = {w.number: None for w in workers}
        self.over: set[int] = set()
        self._lock = threading.Lock()
        self._live = None
        if getattr(self.stream, "isatty", lambda: False)():
            from rich.console import Console
            from rich.live import Live

            self._live = Live(self.table(), console=Console(file=self.stream), auto_refresh=False)
            self._live.start()

    def done(self) -> int:
        return sum(len(s) for s in self.finished.values())

    def started(self, worker: Worker, key: CaseKey) -> None:
        with self._lock:
            self.flight[worker.number] = (key, self.clock())

    def ended(self, worker: Worker, record: dict[str, Any]) -> None:
        with self._lock:
            key = records.key_of(record)
            self.flight[worker.number] = None
            if key in self.finished[worker.number]:
                return
            self.finished[worker.number].add(key)
            self.failed[worker.number] += record["status"] == "failed"
            if self._live is None:
                print(self.line(worker, record), file=self.stream, flush=True)

    def finish(self, worker: Worker) -> None:
        with self._lock:
            self.over.add(worker.number)
            self.flight[worker.number] = None

    def line(self, worker: Worker, record: dict[str, Any]) -> str:
        """`[12/40] GPU 3: attention quick B1S1H4Hkv4D128_nocausal flex bf16: ok (4.1 s)`."""
        what = " ".join(records.key_of(record))
        status = record["status"] if record["status"] != "failed" else f"failed: {record.get('reason')}"
        took = f" ({record['measure_s']:.1f} s)" if type(record.get("measure_s")) in (int, float) else ""
        return f"[{self.done()}/{self.total}] {worker.label}: {what}: {status}{took}"

    def table(self):
        from rich.table import Table
        from rich.text import Text

        table = Table(title=f"{self.done()} of {self.total} cases", title_justify="left")
        for column in ("worker", "done", "failed", "in flight"):
            table.add_column(column)
        now = self.clock()
        for worker in self.workers:
            n = worker.number
            flight = self.flight[n]
            doing = ("finished" if n in self.over else "-") if flight is None else \
                f"{' '.join(flight[0])} ({now - flight[1]:.0f} s)"
            table.add_row(Text(worker.label), f"{len(self.finished[n])}/{self.dealt[n]}", str(self.failed[n]),
                          Text(doing))
        return table

    def refresh(self) -> None:
        if self._live is not None:
            with self._lock:
                self._live.update(self.table(), refresh=True)

    def close(self) -> None:
        if self._live is not None:
            self.refresh()
            self._live.stop()


class Follower:
    """Per-case progress for a run that is not dealt (the plain `flybench run`): a thread reads the run's record
    file as asv's processes append to it and tells a `Progress` of one worker, as the dealt runs do, so a
    workload of several minutes is not silent. Used as a context manager around the asv invocations."""

    def __init__(self, record_file: Path, run_id: str, total: int, label: str, stream: IO[str] | None = None,
                 every_s: float = 1.0) -> None:
        self.worker = _Labelled(1, None, label)
        self.progress = Progress([self.worker], [total], stream)
        self.tail, self.run_id, self.every_s = _Tail(record_file), run_id, every_s
        self.outcome, self._lock, self._stop = Outcome(), threading.Lock(), threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Follower:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        _follow(self.tail, self.run_id, self.worker, self.progress, self.outcome, self._lock)  # the last lines
        self.progress.finish(self.worker)
        self.progress.close()

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            _follow(self.tail, self.run_id, self.worker, self.progress, self.outcome, self._lock)
            self.progress.refresh()


@dataclass(frozen=True)
class _Labelled(Worker):
    """A worker named as the run names it (the device), not by a number."""

    name: str = ""

    @property
    def label(self) -> str:
        return self.name
