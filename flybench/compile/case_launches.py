"""What a timed case launches on the GPU, compiled on the CPU: the evidence `flybench gate` selects by.

A case's speed on a given GPU can change only when the machine code or the
launch configuration of what it launches changes, or the host code that
launches and measures it (DESIGN.md, "Machine code is the evidence of
change"). For the providers that launch the project's Triton kernels
(`LAUNCHERS`) this module lists a case's launches as its provider makes
them: the plan `flybench.kernels.triton.cases.build` makes on meta tensors
(the model lane's MoE layer for `mixtral_step`), specialised as that
provider's launcher specialises (Triton's JIT marks integers divisible by
16, jax-triton array pointers only), each compiled for the target without a
GPU. `compare` then says, launch by launch, what differs between two sides:
machine code (PTX on NVIDIA, AMDGPU ISA; debug sections and line directives
left out, as the ISA diff leaves them out), launch configuration (grid,
warps, stages, shared memory) or arguments (run-time scalars, tensor
shapes).

Each side lists its own launches: the gate runs this file once in each
side's checkout, with that side's flybench first on the path (`run_side`),
so a head that retunes the configuration table compiles the head's table.
Run that way, the file imports only what every flybench with the Triton
kernels has (`flybench.workloads`, `flybench.kernels.triton.cases`,
`specs`, `configs`, `moe`, `flybench.model.lane`).

Compiles are cached by content, in a folder both sides share: the source,
as Python reads it (comments and docstrings left out), of every project
module the kernel's module reaches by its imports, the compile's signature, constants, attributes and options, the target and
Triton's version. A comment changes none of them, so its head compiles
nothing: the base's compile stands for both.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

LAUNCHERS = {("diffusion_attention", "triton"): True, ("moe", "triton"): True,
             ("diffusion_attention", "jax-triton"): False, ("moe", "jax-triton"): False,
             ("mixtral_step", "jax-triton"): False}
"""(workload, provider) pairs whose cases launch the project's Triton kernels, and whether their launcher marks
integers divisible by 16 (Triton's JIT does; jax-triton marks array pointers only)."""
KERNEL_PACKAGE = "flybench/kernels/triton/"
"""Where the project's Triton kernels live, relative to a flybench checkout."""
Key = tuple[str, str, str, str]
"""(workload, case, provider, dtype)."""


def launches(key: Key, arch: str) -> list[Any]:
    """The launches (`flybench.kernels.triton.launch.Launch`) a case makes on `arch`, built on meta tensors with
    the configuration table's entry and the compute units of the architecture's reference part."""
    from flybench.kernels.triton import cases
    from flybench.workloads import get_workload

    workload, name, _, dtype = key
    case = get_workload(workload).case(name)
    if workload == "mixtral_step":
        return _model_lane_launches(case, arch)
    return cases.build(case, dtype, cases.meta_inputs(case, dtype, arch), arch).launches


def _model_lane_launches(case: Any, arch: str) -> list[Any]:
    """The Triton MoE layer's launches in one model-lane step (each layer launches the same): bf16 rows of the
    step's tokens, as `providers.jax_custom_call.moe` plans them."""
    import torch

    from flybench.kernels.triton import configs, moe
    from flybench.model.lane import config_of

    c, p = config_of(case), case.shape
    tokens = p["batch"] * p["tokens"]

    def meta(*shape: int, dtype: Any = torch.bfloat16) -> Any:
        return torch.empty(shape, dtype=dtype, device="meta")

    inputs = {"x": meta(tokens, c.hidden), "router_logits": meta(tokens, c.experts, dtype=torch.float32),
              "w13": meta(c.experts, 2 * c.intermediate, c.hidden), "w2": meta(c.experts, c.hidden, c.intermediate)}
    return moe.plan(inputs, c.top_k, configs.moe_config(arch, "bf16", tokens)).launches


def normalized_source(text: str, *, without_kernels: bool = False) -> str:
    """A module's code as Python reads it: comments, docstrings and layout left out (`ast.dump`); with
    `without_kernels`, the bodies of its `@triton.jit` functions too (what is left is its host code). Text that
    does not parse is returned as it is."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
            if without_kernels and isinstance(node, ast.FunctionDef) and any(
                    is_kernel_decorator(d) for d in node.decorator_list):
                node.body = [ast.Pass()]
    return ast.dump(tree)


KERNEL_DECORATORS = frozenset({"triton.jit", "triton.autotune", "triton.heuristics", "jit", "autotune",
                               "heuristics"})
"""What makes a function a Triton kernel: `@triton.jit`, `@triton.autotune(...)`, `@triton.heuristics(...)` (or
the names imported from triton). `@torch.jit.ignore` and any other decorator naming "jit" mark host code."""


def is_kernel_decorator(node: ast.expr) -> bool:
    """Whether a decorator is one of `KERNEL_DECORATORS` (called or not)."""
    node = node.func if isinstance(node, ast.Call) else node
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return False
    return ".".join([node.id, *reversed(parts)]) in KERNEL_DECORATORS


def reached_digest(module_file: str) -> str:
    """The normalised source of every project module a kernel's module reaches: itself, the modules it imports
    (`flybench.imports`), theirs in turn, and the packages above each. What a compile's cache key holds of its
    code: a `@triton.jit` helper in another module or a subpackage changes the key, a comment does not."""
    from flybench.imports import imported_files, package_inits

    path = Path(module_file).resolve()
    root = next((p for p in path.parents if (p / "flybench" / "__init__.py").is_file()), path.parent)
    seen: set[Path] = set()
    todo = [path]
    while todo:
        found = todo.pop()
        if found in seen or not found.is_file():
            continue
        seen.add(found)
        todo += imported_files(root, found, "flybench") + package_inits(root, found)
    digest = hashlib.sha256()
    for found in sorted(seen):
        name = found.relative_to(root).as_posix() if found.is_relative_to(root) else found.name
        digest.update(name.encode() + b"\0" + normalized_source(found.read_text()).encode() + b"\0")
    return digest.hexdigest()


def cannot_compile() -> str | None:
    """Why this interpreter cannot compile the launches (Triton is not installed: the README's main install has
    none), else None. The gate then selects those cases by their files, and never reports compiles that did not
    happen."""
    import importlib.util

    if importlib.util.find_spec("triton") is None:
        return "Triton is not installed here (`pip install -e '.[compile]'` brings the pinned triton)"
    return None


def _plain(value: Any) -> Any:
    """A launch argument as JSON: a tensor as its element type and shape, numbers and flags as they are."""
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"{str(value.dtype).removeprefix('torch.')}{list(value.shape)}"
    return value if value is None or isinstance(value, (bool, int, float, str)) else repr(value)


def describe(launch: Any, arch: str, mark_integers: bool, digests: dict[str, str]) -> dict[str, Any]:
    """One launch as data, with the content key of its compile (`digests` keeps each package's source digest)."""
    import triton

    from flybench.kernels.triton import specs

    backend = specs.TARGETS[arch][0]
    signature, constexprs, attrs = specs.specialize(launch, backend, mark_integers)
    module = launch.kernel.fn.__code__.co_filename
    if module not in digests:
        digests[module] = reached_digest(module)
    spec = specs.KernelSpec(launch.name, launch.kernel, signature, constexprs, attrs, dict(launch.options))
    key = hashlib.sha256("\0".join((triton.__version__, arch, digests[module], spec.key())).encode()).hexdigest()
    return {"kernel": launch.name, "grid": list(launch.grid), "options": dict(launch.options),
            "constants": {k: _plain(v) for k, v in launch.constexprs.items()},
            "arguments": {k: _plain(v) for k, v in launch.args.items()}, "key": key[:32], "spec": spec}


def compiled(spec: Any, arch: str) -> dict[str, Any]:
    """Compile one spec for `arch`: its machine code listing and launch resources, or why it failed."""
    try:
        kernel = spec.compile(arch)
    except Exception as exc:  # noqa: BLE001 - a kernel that does not compile is reported, and its case is timed
        text = " ".join(str(exc).split())
        return {"status": "failed", "reason": f"{type(exc).__name__}: {text[-300:]}"}
    listing = kernel.asm.get("ptx") if arch.startswith("sm_") else kernel.asm.get("amdgcn")
    metadata = kernel.metadata
    return {"status": "ok", "listing": listing or "", "shared": int(metadata.shared),
            "num_warps": int(metadata.num_warps), "num_stages": int(getattr(metadata, "num_stages", 0) or 0)}


_PENDING: list[tuple[Any, str]] = []
"""The specs a pool of forked workers compiles (each inherits the list; nothing is pickled but an index)."""


def _compile_pending(index: int) -> dict[str, Any]:
    spec, arch = _PENDING[index]
    return compiled(spec, arch)


def side_launches(keys: list[Key], arches: list[str], cache: Path, workers: int) -> dict[str, Any]:
    """Every case's launches on every target, compiled (or read from `cache`): {"case|arch": [launch, ...]},
    or {"case|arch": {"error": why}} for a case whose plan could not be built."""
    import multiprocessing

    cache.mkdir(parents=True, exist_ok=True)
    digests: dict[str, str] = {}
    found: dict[str, Any] = {}
    todo: dict[str, tuple[Any, str]] = {}
    for key in keys:
        marks = LAUNCHERS[key[0], key[2]]
        for arch in arches:
            name = "|".join((*key, arch))
            try:
                found[name] = [describe(launch, arch, marks, digests) for launch in launches(key, arch)]
            except Exception as exc:  # noqa: BLE001 - the case is timed, and the report says why
                found[name] = {"error": f"its launches could not be planned on {arch}: {type(exc).__name__}: "
                                        f"{' '.join(str(exc).split())[-300:]}"}
                continue
            for launch in found[name]:
                if cached(cache, launch["key"]) is None:
                    todo.setdefault(launch["key"], (launch["spec"], arch))
    _PENDING[:] = list(todo.values())
    if _PENDING:
        total = sum(len(v) for v in found.values() if isinstance(v, list))
        print(f"compiling {len(_PENDING)} of {total} launches on {', '.join(arches)} (the rest are cached)",
              file=sys.stderr, flush=True)
        progress = _Progress(len(_PENDING))
        if workers > 1 and len(_PENDING) > 1:
            with multiprocessing.get_context("fork").Pool(min(workers, len(_PENDING))) as pool:
                results = [progress.done(result) for result in pool.imap(_compile_pending, range(len(_PENDING)))]
        else:
            results = [progress.done(_compile_pending(i)) for i in range(len(_PENDING))]
        for key, result in zip(todo, results):
            listing = result.pop("listing", None)
            result["key"] = key
            if listing is not None:
                result["code_sha256"] = hashlib.sha256(listing.encode()).hexdigest()
                _replace(cache / f"{key}.code", listing)
            _replace(cache / f"{key}.json", json.dumps(result))
    for launches_ in found.values():
        for launch in launches_ if isinstance(launches_, list) else []:
            launch.pop("spec")
            launch["compiled"] = cached(cache, launch["key"]) or {
                "status": "failed", "reason": f"its compile could not be read back from the cache {cache}"}
    return found


class _Progress:
    """A line every few seconds while launches compile (and one at the end): how many are done, how many are
    left, and when the rest should be done at the pace so far. A cold cache on two cores takes many minutes,
    which must not pass in silence; a warm one on a GPU machine compiles a hundred in seconds, which needs no
    hundred lines."""

    EVERY_S = 5.0

    def __init__(self, total: int) -> None:
        import time

        self.total, self.count, self.clock = total, 0, time.monotonic
        self.began = self.said = self.clock()

    def done(self, result: dict[str, Any]) -> dict[str, Any]:
        self.count += 1
        left = self.total - self.count
        if left and self.clock() - self.said < self.EVERY_S:
            return result
        self.said = self.clock()
        spent = self.said - self.began
        more = f", about {_duration(spent / self.count * left)} more" if left else ""
        print(f"compiled {self.count} of {self.total} launches, {left} left ({_duration(spent)} so far{more})",
              file=sys.stderr, flush=True)
        return result


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def cached(cache: Path, key: str) -> dict[str, Any] | None:
    """The cached compile of `key`, or None where the cache cannot vouch for it, so that it is compiled again: no
    entry, an entry that is not a regular file (a FIFO would block the gate for ever), one that does not parse
    or names another key, or a compile whose listing is missing, not a regular file, or not the one it wrote (a
    pruned, partly restored or foreign cache). A missing listing is never read as the same code."""
    entry, listing = cache / f"{key}.json", cache / f"{key}.code"
    if not entry.is_file():
        return None
    try:
        result = json.loads(entry.read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(result, dict) or result.get("key") != key or result.get("status") not in ("ok", "failed"):
        return None
    if result["status"] == "ok":
        try:
            text = listing.read_bytes() if listing.is_file() else None
        except OSError:
            text = None
        if text is None or hashlib.sha256(text).hexdigest() != result.get("code_sha256"):
            return None
    return result


def _replace(path: Path, text: str) -> None:
    """Write `path` whole through a file beside it; whatever stood there (a FIFO, a folder's link) is replaced,
    never opened."""
    temporary = path.with_name(f"{path.name}.{os.getpid()}")
    temporary.write_text(text)
    temporary.replace(path)


def run_side(root: Path, keys: list[Key], arches: list[str], cache: Path, workers: int, log: Any = None,
             prefix: str = "") -> dict[str, Any]:
    """`side_launches` run in a checkout at `root` with its own flybench first on the path: that side's plans,
    tables and kernels; its progress lines go to `log` (default stderr) after `prefix` as they come. Returns what
    it found; an error when it could not run at all."""
    import subprocess
    import tempfile

    from flybench.errors import FlybenchError

    with tempfile.TemporaryDirectory(prefix="flybench-launches-") as tmp:
        request, answer = Path(tmp) / "request.json", Path(tmp) / "answer.json"
        request.write_text(json.dumps({"keys": keys, "arches": arches, "cache": str(cache), "workers": workers,
                                       "answer": str(answer)}))
        code = f"import runpy, sys; sys.argv = ['case_launches', {str(request)!r}]; " \
               f"runpy.run_path({__file__!r}, run_name='__main__')"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), *filter(None, [os.environ.get("PYTHONPATH")])]),
               "TRITON_DEFAULT_FP_FUSION": os.environ.get("TRITON_DEFAULT_FP_FUSION", "1")}
        with subprocess.Popen([sys.executable, "-c", code], cwd=root, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, errors="replace") as process:
            lines = []
            for line in process.stderr:  # its progress, passed on as it comes
                lines.append(line.rstrip("\n"))
                print(f"{prefix}{lines[-1]}", file=log or sys.stderr, flush=True)
        if process.returncode != 0 or not answer.is_file():
            tail = ([line for line in lines if line.strip()] or ["see its output above"])[-1]
            raise FlybenchError(f"the launches of {root.name}'s cases could not be listed (exit "
                                f"{process.returncode}): {tail}")
        return json.loads(answer.read_text())


