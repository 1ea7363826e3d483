"""asv suites for the attention workload: tiny (CPU, tests), quick (pull requests), full (nightly)."""

from flybench.suite import make_suite

Tiny = make_suite("attention", "tiny")
Quick = make_suite("attention", "quick")
Full = make_suite("attention", "full")
