"""Device timing: events around each call, warm-up, cache flush, optional graph replay.

One sample is one call of the runner, bracketed by device events on the
current stream, preceded by a write of a buffer twice the size of the
last-level cache so every sample starts cold. The warm-up runs for a fixed
time (not a fixed count), which both includes the first-call JIT compile and
brings the clocks up from idle before the first sample. The number of
samples follows from the warm-up's estimate of one call and the contract's
time budget. On the CPU the host clock times each call.

With the contract's `graph`, one call is captured into a device graph and
its replays are timed: a case of several short kernels (split-K attention
and its combine, a MoE layer's nine kernels) is then timed without the
launch gaps between them, close to the sum of its kernels' times. A runner
that cannot be captured is timed directly, and its contract says so.

A runner marked with `host_timed` (XLA's: its work runs on streams that events
on torch's stream cannot see, and each call blocks until its outputs are
ready) is timed with the host clock on a GPU too, after the cache flush and a
device synchronisation before each sample.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Callable

from flybench.hardware import Device, llc_bytes
from flybench.measure.contract import Contract
from flybench.providers.base import Runner
from flybench.workloads.base import Tensors


HOST_TIMED = "flybench_host_timed"


def host_timed(runner: Runner) -> Runner:
    """Mark `runner` as one to time with the host clock: it must block until its work is done."""
    setattr(runner, HOST_TIMED, True)
    return runner


@dataclass(frozen=True)
class TimedCall:
    """What is timed: the runner itself, or the replay of a device graph captured from it.

    `outputs` are the graph's own output tensors, which every replay
    rewrites (None when the runner is timed directly): the caller checks
    them against the reference before timing, like the runner's. `note`
    says why a graph the contract asked for was not used.
    """

    call: Callable[[], object]
    contract: Contract
    outputs: Tensors | None = None
    note: str | None = None


def prepare(runner: Runner, device: Device, contract: Contract) -> TimedCall:
    """The call to time under `contract`, and the contract as it will really be measured.

    A graph replays a multi-kernel case without the launch gaps between its
    kernels. Where the runner cannot be captured (it waits on the host, or
    its work runs outside torch's streams), it is timed directly and the
    contract says `graph: false`.
    """
    if device.kind == "cpu":
        return TimedCall(runner, replace(contract, graph=False))
    if getattr(runner, HOST_TIMED, False):
        return TimedCall(runner, replace(contract, graph=False, timer="host-clock-after-sync"))
    if not contract.graph:
        return TimedCall(runner, contract)
    try:
        replay, outputs = _graphed(runner)
    except Exception as exc:  # noqa: BLE001 - a runner that cannot be captured is timed as it is
        return TimedCall(runner, replace(contract, graph=False),
                         note=f"device graph capture failed ({type(exc).__name__}: {str(exc)[:200]}); timed directly")
    return TimedCall(replay, contract, outputs)


def time_runner(runner: Runner, device: Device, contract: Contract) -> list[float]:
    """Seconds per call of `runner` under `contract`, for callers that have checked the runner already."""
    return time_call(prepare(runner, device, contract), device)


def time_call(timed: TimedCall, device: Device) -> list[float]:
    """Seconds per call, one entry per sample."""
    contract = timed.contract
    if device.kind == "cpu":
        return _time_on_host(timed.call, contract)
    if contract.timer == "host-clock-after-sync":
        import torch

        return _time_on_host(timed.call, contract, torch.cuda.synchronize, _before_host_sample(device, contract))
    return _time_on_device(timed.call, device, contract)


def _sample_count(per_call_s: float, contract: Contract) -> int:
    wanted = int(contract.target_s / max(per_call_s, 1e-7))
    return max(contract.min_samples, min(contract.max_samples, wanted))


def _warm_up(call: Callable[[], object], sync: Callable[[], None], contract: Contract) -> float:
    """Run `call` for at least `warmup_s` (and 3 calls); return the mean time of the last calls."""
    call()  # first call: JIT compile, autotune, handle creation
    sync()
    calls, start = 0, time.perf_counter()
    while calls < 3 or time.perf_counter() - start < contract.warmup_s:
        call()
        calls += 1
        if calls % 8 == 0 or calls < 3:
            sync()
    sync()
    return (time.perf_counter() - start) / calls


def _nothing() -> None:
    return None


def _time_on_host(runner: Runner, contract: Contract, sync: Callable[[], None] = _nothing,
                  before: Callable[[], None] = _nothing) -> list[float]:
    """Host clock around each call; `before` runs untimed before each sample, `sync` in the warm-up."""
    per_call = _warm_up(runner, sync, contract)
    samples = []
    for _ in range(_sample_count(per_call, contract)):
        before()
        start = time.perf_counter()
        runner()
        samples.append(time.perf_counter() - start)
    return samples


def _time_on_device(call: Callable[[], object], device: Device, contract: Contract) -> list[float]:
    import torch

    sync = torch.cuda.synchronize
    per_call = _warm_up(call, sync, contract)
    flush = _flush_buffer(device) if contract.flush == "llc" else None
    count = _sample_count(per_call, contract)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(count)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(count)]
    for start, end in zip(starts, ends):
        if flush is not None:
            flush.add_(1)
        start.record()
        call()
        end.record()
    sync()
    return [start.elapsed_time(end) / 1e3 for start, end in zip(starts, ends)]


def _before_host_sample(device: Device, contract: Contract) -> Callable[[], None]:
    """Flush the cache (if the contract says so) and wait for the device, so a sample starts idle and cold."""
    import torch

    flush = _flush_buffer(device) if contract.flush == "llc" else None

    def before() -> None:
        if flush is not None:
            flush.add_(1)
        torch.cuda.synchronize()

    return before


def _flush_buffer(device: Device) -> "torch.Tensor":  # noqa: F821
    """A buffer twice the last-level cache; writing it evicts whatever the call left there."""
    import torch

    return torch.zeros(max(2 * llc_bytes(device), 1 << 20) // 4, dtype=torch.int32, device="cuda")


def _graphed(runner: Runner) -> tuple[Callable[[], None], Tensors]:
    """Capture one call into a device graph; return its replay and the outputs each replay rewrites.

    The runner has already run (the correctness gate), so lazily compiled
    kernels exist before capture, as FlyDSL requires; one more call on the
    capture's side stream warms that stream.
    """
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        runner()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outputs = runner()
    return graph.replay, outputs
