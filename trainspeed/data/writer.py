"""Which writer a dataset folder belongs to, and whether that writer finished.

Every command that writes a shard set (`data mahjong-selfplay`, `data from-mjai`, `data
from-arrays`, `write_dataset`) claims its folder first (`claim_folder`), before it writes anything:

- a new or empty folder is claimed: `writer.json` names the writer and its settings, and says the
  set is unfinished;
- a folder whose `writer.json` names the same writer with the same settings is that writer's own:
  it completes or extends its set there (self-play with the same seed, say);
- anything else (another writer's set, the same writer's with other settings, a run directory, a
  shard set or files no writer claimed) is refused in one line, and nothing there changes.

Once the index is written the writer marks the set finished (`FolderClaim.finish`). Until then the
folder is an unfinished write (a kill -9, a crash, or a writer still at work): `load_index`
refuses it (`unfinished_problem`), so `verify`, `inspect` and training never take part of a set for
all of it, and rerunning the same command completes it.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from trainspeed.atomic import atomic_write_text, check_writable_directory
from trainspeed.errors import UsageError
from trainspeed.user_files import FileRefused, read_regular
from trainspeed.user_json import JSONRefused, loads

WRITER_FILE = "writer.json"
WRITER_MAX_BYTES = 1 << 20
RUN_MARKERS = ("train_config.json", "checkpoints", "metrics.jsonl")
"""Files of a training run's directory: a folder holding one is described as a run."""

LegacyOwner = Callable[[Path], dict[str, Any] | None]
"""For a folder a writer made before folders recorded their writer: its settings, or None."""


@dataclass(frozen=True)
class FolderClaim:
    """A folder a writer holds: `finished_before` is None for a folder it found new or empty,
    else whether its own set there was finished when it claimed it."""

    folder: Path
    writer: str
    settings: dict[str, Any]
    finished_before: bool | None

    def finish(self) -> None:
        """Mark the set whole: call once its index is written."""
        _write_record(self.folder, self.writer, self.settings, finished=True)

    def abandon(self) -> None:
        """After a write failed (bad input found half way): a folder the claim found new or empty
        is emptied again, the record included; one that held the writer's own set keeps its
        unfinished mark, for a rerun to complete."""
        if self.finished_before is None:
            for entry in self.folder.iterdir():
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()


def _describe_settings(settings: dict[str, Any]) -> str:
    return ", ".join(f"{key} {json.dumps(value)[:60]}" for key, value in sorted(settings.items()))


def _differences(before: dict[str, Any], now: dict[str, Any]) -> str:
    keys = sorted(key for key in set(before) | set(now) if before.get(key) != now.get(key))
    return ", ".join(f"{key} {json.dumps(before.get(key))[:40]} -> {json.dumps(now.get(key))[:40]}" for key in keys)


def read_record(folder: Path) -> dict[str, Any] | None:
    """The folder's `writer.json` (writer, settings, finished), or None when it has none;
    UsageError for one that is not such a record (it is data from wherever the folder came from)."""
    path = folder / WRITER_FILE
    if not path.exists() and not path.is_symlink():
        return None
    try:
        record = loads(read_regular(path, str(path), WRITER_MAX_BYTES).decode("utf-8"))
    except FileRefused:
        raise
    except (UnicodeDecodeError, JSONRefused):
        record = None
    if (not isinstance(record, dict) or not isinstance(record.get("writer"), str)
            or not isinstance(record.get("settings"), dict) or not isinstance(record.get("finished"), bool)):
        raise UsageError(f"{path}: not the record a trainspeed writer keeps (writer, settings, finished)")
    return record


def unfinished_problem(folder: Path) -> str | None:
    """Why the shard set in `folder` is not whole (its writer did not finish), or None."""
    record = read_record(folder)
    if record is None or record["finished"]:
        return None
    return (f"an unfinished write of `trainspeed data {record['writer']}` (it was stopped, or is still running); "
            "rerun that command with the same settings to complete it")


