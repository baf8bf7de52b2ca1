"""`trainspeed data ...` subcommands that make Mahjong shards: mahjong-selfplay, from-mjai (`inspect` and
`verify` are the generic ones of `trainspeed.cli.data`, which apply Mahjong's checks to its format).

Only the flags are defined at import: the command line builds every parser before it knows which
command runs, so the engine and the encoders are imported by the handlers."""

from __future__ import annotations

import argparse
from pathlib import Path

from trainspeed.flags import positive_int, process_count, seed_value


def add_data_commands(data_subparsers: argparse._SubParsersAction) -> None:
    selfplay = data_subparsers.add_parser(
        "mahjong-selfplay", help="play rule-based games; write mjai logs and training shards")
    selfplay.add_argument("--games", type=positive_int, required=True, help="number of games")
    selfplay.add_argument("--workers", type=process_count, default=1, help="parallel processes")
    selfplay.add_argument("--out", type=Path, required=True, help="output folder (rerun to resume)")
    selfplay.add_argument("--seed", type=seed_value, default=0)
    selfplay.add_argument("--games-per-shard", type=positive_int, default=16)
    selfplay.add_argument("--no-progress", action="store_true", help="no progress bar")
    selfplay.set_defaults(handler=run_selfplay_command)

    from_mjai = data_subparsers.add_parser("from-mjai", help="encode mjai logs (files or folders) into shards")
    from_mjai.add_argument("logs", nargs="+", type=Path, help="mjai log files or folders of them")
    from_mjai.add_argument("--out", type=Path, required=True)
    from_mjai.add_argument("--games-per-shard", type=positive_int, default=16)
    from_mjai.set_defaults(handler=run_from_mjai_command)


def run_selfplay_command(args: argparse.Namespace) -> int:
    from trainspeed.workloads.mahjong.data.selfplay import SelfPlayConfig, run_selfplay

    result = run_selfplay(SelfPlayConfig(
        games=args.games, out=args.out, seed=args.seed, workers=args.workers,
        games_per_shard=args.games_per_shard, progress=not args.no_progress))
    print(f"{args.out}: {result.games} games, {result.samples} samples in {result.shards} shards "
          f"(played {result.games_played}, re-encoded from logs {result.games_replayed}) "
          f"in {result.seconds:.1f} s, {result.samples_per_s:.0f} samples/s")
    return 0


def run_from_mjai_command(args: argparse.Namespace) -> int:
    from trainspeed.workloads.mahjong.data.mjai_import import import_mjai

    result = import_mjai(args.logs, args.out, games_per_shard=args.games_per_shard)
    print(f"{args.out}: {result.games} games from {result.files} files, "
          f"{result.samples} samples in {result.shards} shards")
    return 0
