"""`xla` and `xla-dense`: the workloads as a JAX user writes them, compiled by XLA.

- attention: `jax.nn.dot_product_attention` (BSHD, GQA), with its log-sum-exp
  (`return_residual`). Diffusion attention gathers the prefix pages through
  the block table in JAX, appends the draft block and masks (prefix up to each
  context length; draft block bidirectional or causal), all inside the call.
- moe (`xla`): route, sort the (token, slot) pairs by expert, then
  `jax.lax.ragged_dot` for the gate+up and down grouped GEMMs and a weighted
  scatter-add. `xla-dense` is the dense masked path XLA falls back to without
  a grouped GEMM: every token through every expert, the routing weights (zero
  for unchosen experts) folded in before the down projection.
- gemm: `jnp.matmul(a, b.T)`; the copy is a jitted copy of the buffer.

Inputs arrive as torch tensors and cross into JAX through DLPack once, in
`build` (zero-copy where the device and alignment allow); outputs go back the
same way for the correctness gate. Everything is jit-compiled ahead of time in
`build` (`jit(...).lower(...).compile()`), so compilation stays out of the
timed call. Weight transposes for ragged_dot are done there too.

How it is timed: XLA runs on its own streams, which device events recorded
on torch's stream do not see. The runner blocks until its outputs are ready
(`block_until_ready`) and is marked `host_timed`, so `measure.timing` times
it with the host clock after a device synchronisation (and the cache flush)
before each sample. On a CPU every provider is host-timed anyway. The time
includes XLA's dispatch from Python, which is what a JAX caller pays.
fp8 is not wired (no scaled fp8 matmul formulation yet).
"""

from __future__ import annotations

import os
from functools import partial
from typing import TYPE_CHECKING, Any, Callable

from flybench.hardware import Device
from flybench.measure.timing import host_timed
from flybench.providers import register
from flybench.providers.base import Provider, Runner
from flybench.providers.torch_ops import attention_scale
from flybench.workloads.base import Case, Tensors

if TYPE_CHECKING:
    import jax
    import torch

# JAX takes 75% of a GPU's memory at its first use unless told not to; torch allocates the inputs, the
# cache flush and the reference on the same GPU, so JAX must allocate on demand (set before jax is imported).
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

JAX_INSTALL = ("pip install -e '.[jax]' in the flybench clone (CPU); on a GPU also JAX's backend for it: 'jax[cuda13]' (NVIDIA) "
               "or 'jax[rocm7-local]' (AMD, docs/rocm.md)")


