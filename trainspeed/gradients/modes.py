"""The noise-scale meter's modes, a flag's choices: read where the flags are checked, which may be
a process that imports no torch (a trainer of exported steps)."""

NOISE_SCALE_MODES = ("on", "off")
