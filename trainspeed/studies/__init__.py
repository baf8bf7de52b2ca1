"""`trainspeed study NAME`: the study's findings as commands, one module per finding.

Every study module has the same face: `NAME`, `HELP`, `add_arguments(parser)` (its own flags,
each None unless given), `preset_config(preset, out)` and `config_from_args(args, out)` (a typed,
checked config), `units(config)` and `estimate_s(config)` (for the progress bar and the estimate
printed before it starts) and `run(config, command, progress)`, which writes its typed rows under
`out` and returns the files. The studies measure with the package's own commands, never a loop of
their own.
"""

from __future__ import annotations

from types import ModuleType

from trainspeed.studies import batch_size, everything, remote, scaling, throughput

STUDIES: dict[str, ModuleType] = {module.NAME: module for module in (throughput, remote, scaling, batch_size, everything)}