def compare(base: Any, head: Any, cache: Path, code_lines: Any) -> list[str]:
    """What differs between one case's launches at base and at head, in words (nothing: it would run the same
    machine code with the same launch configuration). `code_lines` reduces a listing to its code."""
    for side, found in (("base", base), ("head", head)):
        if isinstance(found, dict):
            return [f"at {side}, {found['error']}"]
    names = [[launch["kernel"] for launch in side] for side in (base, head)]
    if names[0] != names[1]:
        return [f"it launches {', '.join(names[1]) or 'nothing'} where it launched {', '.join(names[0]) or 'nothing'}"]
    reasons = []
    for before, after in zip(base, head):
        kernel = after["kernel"]
        failed = [f"{kernel} failed to compile at {side}: {launch['compiled']['reason']}"
                  for side, launch in (("base", before), ("head", after)) if launch["compiled"]["status"] != "ok"]
        if failed:
            reasons += failed
            continue
        settings = _changes({**before["constants"], **before["options"]}, {**after["constants"], **after["options"]})
        if before["key"] != after["key"]:
            codes = [_code(cache, launch["key"], code_lines) for launch in (before, after)]
            if None in codes:
                reasons.append(f"machine code of {kernel} could not be read back from the compile cache {cache}: "
                               "not known to be the same")
                continue
            if codes[0] != codes[1]:
                reasons.append(f"machine code of {kernel} changed "
                               f"({settings or 'same constants and options: its source'})")
                continue
        launch = _changes({"grid": before["grid"], **{k: before["compiled"][k] for k in RESOURCES}},
                          {"grid": after["grid"], **{k: after["compiled"][k] for k in RESOURCES}})
        if launch:
            reasons.append(f"launch configuration of {kernel} changed ({launch})")
            continue
        arguments = _changes(before["arguments"], after["arguments"])
        if arguments:
            reasons.append(f"arguments of {kernel} changed ({arguments})")
    return reasons


