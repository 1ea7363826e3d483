"""Roofline denominators (the machine's measured ceilings, else the vendor's peak figures) and the rates of a time.

Measured ceilings come from the gemm workload (large GEMM, device copy) and are
read from the JSON file named by FLYBENCH_CEILINGS: {"bf16_tflops": ..,
"fp8_tflops": .., "hbm_tbs": ..}. Which basis was used is recorded.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from flybench import envvars
from flybench.errors import FlybenchError
from flybench.hardware import Device


def ceilings(device: Device) -> tuple[dict[str, float], str]:
    """(ceilings, basis) where basis is "measured:<file>", "vendor" or "none"."""
    path = os.environ.get(envvars.CEILINGS)
    if path:
        try:
            return {k: float(v) for k, v in json.loads(Path(path).read_text()).items()}, f"measured:{path}"
        except (OSError, ValueError, AttributeError) as exc:
            raise FlybenchError(f"{envvars.CEILINGS}={path}: cannot read ceilings ({exc}); "
                                "give a JSON object like {\"bf16_tflops\": 790, \"hbm_tbs\": 4.3}") from exc
    peak = device.peak
    if peak is None:
        return {}, "none"
    return {"bf16_tflops": peak.bf16_tflops, "fp8_tflops": peak.fp8_tflops, "hbm_tbs": peak.hbm_tbs}, "vendor"


def floor_s(flops: float, nbytes: float, dtype: str, device: Device) -> float | None:
    """The roofline's time floor: the slower of doing the FLOPs at the matrix rate and moving the bytes."""
    peaks, _ = ceilings(device)
    rate = peaks.get("fp8_tflops" if dtype == "fp8" else "bf16_tflops")
    bandwidth = peaks.get("hbm_tbs")
    if not rate or not bandwidth:
        return None
    return max(flops / (rate * 1e12), nbytes / (bandwidth * 1e12))


def rates(flops: float | None, nbytes: float | None, floor: float | None,
          seconds: float | None) -> tuple[float | None, float | None, float | None]:
    """(TFLOP/s, GB/s, fraction of roofline) of one call taking `seconds`: the facts derived from a time.

    The measurement writes them into the case record and the store derives
    them again from asv's stored time, with this one function.
    """
    if not seconds or seconds <= 0 or seconds != seconds:
        return None, None, None
    return (flops / seconds / 1e12 if flops else None, nbytes / seconds / 1e9 if nbytes else None,
            floor / seconds if floor else None)
