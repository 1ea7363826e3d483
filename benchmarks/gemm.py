"""asv suites for the gemm workload: tiny (CPU, tests), quick (pull requests), full (nightly)."""

from flybench.suite import make_suite

Tiny = make_suite("gemm", "tiny")
Quick = make_suite("gemm", "quick")
Full = make_suite("gemm", "full")
