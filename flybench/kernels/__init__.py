"""Kernels written in this project (as opposed to the baselines it times through providers).

Each subpackage is one kernel language; `flybench.kernels.triton` holds the
portable Triton kernels behind the `triton` provider.
"""
