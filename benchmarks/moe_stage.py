"""asv suites for the moe_stage workload (one stage of a routed MoE): tiny (CPU, tests), quick (pull requests), full (nightly)."""

from flybench.suite import make_suite

Tiny = make_suite("moe_stage", "tiny")
Quick = make_suite("moe_stage", "quick")
Full = make_suite("moe_stage", "full")
