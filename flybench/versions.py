"""Versions of the packages a measurement depends on, recorded with every result."""

from __future__ import annotations

from importlib import metadata

PACKAGES = ("torch", "triton", "pytorch-triton-rocm", "flydsl", "jax", "jaxlib", "amd-aiter", "asv", "flybench")


def package_versions() -> dict[str, str]:
    """Installed versions of the packages that can change a measurement; absent ones are left out."""
    found = {}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found
