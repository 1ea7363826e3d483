"""Regression detection: step detection over history and base-vs-head comparison, with reports.

The public names load on first use (PEP 562), so a verb that needs one
module of this package (bisect needs none of the store) does not import
DuckDB, pandas and scipy with the rest. `compare` is the module; its
function is `flybench.regress.compare.compare`.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOME = {
    "CaseResult": "compare", "Comparison": "compare", "ResourceChange": "compare",
    "RegressConfig": "config", "Thresholds": "config", "load_config": "config",
    "Regression": "history", "Step": "history", "find_regressions": "stored",
    "exit_code": "report", "markdown": "report", "terminal": "report", "to_json": "report",
}
__all__ = sorted(_HOME, key=str.lower)


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
