"""`trainspeed data ...`: the generic verbs (from-arrays, inspect, verify) and each workload's dataset
tools (mahjong-selfplay, from-mjai, images).

`inspect` and `verify` read any shard set from its index alone; a format a workload knows more
about (Mahjong: legal actions, finite features, game counts) gets that workload's checks too.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from trainspeed.errors import UsageError
from trainspeed.flags import THREADS, WORKERS, CommaListAction, Range, comma_list, positive_int
from trainspeed.user_json import printable
from trainspeed.workloads.mahjong.data.cli import add_data_commands as add_mahjong_data_commands
from trainspeed.workloads.stylegan3.cli import add_images_command as add_image_data_command

if TYPE_CHECKING:
    from trainspeed.data.verify import VerifyReport


def format_checks() -> dict[str, Callable[[Path], "VerifyReport"]]:
    """Shard formats whose workload checks more than any shard set gets (sizes, checksums, totals)."""
    from trainspeed.workloads.mahjong.data.shards import MAHJONG_SCHEMA
    from trainspeed.workloads.mahjong.data.verify import verify_mahjong_shards

    return {MAHJONG_SCHEMA.format_name: verify_mahjong_shards}


def add_data_commands(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("data", help="make, import, inspect and verify datasets")
    data_subparsers = parser.add_subparsers(dest="data_command", required=True, metavar="DATA_COMMAND")

    from_arrays = data_subparsers.add_parser(
        "from-arrays", help="write a dataset of your own arrays (.npz, or a folder of .npy) as shards",
        description="Write the named arrays of an .npz file (or the .npy files of a folder, one column each) "
        "as a shard set that trainspeed.data.open_dataset reads; each array holds one entry per sample.")
    from_arrays.add_argument("source", type=Path, help="an .npz file or a folder of .npy files (never unpickled)")
    from_arrays.add_argument("--out", type=Path, required=True, help="a new or empty folder")
    from_arrays.add_argument("--split-by", help="integer column whose equal values stay in one split (e.g. a "
                             "document id); default: each sample on its own")
    from_arrays.add_argument("--val-fraction", type=Range(0, 1).parser(float), default=0.05, help="share held out for validation "
                             "(of the --split-by values; per-mille steps; default: 0.05)")
    from_arrays.add_argument("--samples-per-shard", type=positive_int, help="default: about 64 MiB per shard")
    from_arrays.add_argument("--vocab", type=positive_int, help="the number of token ids: every id of the tokens "
                             "array must be below it (recorded in the index); default: any id int32 holds")
    from_arrays.set_defaults(handler=run_from_arrays_command)

    data_help = ("a shard folder, or data read where it lies: an image folder (ROOT/CLASS/*.jpg), a token file "
                 "(.bin, .npy, or a folder with train.bin), a Hugging Face dataset, WebDataset .tar shards")
    inspect = data_subparsers.add_parser("inspect", help="summarize a dataset: a shard folder from its index, data "
                                         "read where it lies from its listing")
    inspect.add_argument("folder", type=Path, metavar="DATA", help=data_help)
    inspect.add_argument("--json", action="store_true", help="print the summary as JSON")
    inspect.set_defaults(handler=run_inspect_command)

    verify = data_subparsers.add_parser(
        "verify", help="check sizes, checksums, counts and token ids (and a workload's own checks of its format); "
        "decode every image of data read where it lies")
    verify.add_argument("folder", type=Path, metavar="DATA", help=data_help)
    verify.add_argument("--vocab", type=positive_int, help="report token ids at or past it (default: the vocabulary "
                        "the index records, if any; negative ids and ids past int32 always)")
    verify.set_defaults(handler=run_verify_command)

    bench = data_subparsers.add_parser(
        "bench", help="is the device fed? the loader's samples/s per worker count beside the step's",
        description="Time the rank's loader reading DATA where it lies (as `trainspeed train` reads it: decoding and "
        "augmenting on its workers) for each --workers count, beside the samples/s a training step of the workload "
        "consumes at the same batch (from --bench-rows, or a quick bench on --target), and say how many workers "
        "keep the device fed. One row per worker count is appended to --out; `trainspeed report` draws them.")
    bench.add_argument("data", type=Path, metavar="DATA", help=data_help)
    bench.add_argument("--workload", required=True, help="the workload that reads DATA (timm:resnet18, hf:gpt2, ...)")
    bench.add_argument("--size", help="the workload's size (default: its default size)")
    bench.add_argument("--workers", action=CommaListAction, items=comma_list(int, WORKERS, what="worker counts",
                       example="1,2,4", distinct=True), default=(1, 2, 4), help="loader worker counts (default: 1,2,4)")
    bench.add_argument("--batch-size", type=positive_int, default=32, help="samples per batch (default: 32)")
    bench.add_argument("--batches", type=positive_int, default=20,
                       help="batches timed per worker count, after the first (default: 20)")
    bench.add_argument("--bench-rows", type=Path, help="a `trainspeed bench` rows file: the step's samples/s is its "
                       "fastest measured row of the workload, size and batch (default: a quick bench)")
    bench.add_argument("--target", default="cpu:eager:fp32", help="where the quick bench times the step "
                       "(default: cpu:eager:fp32)")
    bench.add_argument("--threads", type=THREADS.parser(int), default=1,
                       help="torch threads of the step, as train's --threads (default: 1)")
    bench.add_argument("--bad-samples", choices=("refuse", "skip"), default="refuse",
                       help="an unreadable image: refuse (default) or skip and count it")
    bench.add_argument("--out", type=Path, default=Path("results/data_bench.jsonl"),
                       help="rows file appended to (default: results/data_bench.jsonl)")
    bench.set_defaults(handler=run_data_bench_command)

    add_mahjong_data_commands(data_subparsers)
    add_image_data_command(data_subparsers)


def run_from_arrays_command(args: argparse.Namespace) -> int:
    from trainspeed.data.dataset import load_arrays, write_dataset

    columns = load_arrays(args.source)
    index = write_dataset(columns, args.out, split_by=args.split_by, val_fraction=args.val_fraction,
                          samples_per_shard=args.samples_per_shard, source={"from_arrays": str(args.source)},
                          vocabulary=args.vocab)
    split = index["split"]
    print(f"{args.out}: {index['samples']} samples ({split['train_samples']} train, {split['val_samples']} val) "
          f"of columns {', '.join(index['columns'])} in {len(index['shards'])} shards")
    return 0


def run_inspect_command(args: argparse.Namespace) -> int:
    from trainspeed.data.dataset import summarize_dataset
    from trainspeed.data.sources import SHARDS, detect_format

    if detect_format(args.folder) != SHARDS:
        return _inspect_in_place(args)
    summary = summarize_dataset(args.folder)
    if args.json:
        print(json.dumps(summary, indent=1))
        return 0
    lines = [f"{args.folder}: {summary['format']} version {summary['format_version']}, {summary['shards']} shards, "
             f"{summary['samples']} samples, {summary['total_bytes'] / 2**20:.1f} MiB"]
    lines += [f"  {name:12s} {column['dtype']:5s} {tuple(column['shape'])}" for name, column in summary["columns"].items()]
    shown = ("format", "format_version", "shards", "samples", "total_bytes", "columns")
    lines += [f"  {key}: {json.dumps(value)}" for key, value in summary.items() if key not in shown]
    print("\n".join(printable(line) for line in lines))  # names in an index are anyone's text
    return 0


def _inspect_in_place(args: argparse.Namespace) -> int:
    from trainspeed.data.verify_in_place import summarize_in_place

    summary = summarize_in_place(args.folder)
    if args.json:
        print(json.dumps(summary, indent=1))
        return 0
    lines = [f"{args.folder}: {summary['format']}"]
    lines += [f"  {key}: {json.dumps(value)}" for key, value in summary.items() if key != "format"]
    print("\n".join(printable(line) for line in lines))  # names of files are anyone's text
    return 0


def _verify_in_place(args: argparse.Namespace) -> int:
    from trainspeed.data.verify_in_place import verify_in_place

    report = verify_in_place(args.folder, args.vocab)
    for problem in report.problems:
        print(printable(f"FAIL {problem}"))
    if report.is_ok:
        print(printable(f"{args.folder}: OK, {report.described}"))
        return 0
    print(printable(f"{args.folder}: {len(report.problems)} problems ({report.described})"))
    return 1


def run_data_bench_command(args: argparse.Namespace) -> int:
    from trainspeed.bench.data_feed import DataBenchConfig, run_data_bench
    from trainspeed.bench.data_feed_report import verdict

    config = DataBenchConfig(data=args.data, workload=args.workload, size=args.size, workers=list(args.workers),
                             batch_size=args.batch_size, batches=args.batches, bench_rows=args.bench_rows,
                             target=args.target, out=args.out, bad_samples=args.bad_samples, threads=args.threads,
                             command=args.command_line)
    rows = run_data_bench(config, report=lambda line: print(printable(line), flush=True))
    print(printable(f"{args.out}: {len(rows)} rows; {verdict(rows)}"))
    return 0


def run_verify_command(args: argparse.Namespace) -> int:
    from trainspeed.data.dataset import verify_dataset
    from trainspeed.data.shards import load_index
    from trainspeed.data.sources import SHARDS, detect_format

    if detect_format(args.folder) != SHARDS:
        return _verify_in_place(args)
    data_format = load_index(args.folder)["format"]
    format_check = format_checks().get(data_format)
    if format_check is not None and args.vocab is not None:
        raise UsageError(f"--vocab: {args.folder} is a {data_format} shard set, which holds no token ids; drop --vocab")
    report = format_check(args.folder) if format_check is not None else verify_dataset(args.folder, args.vocab)
    for problem in report.problems:
        print(printable(f"FAIL {problem}"))
    if report.is_ok:
        print(f"{args.folder}: OK, {report.shards} shards, {report.samples} samples")
        return 0
    print(f"{args.folder}: {len(report.problems)} problems")
    return 1
