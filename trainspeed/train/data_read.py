"""Which data a run trained on, recorded when it starts, so that `--resume` on other data is refused.

A resume names its data again (`--data`). The path may be the same while the content is not: a
dataset written again in the same folder, another image folder moved into its place. A checkpoint
continued on other samples is another run with this run's rows, so the launcher records the
training split's fingerprint (its loader's `data_record`: the format and a fingerprint of the
content, as the summary records it) in `data_read.json` when the run starts, and a resume whose
data gives another fingerprint is refused in one line before anything in the run folder changes.
The path is compared as a setting (`trainspeed.train.resume_rule`). A run that recorded none (started before this file
existed, or on a loader that records nothing) is resumed as before."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from trainspeed.atomic import atomic_write_text
from trainspeed.errors import UsageError
from trainspeed.user_files import read_regular
from trainspeed.user_json import parse_json

DATA_FILE = "data_read.json"
KEPT = ("format", "path", "fingerprint", "fingerprint_covers")
"""What of a loader's record identifies the data (its counts of skipped samples do not)."""
MAX_BYTES = 64 * 1024
"""The record is a few hundred bytes; a longer file is not one this trainer wrote."""


def loader_record(loader: Any) -> dict | None:
    """The identity of the data a loader reads (None where the loader records nothing)."""
    record = getattr(loader, "data_record", None)
    found = record() if callable(record) else None
    if not isinstance(found, dict) or not found.get("fingerprint"):
        return None
    return {key: found.get(key) for key in KEPT}


def record_data(run_dir: Path, record: dict | None) -> None:
    """Write what the run trains on (nothing where the loader records nothing)."""
    if record is not None:
        atomic_write_text(run_dir / DATA_FILE, json.dumps(record, sort_keys=True) + "\n")


def check_same_data(run_dir: Path, now: dict | None, data_flag: str | None) -> None:
    """UsageError where the run recorded the data it trained on and `--data` now reads other data."""
    path = run_dir / DATA_FILE
    if not os.path.lexists(path):
        return
    text = read_regular(path, max_bytes=MAX_BYTES)
    if len(text) > MAX_BYTES:
        raise UsageError(f"train: {path} is over {MAX_BYTES // 1024} KiB, not the record this trainer writes; restore "
                         "it, or start a new run in another --out")
    recorded = parse_json(text, str(path))
    if not isinstance(recorded, dict) or not isinstance(recorded.get("fingerprint"), str):
        raise UsageError(f"train: {path} does not say which data the run trained on (no fingerprint); it was edited "
                         "or written by another program: restore it, or start a new run in another --out")
    if now is None:
        raise UsageError(f"train: the run in {run_dir} trained on {recorded.get('path')} and this resume reads no data "
                         "of that kind; resume with the --data it trained on")
    if now["fingerprint"] != recorded["fingerprint"]:
        raise UsageError(
            f"train: cannot resume {run_dir}: --data {data_flag} is not the data it trained on (fingerprint "
            f"{now['fingerprint'][:12]} now, {recorded['fingerprint'][:12]} when it started from "
            f"{recorded.get('path')}; it covers {recorded.get('fingerprint_covers')}); resume with that data, or "
            "start a new run in another --out")
