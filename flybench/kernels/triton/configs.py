"""Which configuration of a Triton kernel runs a case on an architecture.

The numbers live in `config_table.TABLE`, not in autotune decorators: a run is
reproducible (the same case always compiles the same kernel), nothing is tuned
inside a timed benchmark, and compile-only resource metrics compile exactly the
configurations that run. `flybench.kernels.triton.tune` refreshes the table on
a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flybench.errors import FlybenchError
from flybench.kernels.triton.config_table import TABLE

LAUNCH_OPTIONS = ("num_warps", "num_stages", "waves_per_eu", "matrix_instr_nonkdim", "kpack")
"""Entry keys that are Triton launch options rather than kernel constants."""
BUCKET_KEYS = ("max_rows", "max_tokens")


@dataclass(frozen=True)
class Config:
    """One table entry split by role: kernel constants, launch options, host-side planning values."""

    constexprs: dict[str, int]
    options: dict[str, int]
    host: dict[str, int]

    @classmethod
    def from_entry(cls, entry: dict[str, Any]) -> Config:
        constexprs = {k: v for k, v in entry.items() if k.isupper()}
        options = {k: v for k, v in entry.items() if k in LAUNCH_OPTIONS}
        host = {k: v for k, v in entry.items() if not k.isupper() and k not in LAUNCH_OPTIONS and k not in BUCKET_KEYS}
        return cls(constexprs, options, host)

    def label(self) -> str:
        """Short text naming the configuration, e.g. 'BLOCK_M=64,BLOCK_N=64,num_warps=4,num_stages=3'."""
        return ",".join(f"{k}={v}" for k, v in {**self.constexprs, **self.options}.items())


def table_arch(arch: str) -> str:
    """The table key for a device architecture: itself, else the same vendor's tuned sibling.

    An sm_80 or sm_100 GPU runs the sm_90 entry and an unlisted CDNA part the gfx942
    entry; they compile and run, just not at configurations chosen for them.
    """
    if arch in TABLE:
        return arch
    if arch.startswith("sm_"):
        return "sm_90"
    if arch.startswith("gfx9"):
        return "gfx942"
    raise FlybenchError(f"no Triton kernel configuration for architecture {arch!r}; "
                        f"the table has {', '.join(TABLE)} (flybench/kernels/triton/config_table.py)")


def entries(arch: str, workload: str, dtype: str) -> list[dict[str, Any]]:
    """The ordered bucket entries configuring `workload` in `dtype` on `arch`."""
    table = TABLE[table_arch(arch)][workload]
    return table[dtype] if isinstance(table, dict) else table


def bucket_index(entries_: list[dict[str, Any]], size: int) -> int:
    """Index of the first entry whose bound admits `size` (entries are ordered, the last unbounded)."""
    for index, entry in enumerate(entries_):
        bound = next(entry[k] for k in BUCKET_KEYS if k in entry)
        if bound is None or size <= bound:
            return index
    raise FlybenchError(f"the configuration table has no bucket for size {size}; its last entry needs a None bound")


def attention_config(arch: str, rows: int) -> Config:
    """Diffusion attention: `rows` is query rows per KV head (GQA group size x draft tokens)."""
    table = entries(arch, "diffusion_attention", "")
    return Config.from_entry(table[bucket_index(table, rows)])


def moe_config(arch: str, dtype: str, tokens: int) -> Config:
    """Fused MoE for `tokens` tokens in `dtype` ("bf16" or "fp8")."""
    table = entries(arch, "moe", dtype)
    return Config.from_entry(table[bucket_index(table, tokens)])


def compute_units(arch: str) -> int:
    """CUs/SMs of the architecture's reference part: used to plan splits when no device is asked."""
    return int(TABLE[table_arch(arch)]["compute_units"])


def provenance(arch: str) -> str:
    """Where the architecture's numbers come from (hand-picked or tuned, on what)."""
    return str(TABLE[table_arch(arch)]["provenance"])
