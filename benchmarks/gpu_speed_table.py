"""The tables of docs/results/gpu_speed.md from the rows one run of benchmarks/gpu_speed.sh wrote.

    python3 benchmarks/gpu_speed_table.py --mahjong OUT/mahjong_speed.jsonl --stylegan3 OUT/stylegan3_speed.jsonl \
        --attention OUT/mahjong_attention.jsonl --triton OUT/triton_lrelu.jsonl --out OUT/gpu_speed_table.md

Every number is read from a row; a missing file or row reads "not measured". Ratios are to the
baseline of the same batch: Mahjong size `--mahjong-baseline-size` (base) on `--mahjong-baseline`,
StyleGAN3 variant `activation` on `--stylegan3-baseline`. The goal lines take the best measured
row that meets the goal's condition (batch size, memory).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

GIB = 2**30


def read_jsonl(path: Path | None) -> list[dict]:
    if path is None or not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line:
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line cut by a time cap
    return rows


def _k(value: float | None) -> str:
    if value is None:
        return "not measured"
    return f"{value / 1000:.1f}k" if value >= 1000 else f"{value:.1f}"


def mfu_text(row: dict) -> str:
    """The row's MFU in percent, with the peak it divides by where the row names it ("nominal": the
    chip's published peak; "measured": the matmul chain on the device; "given": --peak-tflops)."""
    source = row.get("peak_tflops_source")
    return f"{row['mfu'] * 100:.1f}%" + (f" ({source})" if source else "")


