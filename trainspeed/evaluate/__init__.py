"""Evaluating trained policies: run a run directory's network on a target, play it, summarise.

This layer sits above `trainspeed.train` because it reads what training leaves behind (run
directories and their checkpoints), and below `trainspeed.report`, which plots its rows.
"""
