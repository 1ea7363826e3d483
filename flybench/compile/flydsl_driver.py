"""Compile one FlyDSL case inside a worker and read its dumped ISA (the worker set the target environment).

FlyDSL's IR dump (FLYDSL_DUMP_IR=1) writes every pipeline stage of every
compiled module under FLYDSL_DUMP_DIR/<kernel or launcher name>/; three of
the stages are read: `*_final_isa.s` (the ISA and its metadata),
`*_gpu_module_to_binary.mlir` (the linked code object, for code size) and
`00_origin.mlir` (the launch, for dynamic LDS). The dump directory is fresh
per compile, so nothing of an earlier compile is read by mistake.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from flybench.compile import capture
from flybench.compile.amd import describe_module
from flybench.compile.elf import binaries_in_mlir
from flybench.compile.record import CompileRecord
from flybench.compile.registry import KernelCase


def prepare(case: KernelCase, checkout: str | None) -> None:
    """Imports that must not count as compile time: flydsl, torch, and the checkout's kernel module."""
    if checkout and checkout not in sys.path:
        sys.path.insert(0, checkout)
    import flydsl.compiler
    import flydsl.expr  # noqa: F401
    import torch

    if case.module:
        import importlib

        current = torch.cuda.current_stream  # a module may take a default stream at import (hgemm_splitk's host
        torch.cuda.current_stream = lambda device=None: None  # wrapper did), which raises where torch has no GPU
        try:
            importlib.import_module(case.module.removesuffix(".py").replace("/", "."))
        finally:
            torch.cuda.current_stream = current


def warm_up(log: Path) -> None:
    """Compile an empty kernel for the worker's target, untimed, with the dump going to a scratch directory."""
    import flydsl.compiler as flyc
    import flydsl.expr as fx
    import torch

    @flyc.kernel
    def flybench_warm_up_kernel(A: fx.Tensor):
        pass

    @flyc.jit
    def flybench_warm_up(A: fx.Tensor, stream: fx.Stream = fx.Stream(None)):
        flybench_warm_up_kernel(A).launch(grid=(1, 1, 1), block=[64, 1, 1], stream=stream)

    dump = Path(tempfile.mkdtemp(prefix="flybench-flydsl-warmup-"))
    os.environ["FLYDSL_DUMP_DIR"] = str(dump)
    try:
        with capture.captured_output(log):
            flyc.compile(flybench_warm_up, torch.empty(64, dtype=torch.float32, device="meta"))
    finally:
        shutil.rmtree(dump, ignore_errors=True)


def compile_case(case: KernelCase, arch: str, checkout: str | None, log: Path) -> tuple[CompileRecord, dict[str, str]]:
    """Compile, time and parse one case; every failure becomes a "failed" record, never an exception."""
    from flybench.compile import flydsl_upstream

    record = CompileRecord(case.name, arch, "failed", config=case.config)
    dump = Path(tempfile.mkdtemp(prefix="flybench-flydsl-dump-"))
    os.environ["FLYDSL_DUMP_DIR"] = str(dump)
    flydsl_upstream.DROPPED.clear()
    error = None
    try:
        with capture.captured_output(log):
            prepare(case, checkout)
            entry = capture.load_entry(case.entry)
            start = time.perf_counter()
            try:
                entry(dict(case.config))
            finally:
                record.compile_time_s = round(time.perf_counter() - start, 3)
    except Exception as exc:
        error = capture.failure_reason(exc)
    printed = log.read_text(errors="replace") if log.exists() else ""
    record.diagnostics = capture.diagnostics(printed) + [f"ignored: {d}" for d in flydsl_upstream.DROPPED]
    try:
        files = _read_dump(record, dump, arch, case.primary) if error is None else {}
    finally:
        shutil.rmtree(dump, ignore_errors=True)
    if error is not None:
        errors = capture.errors_in(record.diagnostics)
        record.reason = error + (f"; compiler said: {errors[0]}" if errors else "")
        return record, {}
    return record, files


def _read_dump(record: CompileRecord, dump: Path, arch: str, primary: str) -> dict[str, str]:
    isa_files = sorted(dump.rglob("*final_isa.s"))
    if not isa_files:
        record.reason = f"the compile returned but dumped no ISA under {dump} (is FLYDSL_DUMP_IR honoured?)"
        return {}
    texts = []
    for isa in isa_files:
        stage_dir = isa.parent
        objects = [b for p in stage_dir.glob("*gpu_module_to_binary.mlir") for b in binaries_in_mlir(p.read_text())]
        origin = stage_dir / "00_origin.mlir"
        launch_ir = origin.read_text() if origin.exists() else ""
        kernels, suspect = describe_module(isa.read_text(), arch, objects, launch_ir)
        record.kernels.update(kernels)
        record.suspect += suspect
        texts.append(f"; ---- flybench: {stage_dir.name} ----\n{isa.read_text()}")
    finish(record, primary)
    return {"kernel.s": "\n".join(texts)}


def finish(record: CompileRecord, primary_hint: str = "") -> None:
    """Pick the reported kernel, fill the tracked metrics, and turn printed compiler errors into suspicion."""
    if not record.kernels:
        record.status, record.reason = "failed", "the code object has no kernel metadata (no .amdgpu_metadata)"
        return
    record.primary = _primary(record.kernels, primary_hint)
    record.metrics = {k: v for k, v in record.kernels[record.primary].items() if isinstance(v, (int, float))}
    record.metrics["compile_time"] = record.compile_time_s
    record.suspect += [f"the compiler printed an error yet produced code: {line}"
                       for line in capture.errors_in(record.diagnostics)]
    record.status, record.reason = "ok", None


def _primary(kernels: dict[str, dict[str, Any]], hint: str) -> str:
    named = [s for s in kernels if hint and hint in s]
    if named:
        return named[0]
    return max(kernels, key=lambda s: (kernels[s].get("instructions") or 0, s))
