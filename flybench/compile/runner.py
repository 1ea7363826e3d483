"""Measure compile metrics: decide what can be compiled here, serve the cache, run workers for the rest.

Every (kernel, target) asked for yields a record, in order: "unavailable" or
"not_applicable" with a reason when it cannot or need not be compiled here,
the cached record when one exists for the same inputs, otherwise a fresh
compile. Fresh compiles are batched per (backend, target) into worker
processes (`flybench.compile.worker`), up to one per CPU at a time; a
worker that dies or overruns the per-kernel timeout costs only the kernel
it was compiling, which is recorded as failed with that reason, and a new
worker takes the remaining jobs.
"""

from __future__ import annotations

import functools
import os
import subprocess
from dataclasses import asdict
from pathlib import Path
from collections.abc import Callable

from flybench import envvars
from flybench.compile import cache, hip_stub, sources, toolchain
from flybench.compile.record import CompileRecord
from flybench.compile.registry import ARCHES, OWN_FLYDSL_FILE, KernelCase, get_case
from flybench.compile.workers import Batch, run_batches

NO_CHECKOUT = (f"the FlyDSL checkout kernels need a FlyDSL source checkout (kernels/ is not in the flydsl wheel): "
               f"set {envvars.FLYDSL_SRC} or pass --flydsl-src")
TIMEOUT_S = 600.0
Progress = Callable[[str], None]


def checkout_path(explicit: str | Path | None = None) -> Path | None:
    value = explicit or os.environ.get(envvars.FLYDSL_SRC)
    return Path(value).expanduser().resolve() if value else None


def measure_one(name: str, arch: str, checkout: str | Path | None = None, force: bool = False) -> CompileRecord:
    """The record of one registered kernel on one target (compiling it if the cache lacks it)."""
    return measure([(get_case(name), arch)], checkout, force=force)[0]


def measure(requests: list[tuple[KernelCase, str]], checkout: str | Path | None = None, *, force: bool = False,
            parallel: int | None = None, timeout_s: float = TIMEOUT_S,
            progress: Progress | None = None) -> list[CompileRecord]:
    """Records for every (case, arch) in order; nothing here raises for a kernel's failure."""
    root, src = cache.cache_root(), checkout_path(checkout)
    toolkit = toolchain.rocm_root(root)
    results: list[CompileRecord | None] = []
    pending: dict[tuple[str, str], list[tuple[int, dict]]] = {}
    for index, (case, arch) in enumerate(requests):
        ready = _unavailable(case, arch, src, toolkit)
        job = _job(case, arch, src, toolkit, root) if ready is None else None
        cached = cache.load(root, case.name, arch, job["key"]) if job and not force else None
        results.append(ready or cached)
        if job and cached is None:
            pending.setdefault((case.backend, arch), []).append((index, job))
    if progress and pending:
        waiting = sum(len(items) for items in pending.values())
        progress(f"{len(requests) - waiting} of {len(requests)} compiles cached or unavailable; compiling {waiting}")
    batches = [Batch(backend, arch, [j for _, j in items], _environment(backend, arch, toolkit, src), timeout_s)
               for (backend, arch), items in pending.items()]
    run_batches(batches, parallel or os.cpu_count() or 1, root, progress)
    for (backend, arch), items in pending.items():
        for index, job in items:
            results[index] = cache.load(root, job["case"]["name"], arch, job["key"]) or CompileRecord(
                job["case"]["name"], arch, "failed", "the compile worker wrote no record (see its log)", key=job["key"])
    return [r for r in results if r is not None]


def _unavailable(case: KernelCase, arch: str, src: Path | None, toolkit: toolchain.Toolkit) -> CompileRecord | None:
    """A record when the case cannot or need not be compiled here; None when it can."""
    def record(status: str, reason: str) -> CompileRecord:
        return CompileRecord(case.name, arch, status, reason, config=case.config)

    if arch not in ARCHES:
        return record("failed", f"unknown target {arch!r}; known targets: {', '.join(ARCHES)}")
    if arch not in case.arches:
        why = case.not_applicable or ("FlyDSL generates AMDGPU code only" if case.backend == "flydsl"
                                      else f"registered for {', '.join(case.arches)} only")
        return record("not_applicable", why)
    packages = ("flydsl", "torch") if case.backend == "flydsl" else ("triton",)
    for package in packages:
        if toolchain.package_dir(package) is None:
            return record("unavailable", f"the Python package {package} is not installed, so {case.backend} kernels "
                                         f"cannot be compiled here ({toolchain.INSTALL}; for torch the CPU build "
                                         "is enough)")
    if case.backend == "flydsl" and not toolkit.usable:
        return record("unavailable", toolkit.problems[0])
    if case.origin == "checkout":
        if src is None:
            return record("unavailable", NO_CHECKOUT)
        if not (src / "kernels").is_dir():
            return record("unavailable", f"{src} is not a FlyDSL source checkout (it has no kernels/ directory): "
                                         f"point {envvars.FLYDSL_SRC} or --flydsl-src at one")
        if case.module and sources.module_file(src, case.module) is None:
            return record("unavailable", f"{case.module} does not exist in the checkout at {src} "
                                         "(the kernel is newer than, or was moved or removed before, this commit)")
    elif case.backend == "flydsl" and not (cache.ROOT / OWN_FLYDSL_FILE).is_file():
        return record("unavailable", f"{OWN_FLYDSL_FILE} is missing: flybench's own FlyDSL kernel ships in its "
                                     "source tree, not in an installed wheel")
    return None


