"""The noise-scale meter's modes and how often it measures, a flag's choices and default: read
where the flags are checked, which may be a process that imports no torch (a trainer of exported
steps)."""

NOISE_SCALE_MODES = ("on", "off")
DEFAULT_MEASURE_EVERY = 32
"""One-rank steps per measurement by default (`--noise-scale-every`, `trainspeed.gradients.noise_scale`):
the cost table (`docs/results/noise_scale_cost.md`) puts a step measured over 2 micro-batches at up
to about twice a plain step on small models, so 1 step in 32 costs a few percent of the training."""
MAX_MEASURE_EVERY = 2**20
