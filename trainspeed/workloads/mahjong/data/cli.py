"""`trainspeed data ...` subcommands for Mahjong shards: mahjong-selfplay, from-mjai, inspect, verify."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

from trainspeed.flags import positive_int
from trainspeed.workloads.mahjong.data.mjai_import import import_mjai
from trainspeed.workloads.mahjong.data.selfplay import SelfPlayConfig, run_selfplay
from trainspeed.workloads.mahjong.data.verify import summarize_mahjong_shards, verify_mahjong_shards


def add_data_commands(data_subparsers: argparse._SubParsersAction) -> None:
    selfplay = data_subparsers.add_parser(
        "mahjong-selfplay", help="play rule-based games; write mjai logs and training shards")
    selfplay.add_argument("--games", type=positive_int, required=True, help="number of games")
    selfplay.add_argument("--workers", type=positive_int, default=1, help="parallel processes")
    selfplay.add_argument("--out", type=Path, required=True, help="output folder (rerun to resume)")
    selfplay.add_argument("--seed", type=int, default=0)
    selfplay.add_argument("--games-per-shard", type=positive_int, default=16)
    selfplay.add_argument("--no-progress", action="store_true", help="no progress bar")
    selfplay.set_defaults(handler=run_selfplay_command)

    from_mjai = data_subparsers.add_parser("from-mjai", help="encode mjai logs (files or folders) into shards")
    from_mjai.add_argument("logs", nargs="+", type=Path, help="mjai log files or folders of them")
    from_mjai.add_argument("--out", type=Path, required=True)
    from_mjai.add_argument("--games-per-shard", type=positive_int, default=16)
    from_mjai.set_defaults(handler=run_from_mjai_command)

    inspect = data_subparsers.add_parser("inspect", help="summarize a shard folder from its index")
    inspect.add_argument("folder", type=Path)
    inspect.add_argument("--json", action="store_true", help="print the summary as JSON")
    inspect.set_defaults(handler=run_inspect_command)

    verify = data_subparsers.add_parser("verify", help="check sizes, checksums, counts and legal actions")
    verify.add_argument("folder", type=Path)
    verify.set_defaults(handler=run_verify_command)


def run_selfplay_command(args: argparse.Namespace) -> int:
    result = run_selfplay(SelfPlayConfig(
        games=args.games, out=args.out, seed=args.seed, workers=args.workers,
        games_per_shard=args.games_per_shard, progress=not args.no_progress))
    print(f"{args.out}: {result.games} games, {result.samples} samples in {result.shards} shards "
          f"(played {result.games_played}, re-encoded from logs {result.games_replayed}) "
          f"in {result.seconds:.1f} s, {result.samples_per_s:.0f} samples/s")
    return 0


def run_from_mjai_command(args: argparse.Namespace) -> int:
    result = import_mjai(args.logs, args.out, games_per_shard=args.games_per_shard)
    print(f"{args.out}: {result.games} games from {result.files} files, "
          f"{result.samples} samples in {result.shards} shards")
    return 0


def run_inspect_command(args: argparse.Namespace) -> int:
    summary = summarize_mahjong_shards(args.folder)
    if args.json:
        print(json.dumps(asdict(summary), indent=1))
        return 0
    print(f"{args.folder}: format version {summary.format_version}, {summary.shards} shards, "
          f"{summary.games} games, {summary.samples} samples")
    print(f"  {summary.bytes_per_sample} bytes per sample, {summary.total_bytes / 2**20:.1f} MiB in shards, "
          f"feature max abs error (float16) {summary.feature_max_abs_error:.3g}")
    for name, column in summary.columns.items():
        print(f"  {name:9s} {column['dtype']:4s} {tuple(column['shape'])}")
    if summary.source:
        print(f"  source: {summary.source}")
    return 0


def run_verify_command(args: argparse.Namespace) -> int:
    report = verify_mahjong_shards(args.folder)
    for problem in report.problems:
        print(f"FAIL {problem}")
    if report.is_ok:
        print(f"{args.folder}: OK, {report.shards} shards, {report.samples} samples")
        return 0
    print(f"{args.folder}: {len(report.problems)} problems")
    return 1
