"""flydsl-jax: unavailable, saying why, until a FlyDSL release ships its JAX API."""

from __future__ import annotations

import importlib.util
from importlib import metadata

import pytest

from flybench.hardware import Device
from flybench.providers import flydsl_jax, get_provider

GFX950 = Device("rocm", "gfx950", "AMD Instinct MI355X", "gfx950", "hip 7.0", "cuda")


def spec_without(*missing):
    real = importlib.util.find_spec
    return lambda name, *a: None if name in missing else (object() if name.startswith("flydsl") else real(name, *a))


@pytest.mark.parametrize("device", [GFX950, Device("cpu", "cpu", "CPU", "cpu", "", "cpu")], ids=["gfx950", "cpu"])
def test_a_flydsl_without_its_jax_api_is_named_with_the_reason(monkeypatch, device):
    monkeypatch.setattr(importlib.util, "find_spec", spec_without("flydsl.jax"))
    monkeypatch.setattr(metadata, "version", lambda name: "0.5.0")
    reason = get_provider("flydsl-jax").unavailable_reason("moe", "bf16", device)
    assert reason.startswith("this FlyDSL (0.5.0) has no flydsl.jax") and "pull request #257" in reason
    assert "no FlyDSL release" in reason


def test_without_flydsl_it_says_to_install_it_and_why_that_is_not_enough(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", spec_without("flydsl", "flydsl.jax"))
    reason = get_provider("flydsl-jax").unavailable_reason("attention", "bf16", GFX950)
    assert "pip install flydsl" in reason and flydsl_jax.NO_RELEASE in reason


def test_a_flydsl_with_the_api_is_still_refused_until_the_wiring_exists(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", spec_without())
    reason = get_provider("flydsl-jax").unavailable_reason("attention", "bf16", GFX950)
    assert "wiring is not written yet" in reason


def test_the_installed_flydsl_has_no_jax_api():
    """FlyDSL 0.5.0, the release this project installs, has no flydsl.jax: the reason here is the real one."""
    if importlib.util.find_spec("flydsl") is None:
        pytest.skip("flydsl is not installed here")
    assert importlib.util.find_spec("flydsl.jax") is None
    assert "no flydsl.jax" in get_provider("flydsl-jax").unavailable_reason("moe", "bf16", GFX950)
