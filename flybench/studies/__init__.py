"""Studies that prove the measurement method on a real GPU; run as `python -m flybench.studies.<name>`."""
