"""asv suites for the moe workload: tiny (CPU, tests), quick (pull requests), full (nightly)."""

from flybench.suite import make_suite

Tiny = make_suite("moe", "tiny")
Quick = make_suite("moe", "quick")
Full = make_suite("moe", "full")
