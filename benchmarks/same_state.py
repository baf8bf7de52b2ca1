"""Do two checkpoints of exported steps hold the same state? (A run killed and resumed against one
never stopped: `benchmarks/tpu_train.sh`.) Prints one line: leaves, equal bit for bit, and the
largest absolute difference. Reads npz with allow_pickle=False.

    python benchmarks/same_state.py RUN_A/checkpoints/step-000000240.npz RUN_B/checkpoints/step-000000240.npz
"""

from __future__ import annotations

import argparse
import sys

import numpy as np


def leaves(path: str) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as loaded:
        return {name: loaded[name] for name in loaded.files if name.startswith("leaf")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("first")
    parser.add_argument("second")
    args = parser.parse_args()
    first, second = leaves(args.first), leaves(args.second)
    if first.keys() != second.keys():
        print(f"not the same state: {len(first)} and {len(second)} leaves", file=sys.stderr)
        return 1
    equal = sum(np.array_equal(first[name], second[name]) for name in first)
    largest = max(float(np.max(np.abs(first[name].astype(np.float64) - second[name].astype(np.float64)), initial=0.0))
                  for name in first)
    print(f"{len(first)} leaves, {equal} equal bit for bit, largest absolute difference {largest:.3g}")
    return 0 if equal == len(first) else 1


if __name__ == "__main__":
    sys.exit(main())
