"""What device this is: architecture, vendor peak figures, cache size, asv machine name.

Vendor peaks are leads for the roofline until the gemm workload has measured
this machine's own ceilings.
"""

from __future__ import annotations

import os
import platform
import re
import socket
from dataclasses import asdict, dataclass
from functools import lru_cache
from flybench import envvars


@dataclass(frozen=True)
class Peak:
    """Dense vendor figures: HBM TB/s, bf16 and fp8 TFLOP/s, last-level cache bytes."""

    hbm_tbs: float
    bf16_tflops: float
    fp8_tflops: float
    llc_bytes: int


# MI300X/MI325X/MI35xX: the Infinity Cache (256 MB) is the last level a flush must clear.
PEAKS: dict[str, Peak] = {
    "mi300x": Peak(5.3, 1307, 2615, 256 << 20),
    "mi325x": Peak(6.0, 1307, 2615, 256 << 20),
    "mi350x": Peak(8.0, 2307, 4614, 256 << 20),
    "mi355x": Peak(8.0, 2517, 5033, 256 << 20),
    "h200": Peak(4.8, 989, 1979, 60 << 20),
    "h100": Peak(3.35, 989, 1979, 50 << 20),
}


@dataclass(frozen=True)
class Device:
    """The accelerator flybench runs on (or the CPU), as recorded with every result."""

    kind: str  # "rocm", "cuda" or "cpu"
    arch: str  # "gfx942", "gfx950", "sm_90", "cpu"
    name: str  # marketing name as the driver reports it
    accelerator: str  # short tag for the machine name: "gfx942", "h200", "cpu"
    driver: str
    torch_device: str  # "cuda" (also on ROCm) or "cpu"

    @property
    def peak(self) -> Peak | None:
        return _peak_for(self.name)

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


def _peak_for(name: str) -> Peak | None:
    lowered = name.lower().replace(" ", "")
    for key, peak in PEAKS.items():
        if key in lowered:
            return peak
    return None


@lru_cache(maxsize=1)
def detect() -> Device:
    """Detect the first GPU through torch; the CPU when torch sees none.

    FLYBENCH_DEVICE=cpu forces the CPU (useful on a GPU machine for tests).
    """
    import torch

    if os.environ.get(envvars.DEVICE) == "cpu" or not torch.cuda.is_available():
        return Device("cpu", "cpu", platform.processor() or platform.machine(), "cpu", "", "cpu")
    props = torch.cuda.get_device_properties(0)
    if torch.version.hip:
        arch = props.gcnArchName.split(":")[0]
        return Device("rocm", arch, props.name, arch, f"hip {torch.version.hip}", "cuda")
    arch = f"sm_{props.major}{props.minor}"
    accelerator = _nvidia_tag(props.name) or arch
    return Device("cuda", arch, props.name, accelerator, f"cuda {torch.version.cuda}", "cuda")


def memory_bytes(device: Device) -> int | None:
    """The device's memory in bytes (None on the CPU): what a case's memory estimate is weighed against."""
    if device.kind == "cpu":
        return None
    import torch

    return int(torch.cuda.get_device_properties(0).total_memory)


@dataclass(frozen=True)
class Gpu:
    """One GPU of this node as torch numbers it (after any *_VISIBLE_DEVICES the user set)."""

    index: int
    name: str
    uuid: str  # "GPU-<uuid>", as nvidia-smi -L prints it; "" when torch gives none


def gpus(device: Device, torch_cuda=None) -> list[Gpu]:
    """Every GPU of this node; FLYBENCH_FAKE_GPUS=N makes N stand-ins of the CPU (tests deal CPU cases to them).

    The UUID comes from torch's device properties (`uuid`: a `_CUuuid` whose str is the hex UUID), the same API
    `detect` reads, so that a GPU that turns out slow can be found again on the node after a reboot renumbers it.
    """
    fake = os.environ.get(envvars.FAKE_GPUS)
    if fake:
        if not fake.isdigit() or int(fake) < 1:
            raise ValueError(f"{envvars.FAKE_GPUS}={fake!r}: give a whole number of stand-in GPUs, 1 or more")
        return [Gpu(i, device.name, f"FAKE-{i}") for i in range(int(fake))]
    if device.kind == "cpu":
        return []
    if torch_cuda is None:
        import torch

        torch_cuda = torch.cuda
    found = []
    for i in range(torch_cuda.device_count()):
        props = torch_cuda.get_device_properties(i)
        found.append(Gpu(i, str(props.name), _uuid_text(getattr(props, "uuid", None))))
    return found


def _uuid_text(value) -> str:
    """`GPU-xxxxxxxx-xxxx-...`: torch's UUID (a `_CUuuid`, text, or 16 bytes) in the vendor tools' spelling."""
    if value is None:
        return ""
    if isinstance(value, (bytes, bytearray)):
        text = value.hex()
    else:
        text = str(value).strip()
        if text.startswith("GPU-"):
            return text
    digits = re.sub(r"[^0-9a-fA-F]", "", text).lower()
    if len(digits) != 32:
        return text
    return f"GPU-{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


def _nvidia_tag(name: str) -> str:
    match = re.search(r"\b([A-Z]\d{2,3}[A-Z]?)\b", name)
    return match.group(1).lower() if match else ""


def llc_bytes(device: Device) -> int:
    """Bytes of last-level cache that a flush buffer must exceed."""
    if device.peak is not None:
        return device.peak.llc_bytes
    if device.kind == "cpu":
        return 0
    import torch

    return int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 256 << 20))


def fp8_dtype_name(arch: str) -> str:
    """gfx942 uses the fnuz flavour of e4m3; gfx950, NVIDIA and the CPU use OCP e4m3fn."""
    return "float8_e4m3fnuz" if arch == "gfx942" else "float8_e4m3fn"


def machine_name(device: Device | None = None) -> str:
    """asv machine name: `<host>-<accelerator>`, e.g. `ci7-gfx942`, `box-h200`, `laptop-cpu`."""
    device = device or detect()
    host = re.sub(r"[^A-Za-z0-9_.-]", "-", socket.gethostname().split(".")[0]) or "host"
    return f"{host}-{device.accelerator}"


LOADED = 0.75
"""A machine whose 1-minute load average is at or above this share of its cores is busy with other work."""


def warn_if_busy(when: str) -> None:
    """Say when other work keeps this machine's cores busy: a timing taken then is slower and noisier (a run at a
    load of 8-13 on two cores timed one case's bf16 and fp16 40x apart), and nothing in the results says so."""
    load = os.getloadavg()[0]
    cores = len(os.sched_getaffinity(0))
    if load >= LOADED * cores:
        print(f"warning: this machine is busy {when}: load average {load:.1f} on {cores} core(s). Timings taken "
              "now are slower and noisier than on an idle machine; measure again when it is idle before reading "
              "them as the kernels' speed.", flush=True)
