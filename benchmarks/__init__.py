"""Benchmarks: speed and memory measured against baselines run in the same process (not tests)."""
