"""Data-parallel training: one rank's loop, its launch on many devices, checkpoints and metrics."""
