"""The measurement contract: how a number was taken, so only like is compared with like."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from dataclasses import asdict, dataclass, replace

from flybench.hardware import Device


@dataclass(frozen=True)
class Contract:
    """Statistic, warm-up, sample budget, cache policy and timer of one measurement.

    `flush` is "llc" (a buffer larger than the last-level cache is written
    before every sample) or "none"; `graph` replays a captured device graph.
    """

    statistic: str = "median"
    warmup_s: float = 0.3
    target_s: float = 1.0
    min_samples: int = 30
    max_samples: int = 2000
    flush: str = "llc"
    graph: bool = False
    timer: str = "device-events"

    def static_key(self) -> str:
        """A short hash of the fields that must match for two results to be comparable."""
        blob = json.dumps(asdict(self), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:12]


# Device-graph replay on a GPU wherever the runner can be captured (measure.timing.prepare): the
# decode-sized cases of a few short kernels are otherwise timed with the launch gaps between them.
PRESETS = {
    "tiny": Contract(warmup_s=0.05, target_s=0.1, min_samples=5, max_samples=50, graph=True),
    "quick": Contract(warmup_s=0.5, target_s=0.5, min_samples=30, max_samples=1000, graph=True),
    "full": Contract(warmup_s=0.5, target_s=1.5, min_samples=50, max_samples=3000, graph=True),
}


def for_device(contract: Contract, device: Device) -> Contract:
    """On the CPU there are no device events and no cache flush: say so in the contract."""
    if device.kind == "cpu":
        return replace(contract, flush="none", graph=False, timer="perf_counter")
    return contract


def describe(contract: Contract, device: Device, samples: int) -> dict:
    """The contract as recorded with a result: static fields, device, samples, clocks."""
    from flybench.versions import package_versions

    return {**asdict(contract), "samples": samples, "device": device.name, "arch": device.arch,
            "clocks": read_clocks(device), "packages": package_versions()}


def read_clocks(device: Device) -> dict[str, str]:
    """Current SM and memory clocks where the vendor tool answers; empty otherwise.

    Read only: flybench never changes clocks or power settings.
    """
    if device.kind == "cuda" and shutil.which("nvidia-smi"):
        query = ["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,clocks.max.sm", "--format=csv,noheader", "-i", "0"]
        fields = ("sm_mhz", "mem_mhz", "max_sm_mhz")
    elif device.kind == "rocm" and shutil.which("amd-smi"):
        query, fields = ["amd-smi", "metric", "--clock", "--csv"], ("amd_smi_csv",)
    else:
        return {}
    try:
        text = subprocess.run(query, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {}
    values = [text] if len(fields) == 1 else [v.strip() for v in text.splitlines()[0].split(",")] if text else []
    return dict(zip(fields, values))
