"""Benchmark scripts. A package so that tests can import the reference peers in `reference/`."""