def _contents(folder: Path) -> list[str]:
    return sorted(entry.name for entry in folder.iterdir() if not entry.name.startswith(".write-probe-"))


def _foreign(folder: Path, names: list[str]) -> str:
    """What a folder holds that no writer claimed, in a few words."""
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    if any(name in RUN_MARKERS for name in names):
        return f"a training run ({shown})"
    if "index.json" in names:
        return f"a shard set that records no writer ({shown})"
    return f"files of something else ({shown})"


def check_folder(folder: Path, writer: str, settings: dict[str, Any], what: str = "--out",
                 legacy: LegacyOwner | None = None) -> bool | None:
    """Whether `writer` with `settings` may write into `folder`, reading only: None for a new or
    empty folder, True or False for its own finished or unfinished set there; UsageError, naming
    `what` and what the folder holds, for anything else. Callers check their folders with it before
    any work (a study before its first command); `claim_folder` runs it too."""
    settings = json.loads(json.dumps(settings))
    if not folder.exists():
        return None
    if not folder.is_dir():
        raise UsageError(f"{what} {folder}: is not a folder; give a new or empty folder")
    names = _contents(folder)
    if not names:
        return None
    record = read_record(folder)
    if record is None:
        found = legacy(folder) if legacy is not None else None
        if found is not None and found == settings:
            return True
        made = f"made with other settings ({_differences(found, settings)})" if found is not None else ""
        raise UsageError(f"{what} {folder}: holds {made or _foreign(folder, names)}, not a dataset of `trainspeed data "
                         f"{writer}` with these settings; choose a new or empty folder (nothing there is changed)")
    if record["writer"] != writer:
        raise UsageError(f"{what} {folder}: holds a dataset of `trainspeed data {record['writer']}`, not of "
                         f"`trainspeed data {writer}`; choose a new or empty folder (nothing there is changed)")
    if record["settings"] != settings:
        raise UsageError(f"{what} {folder}: holds a dataset of `trainspeed data {writer}` made with other settings "
                         f"({_differences(record['settings'], settings)}); rerun with its settings to complete or "
                         "extend it, or choose a new or empty folder (nothing there is changed)")
    return record["finished"]


def claim_folder(folder: str | os.PathLike, writer: str, settings: dict[str, Any], what: str = "--out",
                 legacy: LegacyOwner | None = None, extends: bool = False) -> FolderClaim:
    """Claim `folder` for `writer` with `settings` (`check_folder`, then `writer.json` marked
    unfinished), before anything else is written there. A writer that `extends` its own finished
    set (self-play adds games) may claim it again; any other writer is refused there, since the
    set it would write is the one already there."""
    folder = Path(folder)
    finished = check_folder(folder, writer, settings, what, legacy)
    if finished and not extends:
        raise UsageError(f"{what} {folder}: already holds this dataset, finished; choose a new or empty folder to "
                         "write it again (nothing there is changed)")
    check_writable_directory(folder, f"{what} {folder}")
    settings = json.loads(json.dumps(settings))
    _write_record(folder, writer, settings, finished=False)
    return FolderClaim(folder, writer, settings, finished)


def _write_record(folder: Path, writer: str, settings: dict[str, Any], finished: bool) -> None:
    record = {"writer": writer, "settings": settings, "finished": finished}
    atomic_write_text(folder / WRITER_FILE, json.dumps(record, indent=1, sort_keys=True) + "\n")


def clear_own_files(claim: FolderClaim) -> None:
    """Remove everything but the writer's record from a folder the writer claimed while its set
    there was unfinished, so it writes that set again from the start. Only a folder the claim
    shows to be the writer's own (it found it empty, or holding its own record) is ever cleared."""
    if claim.finished_before is None:
        return
    for entry in claim.folder.iterdir():
        if entry.name == WRITER_FILE:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
