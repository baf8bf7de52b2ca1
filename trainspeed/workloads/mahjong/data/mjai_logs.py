"""Reading and writing mjai logs (one JSON event per line), tolerant of the variants in the wild.

Accepted: plain or gzip files (`.gz` is detected by its magic bytes, not its name), a UTF-8 BOM,
CRLF line ends, blank lines, a file that is one JSON array of events, and "none" events (some tools
log a player's pass explicitly; the engine infers passes, so they are dropped). Several games in one
file are split at each `start_game`. An error names the file and the line.
"""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Iterable

from trainspeed.atomic import atomic_path
from trainspeed.errors import UsageError

GZIP_MAGIC = b"\x1f\x8b"
DROPPED_EVENTS = frozenset({"none"})

LoggedEvent = tuple[int, dict]
"""(line number in the file, event)."""


def _read_text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise UsageError(f"{path}: cannot read ({error.strerror})") from None
    if raw.startswith(GZIP_MAGIC):
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as error:
            raise UsageError(f"{path}: broken gzip data ({error})") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise UsageError(f"{path}: not UTF-8 text at byte {error.start}; is this an mjai log?") from None


def _parse_lines(path: Path, text: str) -> list[LoggedEvent]:
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            events = json.loads(stripped)
        except json.JSONDecodeError as error:
            raise UsageError(f"{path}: line {error.lineno}: not valid JSON ({error.msg})") from None
        return [(1, event) for event in events]
    logged = []
    for line_number, line in enumerate(io.StringIO(text), start=1):
        line = line.strip()
        if not line:
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError as error:
            raise UsageError(f"{path}: line {line_number}: not valid JSON ({error.msg})") from None
        logged.append((line_number, event))
    return logged


def read_games(path: str | Path) -> list[list[LoggedEvent]]:
    """The games of one mjai log file, each as its (line number, event) list."""
    path = Path(path)
    games: list[list[LoggedEvent]] = []
    for line_number, event in _parse_lines(path, _read_text(path)):
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            raise UsageError(f"{path}: line {line_number}: an mjai event is a JSON object with a \"type\"")
        if event["type"] in DROPPED_EVENTS:
            continue
        if event["type"] == "start_game" or not games:
            games.append([])
        games[-1].append((line_number, event))
    if not games:
        raise UsageError(f"{path}: holds no mjai events")
    return games


def write_log(path: Path, events: Iterable[dict]) -> None:
    """A gzip JSON-lines log with fixed header bytes (mtime 0), so reruns give identical files."""
    text = "".join(json.dumps(event, separators=(",", ":"), sort_keys=True) + "\n" for event in events)
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as handle:
            handle.write(text.encode("utf-8"))
