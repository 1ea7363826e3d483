"""asv suites for the mla_decode workload (DeepSeek MLA decode): tiny (CPU, tests), quick (pull requests), full (nightly)."""

from flybench.suite import make_suite

Tiny = make_suite("mla_decode", "tiny")
Quick = make_suite("mla_decode", "quick")
Full = make_suite("mla_decode", "full")
