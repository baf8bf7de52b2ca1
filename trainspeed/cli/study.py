"""`trainspeed study NAME --out DIR`: one finding of the study, measured here and written as rows."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainspeed.errors import UsageError
from trainspeed.flags import Range

if TYPE_CHECKING:
    from trainspeed.studies.face import Study

DEFAULT_MAX_HOURS = 48.0
"""The longest estimate a study starts with unless told otherwise: beyond it, a setting is more
likely a typo than a plan."""

EPILOG = """\
every study writes typed rows under --out; read them all with
  trainspeed report DIR --out DIR/report.html
presets: smoke (minutes in all on a 2-core CPU, the test suite's), quick (the default), full (the
settings of the committed measurements in docs/results); a study's flags override its preset, and
each flag's help says its default at quick and, where they differ, at smoke and full
every setting is checked as the study's own commands check it before anything is written, and a
study whose estimate is longer than --max-hours (48 by default) does not start
"""


def add_study_command(subparsers: argparse._SubParsersAction) -> None:
    from trainspeed.studies import STUDIES
    from trainspeed.studies.common import DEFAULT_PRESET, PRESETS, check_preset

    parser = subparsers.add_parser(
        "study", help="reproduce one finding of the study here (or all of them), as rows for `trainspeed report`",
        description="Run one finding of the study on this machine and write its rows.", epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    studies = parser.add_subparsers(dest="study", required=True, metavar="STUDY")
    for name, face in STUDIES.items():
        study = studies.add_parser(name, help=face.help, description=face.description)
        study.add_argument("--out", type=Path, required=True, help="the folder its rows go to")
        study.add_argument("--preset", default=DEFAULT_PRESET, type=check_preset,
                           help=f"how much to measure: {', '.join(PRESETS)} (default: {DEFAULT_PRESET})")
        study.add_argument("--no-progress", action="store_true", help="no progress bar")
        study.add_argument("--max-hours", type=Range(0, 10_000, low_open=True, why_high=" h").parser(float),
                           default=DEFAULT_MAX_HOURS,
                           help=f"refuse to start when the estimate is longer (default {DEFAULT_MAX_HOURS:g} h; give a "
                           "larger one to run a longer study)")
        face.add_flags(study)
        study.set_defaults(handler=run_study, face=face)


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def run_study(args: argparse.Namespace) -> int:
    study_files(args)
    return 0


def study_files(args: argparse.Namespace) -> list[Path]:
    """Run the study the flags describe, print what the command does, and return the files it
    wrote rows to (`trainspeed.study` returns their rows to a Python caller)."""
    from tqdm.auto import tqdm

    from trainspeed.atomic import check_writable_directory
    from trainspeed.machine import Machine
    from trainspeed.studies.common import StudyFailed, now
    from trainspeed.studies.rows import STUDIES_FILE, StudyRecord, record_study
    from trainspeed.user_json import check_rows_file

    face: Study = args.face
    module = face.runner()
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out} is a file; name a folder for the study's rows")
    check_writable_directory(args.out, f"--out {args.out}")
    config: Any = module.config_from_args(args, args.out)
    for path, kinds in {**module.rows_files(config), args.out / STUDIES_FILE: (StudyRecord.KIND,)}.items():
        check_rows_file(path, f"study {face.name}: {path}", kinds)
    estimate = module.estimate_s(config)
    if estimate > args.max_hours * 3600:
        raise UsageError(f"study {face.name}: the estimate is {_minutes(estimate)} ({estimate / 3600:,.1f} h) on a "
                         f"2-core CPU, longer than --max-hours {args.max_hours:g}; check the settings, or give a larger "
                         "--max-hours to run it")
    print(f"study {face.name} ({args.preset}): about {_minutes(estimate)} on a 2-core CPU; rows go to {args.out}",
          flush=True)
    for line in getattr(module, "plan_lines", lambda _: [])(config):
        print(line, flush=True)
    machine, started, clock = Machine.at_start(), now(), time.perf_counter()
    with tqdm(total=module.units(config), disable=args.no_progress, unit="step", file=sys.stderr) as bar:

        def progress(units: int, what: str) -> None:
            bar.update(units)
            bar.set_description(what)

        try:
            files = module.run(config, args.command_line, progress)
        except StudyFailed as error:
            raise UsageError(f"study {face.name}: {error}") from None
    record = record_study(args.out, face.name, args.preset, started, time.perf_counter() - clock, estimate, files,
                          args.command_line, machine)
    print("\n".join(str(path) for path in files))
    print(f"study {face.name}: {_minutes(record.wall_s)} (estimated {_minutes(estimate)}); "
          f"read it with `trainspeed report {args.out} --out {args.out / 'report.html'}`")
    return files