def mahjong_table(rows: list[dict], baseline_target: str, baseline_size: str = "base") -> list[str]:
    measured = [r for r in rows if r.get("status") in ("ok", "invalid") and r.get("samples_per_s")]
    if not rows:
        return ["Mahjong: not measured."]
    base = {r["batch_size"]: r["samples_per_s"] for r in measured if r["size"] == baseline_size and r["target"] == baseline_target}
    lines = [f"| size | target | batch | samples/s | MFU | vs {baseline_size} on {baseline_target} | peak memory | first step s | status |",
             "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        rate = r.get("samples_per_s") if r in measured else None
        mfu = mfu_text(r) if r.get("mfu") else ""
        ratio = f"{rate / base[r['batch_size']]:.2f}x" if rate and r["batch_size"] in base else ""
        memory = f"{r['peak_memory_bytes'] / GIB:.1f} GiB" if r.get("peak_memory_bytes") else ""
        first = f"{r['first_step_s']:.1f}" if r.get("first_step_s") else ""
        status = r.get("status", "") + (f": {r['error']}" if r.get("error") else "")
        lines.append(f"| {r['size']} | {r['target']} | {r['batch_size']} | {_k(rate)} | {mfu} | {ratio} | {memory} | "
                     f"{first} | {status} |")  # fmt: skip
    return lines


def stylegan3_table(rows: list[dict], baseline_target: str) -> list[str]:
    if not rows:
        return ["StyleGAN3: not measured."]
    key = lambda r: (r["size"], r["batch_size"])  # noqa: E731
    base = {key(r): r["s_per_kimg"] for r in rows if r.get("variant") == "activation" and r.get("target") == baseline_target}
    lines = [f"| case | variant | target | lrelu | s/kimg | vs activation on {baseline_target} | peak device memory | first step s |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        ratio = f"{base[key(r)] / r['s_per_kimg']:.2f}x" if key(r) in base and r.get("s_per_kimg") else ""
        memory = f"{r['peak_memory_bytes'] / GIB:.1f} GiB" if r.get("peak_memory_bytes") is not None else ""
        lrelu = r.get("lrelu_path", "plain") + (f" ({r['lrelu_note']})" if r.get("lrelu_note") else "")
        lines.append(f"| {r['size']}:{r['batch_size']} | {r['variant']} | {r['target']} | {lrelu} | {r['s_per_kimg']} | "
                     f"{ratio} | {memory} | {r.get('first_step_s', '')} |")  # fmt: skip
    return lines


def attention_table(rows: list[dict]) -> list[str]:
    if not rows:
        return ["Attention backends: not measured."]
    lines = ["| attention | batch | ms (fwd+bwd) | TFLOP/s | note |", "|---|---|---|---|---|"]
    for r in rows:
        note = f"ran {r['ran']}" if r.get("ran") else r.get("error", "")
        lines.append(f"| {r['kind']} | {r['batch']} | {r.get('ms', 'unavailable')} | {r.get('tflops', '')} | {note} |")
    return lines


def triton_table(rows: list[dict]) -> list[str]:
    if not rows:
        return ["Fused filtered leaky ReLU kernel check: not measured."]
    lines = []
    for dtype in sorted({r["dtype"] for r in rows}):
        chosen = [r for r in rows if r["dtype"] == dtype]
        speedups = [r["speedup"] for r in chosen if r.get("speedup")]
        mean = math.exp(sum(math.log(s) for s in speedups) / len(speedups)) if speedups else float("nan")
        plain_ms = sum(r["plain_fwd_bwd_ms"] for r in chosen)
        fused_ms = sum(r["fused_fwd_bwd_ms"] for r in chosen)
        bad = [str(r["layer"]) for r in chosen if not r.get("ok")]
        lines.append(f"- {dtype}: {len(chosen)} layers, all layers {plain_ms:.1f} ms plain vs {fused_ms:.1f} ms fused "
                     f"(x{plain_ms / fused_ms:.2f}; per-layer geometric mean x{mean:.2f}); "
                     f"{'mismatch in layers ' + ', '.join(bad) if bad else 'every layer agrees with the plain ops'}")  # fmt: skip
    return lines


def goal_lines(mahjong: list[dict], stylegan3: list[dict]) -> list[str]:
    ok = [r for r in mahjong if r.get("status") == "ok" and r.get("samples_per_s")]
    large = max((r for r in ok if r["batch_size"] >= 4096 and r.get("mfu")), key=lambda r: r["mfu"], default=None)
    small = max((r for r in ok if r["batch_size"] == 256), key=lambda r: r["samples_per_s"], default=None)
    fits = [r for r in stylegan3 if r.get("peak_memory_bytes") is not None and r["peak_memory_bytes"] <= 40 * GIB]
    best_sg = min(fits, key=lambda r: r["s_per_kimg"], default=None)

    def where(r: dict | None) -> str:
        return "" if r is None else f" ({r['size']}, {r['target']}, batch {r['batch_size']})"

    large_text = f"{mfu_text(large)}{where(large)}" if large else "not measured"
    small_text = f"{_k(small['samples_per_s'])}{where(small)}" if small else "not measured"
    sg_text = (f"{best_sg['s_per_kimg']} s/kimg in {best_sg['peak_memory_bytes'] / GIB:.1f} GiB ({best_sg['variant']}, "
               f"{best_sg['target']})" if best_sg else "not measured")  # fmt: skip
    return [
        "| goal | best measured |",
        "|---|---|",
        f"| Mahjong base: >= 55% MFU (60% stretch) at batch >= 4096 | {large_text} |",
        f"| Mahjong base: >= 45k samples/s at batch 256 | {small_text} |",
        f"| StyleGAN3 T-256 batch 32: <= 50 s/kimg (25 stretch) within 40 GiB | {sg_text} |",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mahjong", type=Path)
    parser.add_argument("--stylegan3", type=Path)
    parser.add_argument("--attention", type=Path)
    parser.add_argument("--triton", type=Path)
    parser.add_argument("--mahjong-baseline", default="cuda:cudagraphs:bf16")
    parser.add_argument("--mahjong-baseline-size", default="base")
    parser.add_argument("--stylegan3-baseline", default="cuda:eager:bf16")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)

    mahjong, stylegan3 = read_jsonl(args.mahjong), read_jsonl(args.stylegan3)
    sections = [
        ("Goals", goal_lines(mahjong, stylegan3)),
        ("Mahjong policy", mahjong_table(mahjong, args.mahjong_baseline, args.mahjong_baseline_size)),
        ("Mahjong attention at 34 tokens", attention_table(read_jsonl(args.attention))),
        ("StyleGAN3 T-256", stylegan3_table(stylegan3, args.stylegan3_baseline)),
        ("Fused filtered leaky ReLU, per layer", triton_table(read_jsonl(args.triton))),
    ]
    text = "\n\n".join(f"## {title}\n" + "\n".join(lines) for title, lines in sections) + "\n"
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
