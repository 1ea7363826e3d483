"""Correctness gate, device timing, measurement contracts and case records."""
