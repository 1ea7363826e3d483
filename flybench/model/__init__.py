"""The model lane: a whole decoder step timed as a JAX user runs it, beside the kernel lane's single kernels."""
