"""Regression detection: step detection over history and base-vs-head comparison, with reports."""

from flybench.regress.compare import CaseResult, Comparison, ResourceChange, compare
from flybench.regress.config import RegressConfig, Thresholds, load_config
from flybench.regress.history import Regression, Step, find_regressions
from flybench.regress.report import exit_code, markdown, terminal, to_json

__all__ = [
    "CaseResult", "Comparison", "Regression", "RegressConfig", "ResourceChange", "Step", "Thresholds",
    "compare", "exit_code", "find_regressions", "load_config", "markdown", "terminal", "to_json",
]
