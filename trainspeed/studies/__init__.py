"""`trainspeed study NAME`: the study's findings as commands, one folder per study.

A study's folder is its package. Its `__init__.py` is the study's face, which the command line
reads without importing torch: one `Study` (`trainspeed.studies.face`), `STUDY`, with its name, its
help, its config dataclass (whose fields declared with `flag_field` are its flags, each None unless
given, the preset filling in the rest), its presets, `report_part()` (the report part of the rows
it writes, or None when its rows are another producer's, such as bench rows) and `runner()`, which
imports the study itself. The runner has `preset_config(preset, out)` and `config_from_args(args,
out)` (a typed, checked config), `units(config)` and `estimate_s(config)` (for the progress bar and
the estimate printed before it starts), optionally `plan_lines(config)`,
`rows_files(config)` (each file of rows it appends to and the kinds of row that file may hold,
checked before the study starts so that no row lands in a file of other rows) and `run(config,
command, progress)`, which writes its typed rows under `out` and returns the files. The studies
measure with the package's own commands, never a loop of their own.

A new study is a folder beside these, plus its line in `STUDIES` (`docs/architecture.md`).
"""

from __future__ import annotations

from trainspeed.studies import batch_size, critical_batch, everything, remote, scaling, throughput, time_to_target
from trainspeed.studies.face import Study

STUDIES: dict[str, Study] = {package.STUDY.name: package.STUDY
                             for package in (throughput, remote, scaling, batch_size, time_to_target, critical_batch,
                                            everything)}
"""Every study by its command name, in the order `trainspeed study --help` lists them."""
