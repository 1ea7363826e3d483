"""Every test's gates keep their compiles in a cache of the test session, never in the user's own."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True, scope="session")
def _gate_cache(tmp_path_factory: pytest.TempPathFactory):
    import os

    from flybench import envvars

    before = os.environ.get(envvars.GATE_CACHE)
    os.environ[envvars.GATE_CACHE] = str(tmp_path_factory.mktemp("gate-cache"))
    yield
    if before is None:
        os.environ.pop(envvars.GATE_CACHE, None)
    else:
        os.environ[envvars.GATE_CACHE] = before
