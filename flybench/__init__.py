"""flybench: benchmarks and regression tracking for FlyDSL GPU kernels."""

__version__ = "0.1.0"
