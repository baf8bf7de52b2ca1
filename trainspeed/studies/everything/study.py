"""`trainspeed study all`: every study of the study's findings, one after another, at one preset.

`--preset smoke` finishes in minutes on a 2-core CPU (the test suite runs it), `quick` (the
default) in well under an hour there, `full` at the settings of the committed measurements. The
estimate of each study is printed before anything starts, one progress bar covers them all, and
each writes its rows under OUT, so `trainspeed report OUT --out OUT/report.html` reads the lot. At
smoke and quick the scaling and batch-size studies share one self-play data set; a study this
machine cannot run (the remote one without grpcio) is left out, and the plan says why.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from trainspeed.errors import UsageError
from trainspeed.machine import Machine
from trainspeed.studies import batch_size, remote, scaling, throughput
from trainspeed.studies.common import Progress, no_progress, now
from trainspeed.studies.everything.config import STUDY_NAMES
from trainspeed.studies.face import Study
from trainspeed.studies.rows import record_study

STUDIES: tuple[Study, ...] = (throughput.STUDY, remote.STUDY, scaling.STUDY, batch_size.STUDY)
"""The studies it runs, in order."""
SHARED_DATA = "mahjong_selfplay"


@dataclass(frozen=True)
class AllConfig:
    out: str
    preset: str
    studies: dict[str, Any]
    """Each study's config, by the study's name, in the order they run."""
    left_out: dict[str, str]
    """The studies this machine cannot run, and why."""


def _share_data(configs: dict[str, Any], out: Path) -> dict[str, Any]:
    """The scaling and the batch-size study on one data set, made once with the larger game count."""
    data = str(out / SHARED_DATA)
    names = (scaling.STUDY.name, batch_size.STUDY.name)
    games = max(configs[name].make_data_games for name in names)
    return {**configs, **{name: dataclasses.replace(configs[name], data=data, make_data_games=games) for name in names}}


def config_from_args(args: argparse.Namespace, out: Path) -> AllConfig:
    configs: dict[str, Any] = {}
    left_out: dict[str, str] = {}
    chosen = getattr(args, "only", None) or STUDY_NAMES
    for study in (study for study in STUDIES if study.name in chosen):
        module = study.runner()
        try:
            config = module.preset_config(args.preset, out)
            module.check(config)
            configs[study.name] = config
        except UsageError as error:
            left_out[study.name] = str(error)
    if args.preset != "full" and scaling.STUDY.name in configs and batch_size.STUDY.name in configs:
        configs = _share_data(configs, out)
    return AllConfig(out=str(out), preset=args.preset, studies=configs, left_out=left_out)


def _module(name: str) -> ModuleType:
    """The runner of the study named `name`."""
    return next(study for study in STUDIES if study.name == name).runner()


def units(config: AllConfig) -> int:
    return sum(_module(name).units(study) for name, study in config.studies.items())


def estimate_s(config: AllConfig) -> float:
    return sum(_module(name).estimate_s(study) for name, study in config.studies.items())


def plan_lines(config: AllConfig) -> list[str]:
    lines = [f"  {name}: about {_module(name).estimate_s(study) / 60:.0f} min" for name, study in config.studies.items()]
    return lines + [f"  {name}: left out ({why})" for name, why in config.left_out.items()]


def rows_files(config: AllConfig) -> dict[Path, tuple[str, ...]]:
    """The files of rows every study it runs appends to, and the kinds of row each holds."""
    return {path: kinds for name, study in config.studies.items() for path, kinds in _module(name).rows_files(study).items()}


def run(config: AllConfig, command: str, progress: Progress = no_progress) -> list[Path]:
    files: list[Path] = []
    for name, study in config.studies.items():
        module = _module(name)
        machine, started, clock = Machine.at_start(), now(), time.perf_counter()
        written = module.run(study, command, progress)
        record_study(Path(config.out), name, config.preset, started, time.perf_counter() - clock,
                     module.estimate_s(study), written, command, machine)
        files += written
    return files


