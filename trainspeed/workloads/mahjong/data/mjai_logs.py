"""Reading and writing mjai logs (one JSON event per line), tolerant of the variants in the wild.

Accepted: plain or gzip files (`.gz` is detected by its magic bytes, not its name), a UTF-8 BOM,
CRLF line ends, blank lines, a file that is one JSON array of events, and "none" events (some tools
log a player's pass explicitly; the engine infers passes, so they are dropped). Several games in one
file are split at each `start_game`. An error names the file and the line.

Servers and engines also write the events themselves differently. The engine replays a game from
the dealt hands and the players' actions and works out every result itself, so the fields that
only report results or bookkeeping are normalised away before replay (`RESULT_FIELDS`): a
`ryukyoku` whose `tehais` lists null (or "?") for hands not shown, a `hora` with yaku, fu, points,
`uradora_markers` or scores, a `start_game` with the viewer's `id`, names or a game type, a
`reach_accepted` with deltas and scores, and annotations such as Mortal's `meta` on any event. A
`start_kyoku` without `scores` (the original mjai server omits them) takes the scores that the
previous hand's last result reported, or 25,000 each at the very start of a game.

Refused, because a guess would change the samples: hidden tiles ("?") in a dealt hand or a draw (a
log from one player's view), a discard that does not say whether it was the drawn tile
(`tsumogiri`), and a hand whose starting scores no event gives.
"""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Iterable

from trainspeed.atomic import atomic_path
from trainspeed.errors import UsageError
from trainspeed.user_files import read_regular
from trainspeed.user_json import parse_json

GZIP_MAGIC = b"\x1f\x8b"
DROPPED_EVENTS = frozenset({"none"})
RESULT_FIELDS: dict[str, frozenset[str]] = {
    "start_game": frozenset({"type"}),
    "hora": frozenset({"type", "actor", "target", "pai"}),
    "ryukyoku": frozenset({"type", "actor", "reason"}),
    "reach_accepted": frozenset({"type", "actor"}),
    "end_kyoku": frozenset({"type"}),
    "end_game": frozenset({"type"}),
}
"""Events that report results or bookkeeping, and the fields of each that replay keeps (the engine
computes deltas, scores, hands shown at a draw, yaku and points itself)."""
ANNOTATION_FIELDS = frozenset({"meta"})
"""Fields some engines add to any event for their own analysis (Mortal's q-values, masks, timings)."""
HIDDEN_TILE = "?"
START_SCORES = [25000, 25000, 25000, 25000]
"""Every seat's score when a game starts under the engine's rules."""
REQUIRED_FIELDS: dict[str, tuple[str, ...]] = {
    "start_kyoku": ("bakaze", "kyoku", "honba", "kyotaku", "oya", "dora_marker", "tehais"),
    "tsumo": ("actor", "pai"),
    "dahai": ("actor", "pai", "tsumogiri"),
}

LoggedEvent = tuple[int, dict]
"""(line number in the file, event)."""


def _read_text(path: Path) -> str:
    raw = read_regular(path)  # a FIFO or a device among the logs would never end
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
        return [(1, event) for event in parse_json(stripped, str(path))]
    logged = []
    for line_number, line in enumerate(io.StringIO(text), start=1):
        line = line.strip()
        if line:
            logged.append((line_number, parse_json(line, f"{path}: line {line_number}")))
    return logged


def read_games(path: str | Path) -> list[list[LoggedEvent]]:
    """The games of one mjai log file, each as its (line number, event) list, normalised."""
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
    return [normalize_game(path, game) for game in games]


def normalize_game(path: Path, events: list[LoggedEvent]) -> list[LoggedEvent]:
    """One game's events as the engine replays them (see the module docstring): result and
    annotation fields dropped, missing starting scores filled in, hidden or unsaid facts refused."""
    normalized: list[LoggedEvent] = []
    reported: list[int] | None = None
    """Scores reported since the last start_kyoku (a hand's results), None when none was."""
    first_hand = True
    for line_number, event in events:
        kind = event["type"]
        scores = event.get("scores")
        if kind == "start_kyoku":
            event = _with_start_scores(path, line_number, event, reported, first_hand)
            reported, first_hand = None, False
        elif _is_score_list(scores):
            reported = list(scores)
        _check_required(path, line_number, event)
        kept = RESULT_FIELDS.get(kind)
        event = {key: value for key, value in event.items()
                 if key not in ANNOTATION_FIELDS and (kept is None or key in kept)}
        normalized.append((line_number, event))
    return normalized


def _is_score_list(value: object) -> bool:
    return isinstance(value, list) and len(value) == len(START_SCORES) and all(isinstance(v, int) for v in value)


def _with_start_scores(path: Path, line_number: int, event: dict, reported: list[int] | None,
                       first_hand: bool) -> dict:
    """A start_kyoku with its `scores`: its own, the scores the previous hand's last result
    reported, or the starting scores when this is the game's first hand (East 1, no repeat, no
    deposits)."""
    if _is_score_list(event.get("scores")):
        return event
    game_start = (event.get("bakaze") == "E" and event.get("kyoku") == 1 and event.get("honba") == 0
                  and event.get("kyotaku") == 0)
    if not first_hand and reported is not None:
        return {**event, "scores": list(reported)}
    if first_hand and game_start:
        return {**event, "scores": list(START_SCORES)}
    raise UsageError(f"{path}: line {line_number}: start_kyoku has no scores, and no earlier event of the "
                     "game reports them; the players' scores are part of every sample")


def _check_required(path: Path, line_number: int, event: dict) -> None:
    kind = event["type"]
    for name in REQUIRED_FIELDS.get(kind, ()):
        if event.get(name) is None:
            why = ("the samples record whether each discard was the drawn tile, and this log does not say"
                   if name == "tsumogiri" else "the engine needs it to replay the game")
            raise UsageError(f"{path}: line {line_number}: {kind} has no {name!r}; {why}")
    hidden = (kind == "tsumo" and event.get("pai") == HIDDEN_TILE) or (
        kind == "start_kyoku" and any(HIDDEN_TILE in hand for hand in event["tehais"] if isinstance(hand, list)))
    if hidden:
        raise UsageError(f"{path}: line {line_number}: {kind} shows hidden tiles ({HIDDEN_TILE!r}): the log is "
                         "one player's view of the game; only logs that show every hand can be replayed")


def write_log(path: Path, events: Iterable[dict]) -> None:
    """A gzip JSON-lines log with fixed header bytes (mtime 0), so reruns give identical files."""
    text = "".join(json.dumps(event, separators=(",", ":"), sort_keys=True) + "\n" for event in events)
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as handle:
            handle.write(text.encode("utf-8"))
