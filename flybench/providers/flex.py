"""`flex`: torch FlexAttention with a block mask, for both attention workloads.

For diffusion attention the pages are gathered and the draft block appended
inside the timed call (FlexAttention reads contiguous K/V), so the paged read
is paid like every other provider pays it. The block mask depends only on the
case and is built once, outside the timed call. On a GPU flex_attention is
compiled (its intended use); on the CPU it runs eagerly.
"""

from __future__ import annotations

import warnings

from flybench.hardware import Device
from flybench.providers import register
from flybench.providers.base import Provider, Runner
from flybench.providers.torch_ops import attention_scale, paged_kv_gather
from flybench.workloads.base import Case, Tensors


class Flex(Provider):
    name = "flex"
    module = "torch"
    workloads = frozenset({"diffusion_attention", "attention"})
    description = "torch FlexAttention (torch.nn.attention.flex_attention) with a block mask"

    def unavailable_reason(self, workload: str, dtype: str, device: Device) -> str | None:
        try:
            import torch.nn.attention.flex_attention  # noqa: F401
        except ImportError as exc:
            return f"this torch has no FlexAttention ({exc}); install torch >= 2.5"
        return None

    def build(self, case: Case, dtype: str, inputs: Tensors, device: Device) -> Runner:
        import torch
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        if device.kind == "cpu":  # no compiled kernel on the CPU: the unfused path is what runs there
            warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
            attend = flex_attention
        else:
            attend = torch.compile(flex_attention, dynamic=False)
        scale = attention_scale(case)
        lse = _lse_request()
        if case.workload == "attention":
            q, k, v = (inputs[n].transpose(1, 2) for n in ("q", "k", "v"))
            mask_mod = _causal if case.shape["causal"] else _everything
            block_mask = create_block_mask(mask_mod, None, None, q.shape[2], k.shape[2], device=q.device)
            return lambda: _bshd(attend(q, k, v, block_mask=block_mask, scale=scale,
                                        enable_gqa=k.shape[1] != q.shape[1], **lse))
        block_mask = _diffusion_block_mask(case, inputs, create_block_mask)
        q = inputs["q"].transpose(1, 2)
        gather = paged_kv_gather(inputs)

        def run() -> Tensors:
            k, v = gather()
            return _bshd(attend(q, k.transpose(1, 2), v.transpose(1, 2), block_mask=block_mask, scale=scale,
                                enable_gqa=k.shape[2] != q.shape[1], **lse))

        return run


def _causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def _everything(b, h, q_idx, kv_idx):
    return q_idx >= 0


def _lse_request() -> dict:
    """Ask for the log-sum-exp the way this torch wants it (return_aux from 2.9, return_lse before)."""
    import inspect

    from torch.nn.attention import flex_attention as module

    if "return_aux" in inspect.signature(module.flex_attention).parameters:
        return {"return_aux": module.AuxRequest(lse=True)}
    return {"return_lse": True}


def _bshd(result) -> Tensors:
    out, aux = result
    return {"out": out.transpose(1, 2), "lse": getattr(aux, "lse", aux)}


def _diffusion_block_mask(case: Case, inputs: Tensors, create_block_mask):
    """Prefix visible up to each sequence's context length; the draft block bidirectional or causal."""
    batch, pages = inputs["block_table"].shape
    prefix_len = pages * inputs["k_cache"].shape[1]
    draft = inputs["q"].shape[1]
    context_lens = inputs["context_lens"].to(inputs["q"].device)
    causal = case.shape["mask"] == "causal"

    def mask_mod(b, h, q_idx, kv_idx):
        in_prefix = kv_idx < context_lens[b]
        in_draft = kv_idx >= prefix_len
        draft_visible = (kv_idx - prefix_len <= q_idx) if causal else in_draft
        return in_prefix | (in_draft & draft_visible)

    return create_block_mask(mask_mod, batch, None, draft, prefix_len + draft, device=inputs["q"].device)


register(Flex())
