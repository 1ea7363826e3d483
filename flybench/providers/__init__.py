"""The provider registry: each provider plugs in with `register` and nothing else changes."""

from __future__ import annotations

from flybench.errors import unknown_name
from flybench.providers.base import Provider, Runner

PROVIDERS: dict[str, Provider] = {}


def register(provider: Provider) -> Provider:
    """Add a provider; a second one with the same name is a programming error."""
    if provider.name in PROVIDERS:
        raise ValueError(f"provider {provider.name!r} registered twice")
    PROVIDERS[provider.name] = provider
    return provider


def get_provider(name: str) -> Provider:
    """The provider called `name`, or an error listing the valid names."""
    _load_builtin()
    if name not in PROVIDERS:
        raise unknown_name("provider", name, list(PROVIDERS))
    return PROVIDERS[name]


def provider_names(workload: str | None = None) -> list[str]:
    """Names of the registered providers, optionally only those implementing `workload`."""
    _load_builtin()
    return [n for n, p in PROVIDERS.items() if workload is None or workload in p.workloads]


def _load_builtin() -> None:
    """Import every provider module of this package; each registers itself on import.

    Modules whose names start with "_" and the shared `base`/`torch_ops` are
    helpers, not providers. Importing a provider module must never need its
    backend (torch, triton, jax, aiter): those are imported when a case is
    built, and `unavailable_reason` says what is missing.
    """
    import importlib
    import pkgutil

    for module in pkgutil.iter_modules(__path__):
        if not module.name.startswith("_") and module.name not in _HELPERS:
            importlib.import_module(f"{__name__}.{module.name}")


_HELPERS = {"base", "torch_ops"}


__all__ = ["PROVIDERS", "Provider", "Runner", "get_provider", "provider_names", "register"]