class Xla(Provider):
    """JAX/XLA formulations; `moe_path` picks "ragged" (xla) or "dense" (xla-dense) for the MoE."""

    module = "jaxlib"  # XLA, the compiler that runs these, ships in jaxlib

    def __init__(self, name: str, moe_path: str) -> None:
        self.name, self.moe_path = name, moe_path
        self.workloads = frozenset({"moe", "mixtral_step"} if moe_path == "dense"
                                   else {"diffusion_attention", "attention", "moe", "gemm", "mixtral_step"})
        self.description = ("JAX dense masked MoE (every token through every expert)" if moe_path == "dense" else
                            "JAX/XLA: dot_product_attention, ragged_dot MoE, matmul")

    def unavailable_reason(self, workload: str, dtype: str, device: Device) -> str | None:
        import importlib.util

        if importlib.util.find_spec("jax") is None:
            return f"{self.name} needs JAX: {JAX_INSTALL}"
        if dtype == "fp8":
            return f"{self.name} has no fp8 (scaled float8 matmul) formulation yet; use bf16"
        if device.kind == "cpu" and dtype == "fp16" and "attention" in workload:
            return ("XLA's CPU backend has no fp16 dot with float32 accumulation, which dot_product_attention "
                    "uses; fp16 attention runs on a GPU, bf16 runs here")
        if device.kind != "cpu":
            import jax

            if jax.default_backend() == "cpu":
                return f"this JAX has no GPU backend, so it cannot read {device.arch} tensors: {JAX_INSTALL}"
        return None

    def memory_reason(self, case: Case, dtype: str, device_bytes: int) -> str | None:
        """The ragged MoE on a GPU: XLA lowers `ragged_dot` to every row against every expert, a [rows, experts,
        N] product for each of the two projections, of which the larger is allocated at once (dsv3-tp8-t4096:
        32,768 rows x 256 experts x 7,168 = 112 GiB in bf16, which XLA asked for and did not get on an H200).
        JAX takes XLA_PYTHON_CLIENT_MEM_FRACTION of the device (0.75 unless set)."""
        if case.workload != "moe" or self.moe_path != "ragged":
            return None
        s = case.shape
        rows = s["tokens"] * s["top_k"]
        need = rows * s["experts"] * max(2 * s["inter"], s["hidden"]) * (1 if dtype.startswith("fp8") else 2)
        try:
            share = float(os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.75"))
        except ValueError:
            share = 0.75
        if need <= share * device_bytes:
            return None
        return (f"needs about {need / 2**30:.0f} GiB of device memory by its estimate (XLA's ragged_dot: {rows} "
                f"rows x {s['experts']} experts), over the {share * device_bytes / 2**30:.0f} GiB JAX gets of this "
                "device")

    def build(self, case: Case, dtype: str, inputs: Tensors, device: Device) -> Runner:
        import jax

        if case.workload == "mixtral_step":
            raise ValueError(MODEL_LANE_BUILDS)
        if case.workload == "moe":
            function = partial(moe_ragged if self.moe_path == "ragged" else moe_dense, top_k=case.shape["top_k"])
            names, prepare = ("x", "router_logits", "w13", "w2"), _moe_weights_for(self.moe_path)
        elif case.workload == "attention":
            function = partial(attention, scale=attention_scale(case), causal=bool(case.shape["causal"]))
            names, prepare = ("q", "k", "v"), None
        elif case.workload == "diffusion_attention":
            function = partial(diffusion_attention, scale=attention_scale(case), causal=case.shape["mask"] == "causal")
            names, prepare = ("q", "k_cache", "v_cache", "block_table", "context_lens", "k_draft", "v_draft"), None
        elif case.shape["kind"] == "copy":
            function, names, prepare = copy, ("src",), None
        else:
            function, names, prepare = gemm, ("a", "b"), None
        args = [to_jax(inputs[n]) for n in names]
        if prepare is not None:
            args = jax.block_until_ready(prepare(*args))
        return compiled_runner(function, args)


MODEL_LANE_BUILDS = ("a mixtral_step case is a whole decoder step: the model lane builds it around this provider's "
                     "MoE layer (Workload.built_by, flybench.model.lane.Step), not the provider")
"""Why a provider refuses to build a model-lane case itself: the model lane imports the providers' MoE layers, and
no provider imports the model lane, so the dependency runs one way."""


def to_jax(tensor: "torch.Tensor") -> "jax.Array":
    """A torch tensor as a JAX array on the matching device, through DLPack (zero-copy where possible)."""
    import jax

    return jax.dlpack.from_dlpack(tensor.contiguous())


def to_torch(array: "jax.Array") -> "torch.Tensor":
    import torch

    return torch.from_dlpack(array)


def compiled_runner(function: Callable[..., Any], args: list) -> Runner:
    """Compile `function` for `args` now; the runner calls the executable and blocks until it is done."""
    import jax

    executable = jax.jit(function).lower(*args).compile()

    def run() -> Tensors:
        result = jax.block_until_ready(executable(*args))
        return {name: to_torch(value) for name, value in result.items()}

    return host_timed(run)


def attention(q, k, v, *, scale: float, causal: bool = False, mask=None) -> dict:
    """BSHD attention; "lse" [B, H, S] in float32 from the residual, which JAX returns as [B, S, H]."""
    import jax
    import jax.numpy as jnp

    out, lse = jax.nn.dot_product_attention(q, k, v, mask=mask, scale=scale, is_causal=causal, return_residual=True)
    return {"out": out, "lse": jnp.swapaxes(lse, 1, 2).astype(jnp.float32)}


def diffusion_attention(q, k_cache, v_cache, block_table, context_lens, k_draft, v_draft, *, scale: float,
                        causal: bool) -> dict:
    """Gather each sequence's pages, append its draft block, attend under the draft-block mask."""
    import jax.numpy as jnp

    batch, pages = block_table.shape
    page_size, draft = k_cache.shape[1], q.shape[1]
    prefix_len = pages * page_size

    def keys(cache, draft_kv):
        prefix = cache[block_table].reshape(batch, prefix_len, *cache.shape[2:])
        return jnp.concatenate([prefix, draft_kv], axis=1)

    prefix = jnp.arange(prefix_len)[None, None, :] < context_lens[:, None, None]  # [B, 1, prefix]
    block = jnp.tril(jnp.ones((draft, draft), bool)) if causal else jnp.ones((draft, draft), bool)
    visible = jnp.concatenate([jnp.broadcast_to(prefix, (batch, draft, prefix_len)),
                               jnp.broadcast_to(block, (batch, draft, draft))], axis=2)
    return attention(q, keys(k_cache, k_draft), keys(v_cache, v_draft), scale=scale, mask=visible[:, None])


def route(logits, top_k: int):
    """The workload's routing: the top-k logits per token, softmax over them (float32)."""
    import jax

    values, ids = jax.lax.top_k(logits.astype("float32"), top_k)
    return jax.nn.softmax(values, axis=-1), ids


def swiglu(gate_up, inter: int):
    import jax

    return jax.nn.silu(gate_up[..., :inter]) * gate_up[..., inter:]


def _moe_weights_for(path: str) -> Callable | None:
    """ragged_dot takes the right operand as [groups, K, N]: transpose once, outside the timed call."""
    if path != "ragged":
        return None
    return lambda x, logits, w13, w2: (x, logits, *ragged_weights(w13, w2))


def ragged_weights(w13, w2) -> tuple:
    """The experts' weights ([E, N, K], as the workload stores them) as `moe_ragged` takes them: [E, K, N]."""
    import jax.numpy as jnp

    return jnp.swapaxes(w13, 1, 2), jnp.swapaxes(w2, 1, 2)


def moe_ragged(x, logits, w13_t, w2_t, *, top_k: int) -> dict:
    """Grouped GEMMs over the expert-sorted rows (w13_t [E, H, 2I], w2_t [E, I, H])."""
    import jax
    import jax.numpy as jnp

    experts, inter = w13_t.shape[0], w2_t.shape[1]
    weights, ids = route(logits, top_k)
    flat = ids.reshape(-1)
    order = jnp.argsort(flat, stable=True)
    token = order // top_k
    sizes = jnp.bincount(flat, length=experts).astype(jnp.int32)
    gate_up = jax.lax.ragged_dot(x[token], w13_t, sizes, preferred_element_type=jnp.float32)
    hidden = swiglu(gate_up, inter).astype(x.dtype)
    down = jax.lax.ragged_dot(hidden, w2_t, sizes, preferred_element_type=jnp.float32)
    out = jnp.zeros(x.shape, jnp.float32).at[token].add(down * weights.reshape(-1)[order][:, None])
    return {"out": out.astype(x.dtype)}


def moe_dense(x, logits, w13, w2, *, top_k: int) -> dict:
    """Every token through every expert; unchosen experts get weight 0 before the down projection."""
    import jax.numpy as jnp

    tokens, inter = x.shape[0], w2.shape[2]
    weights, ids = route(logits, top_k)
    combine = jnp.zeros((tokens, w13.shape[0]), jnp.float32).at[jnp.arange(tokens)[:, None], ids].set(weights)
    gate_up = jnp.einsum("th,eoh->teo", x, w13, preferred_element_type=jnp.float32)
    hidden = (swiglu(gate_up, inter) * combine[:, :, None]).astype(x.dtype)
    out = jnp.einsum("tei,ehi->th", hidden, w2, preferred_element_type=jnp.float32)
    return {"out": out.astype(x.dtype)}


def gemm(a, b) -> dict:
    import jax.numpy as jnp

    return {"out": jnp.matmul(a, b.T)}


def copy(src) -> dict:
    import jax.numpy as jnp

    return {"out": jnp.copy(src)}


register(Xla("xla", moe_path="ragged"))
register(Xla("xla-dense", moe_path="dense"))
