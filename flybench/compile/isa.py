"""Reading AMDGPU assembly as LLVM prints it: per-kernel metadata and instruction counts.

The compilers (FlyDSL's ROCDL pipeline, Triton's AMD backend) both emit the
same textual ISA: one function body per kernel (`name:` ... `.Lfunc_end`),
`.set .L<name>.num_vgpr` style resource symbols (LLVM 19 and later), and an
`.amdgpu_metadata` YAML block with the numbers the runtime uses. Those
numbers are read here without a YAML library: the block is regular (scalars
at a fixed indent, one list entry per kernel), and PyYAML is not a
dependency of flybench.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

_METADATA = re.compile(r"\.amdgpu_metadata\s*\n(.*?)\.end_amdgpu_metadata", re.DOTALL)
_ENTRY_KEY = re.compile(r"^(?:  - |    )\.([a-z_]+):\s*(\S.*)?$")
_SET = re.compile(r"^\s*\.set\s+\.L(?P<sym>[\w.$]+)\.(?P<key>num_vgpr|num_agpr|numbered_sgpr),\s*(?P<val>\d+)\s*$",
                  re.MULTILINE)
_MNEMONIC = re.compile(r"^\s+([a-z][a-z0-9_]*)\b")
STORE_PREFIXES = ("buffer_store", "global_store", "flat_store", "buffer_atomic", "global_atomic", "flat_atomic")
"""Instructions that make a kernel's work visible outside it (scratch stores do not)."""


MIX = (
    ("mfma", ("v_mfma", "v_smfmac")),
    ("waitcnt", ("s_waitcnt",)),
    ("branch", ("s_branch", "s_cbranch", "s_setpc", "s_swappc")),
    ("smem", ("s_load", "s_buffer_load", "s_store", "s_buffer_store", "s_scratch", "s_dcache")),
    ("vmem", ("buffer_", "global_", "flat_", "scratch_")),
    ("lds", ("ds_",)),
    ("valu", ("v_",)),
    ("salu", ("s_",)),
)
"""AMDGPU instruction classes by mnemonic prefix, in the order they are tried."""


@dataclass
class AmdKernel:
    """What the ISA says about one kernel symbol."""

    symbol: str
    vgpr_count: int | None = None  # .vgpr_count: on gfx90a+ the unified VGPR+AGPR allocation
    agpr_count: int | None = None
    arch_vgprs: int | None = None  # .set .L<sym>.num_vgpr (architectural VGPRs alone)
    sgpr_count: int | None = None
    lds_static_bytes: int | None = None
    scratch_bytes: int | None = None
    vgpr_spills: int | None = None
    sgpr_spills: int | None = None
    workgroup_size: int | None = None
    wavefront_size: int | None = None
    mnemonics: Counter = field(default_factory=Counter)

    @property
    def instructions(self) -> int:
        return sum(self.mnemonics.values())

    @property
    def mfma(self) -> dict[str, int]:
        """MFMA (and sparse SMFMAC) instructions by mnemonic: the matrix-core work of the kernel."""
        return {m: n for m, n in sorted(self.mnemonics.items()) if m.startswith(("v_mfma", "v_smfmac"))}

    @property
    def mix(self) -> dict[str, int]:
        """The static instruction mix: every instruction counted once, in the first class of MIX its mnemonic
        starts with (MFMA before VALU, waits and branches before SALU), "other" when none."""
        counts = dict.fromkeys([name for name, _ in MIX] + ["other"], 0)
        for mnemonic, n in self.mnemonics.items():
            counts[next((name for name, prefixes in MIX if mnemonic.startswith(prefixes)), "other")] += n
        return counts

    @property
    def ds_read_b64_tr(self) -> int:
        """gfx950's transpose-on-read LDS loads (ds_read_b64_tr_b4/b8/b16)."""
        return sum(n for m, n in self.mnemonics.items() if m.startswith("ds_read_b64_tr"))

    @property
    def stores(self) -> int:
        return sum(n for m, n in self.mnemonics.items() if m.startswith(STORE_PREFIXES))

    @property
    def vgprs(self) -> int | None:
        """Architectural VGPRs; without the `.set` symbol, the unified count minus AGPRs (exact when no AGPRs)."""
        if self.arch_vgprs is not None:
            return self.arch_vgprs
        if self.vgpr_count is None:
            return None
        return self.vgpr_count - (self.agpr_count or 0)


