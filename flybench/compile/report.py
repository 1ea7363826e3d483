"""Compile records as tables: markdown for docs and PR comments, JSON for tools."""

from __future__ import annotations

import json
from dataclasses import asdict

from flybench.compile.record import CompileRecord

AMD_COLUMNS = ("kernel", "arch", "VGPR", "AGPR", "SGPR", "LDS static", "LDS dyn", "scratch", "spills v/s",
               "waves/SIMD", "MFMA", "ds_read_b64_tr", "code B", "compile s")
NVIDIA_COLUMNS = ("kernel", "arch", "regs", "spill B", "smem static", "smem dyn", "code B", "compile s")


def _n(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.2f}" if value < 100 else f"{value:.0f}"
    return str(int(value)) if isinstance(value, float) else str(value)


def _amd_row(r: CompileRecord) -> list[str]:
    m, kernel = r.metrics, r.kernels.get(r.primary or "", {})
    limiters = kernel.get("occupancy_limiters") or []
    kinds = ", ".join(f"{n}x {k.removeprefix('v_mfma_')}" for k, n in (kernel.get("mfma_by_kind") or {}).items())
    return [r.kernel, r.arch, _n(m.get("vgprs")), _n(m.get("agprs")), _n(m.get("sgprs")), _n(m.get("lds_static")),
            _n(m.get("lds_dynamic")), _n(m.get("scratch")), f"{_n(m.get('vgpr_spills'))}/{_n(m.get('sgpr_spills'))}",
            f"{_n(m.get('occupancy'))} ({'+'.join(limiters)})" if limiters else _n(m.get("occupancy")),
            f"{_n(m.get('mfma'))}" + (f" ({kinds})" if kinds else ""), _n(m.get("ds_read_b64_tr")),
            _n(m.get("code_size")), _n(m.get("compile_time"))]


def _nvidia_row(r: CompileRecord) -> list[str]:
    m = r.metrics
    return [r.kernel, r.arch, _n(m.get("registers")), _n(m.get("spill_bytes")), _n(m.get("smem_static")),
            _n(m.get("smem_dynamic")), _n(m.get("code_size")), _n(m.get("compile_time"))]


def _table(columns: tuple[str, ...], rows: list[list[str]]) -> list[str]:
    return [f"| {' | '.join(columns)} |", f"|{'|'.join(' --- ' for _ in columns)}|",
            *(f"| {' | '.join(row)} |" for row in rows)]


def markdown(records: list[CompileRecord]) -> str:
    """Tables of the compiled kernels (AMD, then NVIDIA), then what was not compiled and why, then suspicions."""
    ok = [r for r in records if r.status == "ok"]
    amd = [_amd_row(r) for r in ok if not r.arch.startswith("sm_")]
    nvidia = [_nvidia_row(r) for r in ok if r.arch.startswith("sm_")]
    lines: list[str] = []
    if amd:
        lines += _table(AMD_COLUMNS, amd) + [""]
    if nvidia:
        lines += _table(NVIDIA_COLUMNS, nvidia) + [""]
    others = [r for r in records if r.status != "ok"]
    if others:
        lines += ["Not compiled:", ""] + [f"- {r.kernel} on {r.arch}: {r.status.replace('_', ' ')}: {r.reason}"
                                          for r in others] + [""]
    suspects = [(r, s) for r in ok for s in r.suspect]
    if suspects:
        lines += ["Suspected miscompiles:", ""] + [f"- {r.kernel} on {r.arch}: {s}" for r, s in suspects] + [""]
    return "\n".join(lines).rstrip() + "\n"


def to_json(records: list[CompileRecord]) -> str:
    return json.dumps([asdict(r) for r in records], indent=1, sort_keys=True)
