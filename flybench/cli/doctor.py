"""`flybench doctor`: what this machine has for flybench, and what each missing piece disables.

Every line is a check: found (with version or path) or missing, and for a
missing piece the sentence a user can act on: what it disables and how to
get it. Nothing is changed; `--compile` additionally compiles flybench's own
FlyDSL and Triton kernels for gfx942 (a real end-to-end check of the compile
toolchain, about half a minute on a CPU).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    disables: str = ""


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "doctor", help="report ROCm, GPUs, FlyDSL, Triton, the compile toolchain, JAX, AITER",
        description="Check what this machine can measure and compile: the GPU and its driver, ROCm or CUDA, "
                    "torch, Triton, FlyDSL (installed or --flydsl-src), the compile toolchain, JAX and AITER, and "
                    "what each missing piece disables, with the command that installs it. Exit status: 0 (a "
                    "report, whatever it finds), 2 bad input.")
    parser.add_argument("--flydsl-src", default=None, help="FlyDSL source checkout (default: $FLYBENCH_FLYDSL_SRC)")
    parser.add_argument("--compile", action="store_true", help="also compile flybench's own kernels for gfx942")
    parser.add_argument("--json", action="store_true", help="print the checks as JSON")
    return parser


def main(args: argparse.Namespace) -> int:
    checks = run_checks(args.flydsl_src, compile_check=args.compile)
    if args.json:
        print(json.dumps([asdict(c) for c in checks], indent=1))
    else:
        _print(checks)
    return 0


def run_checks(flydsl_src: str | None = None, compile_check: bool = False) -> list[Check]:
    """All checks, in the order a user would fix them."""
    checks = [_torch(), *_gpus(), _package("flydsl", "FlyDSL kernels can be neither compiled nor run: "
                                                     "pip install -e '.[compile]'"),
              _checkout(flydsl_src), _triton(), _toolkit(),
              _package("jax", "the xla provider (JAX/XLA baselines) cannot run: pip install -e '.[jax]'"),
              _spec("aiter", "the ck provider (Composable Kernel through AITER) cannot run; AITER needs ROCm"),
              _package("asv", "flybench run cannot run the suites: pip install -e '.[bench]'"),
              _package("duckdb", "flybench ingest/compare/regressions cannot store results: pip install -e '.[store]'"),
              _package("streamlit", "the dashboard cannot start: pip install -e '.[dashboard]'")]
    if compile_check:
        checks += _compile_own()
    return checks


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _package(name: str, disables: str) -> Check:
    found = _version(name)
    return Check(name, found is not None, found or "not installed", "" if found else disables)


def _spec(name: str, disables: str) -> Check:
    from importlib.util import find_spec

    found = find_spec(name) is not None
    return Check(name, found, _version(name) or ("installed" if found else "not installed"), "" if found else disables)


def _torch() -> Check:
    if _version("torch") is None:
        return Check("torch", False, "not installed", "no workload, provider or FlyDSL compile can run: install torch "
                                                      "(the CPU build is enough for tests and compile-only metrics)")
    import torch

    build = f"ROCm {torch.version.hip}" if torch.version.hip else f"CUDA {torch.version.cuda}" if torch.version.cuda \
        else "CPU build"
    return Check("torch", True, f"{torch.__version__} ({build})")


def _gpus() -> list[Check]:
    checks = []
    rocm = os.environ.get("ROCM_PATH") or ("/opt/rocm" if Path("/opt/rocm").is_dir() else None)
    checks.append(Check("ROCm", rocm is not None, rocm or "no ROCM_PATH and no /opt/rocm",
                        "" if rocm else "ROCm-only providers (FlyDSL runtime, CK, rocBLAS/hipBLASLt) cannot run here; "
                                        "compile-only metrics for gfx942/gfx950 still work"))
    devices = []
    if _version("torch") is not None:
        import torch

        if torch.cuda.is_available():
            devices = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    tools = [t for t in ("amd-smi", "rocm-smi", "nvidia-smi") if shutil.which(t)]
    listed = f" (tools: {', '.join(tools)})" if tools else ""
    detail = ", ".join(devices) if devices else f"none visible to torch{listed}"
    checks.append(Check("GPUs", bool(devices), detail, "" if devices else
                        "device timing cannot run here (CPU timing of the tiny set and compile-only metrics "
                        "still work)"))
    return checks


def _checkout(explicit: str | None) -> Check:
    from flybench import envvars
    from flybench.compile.runner import NO_CHECKOUT, checkout_path

    path = checkout_path(explicit)
    if path is None:
        return Check("FlyDSL checkout", False, "not given", f"{NO_CHECKOUT}; without it those kernels are reported "
                                                            "unavailable")
    if not (path / "kernels" / "attention").is_dir():
        return Check("FlyDSL checkout", False, f"{path}: no kernels/attention there",
                     f"{path} is not a FlyDSL source checkout: point {envvars.FLYDSL_SRC} or --flydsl-src at one")
    try:
        head = subprocess.run(["git", "-C", str(path), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        head = ""
    return Check("FlyDSL checkout", True, f"{path}" + (f" at {head}" if head else " (not a git work tree)"))


def _triton() -> Check:
    from flybench.compile.toolchain import package_dir

    root = package_dir("triton")
    if root is None:
        return Check("triton", False, "not installed", "Triton kernels cannot be compiled (and FlyDSL kernels that use "
                                                       "math lose their bitcode): pip install -e '.[compile]'")
    parts = [_version("triton") or "?"]
    parts.append("AMD backend" if (root / "backends" / "amd").is_dir() else "no AMD backend")
    parts.append("ptxas" if (root / "backends" / "nvidia" / "bin" / "ptxas").is_file() else "no ptxas")
    return Check("triton", True, ", ".join(parts))


def _toolkit() -> Check:
    from flybench.compile import cache, toolchain

    toolkit = toolchain.rocm_root(cache.cache_root())
    if not toolkit.usable:
        return Check("compile toolchain", False, "no ld.lld", "; ".join(toolkit.problems))
    lld = toolchain.lld_version(toolkit.root) or "ld.lld does not run"
    detail = f"{toolkit.origin}: {toolkit.root} ({lld})"
    return Check("compile toolchain", not toolkit.problems and "LLD" in lld, detail, "; ".join(toolkit.problems))


def _compile_own() -> list[Check]:
    from flybench.compile.registry import get_case
    from flybench.compile.runner import measure

    checks = []
    for record in measure([(get_case(n), "gfx942") for n in ("flydsl_vector_add", "triton_vector_add")]):
        ok = record.status == "ok" and not record.suspect
        detail = (f"{record.metrics.get('vgprs')} VGPRs, {record.metrics.get('code_size')} bytes of code"
                  if record.status == "ok" else f"{record.status}: {record.reason}")
        checks.append(Check(f"compile {record.kernel} (gfx942)", ok, detail, "" if ok else "; ".join(record.suspect)))
    return checks


def _print(checks: list[Check]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title="flybench doctor", show_lines=False)
    for column in ("check", "", "found", "if missing"):
        table.add_column(column, overflow="fold")
    for c in checks:
        table.add_row(c.name, "[green]ok[/]" if c.ok else "[red]missing[/]", Text(c.detail), Text(c.disables))
    Console().print(table)
