"""Roofline denominators: the machine's measured ceilings, else the vendor's peak figures.

Measured ceilings come from the gemm workload (large GEMM, device copy) and are
read from the JSON file named by FLYBENCH_CEILINGS: {"bf16_tflops": ..,
"fp8_tflops": .., "hbm_tbs": ..}. Which basis was used is recorded.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from flybench.errors import FlybenchError
from flybench.hardware import Device


def ceilings(device: Device) -> tuple[dict[str, float], str]:
    """(ceilings, basis) where basis is "measured:<file>", "vendor" or "none"."""
    path = os.environ.get("FLYBENCH_CEILINGS")
    if path:
        try:
            return {k: float(v) for k, v in json.loads(Path(path).read_text()).items()}, f"measured:{path}"
        except (OSError, ValueError, AttributeError) as exc:
            raise FlybenchError(f"FLYBENCH_CEILINGS={path}: cannot read ceilings ({exc}); "
                                "give a JSON object like {\"bf16_tflops\": 790, \"hbm_tbs\": 4.3}") from exc
    peak = device.peak
    if peak is None:
        return {}, "none"
    return {"bf16_tflops": peak.bf16_tflops, "fp8_tflops": peak.fp8_tflops, "hbm_tbs": peak.hbm_tbs}, "vendor"


def fraction(flops: float, nbytes: float, seconds: float, dtype: str, device: Device) -> float | None:
    """Time floor over measured time: 1.0 means the call ran at the roofline."""
    peaks, _ = ceilings(device)
    rate = peaks.get("fp8_tflops" if dtype == "fp8" else "bf16_tflops")
    bandwidth = peaks.get("hbm_tbs")
    if not rate or not bandwidth or seconds <= 0:
        return None
    floor = max(flops / (rate * 1e12), nbytes / (bandwidth * 1e12))
    return floor / seconds
