"""`trainspeed eval mahjong`: flags -> MahjongEvalConfig -> duplicate games -> row + figure."""

from __future__ import annotations

import argparse
from pathlib import Path

from trainspeed.evaluate.config import MahjongAgreementConfig, MahjongEvalConfig
from trainspeed.flags import Range, config_from_flags, flag_adder, positive_int

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
        "target) and append its mean rank and score with 95% intervals, and its rank shares, to --out.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)

    flag = flag_adder(mahjong, MahjongEvalConfig)

    flag("--policy", "policy", "run directory of the policy (its latest checkpoint)", required=True, metavar="RUN_DIR")
    flag("--step", "policy_step", "the policy's checkpoint of this step instead of its latest", metavar="N")
    flag("--opponent", "opponent", "rule-based, random, or a policy's run directory")
    flag("--games", "games", "games in all, a multiple of 4 (4 per deal)")
    flag("--seed", "seed", "chooses the deals")
    flag("--target", "target", "device:mode:precision the networks run on")
    flag("--temperature", "temperature", "0: best legal action; > 0: sample softmax(logits / T), seeded")
    flag("--batch-games", "batch_games", "games played at once per worker (their decisions share a forward pass)")
    flag("--workers", "workers", "processes playing deals side by side (same results for any number)")
    flag("--threads", "threads", "torch threads per worker")
    flag("--out", "out", "results JSONL the row is appended to (progress in OUT.progress)")
    flag("--no-progress", "progress", "no progress bar")
    mahjong.add_argument("--no-plot", action="store_true", help="do not redraw OUT's figure")
    mahjong.set_defaults(handler=run_eval_mahjong)
    add_agreement_command(eval_subparsers)
    add_null_test_command(eval_subparsers)


def add_null_test_command(eval_subparsers: argparse._SubParsersAction) -> None:
    null = eval_subparsers.add_parser(
        "mahjong-null", help="check the evaluation's interval: a policy sampling against itself, many seeds",
        description="Play a Mahjong policy against three copies of itself with sampled moves (an even match: "
        "mean rank 2.5 in expectation) once per evaluation seed, and append each evaluation's row and a "
        "summary with the share of 95% intervals that contain 2.5 to --out.")

    flag = flag_adder(null, MahjongEvalConfig)

    flag("--policy", "policy", "run directory of the policy (its latest checkpoint)", required=True, metavar="RUN_DIR")
    null.add_argument("--seeds", type=positive_int, default=20, help="evaluations, with seeds 0..N-1 (default: 20)")
    flag("--games", "games", "games per evaluation, a multiple of 4")
    null.add_argument("--temperature", type=Range(0, 1e6, low_open=True).parser(float), default=1.0,
                      help="sampling temperature, above 0 (default: 1.0)")
    flag("--target", "target", "device:mode:precision the network runs on")
    flag("--batch-games", "batch_games", "games played at once per worker")
    flag("--workers", "workers", "processes playing deals side by side")
    flag("--threads", "threads", "torch threads per worker")
    flag("--out", "out", "results JSONL the rows are appended to")
    flag("--no-progress", "progress", "no progress bar")
    null.set_defaults(handler=run_eval_null)


def run_eval_null(args: argparse.Namespace) -> int:
    from trainspeed.evaluate.null_test import run_null_test

    config = config_from_flags(MahjongEvalConfig, args)
    row = run_null_test(config, args.seeds, args.command_line)
    low, high = row.coverage_ci95
    print(f"{row.policy} (step {row.policy_step}) against itself at temperature {row.temperature:g}: "
          f"{row.covered} of {len(row.eval_seeds)} intervals contain 2.5 (coverage {row.coverage:.2f} "
          f"[{low:.2f}, {high:.2f}]); mean ranks {min(row.mean_ranks):.3f}..{max(row.mean_ranks):.3f}")
    print(f"appended to {config.out}")
    return 0


def add_agreement_command(eval_subparsers: argparse._SubParsersAction) -> None:
    agreement = eval_subparsers.add_parser(
        "mahjong-agreement", help="a Mahjong policy's agreement with its teacher per kind of decision",
        description="Answer every held-out decision of a Mahjong dataset with the policy's most likely "
        "legal action and append its agreement with the recorded (teacher's) action per kind of decision "
        "(discard, riichi, win, pon, chi, kan, abort, pass), and what its wrong discards cost, to --out.")

    flag = flag_adder(agreement, MahjongAgreementConfig)

    flag("--policy", "policy", "run directory of the policy (its latest checkpoint)", required=True, metavar="RUN_DIR")
    flag("--step", "policy_step", "the policy's checkpoint of this step instead of its latest", metavar="N")
    flag("--data", "data", "Mahjong shard folder", required=True, metavar="DIR")
    flag("--split", "split", "train or val (held-out games)")
    flag("--target", "target", "device:mode:precision the network runs on")
    flag("--batch-size", "batch_size", "samples per forward pass")
    flag("--threads", "threads", "torch threads")
    flag("--out", "out", "results JSONL the row is appended to")
    agreement.set_defaults(handler=run_eval_agreement)


def run_eval_agreement(args: argparse.Namespace) -> int:
    from trainspeed.evaluate.agreement import run_agreement

    config = config_from_flags(MahjongAgreementConfig, args)
    row = run_agreement(config, args.command_line)
    shares = ", ".join(f"{kind} {share:.3f} ({row.samples_per_kind.get(kind, row.samples)})"
                       for kind, share in row.agreement.items() if share is not None and kind in row.samples_per_kind)
    print(f"{row.policy} (step {row.policy_step}) on {row.samples} {row.split} decisions of {row.data}: "
          f"agreement {row.agreement['overall']:.3f}; {shares}")
    print("wrong building discards: " + ", ".join(f"{name} {count}" for name, count in row.discard_errors.items())
          + f"; folding discards agreed {row.agreement['discard_folding'] or 0:.3f} of {row.folding_samples}")
    print(f"appended to {config.out}")
    return 0


def run_eval_mahjong(args: argparse.Namespace) -> int:
    from trainspeed.evaluate.mahjong import run_mahjong_eval
    from trainspeed.evaluate.report import plot_mahjong_eval
    from trainspeed.evaluate.rows import read_eval_rows

    config = config_from_flags(MahjongEvalConfig, args).validate()
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