def _job(case: KernelCase, arch: str, src: Path | None, toolkit: toolchain.Toolkit, root: Path) -> dict:
    source = _source(case, src)
    versions = toolchain.versions(toolkit if case.backend == "flydsl" else None)
    key = cache.make_key(case.name, arch, case.config, source["hash"], versions)
    return {"case": asdict(case), "arch": arch, "key": key, "cache_root": str(root), "toolchain": versions,
            "checkout": str(src) if case.origin == "checkout" else None, "source": source}


def source_files(case: KernelCase, src: Path | None, root: Path = cache.ROOT) -> list[Path]:
    """The files a kernel is built from: a checkout kernel's module and what it imports from `kernels`
    (`sources.kernel_sources`, in the checkout `src`), or the file of one of this repository's own (under `root`).
    They key its compile cache entry, and a pull request that changes none of them cannot change its code."""
    if case.origin == "checkout":
        return sources.kernel_sources(src, case.module) if src is not None else []
    if case.backend == "flydsl":
        return [root / OWN_FLYDSL_FILE]
    if "plan" in case.config:  # its kernel's module, and the plans, tables and workload it is launched from
        entry = case.entry.split(":")[0].replace(".", "/")
        return sorted(sources.workload_sources(root, [entry, "flybench/kernels/triton/specs"],
                                               case.config["plan"]["workload"]))
    return [root / "flybench" / "compile" / "triton_kernels.py"]


def _source(case: KernelCase, src: Path | None) -> dict[str, str]:
    files = source_files(case, src)
    if case.origin == "checkout":
        return {"origin": "checkout", "path": str(src), "hash": cache.hash_files(files, base=src), "commit": _commit(src)}
    return {"origin": "own", "path": str(files[0].parent.relative_to(cache.ROOT)),
            "hash": cache.hash_files(files, base=cache.ROOT)}


@functools.lru_cache(maxsize=16)
def _commit(src: Path) -> str:
    """The checkout's HEAD when `src` is the top of its own git work tree (an export inside another repository,
    or a tree without git, has no commit of its own)."""
    try:
        done = subprocess.run(["git", "-C", str(src), "rev-parse", "--show-toplevel", "HEAD"], capture_output=True,
                              text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    lines = done.stdout.split()
    if done.returncode != 0 or len(lines) != 2 or Path(lines[0]).resolve() != src.resolve():
        return "unknown (not the top of a git work tree)"
    return lines[1]


def _environment(backend: str, arch: str, toolkit: toolchain.Toolkit, src: Path | None) -> dict[str, str]:
    """The worker's environment: the target, the link toolkit, IR dumps on, FlyDSL's own cache off."""
    env = {k: v for k, v in os.environ.items() if k not in ("HSA_OVERRIDE_GFX_VERSION", "FLYDSL_DEBUG_DUMP_ASM")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(cache.ROOT), env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    if backend == "flydsl":
        env.update(ARCH=arch, FLYDSL_GPU_ARCH=arch, ROCM_PATH=str(toolkit.root), FLYDSL_DUMP_IR="1",
                   FLYDSL_RUNTIME_ENABLE_CACHE="0", COMPILE_ONLY="1")
        if toolkit.origin == "pypi":  # no ROCm here: older FlyDSL wheels need a loadable HIP runtime (hip_stub)
            stub = hip_stub.build(toolkit.root / "lib").parent
            env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(stub), env.get("LD_LIBRARY_PATH", "")) if p)
    else:
        env.update(TRITON_ALWAYS_COMPILE="1", TRITON_DEFAULT_FP_FUSION="1")
    return env

