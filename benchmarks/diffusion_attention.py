"""asv suites for the diffusion_attention workload: tiny (CPU, tests), quick (pull requests), full (nightly)."""

from flybench.suite import make_suite

Tiny = make_suite("diffusion_attention", "tiny")
Quick = make_suite("diffusion_attention", "quick")
Full = make_suite("diffusion_attention", "full")
