"""Batch-size sweeps without data IO: timing, result rows, ratios to a baseline."""
