"""`trainspeed bench` once per size, all in one process (one start-up for a list of variants).

    python3 benchmarks/bench_sizes.py --sizes base,base+bf16-stream,base-fast -- \
        --workload mahjong --targets cuda:cudagraphs:bf16 --batch-sizes 4096 --out results/sizes.jsonl

Everything after `--` goes to `trainspeed bench` unchanged; each size adds `--size SIZE`. Rows are
ordinary trainspeed rows (their `size` names the variant), appended to the one --out file. Each
configuration is built fresh and the target forgets compiled graphs between configurations, as
in one `trainspeed bench` run. The exit code is the worst of the runs' (0 when all succeeded).
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ours, _, bench_args = (argv[: argv.index("--")], "--", argv[argv.index("--") + 1 :]) if "--" in argv else (argv, "", [])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", required=True, help="comma list of sizes, e.g. base,base+bf16-stream")
    args = parser.parse_args(ours)
    if "--size" in bench_args:
        parser.error("give the sizes with --sizes, not --size after --")

    from trainspeed.cli import main as trainspeed_main

    worst = 0
    for size in filter(None, (s.strip() for s in args.sizes.split(","))):
        print(f"== size {size}", flush=True)
        code = trainspeed_main(["bench", "--size", size, *bench_args])
        worst = max(worst, code)
    return worst


if __name__ == "__main__":
    sys.exit(main())