RESOURCES = ("num_warps", "num_stages", "shared")
"""What a compile fixes of a launch besides its code: warps, pipeline stages, shared memory in bytes."""


def _code(cache: Path, key: str, code_lines: Any) -> list[str] | None:
    """The listing of `key` as code lines; None where the cache no longer vouches for it (`cached`)."""
    found = cached(cache, key)
    if found is None or found["status"] != "ok":
        return None
    return code_lines((cache / f"{key}.code").read_text())


def _changes(before: dict[str, Any], after: dict[str, Any]) -> str:
    """'BLOCK_N 128 -> 64, num_stages 4 -> 3': the entries that differ."""
    names = [k for k in after if before.get(k) != after[k]] + [k for k in before if k not in after]
    return ", ".join(f"{k} {_shown(before.get(k))} -> {_shown(after.get(k))}" for k in names)


def _shown(value: Any) -> str:
    return "none" if value is None else "x".join(map(str, value)) if isinstance(value, list) else str(value)


def main(argv: list[str]) -> int:
    """Run in a side's checkout by `run_side`: read the request, write the launches found."""
    request = json.loads(Path(argv[0]).read_text())
    found = side_launches([tuple(k) for k in request["keys"]], request["arches"], Path(request["cache"]),
                          request["workers"])
    Path(request["answer"]).write_text(json.dumps(found))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
