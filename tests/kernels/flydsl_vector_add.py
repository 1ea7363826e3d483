"""flybench's own small FlyDSL kernels, so CI exercises the FlyDSL compile path without a FlyDSL checkout.

`compile_vector_add` is the kernel the compile suite tracks: fp32 C = A + B,
`vec` elements per thread through 128-bit buffer loads and stores. Two more
exist for the tests of the miscompile checks: `compile_noop` builds a
kernel that does nothing (it compiles to a bare `s_endpgm` by construction),
and `compile_tanh` uses `fx.math.tanh`, which FlyDSL 0.5.0 cannot lower for
AMDGPU: LLVM prints "no libcall available for ftanh" and the compile still
succeeds, leaving a kernel without its load and its math.

Each `compile_*` function is called by flybench's compile worker with the
case's configuration, with COMPILE_ONLY=1 and the target set in the
environment; placeholder tensors live on torch's meta device.
"""

from __future__ import annotations

from typing import Any

import flydsl.compiler as flyc
import flydsl.expr as fx
import torch


@flyc.kernel
def vector_add_kernel(A: fx.Tensor, B: fx.Tensor, C: fx.Tensor, block: fx.Constexpr[int], vec: fx.Constexpr[int]):
    bid, tid = fx.block_idx.x, fx.thread_idx.x
    atom = fx.make_copy_atom(fx.rocdl.BufferCopy(vec * fx.Float32.width), fx.Float32)
    tiles = []
    for tensor in (A, B, C):
        tile = fx.slice(fx.logical_divide(fx.rocdl.make_buffer_tensor(tensor), fx.make_layout(block * vec, 1)),
                        (None, bid))
        tiles.append(fx.logical_divide(tile, fx.make_layout(vec, 1)))
    ra, rb, rc = (fx.make_rmem_tensor(vec, fx.Float32) for _ in range(3))
    fx.copy_atom_call(atom, fx.slice(tiles[0], (None, tid)), ra)
    fx.copy_atom_call(atom, fx.slice(tiles[1], (None, tid)), rb)
    fx.memref_store_vec(fx.arith.addf(fx.memref_load_vec(ra), fx.memref_load_vec(rb)), rc)
    fx.copy_atom_call(atom, rc, fx.slice(tiles[2], (None, tid)))


@flyc.jit
def vector_add(A: fx.Tensor, B: fx.Tensor, C: fx.Tensor, n: fx.Int32, block: fx.Constexpr[int],
               vec: fx.Constexpr[int], stream: fx.Stream = fx.Stream(None)):
    grid = (n + block * vec - 1) // (block * vec)
    vector_add_kernel(A, B, C, block, vec).launch(grid=(grid, 1, 1), block=[block, 1, 1], stream=stream)


@flyc.kernel
def noop_kernel(A: fx.Tensor):
    pass


@flyc.jit
def noop(A: fx.Tensor, stream: fx.Stream = fx.Stream(None)):
    noop_kernel(A).launch(grid=(1, 1, 1), block=[64, 1, 1], stream=stream)


@flyc.kernel
def tanh_kernel(A: fx.Tensor, C: fx.Tensor):
    bid, tid = fx.block_idx.x, fx.thread_idx.x
    atom = fx.make_copy_atom(fx.rocdl.BufferCopy(32), fx.Float32)
    ta, tc = (fx.logical_divide(fx.slice(fx.logical_divide(fx.rocdl.make_buffer_tensor(t), fx.make_layout(256, 1)),
                                         (None, bid)), fx.make_layout(1, 1)) for t in (A, C))
    ra, rc = fx.make_rmem_tensor(1, fx.Float32), fx.make_rmem_tensor(1, fx.Float32)
    fx.copy_atom_call(atom, fx.slice(ta, (None, tid)), ra)
    fx.memref_store_vec(fx.math.tanh(fx.memref_load_vec(ra)), rc)
    fx.copy_atom_call(atom, rc, fx.slice(tc, (None, tid)))


@flyc.jit
def tanh(A: fx.Tensor, C: fx.Tensor, n: fx.Int32, stream: fx.Stream = fx.Stream(None)):
    tanh_kernel(A, C).launch(grid=((n + 255) // 256, 1, 1), block=[256, 1, 1], stream=stream)


def _placeholder(n: int) -> torch.Tensor:
    return torch.empty(n, dtype=torch.float32, device="meta")


def compile_vector_add(config: dict[str, Any]) -> None:
    a = _placeholder(config["n"])
    flyc.compile(vector_add, a, a, a, config["n"], config["block"], config["vec"])


def compile_noop(config: dict[str, Any]) -> None:
    flyc.compile(noop, _placeholder(64))


def compile_tanh(config: dict[str, Any]) -> None:
    a = _placeholder(config.get("n", 4096))
    flyc.compile(tanh, a, a, config.get("n", 4096))