def parse_amdgpu_isa(text: str) -> dict[str, AmdKernel]:
    """Every kernel described in the metadata block of `text`, by symbol name, with its instruction mix."""
    kernels = {k.symbol: k for k in _metadata_entries(text)}
    for match in _SET.finditer(text):
        kernel = kernels.get(match["sym"])
        if kernel is not None and match["key"] == "num_vgpr":
            kernel.arch_vgprs = int(match["val"])
    for symbol, kernel in kernels.items():
        kernel.mnemonics = count_mnemonics(function_body(text, symbol))
    return kernels


def function_body(text: str, symbol: str) -> list[str]:
    """The lines from `symbol:` up to its `.Lfunc_end` label (empty if the symbol has no body here)."""
    lines = text.splitlines()
    label = f"{symbol}:"
    start = next((i for i, line in enumerate(lines) if line.split(";", 1)[0].strip() == label), None)
    if start is None:
        return []
    body = []
    for line in lines[start + 1:]:
        if line.startswith(".Lfunc_end"):
            break
        body.append(line)
    return body


def count_mnemonics(lines: list[str]) -> Counter:
    """Instruction mnemonics of a function body; labels, directives and comments are not instructions."""
    found: Counter = Counter()
    for line in lines:
        match = _MNEMONIC.match(line.split(";", 1)[0])
        if match:
            found[match[1]] += 1
    return found


def _metadata_entries(text: str) -> list[AmdKernel]:
    block = _METADATA.search(text)
    if not block:
        return []
    entries: list[dict[str, str]] = []
    in_kernels = False
    for line in block[1].splitlines():
        if not line.startswith(" "):
            in_kernels = line.startswith("amdhsa.kernels:")
            continue
        if not in_kernels:
            continue
        if line.startswith("  - "):
            entries.append({})
        match = _ENTRY_KEY.match(line)
        if match and entries:
            entries[-1][match[1]] = (match[2] or "").strip().strip("'\"")
    return [_kernel(entry) for entry in entries if "name" in entry]


def _kernel(entry: dict[str, str]) -> AmdKernel:
    def number(key: str) -> int | None:
        value = entry.get(key)
        return int(value) if value is not None and value.lstrip("-").isdigit() else None

    return AmdKernel(
        symbol=entry["name"], vgpr_count=number("vgpr_count"), agpr_count=number("agpr_count"),
        sgpr_count=number("sgpr_count"), lds_static_bytes=number("group_segment_fixed_size"),
        scratch_bytes=number("private_segment_fixed_size"), vgpr_spills=number("vgpr_spill_count"),
        sgpr_spills=number("sgpr_spill_count"), workgroup_size=number("max_flat_workgroup_size"),
        wavefront_size=number("wavefront_size"),
    )


def suspicions(kernel: AmdKernel, code_size: int | None) -> list[str]:
    """Reasons to believe a kernel compiled to something that cannot be doing its job.

    A kernel whose math the backend could not lower was seen compiling to a
    bare `s_endpgm` (or to code that stores without ever loading) with a
    zero exit status; only its size or instruction mix gives it away.
    """
    reasons = []
    if kernel.instructions <= 1 or (code_size is not None and code_size <= 8):
        reasons.append(f"{kernel.symbol} is a bare s_endpgm ({kernel.instructions} instruction(s), "
                       f"{code_size if code_size is not None else '?'} bytes of code): suspected miscompile")
    elif kernel.stores == 0:
        reasons.append(f"{kernel.symbol} has no store or atomic instruction, so it cannot write any result: "
                       "suspected miscompile")
    return reasons


DEBUG_DIRECTIVES = (".file", ".loc", ".cfi_", ".section\t.debug", ".section .debug", "$L__", ".Ltmp", ".Lfunc_end",
                    ".Ldebug", ".Linfo", ".Lsection", "@DEBUG_VALUE", "DEBUG_VALUE")
"""Lines of an ISA or PTX listing that say where the code came from, not what it is."""


def code_lines(text: str) -> list[str]:
    """The machine code of an ISA (AMDGPU) or PTX listing alone, a line each with its newline: debug sections and
    line directives name the checkout the code was built from, and comments echo source lines, so they go. Two
    compiles emitted the same code when these lines are equal (the gate's ISA diff, the machine code history)."""
    kept, in_debug = [], False
    for raw in text.splitlines():
        line = raw.split(";", 1)[0].split("//", 1)[0].rstrip()
        word = line.strip()
        if word.startswith((".section", ".text")):
            in_debug = ".debug" in word
        if in_debug:
            in_debug = word != "}"  # a PTX debug section's block ends here
        elif word and not word.startswith(DEBUG_DIRECTIVES):
            kept.append(line + "\n")
    return kept
