"""Research scripts, not part of the installed package: studies that prove the measurement method on a real GPU.

Run from the repository root as `python -m studies.<name>` (the FlyDSL CI study: `python -m studies.flydsl_ci`).
"""
