"""asv suites for the mixtral_step workload (the model lane): tiny (CPU, tests), quick (pull requests), full (nightly)."""

from flybench.suite import make_suite

Tiny = make_suite("mixtral_step", "tiny")
Quick = make_suite("mixtral_step", "quick")
Full = make_suite("mixtral_step", "full")
