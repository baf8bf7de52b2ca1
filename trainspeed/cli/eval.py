"""`trainspeed eval mahjong`: flags -> MahjongEvalConfig -> duplicate games -> row + figure."""

from __future__ import annotations

import argparse
from pathlib import Path

from trainspeed.evaluate.config import MahjongEvalConfig
from trainspeed.flags import add_flag, config_from_flags, thread_count
from trainspeed.user_json import check_rows_file

EPILOG = """\
examples:
  trainspeed eval mahjong --policy runs/mahjong --games 400             # against 3 rule-based agents
  trainspeed eval mahjong --policy runs/a --opponent runs/b --games 1000 --target cuda:eager:bf16
  trainspeed eval mahjong --policy runs/a --opponent random --temperature 0.5 --seed 1
Each deal is played four times, the policy once in each seat against three copies of the opponent;
deal d has engine seed deal_seed(SEED, d), so evaluations with one --seed play the same walls.
An interrupted evaluation continues where it stopped when rerun with the same flags.
"""


def add_eval_commands(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("eval", help="play trained policies and measure their strength")
    eval_subparsers = parser.add_subparsers(dest="eval_command", required=True, metavar="WORKLOAD")
    mahjong = eval_subparsers.add_parser(
        "mahjong", help="duplicate 1-vs-3 games of a Mahjong policy against an opponent",
        description="Play a trained Mahjong policy in duplicate 1-vs-3 games (batched inference on a "
        "target) and append its mean rank, score and rank shares with 95%% intervals to --out.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)

    def flag(name: str, path: str, help: str, **kwargs) -> None:
        add_flag(mahjong, name, MahjongEvalConfig, path, help, **kwargs)

    flag("--policy", "policy", "run directory of the policy (its latest checkpoint)", required=True, metavar="RUN_DIR")
    flag("--opponent", "opponent", "rule-based, random, or a policy's run directory")
    flag("--games", "games", "games in all, a multiple of 4 (4 per deal)")
    flag("--seed", "seed", "chooses the deals")
    flag("--target", "target", "device:mode:precision the networks run on")
    flag("--temperature", "temperature", "0: best legal action; > 0: sample softmax(logits / T), seeded")
    flag("--batch-games", "batch_games", "games played at once (their decisions share a forward pass)")
    flag("--threads", "threads", "torch threads", type=thread_count)
    flag("--out", "out", "results JSONL the row is appended to (progress in OUT.progress)")
    flag("--no-progress", "progress", "no progress bar")
    mahjong.add_argument("--no-plot", action="store_true", help="do not redraw OUT's figure")
    mahjong.set_defaults(handler=run_eval_mahjong)


def run_eval_mahjong(args: argparse.Namespace) -> int:
    from trainspeed.evaluate.mahjong import read_eval_rows, run_mahjong_eval
    from trainspeed.report.eval_plot import plot_mahjong_eval

    config = config_from_flags(MahjongEvalConfig, args).validate()
    check_rows_file(Path(config.out), f"--out {config.out}")
    row = run_mahjong_eval(config, args.command_line)
    low, high = row.mean_rank_ci95 or (row.mean_rank, row.mean_rank)
    print(f"{row.policy} (step {row.policy_step}) vs 3x {row.opponent}: mean rank {row.mean_rank:.3f} "
          f"[{low:.3f}, {high:.3f}], score {row.mean_score_delta:+.0f}, ranks "
          + " / ".join(f"{share:.2f}" for share in row.rank_distribution)
          + f"; {row.games} games ({row.games_played} played now: {row.games_per_s:.2f} games/s, "
          f"{row.decisions_per_s:.0f} decisions/s, engine {row.engine_s:.1f} s, network {row.network_s:.1f} s)")
    print(f"appended to {config.out}")
    if not args.no_plot:
        paths = plot_mahjong_eval(read_eval_rows(config.out), Path(config.out).with_suffix(""))
        print("\n".join(str(path) for path in paths))
    return 0
