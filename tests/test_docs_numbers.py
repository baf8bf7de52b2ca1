"""The numbers the pages on batch size, the TPU page's headline numbers, and the MFU of the TPU
and H200 pages, print, recomputed from the committed rows they quote.

Each claim below is one passage of docs/batch_schedule.md, docs/critical_batch.md,
docs/time_to_target.md, docs/tpu.md (every MFU of a TPU v5e row, against the measured chain and
the chip's nominal peak; its headline tables, each of whose numbers a claim recomputes, and the
ratios, ranges and headings said of them) or a page of docs/results with its numbers formatted from
the rows in docs/results: the test fails where the page's number is changed, and where the rows no
longer give it. The pages' line breaks are read as spaces. Only JSON Lines, CSV and JSON files are
read, and the plan's coverage table is made again from its rows (`benchmarks/plan_coverage.py`, about
a second).
"""

from __future__ import annotations

import csv
import json
import math
import re
import statistics
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Callable

import pytest

from trainspeed.stats import t_quantile

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results"


# --- reading the rows --------------------------------------------------------------------------------

@cache
def records(name: str) -> tuple[dict, ...]:
    return tuple(json.loads(line) for line in (RESULTS / name).read_text().splitlines() if line.strip())


def of_kind(name: str, kind: str) -> list[dict]:
    return [record for record in records(name) if record.get("kind") == kind]


def series_file(series: str) -> str:
    """An auto-vs-fixed series' rows: `auto_vs_fixed_SERIES.jsonl`, or the file a name beginning with
    `auto_vs_` gives whole (the series against plain fixed batches, `auto_vs_plain_*`)."""
    return f"{series if series.startswith('auto_vs_') else f'auto_vs_fixed_{series}'}.jsonl"


def runs(series: str, config: str) -> list[dict]:
    """The runs of one configuration of an auto-vs-fixed series, in seed order."""
    found = [record["values"] for record in records(series_file(series))
             if record["values"].get("row") == "run" and record["values"]["config"] == config]
    return sorted(found, key=lambda run: run["seed"])


def mean_of(series: str, config: str, field: str) -> float:
    return statistics.mean(run[field] for run in runs(series, config))


def ratio_of_means(series: str, config: str, reference: str, field: str = "command_s") -> float:
    return mean_of(series, config, field) / mean_of(series, reference, field)


def seed_ratios(series: str, config: str, reference: str) -> list[float]:
    by_seed = {run["seed"]: run["command_s"] for run in runs(series, reference)}
    return [run["command_s"] / by_seed[run["seed"]] for run in runs(series, config)]


def paired_interval(series: str, config: str, reference: str) -> tuple[float, float]:
    """The paired 95% t interval of config / reference over seeds, on the ratio's logarithm."""
    logs = [math.log(ratio) for ratio in seed_ratios(series, config, reference)]
    half = t_quantile(0.975, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    centre = statistics.mean(logs)
    return math.exp(centre - half), math.exp(centre + half)


def loads(series: str) -> tuple[float, float]:
    values = [value for run in (record["values"] for record in records(series_file(series)))
              if run.get("row") == "run" for value in (run["load_before"], run["load_after"])]
    return min(values), max(values)


def study_batches(name: str) -> dict[int, dict]:
    return {row["global_batch"]: row for row in of_kind(name, "time-to-target-study-batch")}


def study_fit(name: str) -> dict:
    (fit,) = of_kind(name, "time-to-target-study-fit")
    return fit


def critical(name: str) -> tuple[dict, list[dict], list[dict]]:
    """A critical-batch study's settings row, its points and its branches."""
    (settings,) = of_kind(name, "critical-batch-study-config")
    return settings, of_kind(name, "critical-batch"), of_kind(name, "critical-batch-branch")


def checks(name: str) -> dict[str, dict]:
    return {row["config"]: row for row in of_kind(name, "plan-check")}


@cache
def coverage() -> tuple[dict, ...]:
    """The plan's coverage table as `benchmarks/plan_coverage.py` makes it from the committed rows
    now, each cell as its CSV holds it (docs/results/plan_coverage.csv, which its own test compares):
    how the script judges and rounds is under test here, not a file it once wrote."""
    from benchmarks import plan_coverage

    return tuple({name: "" if value is None else str(value) for name, value in plan_coverage._csv_row(item).items()}
                 for item in plan_coverage.coverage())


def covered(plan: str, config: str) -> dict:
    return next(row for row in coverage() if row["plan"] == plan and row["config"] == config)


def bench_rate(name: str, target: str, batch: int) -> float:
    return next(row["samples_per_s"] for row in of_kind(name, "bench")
                if row["target"] == target and row["batch_size"] == batch and row["status"] == "ok")


# --- formatting as the pages do ---------------------------------------------------------------------------

def f1(value: float) -> str:
    return f"{value:,.1f}"


def f2(value: float) -> str:
    return f"{value:.2f}"


def share(value: float) -> str:
    return f"{value:.0%}"


def interval1(low: float, high: float) -> str:
    return f"[{f1(low)}, {f1(high)}]"


def check_cells(row: dict) -> str:
    """predicted s [95%] | measured s | ratio, as the checks' tables print them."""
    low, high = row["predicted_s_ci95"]
    ratio = f2(row["ratio"])
    return f"{f1(row['predicted_s'])} {interval1(low, high)} | {f1(row['measured_s'])} | " + (
        ratio if row["within"] else f"**{ratio}**")


def today(plan: str, config: str, unit: str = "") -> str:
    """Today's prediction of a check and its interval, from the coverage table."""
    row = covered(plan, config)
    return f"{f1(float(row['predicted_s']))}{unit} {interval1(float(row['predicted_lo']), float(row['predicted_hi']))}"


def wilson(hits: int, total: int) -> str:
    from trainspeed.stats import wilson_interval

    low, high = wilson_interval(hits, total)
    return f"[{share(low)}, {share(high)}]"


# --- TPU rows: MFU against the measured chain and against the chip's nominal peak -------------------------

def tpu_row(name: str, size: str, batch: int, target: str = "jax:jit:bf16", run: str | None = None) -> dict:
    """The one `ok`, device-fed bench row of a TPU file with this size, batch and target (of the run
    whose id ends with `run`, where the file holds several)."""
    (row,) = [row for row in of_kind(name, "bench") if row["size"] == size and row["batch_size"] == batch
              and row["target"] == target and (row.get("feed") or "device") == "device" and row["status"] == "ok"
              and (run is None or row["run_id"].endswith(run))]
    return row


def of_nominal(row: dict) -> float:
    """The row's MFU against its chip's nominal peak: its achieved TFLOP/s over the table's figure
    (every committed TPU row divides by the measured chain; its precision's figure is the bf16 one)."""
    from trainspeed.bench.mfu import nominal_peak_mfu
    from trainspeed.bench.results import ResultRow
    from trainspeed.rows import parse_row

    assert row["device_name"] == "TPU v5 lite" and row["peak_tflops_source"] == "measured"
    value = nominal_peak_mfu(parse_row(ResultRow, row, "docs")[0])
    assert value == row["achieved_tflops"] / 197.0
    return value


def pct(value: float) -> str:
    return f"{value:.1%}"


def bold(text: str) -> str:
    return f"**{text}**"


def _tpu_base() -> str:
    name = "tpu_mahjong_base.jsonl"
    fp32 = [tpu_row(name, "base", batch, "jax:jit:fp32") for batch in (64, 1024, 4096)]
    fast = [tpu_row(name, "base-fast", batch) for batch in (64, 1024, 4096)]

    def both(rows: list[dict], value: Callable[[dict], float]) -> str:
        return " / ".join(share(value(row)) for row in rows)

    return (f"MFU against that chain is {both(fp32, lambda r: r['mfu'])} (fp32) and {both(fast, lambda r: r['mfu'])} "
            f"(bf16 `base-fast`) at 64 / 1,024 / 4,096; against the chip's nominal 197 TFLOP/s (Google's bf16 figure, "
            f"which the fp32 step's bf16 passes run at too) it is {both(fp32, of_nominal)} and {both(fast, of_nominal)}.")


def _tpu_named(workload: str, batch: int) -> Callable[[], str]:
    def text() -> str:
        (row,) = [row for row in of_kind("tpu_named_models.jsonl", "bench")
                  if row["workload"] == workload and row["batch_size"] == batch and row["status"] == "ok"]
        return f"| {row['compile_s']:.1f} s | {pct(row['mfu'])} | {pct(of_nominal(row))} |"
    return text


def _tpu_resnet_range() -> str:
    rows = [row for row in of_kind("tpu_named_models.jsonl", "bench") if row["workload"] == "timm:resnet50"]
    measured, nominal = [row["mfu"] for row in rows], [of_nominal(row) for row in rows]
    return (f"{min(measured) * 100:.0f}-{share(max(measured))} MFU of the measured peak, "
            f"{min(nominal) * 100:.0f}-{share(max(nominal))} of the nominal")


def _tpu_packed(precision: str, batch: int) -> str:
    name, base, switch = "tpu_mahjong_attention.jsonl", "base-fast", "base-fast+attn-packed-heads"
    if precision == "fp32":
        base, switch = "base", "base+attn-packed-heads"
    own = tpu_row(name, base, batch, f"jax:jit:{precision}")
    switched = next((row for row in of_kind(name, "bench") if row["size"] == switch and row["batch_size"] == batch
                     and row["status"] == "ok"), None)
    if switched is None:
        return f"| {pct(own['mfu'])} | | {pct(of_nominal(own))} | |"
    return f"| {pct(own['mfu'])} | {pct(switched['mfu'])} | {pct(of_nominal(own))} | {pct(of_nominal(switched))} |"


FUSED = "base-fast+attn-fused-qkv"
FLAT = "base-fast+attn-fused-qkv+flat-tokens"


def _tpu_fused_bf16(batch: int, run: str, bold_fused: str | None = None) -> Callable[[], str]:
    """A row of the first and third calls' table: MFU of `base-fast` and of the fused step, against
    each peak (a bold cell as the page prints it, with its own digits)."""
    def text() -> str:
        name = "tpu_mahjong_fused_bf16.jsonl"
        base, fused = tpu_row(name, "base-fast", batch, run=run), tpu_row(name, FUSED, batch, run=run)
        fused_cell = bold(f"{fused['mfu']:{bold_fused}}") if bold_fused else pct(fused["mfu"])
        return f"| {pct(base['mfu'])} | {fused_cell} | {pct(of_nominal(base))} | {pct(of_nominal(fused))} |"
    return text


def _tpu_fused_fourth(batch: int, bold_cell: bool) -> Callable[[], str]:
    def text() -> str:
        fused = tpu_row("tpu_mahjong_fused_bf16.jsonl", FUSED, batch, run="T195350")
        return f"| {bold(pct(fused['mfu'])) if bold_cell else pct(fused['mfu'])} | {pct(of_nominal(fused))} |"
    return text


def _tpu_fused_fp32(batch: int) -> Callable[[], str]:
    def text() -> str:
        name = "tpu_mahjong_fused_fp32.jsonl"
        base = tpu_row(name, "base", batch, "jax:jit:fp32", run="162831")
        fused = tpu_row(name, "base+attn-fused-qkv", batch, "jax:jit:fp32", run="162831")
        return f"| {pct(base['mfu'])} | {pct(fused['mfu'])} | {pct(of_nominal(base))} | {pct(of_nominal(fused))} |"
    return text


def _tpu_fused_later(batch: int, run: str, bold_cell: bool = False) -> Callable[[], str]:
    def text() -> str:
        fused = tpu_row("tpu_mahjong_fused_bf16.jsonl", FUSED, batch, run=run)
        return f"| {bold(pct(fused['mfu'])) if bold_cell else pct(fused['mfu'])} | {pct(of_nominal(fused))} |"
    return text


def _tpu_fused_later_4096() -> str:
    name = "tpu_mahjong_fused_bf16.jsonl"
    fused, flat = tpu_row(name, FUSED, 4096, run="T023033"), tpu_row(name, FLAT, 4096, run="T023033")
    return (f"| {pct(fused['mfu'])} (flat {pct(flat['mfu'])}) | {pct(of_nominal(fused))} "
            f"(flat {pct(of_nominal(flat))}) |")


def _tpu_best() -> str:
    fused = tpu_row("tpu_mahjong_fused_bf16.jsonl", FUSED, 256, run="T023033")
    return f"256: {pct(fused['mfu'])} of the measured peak**, {pct(of_nominal(fused))} of the chip's nominal 197 TFLOP/s"


def _tpu_stylegan3() -> str:
    name = "tpu_stylegan3_t256.jsonl"
    b8, b32 = tpu_row(name, "t256", 8, run="T192259"), tpu_row(name, "t256", 32, run="T193534")
    return " | ".join(f"{row['achieved_tflops']:.1f} / {pct(row['mfu'])} / {pct(of_nominal(row))}" for row in (b8, b32))



# --- TPU rows: plain `base` and `base-fast` against the peer without and with the bf16 stream ------------------

LIKE_FILE = "tpu_mahjong_like_for_like.jsonl"
LIKE_RUNS = {64: "T095127", 256: "T095127", 4096: "T095851"}
PEER_BF16, PEER_STREAM = "reference-jax:tpu:jit:bf16", "reference-jax:tpu:jit:bf16:bf16-stream"


def _like_rates(batch: int) -> tuple[float, float, float, float]:
    """`base`, the peer, `base-fast` and the peer with the bf16 stream at `batch`: one run's rows."""
    run = LIKE_RUNS[batch]
    return (tpu_row(LIKE_FILE, "base", batch, run=run)["samples_per_s"],
            tpu_row(LIKE_FILE, "base", batch, PEER_BF16, run)["samples_per_s"],
            tpu_row(LIKE_FILE, "base-fast", batch, run=run)["samples_per_s"],
            tpu_row(LIKE_FILE, "base", batch, PEER_STREAM, run)["samples_per_s"])


def _like_for_like_table() -> str:
    lines = []
    for batch, run in LIKE_RUNS.items():
        base, peer, fast, stream = _like_rates(batch)
        (run_id,) = {row["run_id"] for row in of_kind(LIKE_FILE, "bench") if row["run_id"].endswith(run)}
        lines.append(f"| {batch:,} | {base:,.0f} | {peer:,.0f} | **{f2(base / peer)}** | {fast:,.0f} | {stream:,.0f} | "
                     f"**{f2(fast / stream)}** | `{run_id}` |")
    return "\n      ".join(lines)


def _deit_small() -> str:
    row = models_row("timm:deit_small_patch16_224", "jax:jit:bf16:scan-layers+remat", 64, "T105139")
    assert row["peak_tflops_source"] == "nominal"
    return (f"deit_small's batch 64 came back: {row['samples_per_s']:,.1f} images/s, {pct(row['mfu'])} of the nominal "
            f"peak, a {f1(row['compile_s'])} s\n  compile")


def _mobilenetv3() -> str:
    row = models_row("timm:mobilenetv3_large_100", "jax:jit:bf16:scan-layers+remat", 128, "T194020")
    assert row["peak_tflops_source"] == "nominal"
    return f"only its batch 128 had come back, at {row['samples_per_s']:,.1f} images/s in `{row['run_id']}`"


def _like_for_like_gains() -> str:
    rates = [_like_rates(batch) for batch in LIKE_RUNS]
    peer = [stream / peer for _, peer, _, stream in rates]
    ours = [fast / base for base, _, fast, _ in rates]
    return (f"the peer gains as much as trainspeed's step\n      does ({f2(min(peer))}-{f2(max(peer))}x at 64 to 4,096 "
            f"against {f2(min(ours))}-{f2(max(ours))}x)")


# --- TPU rows: the data-parallel program on one chip against the step with no mesh ------------------------

MESH_FILE = "tpu_mesh_one_device.jsonl"


def _mesh_rates(batch: int, devices: int | None) -> list[float]:
    """The call's benches of the folder with no mesh (None) or of one device's mesh (1), in order."""
    return [row["samples_per_s"] for row in of_kind(MESH_FILE, "bench")
            if row["batch_size"] == batch and row.get("devices") == devices and row["status"] == "ok"]


def _mesh_table() -> str:
    lines = []
    for batch in (64, 1024, 4096):
        plain, mesh = _mesh_rates(batch, None), _mesh_rates(batch, 1)
        assert len(plain) == len(mesh) == 2
        lines.append(f"| {batch:,} | {plain[0]:,.0f} / {plain[1]:,.0f} | {mesh[0]:,.0f} / {mesh[1]:,.0f} | "
                     f"{sum(mesh) / sum(plain):.3f} |")
    return "\n".join(lines)


def _mesh_worst() -> str:
    worst = min((min(_mesh_rates(batch, 1)) / max(_mesh_rates(batch, None)), batch) for batch in (64, 1024, 4096))
    return f"faster plain one) is {worst[0]:.3f}, at {worst[1]:,}."


# --- TPU rows: the models users bring (tpu_models.jsonl) ---------------------------------------------------

MODELS_FILE = "tpu_models.jsonl"


def models_row(workload: str, target: str, batch: int, run: str) -> dict:
    """The one row of tpu_models.jsonl of this workload, target and batch, in the run whose id ends with `run`."""
    (row,) = [row for row in of_kind(MODELS_FILE, "bench") if row["workload"] == workload and row["target"] == target
              and row["batch_size"] == batch and row["run_id"].endswith(run)]
    return row


def _models_cells(row: dict) -> str:
    """A table row's measured cells: samples/s, compile, MFU against the nominal and the measured peak,
    XLA's temporaries (a peer's row has no compile, chain or temporaries of its own)."""
    if row["status"] == "oom":
        return "out of memory | | | | |"
    assert row["peak_tflops_source"] == "nominal" and row["peak_tflops"] == 197.0
    if row["target"].startswith("jax-peer"):
        return f"{row['samples_per_s']:,.1f} | | {pct(row['mfu'])} | | |"
    return (f"{row['samples_per_s']:,.1f} | {row['compile_s']:.1f} | {pct(row['mfu'])} | "
            f"{pct(row['mfu_of_measured_peak'])} | {row['program_temp_bytes'] / 1e9:.2f} |")


def _models_table_row(label: str, options: str, workload: str, target: str, batch: int, run: str) -> Callable[[], str]:
    def text() -> str:
        return f"| {label} | {options} | {batch} | {_models_cells(models_row(workload, target, batch, run))}".rstrip()
    return text


_B = "T014844"
_GPT2_FULL = ("hf:gpt2", "jax:jit:bf16:scan-layers+remat-full", "T013828")
_VIT = "timm:vit_small_patch16_224"
MODELS_TABLE = [
    ("hf:gpt2 (124M, 1,024 tokens, dropout off)", "`scan-layers+remat`", "hf:gpt2", "jax:jit:bf16:scan-layers+remat", 8, _B),
    ("", "", "hf:gpt2", "jax:jit:bf16:scan-layers+remat", 16, _B),
    ("", "`scan-layers+remat-full`", *_GPT2_FULL[:2], 16, _GPT2_FULL[2]),
    ("", "", *_GPT2_FULL[:2], 32, _GPT2_FULL[2]),
    ("", "JAX peer", "hf:gpt2", "jax-peer:tpu:bf16", 16, "T014133"),
    ("", "", "hf:gpt2", "jax-peer:tpu:bf16", 32, "T014133"),
    ("timm:vit_small_patch16_224 (`base,opt=adamw`)", "none", _VIT, "jax:jit:bf16", 64, _B),
    ("", "", _VIT, "jax:jit:bf16", 256, _B),
    ("", "`scan-layers+remat`", _VIT, "jax:jit:bf16:scan-layers+remat", 64, _B),
    ("", "", _VIT, "jax:jit:bf16:scan-layers+remat", 256, _B),
    ("", "JAX peer", _VIT, "jax-peer:tpu:bf16", 64, _B),
    ("", "", _VIT, "jax-peer:tpu:bf16", 256, _B),
    ("timm:resnet50", "`scan-layers+remat`", "timm:resnet50", "jax:jit:bf16:scan-layers+remat", 128, _B),
    ("", "", "timm:resnet50", "jax:jit:bf16:scan-layers+remat", 256, _B),
    ("hf:llama, 1.1B (width 2,048, 22 layers, 4 key/value heads, vocabulary 32,000)", "`scan-layers+remat+bf16-state`",
     "hf:llama", "jax:jit:bf16:scan-layers+remat+bf16-state", 4, "T015728"),
    ("", "", "hf:llama", "jax:jit:bf16:scan-layers+remat+bf16-state", 8, "T015728"),
    ("hf:bert (base, 512 tokens, dropout off)", "`scan-layers+remat`", "hf:bert", "jax:jit:bf16:scan-layers+remat", 16,
     "T015728"),
    ("", "", "hf:bert", "jax:jit:bf16:scan-layers+remat", 32, "T015728"),
]


DEPTHWISE_TABLE = [
    ("timm:efficientnet_b0", "`scan-layers+remat`", "timm:efficientnet_b0", "jax:jit:bf16:scan-layers+remat", 128,
     "late-20261207T124209"),
    ("", "", "timm:efficientnet_b0", "jax:jit:bf16:scan-layers+remat", 256, "late-20261207T124209"),
    ("timm:convnext_tiny (`base,opt=adamw`)", "none", "timm:convnext_tiny", "jax:jit:bf16", 64, "late-20261207T124209"),
    ("", "", "timm:convnext_tiny", "jax:jit:bf16", 128, "convnext-20261207T124850"),
]
"""The depthwise networks, counted with a grouped convolution's backward at its own work."""

_ENCODERS = "encoders-20261207T215849"
_SWIN = "timm:swin_tiny_patch4_window7_224"
MORE_MODELS_TABLE = [
    ("hf:distilbert (base, 512 tokens, dropout off)", "`scan-layers+remat`", "hf:distilbert",
     "jax:jit:bf16:scan-layers+remat", 16, _ENCODERS),
    ("", "", "hf:distilbert", "jax:jit:bf16:scan-layers+remat", 32, _ENCODERS),
    ("hf:roberta (base, 512 tokens, dropout off)", "`scan-layers+remat`", "hf:roberta", "jax:jit:bf16:scan-layers+remat",
     16, _ENCODERS),
    ("", "", "hf:roberta", "jax:jit:bf16:scan-layers+remat", 32, _ENCODERS),
    (f"{_SWIN} (`base,opt=adamw`)", "`scan-layers+remat`", _SWIN, "jax:jit:bf16:scan-layers+remat", 64, _ENCODERS),
    ("", "", _SWIN, "jax:jit:bf16:scan-layers+remat", 128, _ENCODERS),
]
"""Three more models of the list, one run."""

_MOBILENET = ("timm:mobilenetv3_large_100", "jax:jit:bf16:scan-layers+remat")
MOBILENET_TABLE = [
    ("timm:mobilenetv3_large_100", "`scan-layers+remat`", *_MOBILENET, 128, "mobilenet-20261207T222915"),
    ("", "", *_MOBILENET, 256, "mobilenet-20261207T222915"),
]


def _models_ratio(numerator: dict, denominator: dict) -> str:
    return f"{numerator['samples_per_s'] / denominator['samples_per_s']:.2f}x"


def _models_gpt2_peer() -> str:
    own = [models_row(*_GPT2_FULL[:2], batch, _GPT2_FULL[2]) for batch in (16, 32)]
    peer = [models_row("hf:gpt2", "jax-peer:tpu:bf16", batch, "T014133") for batch in (16, 32)]
    ratios = [_models_ratio(mine, theirs) for mine, theirs in zip(own, peer)]
    return (f"**{ratios[0]} and {ratios[1]} the JAX peer** ({own[0]['samples_per_s']:.1f} against {peer[0]['samples_per_s']:.1f} "
            f"samples/s at 16, {own[1]['samples_per_s']:.1f} against {peer[1]['samples_per_s']:.1f} at 32)")


def _models_vit() -> str:
    plain = [models_row(_VIT, "jax:jit:bf16", batch, _B) for batch in (64, 256)]
    peer = [models_row(_VIT, "jax-peer:tpu:bf16", batch, _B) for batch in (64, 256)]
    scanned = [models_row(_VIT, "jax:jit:bf16:scan-layers+remat", batch, _B) for batch in (64, 256)]
    saved = 1 - scanned[1]["program_temp_bytes"] / plain[1]["program_temp_bytes"]
    return (f"**ViT-S/16 unrolled runs at {_models_ratio(plain[0], peer[0])} its peer at 64 and "
            f"{_models_ratio(plain[1], peer[1])} at 256** ({plain[0]['samples_per_s']:,.1f} against "
            f"{peer[0]['samples_per_s']:,.1f}; {plain[1]['samples_per_s']:,.1f} against {peer[1]['samples_per_s']:,.1f}), "
            f"but its rate falls with the batch ({_models_ratio(plain[1], plain[0])} from 64 to 256), at "
            f"{min(row['mfu'] for row in plain) * 100:.0f}-{max(row['mfu'] for row in plain) * 100:.0f}% of the nominal "
            f"peak: the goals (40%, and 256 no slower than 64) are not met. Scanned and recomputed, it runs at "
            f"{_models_ratio(scanned[0], plain[0])} (64) and {_models_ratio(scanned[1], plain[1])} (256) of the unrolled "
            f"step, with {saved:.0%} fewer temporaries at 256 ({scanned[1]['program_temp_bytes'] / 1e9:.2f} against "
            f"{plain[1]['program_temp_bytes'] / 1e9:.2f} GB)")


# the section "Convolutions in bf16, and `bf16-compute`": one run per model (ViT-S's 256 another)
_GPT2_RUN, _VISION_RUN, _VIT256_RUN = "T063121", "T063753", "T064814"
_BF16C = "jax:jit:bf16:bf16-compute"
BF16_TABLE = [
    ("hf:gpt2 (124M, 1,024 tokens, dropout off)", "`scan-layers+remat-full`", *_GPT2_FULL[:2], 16, _GPT2_RUN),
    ("", "", *_GPT2_FULL[:2], 32, _GPT2_RUN),
    ("", "`scan-layers+remat+bf16-compute`", "hf:gpt2", "jax:jit:bf16:scan-layers+remat+bf16-compute", 16, _GPT2_RUN),
    ("", "", "hf:gpt2", "jax:jit:bf16:scan-layers+remat+bf16-compute", 32, _GPT2_RUN),
    ("", "`scan-layers+remat-full+bf16-compute`", "hf:gpt2", "jax:jit:bf16:scan-layers+remat-full+bf16-compute", 32,
     _GPT2_RUN),
    ("", "", "hf:gpt2", "jax:jit:bf16:scan-layers+remat-full+bf16-compute", 64, _GPT2_RUN),
    ("", "JAX peer, same run", "hf:gpt2", "jax-peer:tpu:bf16", 16, _GPT2_RUN),
    ("", "JAX peer, same run", "hf:gpt2", "jax-peer:tpu:bf16", 32, _GPT2_RUN),
    ("timm:resnet50 (convolutions in bf16)", "none", "timm:resnet50", "jax:jit:bf16", 128, _VISION_RUN),
    ("", "", "timm:resnet50", "jax:jit:bf16", 256, _VISION_RUN),
    ("", "`bf16-compute`", "timm:resnet50", _BF16C, 128, _VISION_RUN),
    ("timm:vit_small_patch16_224 (`base,opt=adamw`)", "none", _VIT, "jax:jit:bf16", 64, _VISION_RUN),
    ("", "", _VIT, "jax:jit:bf16", 256, _VIT256_RUN),
    ("", "`bf16-compute`", _VIT, _BF16C, 64, _VISION_RUN),
    ("", "", _VIT, _BF16C, 256, _VIT256_RUN),
    ("", "JAX peer, same run", _VIT, "jax-peer:tpu:bf16", 64, _VISION_RUN),
    ("", "JAX peer, same run", _VIT, "jax-peer:tpu:bf16", 256, _VIT256_RUN),
]


def _bf16_vit_again() -> str:
    again = models_row(_VIT, _BF16C, 64, "T081752")
    return (f"ViT-S/16's `bf16-compute` step exported again with the convolutions' final cast ran at "
            f"{again['samples_per_s']:,.1f} images/s at 64 ({pct(again['mfu'])} of the nominal peak)")


def _bf16_gpt2() -> str:
    full, full_c = (models_row("hf:gpt2", f"jax:jit:bf16:scan-layers+remat-full{extra}", 32, _GPT2_RUN)
                    for extra in ("", "+bf16-compute"))
    best = models_row("hf:gpt2", "jax:jit:bf16:scan-layers+remat+bf16-compute", 16, _GPT2_RUN)
    peer = models_row("hf:gpt2", "jax-peer:tpu:bf16", 16, _GPT2_RUN)
    at_64 = models_row("hf:gpt2", "jax:jit:bf16:scan-layers+remat-full+bf16-compute", 64, _GPT2_RUN)
    return (f"**`bf16-compute` runs hf:gpt2's `remat-full` step at {_models_ratio(full_c, full)} the step without it at "
            f"32** ({full_c['samples_per_s']:.1f} against {full['samples_per_s']:.1f} samples/s), and trains at 64 in "
            f"{at_64['program_temp_bytes'] / 1e9:.2f} GB of temporaries. Its best, `remat` at 16, is "
            f"{best['samples_per_s']:.1f} samples/s, {pct(best['mfu'])} of the nominal peak and "
            f"**{_models_ratio(best, peer)} the JAX peer** ({peer['samples_per_s']:.1f})")


def _bf16_resnet50() -> str:
    plain = [models_row("timm:resnet50", "jax:jit:bf16", batch, _VISION_RUN) for batch in (128, 256)]
    computed = models_row("timm:resnet50", _BF16C, 128, _VISION_RUN)
    return (f"**timm:resnet50 with its convolutions in bf16 runs at {plain[0]['samples_per_s']:,.1f} images/s at 128 "
            f"and {plain[1]['samples_per_s']:,.1f} at 256, {pct(plain[0]['mfu'])} and {pct(plain[1]['mfu'])} of the "
            f"nominal peak**; `bf16-compute` runs it at {_models_ratio(computed, plain[0])} of that at 128")


def _bf16_vit() -> str:
    plain = [models_row(_VIT, "jax:jit:bf16", 64, _VISION_RUN), models_row(_VIT, "jax:jit:bf16", 256, _VIT256_RUN)]
    computed = [models_row(_VIT, _BF16C, 64, _VISION_RUN), models_row(_VIT, _BF16C, 256, _VIT256_RUN)]
    peer = [models_row(_VIT, "jax-peer:tpu:bf16", 64, _VISION_RUN),
            models_row(_VIT, "jax-peer:tpu:bf16", 256, _VIT256_RUN)]
    return (f"**`bf16-compute` runs ViT-S/16 at {_models_ratio(computed[0], plain[0])} the autocast step at 64 and "
            f"{_models_ratio(computed[1], plain[1])} at 256, {_models_ratio(computed[0], peer[0])} and "
            f"{_models_ratio(computed[1], peer[1])} its peer**, at {pct(computed[0]['mfu'])} of the nominal peak at 64; "
            f"its rate still falls with the batch ({computed[0]['samples_per_s']:,.1f} at 64, {computed[1]['samples_per_s']:,.1f} "
            f"at 256, in two calls)")


# --- the data-parallel steps compiled for a v5e 2x4 (aot_v5e_2x4.csv) ------------------------------------

AOT_FILE = "aot_v5e_2x4.csv"


def _aot_rows() -> list[dict]:
    """The CSV's rows, numbers read back as numbers."""
    def number(value: str) -> Any:
        try:
            return int(value)
        except ValueError:
            try:
                return float(value)
            except ValueError:
                return value
    with (RESULTS / AOT_FILE).open() as rows:
        return [{key: number(value) for key, value in row.items()} for row in csv.DictReader(rows)]


def _aot_table() -> str:
    """Each row: the step, per-device and global batch, what a device holds, the collectives' bytes
    per step, the one-chip step, the ring's seconds, the estimated rate and scaling."""
    lines = []
    for row in _aot_rows():
        others = sum(row[f"{kind}_bytes"] for kind in ("reduce-scatter", "all-gather", "all-to-all"))
        low, high = row["estimate_samples_per_s_no_overlap"], row["estimate_samples_per_s_full_overlap"]
        scale_low, scale_high = row["estimate_scaling_no_overlap"], row["estimate_scaling_full_overlap"]
        lines.append(f"| {row['workload']} `{row['size']}` `{row['target']}` | {row['batch_size_per_device']:,} | "
                     f"{row['global_batch']:,} | {row['held_bytes_per_device'] / 1e9:.2f} "
                     f"({'fits' if row['fits'] == 'True' else 'does not fit'}) | {row['all-reduce_bytes'] / 1e6:.1f} | "
                     f"{others / 1e6:.1f} | {row['one_chip_step_s'] * 1e3:.1f} | {row['all_reduce_s'] * 1e3:.2f} | "
                     f"{low:,.0f}-{high:,.0f} | {scale_low:.2f}-{scale_high:.2f}x |")
    return "\n".join(lines)


def _models_gpt2_compiles() -> str:
    rows = [row for row in of_kind(MODELS_FILE, "bench") if row["workload"] == "hf:gpt2" and row.get("compile_s")
            and row["run_id"].endswith((_B, _GPT2_FULL[2]))]
    compiles = [row["compile_s"] for row in rows]
    return f"**compiles in {min(compiles):.1f}-{max(compiles):.1f} s** per program"



# --- the jax family's lowerings and options on this CPU (targets.md) -----------------------------------

def _recurrent_ratios(workload: str) -> str:
    rows = {(row["target"], row["batch_size"]): row for row in of_kind("jax_recurrent_cpu.jsonl", "bench")
            if row["workload"] == workload}
    return " / ".join(f"{rows['jax:jit:fp32', batch]['samples_per_s'] / rows['cpu:eager:fp32', batch]['samples_per_s']:.2f}x"
                      for batch in (16, 64, 256))


def _targets_recurrent() -> str:
    return (f"train on `jax:jit:fp32` at {_recurrent_ratios('user_lstm_lm')} eager PyTorch's rate (LSTM) and "
            f"{_recurrent_ratios('user_gru_lm')} (GRU) at batch 16 / 64 / 256")


def _targets_scan_compile() -> str:
    rows = {row["target"]: row for row in of_kind("jax_scan_compile_cpu.jsonl", "bench")}
    plain, scanned = rows["jax:jit:fp32"], rows["jax:jit:fp32:scan-layers+remat"]
    return (f"compiled in {scanned['compile_s']:.1f} s instead of {plain['compile_s']:.1f} s on this CPU and stepped at "
            f"{scanned['samples_per_s'] / plain['samples_per_s']:.2f}x the unrolled rate")


def h200_best() -> tuple[str, str]:
    """The H200's best bf16 MFU against the measured peak, and against its nominal peak."""
    from trainspeed.nominal_peaks import nominal_peak

    (row,) = [row for row in of_kind("bench_h200_mahjong_base.jsonl", "bench") if row["target"] == "cuda:cudagraphs:bf16"
              and row["batch_size"] == 16384 and row["status"] == "ok"]
    return pct(row["mfu"]), pct(row["achieved_tflops"] / nominal_peak(row["device_name"], "bf16").tflops)


def _h200_speed() -> str:
    measured, nominal = h200_best()
    return (f"62.9k samples/s, {measured} MFU of the measured bf16 matmul peak (`cuda:cudagraphs:bf16`, batch 16384; "
            f"{nominal} of the H200's nominal 989.5 TFLOP/s)")


def _h200_session() -> str:
    measured, nominal = h200_best()
    return f"The best bf16 MFU is {measured} of the measured bf16 peak (62.9k samples/s; {nominal} of the H200's nominal"


# --- the claims ----------------------------------------------------------------------------------------

BATCH_SCHEDULE = "batch_schedule.md"
CRITICAL_BATCH = "critical_batch.md"
TIME_TO_TARGET = "time_to_target.md"
TPU = "tpu.md"


@dataclass(frozen=True)
class Claim:
    page: str
    text: Callable[[], str]
    """The passage as the page prints it, its numbers formatted from the rows."""


def _mahjong_ratios(config: str, last: str) -> Callable[[], str]:
    """A row's end in the Mahjong table: its last batch, command / best fixed, train_s / best fixed."""
    def text() -> str:
        command = f2(ratio_of_means("mahjong", config, "best-fixed-b32"))
        command = f"**{command}**" if config == "auto" else command
        return f"| {last} | {command} | {f2(ratio_of_means('mahjong', config, 'best-fixed-b32', 'train_s'))} |"
    return text


def _mahjong_b_simple() -> str:
    rows = [json.loads(line) for line in (RESULTS / "auto_vs_fixed_mahjong_auto_run" / "metrics.jsonl").read_text().splitlines()]
    noise = [row for row in rows if row["kind"] == "noise-scale"]
    switches = [row for row in rows if row["kind"] == "batch-switch"]
    start = statistics.median(row["b_simple_avg"] for row in noise[:3])
    late = [row["b_simple_avg"] for row in noise if row["step"] > switches[1]["step"]]
    return f"as B_simple grew from about {start:.0f} to {min(late):.0f}-{max(late):.0f}"


def _study_rates() -> str:
    runs_ = of_kind("time_to_target_study_mahjong.jsonl", "time-to-target-study-run")
    best = study_batches("time_to_target_study_mahjong.jsonl")
    rates = [next(run["end_to_end_samples_per_s"] for run in runs_ if run["global_batch"] == batch and run["seed"] == 0
                  and run["lr_factor"] == best[batch]["best_lr_factor"]) for batch in (32, 128, 512)]
    spread = max(rates) / min(rates) - 1
    return (f"within about {share(spread)} the same at every batch from 32 to 512 (seed 0 at each batch's best rate "
            f"in the study's runs: {rates[0]:,.0f}, {rates[1]:,.0f} and {rates[2]:,.0f} samples/s at 32, 128 and 512)")


def _gpt2_best() -> str:
    batches = study_batches("named_time_to_target_gpt2.jsonl")
    fastest = min(batches.values(), key=lambda row: row["wall_s_mean"])
    assert fastest["global_batch"] == 8 and fastest["best_lr_factor"] == 4
    return (f"The study's fastest to the goal was batch 8 at LR factor 4 (0.002): a mean wall of "
            f"{f1(fastest['wall_s_mean'])} s, against {f1(batches[32]['wall_s_mean'])} s for the runner-up, batch 32")


def _paired() -> str:
    ends = [paired_interval(*case) for case in (
        ("mahjong", "auto", "best-fixed-b32"), ("mahjong_calibrated", "auto", "best-fixed-b32"),
        ("charlm", "auto", "best-fixed-b32"), ("gpt2", "auto", "best-fixed-b32"), ("mahjong_2ranks", "auto", "fixed-b128"))]
    shown = [f"[{f2(low)}, {f2(high)}]" for low, high in ends]
    return (f"{shown[0]} and {shown[1]} on Mahjong (the two series), {shown[2]} on the char-LM example, {shown[3]} on "
            f"hf:gpt2, and {shown[4]} on 2 ranks (against batch 128)")


def _seed_range() -> str:
    ratios = seed_ratios("mahjong", "auto", "best-fixed-b32") + seed_ratios("mahjong_calibrated", "auto", "best-fixed-b32")
    return f"Seed by seed the ratio ranged from {f2(min(ratios))} to {f2(max(ratios))} on Mahjong"


def _spread_between_seeds() -> str:
    configs = {run["config"] for run in (record["values"] for record in records("auto_vs_fixed_mahjong.jsonl"))
               if run.get("row") == "run"}
    widest = max(max(run["command_s"] for run in runs("mahjong", config)) /
                 min(run["command_s"] for run in runs("mahjong", config)) for config in configs)
    low, high = loads("mahjong")
    return (f"its load average was {low:.1f} to {high:.1f} in the first series (each row records it before and after its "
            f"run, and the command's seconds vary up to {widest:.1f}x between seeds)")


def _cb_loads_mahjong() -> str:
    settings, _, branches = critical("critical_batch_mahjong.jsonl")
    values = [value for row in branches for value in (row["machine"]["load_average_start"],
                                                       row["machine"]["load_average_end"])]
    return (f"(load average {settings['machine']['load_average_start']:.1f} at the start; {min(values):.2f} to "
            f"{max(values):.2f} over the branches, as their rows record it)")


def _cb_wall() -> str:
    _, _, branches = critical("critical_batch_mahjong.jsonl")
    return f"30 branches at global batch 64 to 1,024, whose rows' `wall_s` add up to {sum(row['wall_s'] for row in branches):,.0f} s"


def _cb_goal_point() -> str:
    _, points, _ = critical("critical_batch_mahjong.jsonl")
    goal = points[-1]
    first, last = goal["values"][0], goal["values"][-1]
    worse = [a - b for a, b in zip(first, last)]
    spread = abs(first[0] - first[1])
    return (f"Its two factor-1 seeds differ by {spread:.3f} ({min(first):.3f} and {max(first):.3f}), and t(0.975, 1) = "
            f"{t_quantile(0.975, 1):.1f} turns that into a tolerance of {goal['tolerance']:.3f}: every factor matched, and "
            f"the point reads \"at least 1,024\", although batch 1,024 was worse than batch 64 on both seeds (by "
            f"{min(worse):.3f} and {max(worse):.3f}; {statistics.mean(worse):.3f} in the mean)")


def _cb_samples_mahjong() -> str:
    settings, _, _ = critical("critical_batch_mahjong.jsonl")
    spent, study, base = settings["samples_spent"], settings["time_to_target_samples"], settings["base_samples"]
    return (f"Samples: {spent:,} in the branches, {spent / study:.1%} of the {study:,} the time-to-target study trained** "
            f"(`fraction_of_time_to_target`; the goal is at most 25%). With the base run's {base:,} it is "
            f"{(spent + base) / study:.1%}")


def _cb_b_simple_mahjong() -> str:
    _, points, _ = critical("critical_batch_mahjong_tolerance.jsonl")
    values = [point["b_simple"] for point in points]
    return (f"B_simple grows {' -> '.join(f'{value:.0f}' for value in values)} along the run, and stays below the critical "
            f"batch** ({', '.join(f'{value / 512:.2f}x' for value in values)} of 512)")


def _cb_against_study() -> str:
    fit = study_fit("time_to_target_study_mahjong.jsonl")
    low, high = fit["b_crit_ci95"]
    return f"Against the study's B_crit {fit['b_crit']:.0f} [{low:.0f}, {high:.0f}]: 512, {512 / fit['b_crit']:.2f}x"


def _tolerance(value: float) -> str:
    return f"{value:.3f}" if value >= 0.01 else f"{value:.2g}"


def _point_rows(name: str) -> str:
    _, points, _ = critical(name)
    lines = []
    for point in points:
        means = " / ".join(f"{mean:.3f}" for mean in point["means"])
        at_least = "at least " if point["critical_at_least"] else ""
        lines.append(f"| {point['step']}{' (the goal)' if point is points[-1] else ''}, {point['samples']:,} | {at_least}"
                     f"{point['critical_batch']:,} ({_tolerance(point['tolerance'])}) |"
                     + ("" if name != "critical_batch_mahjong.jsonl" else
                        f" {of_kind('critical_batch_mahjong_tolerance.jsonl', 'critical-batch')[points.index(point)]['critical_batch']:,} |")
                     + f" {point['b_simple']:.0f} | {means} |")
    return " ".join(lines)


def _cb_load_others() -> str:
    values = []
    for name in ("critical_batch_charlm.jsonl", "critical_batch_gpt2.jsonl"):
        settings, _, branches = critical(name)
        values += [value for row in (settings, *branches) for value in (row["machine"]["load_average_start"],
                                                                        row["machine"]["load_average_end"])]
    return f"(load average {min(values):.1f} to {max(values):.1f};"


def _cb_b_simple_share() -> str:
    shares = [point["b_simple"] / point["critical_batch"] for name in ("critical_batch_charlm.jsonl", "critical_batch_gpt2.jsonl")
              for point in critical(name)[1]]
    return f"B_simple stays far below it ({min(shares):.2f}x to {max(shares):.2f}x), as on Mahjong"


def _against_fit(study: str, name: str) -> tuple[str, list[str]]:
    """A study's B_crit [95%] and each point's critical batch with its ratio to it (two decimals
    below 1, one above)."""
    fit = study_fit(study)
    low, high = fit["b_crit_ci95"]
    ratios = []
    for point in critical(name)[1]:
        ratio = point["critical_batch"] / fit["b_crit"]
        ratios.append(f"{point['critical_batch']:,} ({ratio:.2f}x)" if ratio < 1 else f"{point['critical_batch']:,} ({ratio:.1f}x)")
    return f"{fit['b_crit']:.1f} [{low:.1f}, {high:.1f}]", ratios


def _cb_against_studies() -> str:
    charlm, (c1, c2, c3) = _against_fit("time_to_target_study_charlm.jsonl", "critical_batch_charlm.jsonl")
    gpt2, (g1, g2, _) = _against_fit("named_time_to_target_gpt2.jsonl", "critical_batch_gpt2.jsonl")
    return f"{charlm}: {c1} at a quarter of the run, then {c2} and {c3}. hf:gpt2's is {gpt2}: {g1}, then {g2} twice"


def _cb_gpt2_worse() -> str:
    goal = critical("critical_batch_gpt2.jsonl")[1][-1]
    return (f"tolerance of {goal['tolerance']:.3f} in loss, so batches 32 and 64 matched although their means were "
            f"{goal['worse_by'][2]:.3f} and {goal['worse_by'][3]:.3f} worse than batch 8's")


def _cb_samples_others() -> str:
    charlm, _, _ = critical("critical_batch_charlm.jsonl")
    gpt2, _, branches = critical("critical_batch_gpt2.jsonl")
    reached = [run["validated_step"] * run["global_batch"]
               for run in of_kind("named_time_to_target_gpt2.jsonl", "time-to-target-study-run") if run["reached"]]
    return (f"Samples: {charlm['samples_spent'] / charlm['time_to_target_samples']:.1%} of the char-LM study's "
            f"({charlm['samples_spent']:,} of {charlm['time_to_target_samples']:,}), within the 25% goal; "
            f"{gpt2['samples_spent'] / gpt2['time_to_target_samples']:.1%} of the hf:gpt2 study's ({gpt2['samples_spent']:,} "
            f"of {gpt2['time_to_target_samples']:,}), not.** hf:gpt2's study was small (its runs met the goal in "
            f"{min(reached):,} to {max(reached):,} samples, {sum(reached):,} in all), and its {len(branches)} branches of "
            f"1,024 samples are {gpt2['samples_spent'] / sum(reached):.0%} of what it trained to the goal")


BASE_RUNS = {"mahjong tiny": "critical_batch_mahjong_base", "hf:gpt2 tiny,seq=65": "critical_batch_gpt2_base",
             "char_lm_workload:CharLMWorkload tiny": "critical_batch_charlm_base"}
"""The committed base run that stands in for each workload's critical-batch studies in section 7."""


def _cost_rows(round_: int) -> dict[str, dict]:
    return {row["label"]: row for row in (record["values"] for record in records("critical_batch_cost.jsonl"))
            if row["round"] == round_}


def _base_cost(workload: str) -> tuple[float, float]:
    """The stand-in base run's seconds (start-up, steps, pauses) and CPU seconds (its CPU per wall
    second over the steps and pauses, the start-up at one CPU second a second)."""
    summary = json.loads((RESULTS / BASE_RUNS[workload] / "summary.json").read_text())
    stepping = summary["wall_s"] + summary["paused_s"]
    return summary["startup_s"] + stepping, summary["cpu_s_per_wall_s"] * stepping + summary["startup_s"]


def _with_base(round_: int, label: str = "critical-batch") -> tuple[float, float | None]:
    """A round's critical-batch study with its base run's stand-in, over the round's time-to-target study:
    (wall, CPU; None where the round did not measure CPU seconds)."""
    rows = _cost_rows(round_)
    study, reference = rows[label], rows["time-to-target"]
    seconds, cpu = _base_cost(study["workload"])
    return ((study["wall_s"] + seconds) / reference["wall_s"],
            (study["cpu_s"] + cpu) / reference["cpu_s"] if study.get("cpu_s") and reference.get("cpu_s") else None)


def _cb_cost_row(round_: int, label: str) -> Callable[[], str]:
    """A critical-batch row's ratios in section 7's table: alone and with the base run, wall and CPU."""
    def text() -> str:
        rows = _cost_rows(round_)
        study, reference = rows[label], rows["time-to-target"]

        def ratio(value: float | None) -> str:
            return "–" if value is None else f2(value)
        cpu = study["cpu_s"] / reference["cpu_s"] if study.get("cpu_s") and reference.get("cpu_s") else None
        wall, cpu_with = _with_base(round_, label)
        return f"| {f2(study['wall_s'] / reference['wall_s'])} | {ratio(cpu)} | {f2(wall)} | {ratio(cpu_with)} |"
    return text


def _cb_base_costs() -> str:
    shown = [_base_cost(workload) for workload in BASE_RUNS]
    return (f"{shown[0][0]:.0f} s and {shown[0][1]:.0f} CPU s for Mahjong, {shown[1][0]:.0f} s and {shown[1][1]:.0f} CPU s "
            f"for hf:gpt2, {shown[2][0]:.0f} s and {shown[2][1]:.0f} CPU s for the char-LM example")


def _cb_cost_gpt2() -> str:
    rows = _cost_rows(8)
    study, study_tt = rows["critical-batch"], rows["time-to-target"]
    wall, cpu = study["wall_s"] / study_tt["wall_s"], study["cpu_s"] / study_tt["cpu_s"]
    with_wall, with_cpu = _with_base(8)

    def goal(value: float) -> bool:
        return value <= 0.25
    assert goal(wall) and not goal(cpu) and not goal(with_wall) and not goal(with_cpu)
    return (f"hf:gpt2's study took {f2(wall)}x** the time-to-target study's wall time "
            f"({study['wall_s']:.0f} s against {study_tt['wall_s']:.0f} s, mean load average {study['load_mean']:.1f} and "
            f"{study_tt['load_mean']:.1f}) and {f2(cpu)}x its CPU seconds: the wall time within the goal of a quarter, "
            f"the CPU seconds not. With its base run's stand-in it is {f2(with_wall)}x and {f2(with_cpu)}x, both over "
            f"the goal. It trained {study['trainings']} branches where round 7 trained 39, and its critical batches "
            f"are those of rounds 4 and 7, {', '.join(study['critical'][:2])} and {study['critical'][2]}, with tolerances of "
            f"{study['tolerance'][0]:.3f}, {study['tolerance'][1]:.3f} and {study['tolerance'][2]:.3f} in loss")


def _cb_intro() -> str:
    alone = [_cost_rows(round_)["critical-batch"]["wall_s"] / _cost_rows(round_)["time-to-target"]["wall_s"]
             for round_ in (3, 5, 8)]
    with_base = [_with_base(round_)[0] for round_ in (3, 5, 8)]
    return (f"on tiny Mahjong {f2(alone[0])}x the time-to-target study's wall time at the same load, on the char-LM "
            f"example {f2(alone[1])}x, and on hf:gpt2 {f2(alone[2])}x with 2 seeds at each factor above 1; with the base "
            f"run the study starts from, which the time-to-target study does not need, {f2(with_base[0])}x, "
            f"{f2(with_base[1])}x and {f2(with_base[2])}x")


def _cb_plan_row(name: str, config: str, alone: str, alone_config: str) -> Callable[[], str]:
    def text() -> str:
        row = checks(name)[config]
        base = checks(alone)[alone_config]
        return (f"`{config}` | {check_cells(row)} | {f1(row['predicted_steps'])} / {f1(row['measured_steps'])} | "
                f"{f2(base['ratio'])} |")
    return text


def _study_table_row(name: str, batch: int) -> str:
    row = study_batches(name)[batch]
    steps = [value for value in row["steps_per_seed"]]
    factors = sorted(float(factor) for factor in row["lr_sweep"])
    shown = "-".join(f"{factor:g}" for factor in (factors[0], factors[-1]))
    return (f"| {batch} | {row['best_lr_factor']:g} ({shown}) | {f1(row['steps_mean'])} [{f1(min(steps))}, "
            f"{f1(max(steps))}] | {row['samples_mean']:,.0f} | {row['b_simple']:.0f} |")


def _fit_row(name: str, label: str) -> str:
    fit = study_fit(name)
    (s_low, s_high), (e_low, e_high), (b_low, b_high) = fit["s_min_ci95"], fit["e_min_ci95"], fit["b_crit_ci95"]
    return (f"| {label} | {f1(fit['s_min'])} [{f1(s_low)}, {f1(s_high)}] | {fit['e_min']:,.0f} [{e_low:,.0f}, "
            f"{e_high:,.0f}] | **{fit['b_crit']:.0f} [{b_low:.0f}, {b_high:.0f}]** | {fit['b_simple']:.0f} | "
            f"{fit['relative_rms']:.1%} |")


def _b_simple_shares() -> str:
    shares = [study_fit(name)["b_simple"] / study_fit(name)["b_crit"]
              for name in ("time_to_target_study_mahjong.jsonl", "time_to_target_study_charlm.jsonl")]
    return f"{f2(shares[0])}x on Mahjong, {f2(shares[1])}x on the char-LM example"


def _older_check(name: str, config: str) -> Callable[[], str]:
    def text() -> str:
        row = checks(name)[config]
        low, high = row["predicted_s_ci95"]
        return (f"{f1(row['predicted_s'])} {interval1(low, high)} | {f1(row['measured_s'])} | {f2(row['ratio'])} | "
                f"{f1(row['predicted_steps'])} | {f1(row['measured_steps'])} | {1e3 * row['predicted_step_s']:.1f} | "
                f"{1e3 * row['measured_step_s']:.1f} |")
    return text


def _today_row(plan: str, config: str) -> Callable[[], str]:
    def text() -> str:
        return f"`{config}` | {today(plan, config)} |"
    return text


def _today_ratio(plan: str, config: str) -> Callable[[], str]:
    def text() -> str:
        row = covered(plan, config)
        return f"| {f1(float(row['measured_s']))} | {f2(float(row['ratio']))} |"
    return text


def _today_ranges() -> str:
    older = [row["ratio"] for name in ("plan_mahjong.jsonl", "plan_charlm.jsonl") for row in checks(name).values()]
    now = [float(row["ratio"]) for row in coverage() if row["plan"] in ("plan_mahjong", "plan_charlm")]
    return (f"All six are within ±25% under either model ({f2(min(older))}-{f2(max(older))} of the older predictions, "
            f"{f2(min(now))}-{f2(max(now))} of today's)")


def _plan_check_row(name: str, config: str) -> Callable[[], str]:
    def text() -> str:
        row = checks(name)[config]
        return (f"`{config}` | {row['schedule']} ({' → '.join(map(str, row['batches'] or [row['global_batch']]))}) | {check_cells(row)} | "
            f"{f1(row['predicted_steps'])} / {f1(row['measured_steps'])} | {1e3 * row['predicted_step_s']:.1f} / "
            f"{1e3 * row['measured_step_s']:.1f} |")
    return text


def _misses() -> str:
    rows = [checks("plan_checks_charlm.jsonl")["cpu:eager:fp32/1/8"],
            checks("plan_checks_charlm.jsonl")["cpu:eager:fp32/1/auto:8..512"],
            checks("plan_checks_gpt2.jsonl")["cpu:eager:fp32/1/32"]]
    steps = ", ".join(f"{row['measured_steps']:.0f}" for row in rows[:2]) + f" and {rows[2]['measured_steps']:.0f}"
    predicted = ", ".join(f"{row['predicted_steps']:.0f}" for row in rows[:2]) + f" and {rows[2]['predicted_steps']:.0f}"
    step_ratio = [row["measured_steps"] / row["predicted_steps"] for row in rows]
    time_ratio = [row["measured_step_s"] / row["predicted_step_s"] for row in rows]
    return (f"mostly in the steps ({steps} against {predicted}: {f2(step_ratio[0])}x, {f2(step_ratio[1])}x and "
            f"{f2(step_ratio[2])}x); the step time was {f2(time_ratio[0])}x the predicted on the char-LM batch 8, "
            f"{f2(time_ratio[1])}x on its auto and {f2(time_ratio[2])}x on hf:gpt2's batch 32")


def _slices() -> str:
    rates = {name: (bench_rate(f"plan_checks_{name}/bench.jsonl", "cpu:eager:fp32", 4),
                    bench_rate(f"plan_checks_{name}/bench.jsonl", "cpu:eager:fp32", 8)) for name in ("charlm", "gpt2")}
    cost = {name: (2 * 4 / four) / (8 / eight) for name, (four, eight) in rates.items()}
    return (f"costs {f2(cost['charlm'])}x one pass over 8 on the char-LM example ({f1(rates['charlm'][0])} against "
            f"{f1(rates['charlm'][1])} samples/s) and {f2(cost['gpt2'])}x on hf:gpt2 ({f1(rates['gpt2'][0])} against "
            f"{f1(rates['gpt2'][1])})")


def _charlm_fit_steps() -> str:
    fit = study_fit("time_to_target_study_charlm.jsonl")
    return f"S(8) = {f1(fit['s_min'])} x (1 + {f1(fit['b_crit'])} / 8) = {fit['s_min'] * (1 + fit['b_crit'] / 8):.0f} steps"


def _coverage_lines() -> str:
    again = [row for row in coverage() if row["predicted_s"]]
    inside = sum(row["inside"] == "True" for row in again)
    plain = [row for row in again if row["extrapolated"] == "False"]
    bounded = [row for row in again if row["extrapolated"] == "True"]

    def width(rows: list[dict]) -> float:
        return statistics.median(float(row["predicted_hi"]) / float(row["predicted_lo"]) for row in rows)

    return (f"{inside} of {len(again)} measured times lie inside today's 95% intervals** (Wilson 95% "
            f"{wilson(inside, len(again))}): {sum(row['inside'] == 'True' for row in plain)} of {len(plain)} not "
            f"extrapolated, whose intervals are {f2(width(plain))}x wide (high over low, median), and "
            f"{sum(row['inside'] == 'True' for row in bounded)} of {len(bounded)} extrapolated, {f2(width(bounded))}x wide. "
            f"Counting the {len(coverage()) - len(again)} checks not predicted again as misses, {inside} of "
            f"{len(coverage())} ({share(inside / len(coverage()))})")


def _plain_checks() -> list[dict]:
    """Every committed plan-check row, read here as the rows hold them (not through the script):
    the TPU's are those of `tpu_*` files."""
    found = []
    for path in sorted(RESULTS.glob("*.jsonl")):
        found += [dict(row, on_tpu=path.name.startswith("tpu_")) for row in of_kind(path.name, "plan-check")]
    return found


def _plainly(rows: list[dict]) -> tuple[int, int]:
    """(within ±25% of the printed prediction, inside the printed interval)."""
    return (sum(abs(row["measured_s"] / row["predicted_s"] - 1) <= 0.25 for row in rows),
            sum(bool(row.get("predicted_s_ci95")) and row["predicted_s_ci95"][0] <= row["measured_s"]
                <= row["predicted_s_ci95"][1] for row in rows))


def _plain_count() -> str:
    rows = _plain_checks()
    on_cpu, on_tpu = [row for row in rows if not row["on_tpu"]], [row for row in rows if row["on_tpu"]]
    (hits, held), (cpu_hits, cpu_held), (tpu_hits, tpu_held) = map(_plainly, (rows, on_cpu, on_tpu))
    return (f"**Counted plainly, {hits} of {len(rows)} checks lie within ±25% of the prediction their plan printed** "
            f"({share(hits / len(rows))}, Wilson 95% {wilson(hits, len(rows))}), and {held} of {len(rows)} inside the "
            f"95% interval it printed: on the 2-core CPU {cpu_hits} and {cpu_held} of {len(on_cpu)}, on the TPU v5e "
            f"{tpu_hits} and {tpu_held} of {len(on_tpu)}")


def _plain_rules() -> str:
    rows = _plain_checks()
    plain = [abs(row["measured_s"] / row["predicted_s"] - 1) <= 0.25 for row in rows]
    by_interval = [(row["predicted_s_ci95"][0] <= row["measured_s"] <= row["predicted_s_ci95"][1])
                   if row.get("extrapolated") else hit for row, hit in zip(rows, plain)]
    now = [abs(row["measured_s"] / row["predicted_s_now"] - 1) <= 0.25 if row.get("predicted_s_now") else hit
           for row, hit in zip(rows, plain)]
    flagged = sum(bool(row.get("extrapolated")) for row in rows)
    return (f"{flagged} checks whose plan printed them as extrapolated, judged by their printed interval instead, "
            f"make it {sum(by_interval)} of {len(rows)}: "
            f"{sum(rule and not hit for rule, hit in zip(by_interval, plain))} misses become hits and "
            f"{sum(hit and not rule for rule, hit in zip(by_interval, plain))} hits misses. Held to the prediction at "
            f"the machine's speed when they ran, the {sum(bool(row.get('predicted_s_now')) for row in rows)} "
            f"re-benched checks make it {sum(now)} of {len(rows)}")


def _plain_set(name: str) -> str:
    """One set of checks named before they ran: its configurations' means against their printed
    predictions, and the set's plain count."""
    rows = of_kind(f"plan_checks_plain_{name}.jsonl", "plan-check")
    configs: dict[str, list[dict]] = {}
    for row in rows:
        configs.setdefault(row["config"], []).append(row)
    hits, held = _plainly(rows)

    def said(config: str, runs: list[dict]) -> str:
        mean = statistics.fmean(row["measured_s"] for row in runs)
        role = " (best)" if runs[0]["recommended"] else (" (extrapolated)" if runs[0].get("extrapolated") else "")
        return f"`{config.split('/')[-1]}`{role} {f1(mean)} s against {f1(runs[0]['predicted_s'])} ({f2(mean / runs[0]['predicted_s'])})"

    return (f"{'; '.join(said(config, runs) for config, runs in configs.items())}: {hits} of {len(rows)} runs within "
            f"±25% and {held} of {len(rows)} inside the printed interval")


def _recorded_inside() -> str:
    held = sum(row["recorded_inside"] == "True" for row in coverage())
    return f"the intervals their rows recorded held {held} of {len(coverage())} measured times"


def _configurations(rows: list[dict]) -> list[list[dict]]:
    """The runs of each (plan, configuration), in table order."""
    pairs: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        pairs.setdefault((row["plan"], row["config"]), []).append(row)
    return list(pairs.values())


def _mean_ratio(rows: list[dict]) -> float:
    """The mean of a configuration's runs over today's prediction, at the speed now where they re-benched."""
    judged = rows[0]["now_s"] or rows[0]["predicted_s"]
    return statistics.fmean(float(row["measured_s"]) for row in rows) / float(judged)


def _within() -> str:
    again = [row for row in coverage() if row["predicted_s"]]
    predicted = [rows for rows in _configurations(again) if rows[0]["extrapolated"] == "False"]
    runs = [row for rows in predicted for row in rows]
    within = sum(abs(_mean_ratio(rows) - 1) <= 0.25 for rows in predicted)
    return (f"Within ±25%: {within} of {len(predicted)} of today's predictions** (the configurations not extrapolated; a "
            f"configuration checked at several seeds by the mean of its runs; "
            f"{sum(row['within_25'] == 'True' for row in runs)} of {len(runs)} runs; "
            f"{sum(abs(float(row['recorded_ratio']) - 1) <= 0.25 for row in coverage())} of {len(coverage())} "
            "recorded, extrapolated ones included)")


def _bounded() -> str:
    again = [row for row in coverage() if row["predicted_s"]]
    bounded = [rows for rows in _configurations(again) if rows[0]["extrapolated"] == "True"]
    runs = [row for rows in bounded for row in rows]
    ratios = [_mean_ratio(rows) for rows in bounded]
    return (f"judged by its interval ({sum(row['inside'] == 'True' for row in runs)} of {len(runs)} inside), not by "
            f"±25% (its row holds no `within`). Against the model's point that ranked them, the {len(bounded)} "
            f"extrapolated configurations measured {f2(min(ratios))}-{f2(max(ratios))}x")


def _study_seeds_check() -> str:
    """The hf:gpt2 plan from a new study, checked at 3 seeds: each configuration's mean against its
    prediction, and whether every run lay inside its interval."""
    checks = of_kind("plan_check_study_seeds_gpt2.jsonl", "plan-check")
    by_config: dict[str, list[dict]] = {}
    for row in checks:
        by_config.setdefault(row["config"], []).append(row)

    def pair(config: str) -> tuple[str, str, str]:
        rows = by_config[config]
        mean = statistics.fmean(row["measured_s"] for row in rows)
        return f1(mean), f1(rows[0]["predicted_s"]), f2(mean / rows[0]["predicted_s"])

    fixed, larger, compiled = (pair(config) for config in
                               ("cpu:eager:fp32/1/8", "cpu:eager:fp32/1/32", "cpu:compile:fp32/1/128"))
    inside = sum(bool(row["inside"]) for row in checks)
    share = "all" if inside == len(checks) else f"{inside} of"
    return (f"Batch 8 took {fixed[0]} s against {fixed[1]} predicted ({fixed[2]}), batch 32 {larger[0]} against "
            f"{larger[1]} ({larger[2]}) and compiled 128 {compiled[0]} against {compiled[1]} ({compiled[2]}), each the "
            f"mean of {len(by_config['cpu:eager:fp32/1/8'])} seeds; {share} {len(checks)} runs lie inside their intervals")


def _named_recheck() -> str:
    """The named hf:gpt2 plan checked on another machine with --check-rebench: each configuration's
    bench row again against the planned one, and the mean of its runs against the prediction and the
    prediction at the speed now."""
    checks = of_kind("named_plan_gpt2.jsonl", "plan-check")
    eager = [row for row in checks if row["config"] == "cpu:eager:fp32/1/8"]
    compiled = [row for row in checks if row["config"] == "cpu:compile:fp32/1/128"]
    first = next(row for row in of_kind("named_plan_gpt2.jsonl", "plan")
                 if row["config"] == "cpu:compile:fp32/1/128")["compilations"][0]["seconds"]

    def pair(rows: list[dict], predicted_said: str) -> str:
        mean = statistics.fmean(row["measured_s"] for row in rows)
        predicted, now = rows[0]["predicted_s"], rows[0]["predicted_s_now"]
        return (f"{f1(mean)} s against {f1(predicted)}{predicted_said} ({f2(mean / predicted)}) and {f1(now)} at the "
                f"speed now ({f2(mean / now)})")

    return (f"the bench row of eager batch 8 read {f1(eager[0]['rebench_samples_per_s'])} samples/s there against "
            f"{f1(eager[0]['bench_samples_per_s'])} planned, compiled batch 128 {f1(compiled[0]['rebench_samples_per_s'])} "
            f"against {f1(compiled[0]['bench_samples_per_s'])}, its first compilation "
            f"{f1(compiled[0]['rebench_compile_s'])} s against {f1(first)}. Batch 8 took "
            f"{pair(eager, ' predicted')}; compiled 128 {pair(compiled, '')}")


def _named_table_row(config: str) -> str:
    """A row of named_models.md's table of the plan checked again: prediction, bench rows, the speed
    now, the runs and their ratios, the steady steps."""
    (plan,) = [row for row in of_kind("named_plan_gpt2.jsonl", "plan") if row["config"] == config]
    runs = [row for row in of_kind("named_plan_gpt2.jsonl", "plan-check") if row["config"] == config]
    mean = statistics.fmean(row["measured_s"] for row in runs)
    low, high = plan["predicted_s_ci95"]
    now_low, now_high = runs[0]["predicted_s_now_ci95"]
    steady = sorted(row["steady_step_s"] * 1e3 for row in runs)
    bound = ">= " if any(item["seconds"] is None for item in plan["compilations"]) else ""
    return (f"| {bound}{f1(plan['predicted_s'])} [{f1(low)}, {f1(high)}] | {f1(runs[0]['bench_samples_per_s'])} / "
            f"{f1(runs[0]['rebench_samples_per_s'])} | {f1(runs[0]['predicted_s_now'])} [{f1(now_low)}, {f1(now_high)}] "
            f"| {', '.join(f1(row['measured_s']) for row in runs)} | {f2(mean / plan['predicted_s'])} | "
            f"{f2(mean / runs[0]['predicted_s_now'])} | {f1(plan['step_s'] * 1e3)} / {f1(steady[0])}-{f1(steady[-1])} |")


def _named_start_up() -> str:
    (plan,) = [row for row in of_kind("named_plan_gpt2.jsonl", "plan") if row["config"] == "cpu:eager:fp32/1/8"]
    third = 0.3 < plan["overhead_s"] / plan["predicted_s"] < 0.37
    return (f"what the speed now leaves as planned is {'a third' if third else 'not a third'} of its prediction: the "
            f"study's start-up and shutdown, {f1(plan['overhead_s'])} s")


def _steps_trained() -> str:
    (plan,) = [row for row in of_kind("plan_check_study_seeds_gpt2.jsonl", "plan") if row["config"] == "cpu:eager:fp32/1/8"]
    runs = [row["measured_s"] for row in of_kind("plan_check_study_seeds_gpt2.jsonl", "plan-check")
            if row["config"] == "cpu:eager:fp32/1/8"]
    crossing = plan["overhead_s"] + plan["steps"] * plan["step_s"] + plan["validation_s"]
    return (f"the goal at {plan['steps']:.0f} steps, the plan predicts {plan['steps_trained']:.0f} steps trained and "
            f"{plan['validations']} validations, {f1(plan['predicted_s'])} s for commands that took "
            f"{f1(statistics.fmean(runs))} s (the mean of {len(runs)} seeds); the crossing's {plan['steps']:.0f} steps "
            f"and 1 validation alone would have predicted {f1(crossing)} s")


def _bench_compilations() -> str:
    compiles = {row["batch_size"]: row["first_step_s"] - row["step_time_s"]
                for row in records("plan_check_study_seeds_gpt2/bench.jsonl") if row["target"] == "cpu:compile:fp32"}
    return (f"compiled batch 8 in {f1(compiles[8])} s beyond its steady step, then 32 in {f1(compiles[32])} s and "
            f"128 in {f1(compiles[128])} s")


def _seeds_check() -> str:
    """The char-LM plan checked at 5 seeds: each configuration's mean against its prediction, and
    batch 8's spread of seconds and steps."""
    checks = of_kind("plan_check_seeds_charlm.jsonl", "plan-check")
    fixed = [row for row in checks if row["config"] == "cpu:eager:fp32/1/8"]
    auto = [row for row in checks if row["config"] == "cpu:eager:fp32/1/auto:8..512"]

    def pair(rows: list[dict]) -> str:
        mean = statistics.fmean(row["measured_s"] for row in rows)
        return f"{f1(mean)} s against {f1(rows[0]['predicted_s'])} predicted ({f2(mean / rows[0]['predicted_s'])})"

    return (f"batch 8 took {pair(fixed)}, the mean of {len(fixed)} seeds, and auto {pair(auto)}. The runs' own scatter "
            f"is small beside that (batch 8: {f1(min(row['measured_s'] for row in fixed))} to "
            f"{f1(max(row['measured_s'] for row in fixed))} s): the error is the model's, not one seed's. The truth "
            f"lay between the interval's two ends: {min(row['measured_steps'] for row in fixed):.0f} to "
            f"{max(row['measured_steps'] for row in fixed):.0f} steps at batch 8 against "
            f"{fixed[0]['predicted_steps']:.0f} at the bound")


def _outside() -> str:
    ratio = {(row["plan"], row["config"]): f2(float(row["ratio"])) for row in coverage() if row["predicted_s"]}
    return (f"at batch 8 ({ratio['plan_checks_charlm (eager)', 'cpu:eager:fp32/1/8']}) and its auto "
            f"({ratio['plan_checks_charlm (eager)', 'cpu:eager:fp32/1/auto:8..512']}), hf:gpt2 at batch 32 from the noise "
            f"scale ({ratio['plan_checks_gpt2 (eager)', 'cpu:eager:fp32/1/32']}) and from the critical-batch rows "
            f"({ratio['critical_batch_gpt2_plan', 'cpu:eager:fp32/1/32']})")


def _compiled_shift() -> str:
    shifts = [float(row["predicted_s"]) / float(row["recorded_s"]) - 1 for row in coverage()
              if row["plan"].startswith("plan_checks_") and "compiled" in row["plan"]]
    return f"today's compiled predictions are {min(shifts) * 100:.0f}-{share(max(shifts))} above the recorded ones"


def _one_run_range() -> str:
    from trainspeed.plan.steps_spread import one_run_spread

    spread = one_run_spread()
    half = t_quantile(0.975, spread.degrees_of_freedom) * spread.log_sd
    return f"own batch range from {math.exp(-half):.2f}x to {math.exp(half):.2f}x the run's"


def _mahjong_bound() -> str:
    return f"reads {today('plan_checks_mahjong (eager)', 'cpu:eager:fp32/1/128', ' s')}"


def _plain_row(series: str, reference: str, config: str = "auto") -> str:
    """The end of a row of the plain-fixed table: load, the paired ratios of the command and of
    train_s, with their intervals."""
    low, high = loads(series)

    def paired(field: str) -> str:
        by_seed = {run["seed"]: run[field] for run in runs(series, reference)}
        logs = [math.log(run[field] / by_seed[run["seed"]]) for run in runs(series, config)]
        half = t_quantile(0.975, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
        centre = statistics.mean(logs)
        return f"{f2(math.exp(centre))} [{f2(math.exp(centre - half))}, {f2(math.exp(centre + half))}]"
    return f"| {low:.1f} to {high:.1f} | **{paired('command_s')}** | {paired('train_s')} |"


def _plain_mahjong_seeds() -> str:
    """Where each auto stopped on 1-rank Mahjong, seed by seed, and what the last doublings of the
    noise scale alone cost."""
    timed, noise_only = runs("auto_vs_plain_mahjong", "auto"), runs("auto_vs_plain_mahjong", "auto-noise-only")
    fixed = {run["seed"]: run for run in runs("auto_vs_plain_mahjong", "plain-fixed-b32")}
    words = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine", 10: "ten"}

    def count(found: list[dict], batch: int) -> str:
        return words[sum(run["final_global_batch"] == batch for run in found)]
    at_256 = [run for run in noise_only if run["final_global_batch"] == 256]
    ratios = [run["command_s"] / fixed[run["seed"]]["command_s"] for run in at_256]
    return (f"With its step times auto stayed at 32 on {count(timed, 32)} of the 10 seeds and went to 64 on "
            f"{count(timed, 64)}; by the noise scale alone it went to 128 on {count(noise_only, 128)} and to 256 on "
            f"{count(noise_only, 256)}, where it took {f2(min(ratios))}x to {f2(max(ratios))}x of batch 32's command "
            f"and up to {max(run['samples'] for run in at_256):,} samples")


def _plain_gpt2_never_left() -> str:
    """hf:gpt2's auto against plain batch 8: every auto run ended at 8 without a switch, so the
    ratio is of a run with itself; the seeds' train_s over both configurations."""
    auto, fixed = runs("auto_vs_plain_gpt2", "auto"), runs("auto_vs_plain_gpt2", "plain-fixed-b8")
    last = {run["final_global_batch"] for run in auto} | {run["final_global_batch"] for run in fixed}
    switched = [run for run in auto if run["switches"]]
    train = [run["train_s"] for run in auto + fixed]
    return (f"(the last batch of all {len(auto)} auto runs is {'/'.join(map(str, sorted(last)))}, with "
            f"{'no switch' if not switched else f'{len(switched)} switching'}). It meets its goal at the second "
            f"validation ({max(run['samples'] for run in auto):,} samples), before auto's first switch, so its "
            f"{f2(math.exp(statistics.mean(math.log(a['command_s'] / b['command_s']) for a, b in zip(auto, fixed))))}x "
            f"compares batch 8 with batch 8, a run with itself plus the meter: it is the spread of the seeds' timings "
            f"of the same work (train_s {min(train):.1f} to {max(train):.1f} s over both)")


CLAIMS: dict[str, Claim] = {
    # docs/batch_schedule.md
    "schedule: load and seeds' spread": Claim(BATCH_SCHEDULE, _spread_between_seeds),
    **{f"schedule: mahjong {config}": Claim(BATCH_SCHEDULE, _mahjong_ratios(config, last)) for config, last in (
        ("auto", "256"), ("auto-workload-lr", "256"), ("fixed-b128", "128"), ("default-b1024", "1,024"), ("adaptdl", "32"))},
    "schedule: calibrated": Claim(BATCH_SCHEDULE, lambda: (
        f"| 256, 512 | **{f2(ratio_of_means('mahjong_calibrated', 'auto-calibrated', 'best-fixed-b32'))}** |")),
    "schedule: calibrated auto": Claim(BATCH_SCHEDULE, lambda: (
        f"| 256 | **{f2(ratio_of_means('mahjong_calibrated', 'auto', 'best-fixed-b32'))}** |")),
    "schedule: 2 ranks": Claim(BATCH_SCHEDULE, lambda: (
        f"| 128, 512, 256 | **{f2(ratio_of_means('mahjong_2ranks', 'auto', 'fixed-b128'))}** | "
        f"{f2(ratio_of_means('mahjong_2ranks', 'auto', 'fixed-b128', 'train_s'))} |")),
    "schedule: 2 ranks, study's best": Claim(BATCH_SCHEDULE, lambda: (
        f"| 32 | {f2(ratio_of_means('mahjong_2ranks', 'best-fixed-b32', 'fixed-b128'))} | "
        f"{f2(ratio_of_means('mahjong_2ranks', 'best-fixed-b32', 'fixed-b128', 'train_s'))} |")),
    "schedule: 2 ranks, in words": Claim(BATCH_SCHEDULE, lambda: (
        f"{f2(ratio_of_means('mahjong_2ranks', 'auto', 'fixed-b128'))}x the best fixed batch there (128), "
        f"{f2(ratio_of_means('mahjong_2ranks', 'auto', 'best-fixed-b32'))}x the study's best (32)")),
    "schedule: charlm": Claim(BATCH_SCHEDULE, lambda: (
        f"| 16 | **{f2(ratio_of_means('charlm', 'auto', 'best-fixed-b32'))}** |")),
    "schedule: gpt2": Claim(BATCH_SCHEDULE, lambda: (
        f"| 8 | **{f2(ratio_of_means('gpt2', 'auto', 'best-fixed-b32'))}** | "
        f"{f2(ratio_of_means('gpt2', 'auto', 'best-fixed-b32', 'train_s'))} |")),
    "schedule: plain, mahjong": Claim(BATCH_SCHEDULE, lambda: _plain_row("auto_vs_plain_mahjong", "plain-fixed-b32")),
    "schedule: plain, charlm": Claim(BATCH_SCHEDULE, lambda: _plain_row("auto_vs_plain_charlm", "plain-fixed-b32")),
    "schedule: plain, gpt2": Claim(BATCH_SCHEDULE, lambda: _plain_row("auto_vs_plain_gpt2", "plain-fixed-b8")),
    "schedule: plain, cnn": Claim(BATCH_SCHEDULE, lambda: _plain_row("auto_vs_plain_cnn", "plain-fixed-b128")),
    **{f"schedule: plain, {name}, noise scale alone": Claim(BATCH_SCHEDULE, lambda series=series, reference=reference: _plain_row(
        series, reference, "auto-noise-only")) for name, series, reference in (
        ("mahjong", "auto_vs_plain_mahjong", "plain-fixed-b32"), ("charlm", "auto_vs_plain_charlm", "plain-fixed-b32"),
        ("cnn", "auto_vs_plain_cnn", "plain-fixed-b128"), ("mahjong 2 ranks", "auto_vs_plain_mahjong_2ranks", "plain-fixed-b128"))},
    "schedule: plain, mahjong 2 ranks": Claim(BATCH_SCHEDULE, lambda: _plain_row("auto_vs_plain_mahjong_2ranks",
                                                                                 "plain-fixed-b128")),
    "schedule: plain, mahjong seed by seed": Claim(BATCH_SCHEDULE, _plain_mahjong_seeds),
    "schedule: plain, gpt2's auto never left batch 8": Claim(BATCH_SCHEDULE, _plain_gpt2_never_left),
    "schedule: gpt2's study's best": Claim(BATCH_SCHEDULE, _gpt2_best),
    "schedule: gpt2 load": Claim(BATCH_SCHEDULE, lambda: "the load average was {:.1f} to {:.1f}.".format(*loads("gpt2"))),
    "schedule: paired intervals": Claim(BATCH_SCHEDULE, _paired),
    "schedule: seed by seed": Claim(BATCH_SCHEDULE, _seed_range),
    "schedule: B_simple of the kept seed": Claim(BATCH_SCHEDULE, _mahjong_b_simple),
    "schedule: cost per sample": Claim(BATCH_SCHEDULE, _study_rates),
    "schedule: steps and samples": Claim(BATCH_SCHEDULE, lambda: (
        f"the samples of batch 32 (32,768) in {share(mean_of('mahjong', 'auto', 'steps') / 1024)} of its steps (1,024), "
        f"and fewer samples than batch 128 (40,960) in "
        f"{share(mean_of('mahjong', 'auto', 'steps') / mean_of('mahjong', 'fixed-b128', 'steps') - 1)} more steps")),
    "schedule: workload's rate": Claim(BATCH_SCHEDULE, lambda: (
        f"auto needed {ratio_of_means('mahjong', 'auto-workload-lr', 'best-fixed-b32', 'samples'):.1f}x the samples and "
        f"{f2(ratio_of_means('mahjong', 'auto-workload-lr', 'best-fixed-b32'))}x the time")),
    "schedule: default batch": Claim(BATCH_SCHEDULE, lambda: (
        f"The default batch (1,024) took {ratio_of_means('mahjong', 'default-b1024', 'best-fixed-b32'):.1f}x as long**: "
        f"{mean_of('mahjong', 'default-b1024', 'samples'):,.0f} samples, "
        f"{ratio_of_means('mahjong', 'default-b1024', 'best-fixed-b32', 'samples'):.1f}x those of batch 32")),
    "schedule: charlm steps": Claim(BATCH_SCHEDULE, lambda: (
        f"needed {mean_of('charlm', 'auto', 'samples'):,.0f} samples where batch 32 needed 10,240, in "
        f"{ratio_of_means('charlm', 'auto', 'best-fixed-b32', 'steps'):.1f}x the steps")),
    "schedule: the training split": Claim(BATCH_SCHEDULE, lambda: (
        f"the goal came after {mean_of('mahjong', 'adaptdl', 'samples'):,.0f} samples, within the first pass over the "
        f"training split (its "
        f"{json.loads((RESULTS / 'plan_checks_mahjong' / 'summary.json').read_text())['data']['samples']:,} samples")),
    # docs/critical_batch.md
    "critical: loads": Claim(CRITICAL_BATCH, _cb_loads_mahjong),
    "critical: branch seconds": Claim(CRITICAL_BATCH, _cb_wall),
    "critical: the goal's point": Claim(CRITICAL_BATCH, _cb_goal_point),
    "critical: samples, mahjong": Claim(CRITICAL_BATCH, _cb_samples_mahjong),
    "critical: B_simple, mahjong": Claim(CRITICAL_BATCH, _cb_b_simple_mahjong),
    "critical: against the study": Claim(CRITICAL_BATCH, _cb_against_study),
    "critical: mahjong points": Claim(CRITICAL_BATCH, lambda: _point_rows("critical_batch_mahjong.jsonl")),
    "critical: charlm points": Claim(CRITICAL_BATCH, lambda: _point_rows("critical_batch_charlm.jsonl")),
    "critical: gpt2 points": Claim(CRITICAL_BATCH, lambda: _point_rows("critical_batch_gpt2.jsonl")),
    "critical: loads, charlm and gpt2": Claim(CRITICAL_BATCH, _cb_load_others),
    "critical: cost of hf:gpt2's study": Claim(CRITICAL_BATCH, _cb_cost_gpt2),
    "critical: cost with the base run, in the opening": Claim(CRITICAL_BATCH, _cb_intro),
    "critical: the base runs' stand-in costs": Claim(CRITICAL_BATCH, _cb_base_costs),
    "critical: mahjong with the base run": Claim(CRITICAL_BATCH, lambda: (
        "with its base run's stand-in, {}x and {}x: within the goal of a quarter either way. Rounds 1 and 2 read "
        "{}x and {}x ({}x and {}x with the base run)").format(
        *map(f2, _with_base(3)), *(f2(_cost_rows(r)["critical-batch"]["wall_s"] / _cost_rows(r)["time-to-target"]["wall_s"])
                                   for r in (1, 2)), *(f2(_with_base(r)[0]) for r in (1, 2)))),
    "critical: char-LM with the base run": Claim(CRITICAL_BATCH, lambda: "{}x and {}x with its base run's stand-in".format(
        *map(f2, _with_base(5)))),
    "critical: gpt2 round 4 with the base run": Claim(CRITICAL_BATCH, lambda: (
        f"0.38x at first ({f2(_with_base(4)[0])}x with its base run's stand-in)")),
    **{f"critical: gpt2 round {round_} with the base run": Claim(CRITICAL_BATCH, lambda round_=round_: (
        "({}x and {}x with the base run)".format(*map(f2, _with_base(round_))))) for round_ in (6, 7)},
    **{f"critical: cost, round {round_} {label}": Claim(CRITICAL_BATCH, _cb_cost_row(round_, label))
       for round_, label in ((1, "critical-batch"), (1, "critical-batch-before"), (2, "critical-batch"),
                             (2, "critical-batch-before"), (3, "critical-batch-before"), (3, "critical-batch"),
                             (4, "critical-batch"), (4, "critical-batch-before"), (5, "critical-batch"),
                             (6, "critical-batch"), (7, "critical-batch"), (8, "critical-batch"))},
    "critical: B_simple against it": Claim(CRITICAL_BATCH, _cb_b_simple_share),
    "critical: against the studies": Claim(CRITICAL_BATCH, _cb_against_studies),
    "critical: gpt2's tolerance": Claim(CRITICAL_BATCH, _cb_gpt2_worse),
    "critical: samples, charlm and gpt2": Claim(CRITICAL_BATCH, _cb_samples_others),
    "critical: plan, charlm 8": Claim(CRITICAL_BATCH, _cb_plan_row(
        "critical_batch_charlm_plan.jsonl", "cpu:eager:fp32/1/8", "plan_checks_charlm.jsonl", "cpu:eager:fp32/1/8")),
    "critical: plan, charlm auto": Claim(CRITICAL_BATCH, _cb_plan_row(
        "critical_batch_charlm_plan.jsonl", "cpu:eager:fp32/1/auto:8..512", "plan_checks_charlm.jsonl",
        "cpu:eager:fp32/1/auto:8..512")),
    "critical: plan, gpt2 32": Claim(CRITICAL_BATCH, _cb_plan_row(
        "critical_batch_gpt2_plan.jsonl", "cpu:eager:fp32/1/32", "plan_checks_gpt2.jsonl", "cpu:eager:fp32/1/32")),
    "critical: plan, gpt2 auto": Claim(CRITICAL_BATCH, _cb_plan_row(
        "critical_batch_gpt2_plan.jsonl", "cpu:eager:fp32/1/auto:8..128", "plan_checks_gpt2.jsonl",
        "cpu:eager:fp32/1/auto:8..128")),
    "critical: today's": Claim(CRITICAL_BATCH, lambda: (
        f"{today('critical_batch_charlm_plan', 'cpu:eager:fp32/1/8', ' s')} for the char-LM batch 8 and its auto, "
        f"{today('critical_batch_gpt2_plan', 'cpu:eager:fp32/1/32', ' s')} for hf:gpt2's batch 32, "
        f"{today('critical_batch_gpt2_plan', 'cpu:eager:fp32/1/auto:8..128', ' s')} for its auto")),
    "critical: today's auto": Claim(CRITICAL_BATCH, lambda: (
        f"hf:gpt2's auto stays at 8 "
        f"({f2(float(covered('critical_batch_gpt2_plan', 'cpu:eager:fp32/1/auto:8..128')['ratio']))}x of its measured time)")),
    # docs/time_to_target.md
    **{f"time: study, mahjong {batch}": Claim(TIME_TO_TARGET, lambda batch=batch: _study_table_row(
        "time_to_target_study_mahjong.jsonl", batch)) for batch in (32, 128, 512, 2048)},
    **{f"time: study, charlm {batch}": Claim(TIME_TO_TARGET, lambda batch=batch: _study_table_row(
        "time_to_target_study_charlm.jsonl", batch)) for batch in (8, 32, 128, 512)},
    "time: fit, mahjong": Claim(TIME_TO_TARGET, lambda: _fit_row("time_to_target_study_mahjong.jsonl", "tiny Mahjong")),
    "time: B_simple against B_crit": Claim(TIME_TO_TARGET, _b_simple_shares),
    **{f"time: older check {config}": Claim(TIME_TO_TARGET, _older_check(name, config)) for name, config in (
        ("plan_mahjong.jsonl", "cpu:eager:fp32/2/128"), ("plan_mahjong.jsonl", "cpu:eager:fp32/2/512"),
        ("plan_mahjong.jsonl", "cpu:compile:fp32/1/512"), ("plan_charlm.jsonl", "cpu:eager:fp32/1/8"),
        ("plan_charlm.jsonl", "cpu:eager:fp32/2/512"), ("plan_charlm.jsonl", "cpu:compile:fp32/1/128"))},
    **{f"time: today {plan} {config}": Claim(TIME_TO_TARGET, _today_row(plan, config)) for plan, config in (
        ("plan_mahjong", "cpu:eager:fp32/2/128"), ("plan_mahjong", "cpu:eager:fp32/2/512"),
        ("plan_mahjong", "cpu:compile:fp32/1/512"), ("plan_charlm", "cpu:eager:fp32/1/8"),
        ("plan_charlm", "cpu:eager:fp32/2/512"), ("plan_charlm", "cpu:compile:fp32/1/128"))},
    **{f"time: today's ratio {plan} {config}": Claim(TIME_TO_TARGET, _today_ratio(plan, config)) for plan, config in (
        ("plan_mahjong", "cpu:eager:fp32/2/128"), ("plan_mahjong", "cpu:compile:fp32/1/512"),
        ("plan_charlm", "cpu:eager:fp32/1/8"), ("plan_charlm", "cpu:compile:fp32/1/128"))},
    "time: ranges": Claim(TIME_TO_TARGET, _today_ranges),
    "time: samples/s pick": Claim(TIME_TO_TARGET, lambda: (
        "which took {:.2f}x as long to the goal: {:.1f} s against {:.1f} s".format(
            checks("plan_charlm.jsonl")["cpu:eager:fp32/2/512"]["measured_s"]
            / checks("plan_charlm.jsonl")["cpu:eager:fp32/1/8"]["measured_s"],
            checks("plan_charlm.jsonl")["cpu:eager:fp32/2/512"]["measured_s"],
            checks("plan_charlm.jsonl")["cpu:eager:fp32/1/8"]["measured_s"]))),
    **{f"time: plan check {config}": Claim(TIME_TO_TARGET, _plan_check_row(f"plan_checks_{name}.jsonl", config))
       for name, config in (("mahjong", "cpu:eager:fp32/1/128"), ("mahjong", "cpu:eager:fp32/1/auto:32..2048"),
                            ("mahjong", "cpu:compile:fp32/1/32"), ("charlm", "cpu:eager:fp32/1/8"),
                            ("charlm", "cpu:eager:fp32/1/auto:8..512"), ("charlm", "cpu:compile:fp32/1/32"),
                            ("gpt2", "cpu:eager:fp32/1/32"), ("gpt2", "cpu:eager:fp32/1/auto:8..128"),
                            ("gpt2", "cpu:compile:fp32/1/8"))},
    "time: compiled within": Claim(TIME_TO_TARGET, lambda: "Compiled: 3 of 3 within ±25%** ({})".format(", ".join(
        f2(checks(f"plan_checks_{name}.jsonl")[config]["ratio"]) for name, config in (
            ("mahjong", "cpu:compile:fp32/1/32"), ("charlm", "cpu:compile:fp32/1/32"), ("gpt2", "cpu:compile:fp32/1/8"))))),
    "time: the misses": Claim(TIME_TO_TARGET, _misses),
    "time: the char-LM auto's batches": Claim(TIME_TO_TARGET, lambda: "its auto, which went {}: {}.".format(
        " → ".join(map(str, checks("plan_checks_charlm.jsonl")["cpu:eager:fp32/1/auto:8..512"]["batches"])),
        f2(checks("plan_checks_charlm.jsonl")["cpu:eager:fp32/1/auto:8..512"]["ratio"]))),
    "time: the char-LM fit at 8": Claim(TIME_TO_TARGET, _charlm_fit_steps),
    "time: micro-batches": Claim(TIME_TO_TARGET, _slices),
    "time: warm cache": Claim(TIME_TO_TARGET, lambda: (
        "The checks then took {} (Mahjong, whose validation graph was not yet measured), **{}** (char-LM) and **{}** "
        "(hf:gpt2) of their predictions").format(*(f2(row["ratio"]) for row in of_kind(
            "plan_checks_warm_cache.jsonl", "plan-check")))),
    "time: plain count": Claim(TIME_TO_TARGET, _plain_count),
    "time: the rules' moves": Claim(TIME_TO_TARGET, _plain_rules),
    **{f"time: plain set {name}": Claim(TIME_TO_TARGET, lambda name=name: _plain_set(name)) for name in ("charlm", "gpt2")},
    "time: coverage": Claim(TIME_TO_TARGET, _coverage_lines),
    "time: recorded coverage": Claim(TIME_TO_TARGET, _recorded_inside),
    "time: within 25%": Claim(TIME_TO_TARGET, _within),
    "time: outside 25%": Claim(TIME_TO_TARGET, _outside),
    "time: checks at 5 seeds": Claim(TIME_TO_TARGET, _seeds_check),
    "time: extrapolated by their intervals": Claim(TIME_TO_TARGET, _bounded),
    "time: a study's plan at 3 seeds": Claim(TIME_TO_TARGET, _study_seeds_check),
    "time: the bench's compilations": Claim(TIME_TO_TARGET, _bench_compilations),
    "time: the named plan checked again": Claim(TIME_TO_TARGET, _named_recheck),
    **{f"named: the plan checked again, {config}": Claim("results/named_models.md",
                                                         lambda config=config: _named_table_row(config))
       for config in ("cpu:eager:fp32/1/8", "cpu:compile:fp32/1/128")},
    "time: the named plan's start-up": Claim(TIME_TO_TARGET, _named_start_up),
    "time: steps trained": Claim(TIME_TO_TARGET, _steps_trained),
    "time: compiled shift": Claim(TIME_TO_TARGET, _compiled_shift),
    "time: one run's range": Claim(TIME_TO_TARGET, _one_run_range),
    "time: an extrapolated bound": Claim(TIME_TO_TARGET, _mahjong_bound),
    # docs/tpu.md: every MFU of a TPU v5e row against the measured chain and the chip's nominal peak
    "tpu: mahjong base, both peaks": Claim(TPU, _tpu_base),
    **{f"tpu: named {workload} {batch}": Claim(TPU, _tpu_named(workload, batch)) for workload, batch in (
        ("hf:gpt2", 8), ("timm:resnet50", 32), ("timm:resnet50", 64), ("timm:resnet50", 128))},
    "tpu: resnet50's range": Claim(TPU, _tpu_resnet_range),
    **{f"tpu: packed heads {precision} {batch}": Claim(TPU, lambda precision=precision, batch=batch: _tpu_packed(
        precision, batch)) for precision, batch in (("bf16", 64), ("bf16", 1024), ("bf16", 4096), ("fp32", 4096))},
    **{f"tpu: fused bf16 {batch} ({run})": Claim(TPU, _tpu_fused_bf16(batch, run, bold_fused)) for batch, run, bold_fused in (
        (64, "161957", None), (128, "170455", None), (256, "161957", ".2%"), (512, "170455", None),
        (1024, "161957", None), (4096, "161957", ".1%"), (4096, "170455", None))},
    **{f"tpu: fused bf16, fourth call, {batch}": Claim(TPU, _tpu_fused_fourth(batch, bold_cell))
       for batch, bold_cell in ((64, False), (256, True), (4096, True))},
    **{f"tpu: fused fp32 {batch}": Claim(TPU, _tpu_fused_fp32(batch)) for batch in (64, 256, 1024, 4096)},
    **{f"tpu: fused bf16, cheaper dispatch, {batch}": Claim(TPU, _tpu_fused_later(batch, run, batch == 256))
       for batch, run in ((64, "T023033"), (128, "T024355"), (256, "T023033"), (512, "T024355"), (1024, "T030842"),
                          (2048, "T030842"))},
    "tpu: fused bf16, cheaper dispatch, 4096": Claim(TPU, _tpu_fused_later_4096),
    "tpu: the best batch": Claim(TPU, _tpu_best),
    "tpu: stylegan3": Claim(TPU, _tpu_stylegan3),
    "h200: the best bf16 MFU, gpu_speed": Claim("results/gpu_speed.md", _h200_speed),
    "h200: the best bf16 MFU, session": Claim("results/h200_session.md", _h200_session),
}


# --- docs/tpu.md: the headline tables and claims, from their rows ------------------------------------------------

PEER_BF16, PEER_FP32 = "reference-jax:tpu:jit:bf16", "reference-jax:tpu:jit:fp32"


def n0(value: float) -> str:
    return f"{value:,.0f}"


def batch_cell(batch: int) -> str:
    return f"{batch:,}"


def peer_row(name: str, batch: int, target: str = PEER_BF16, run: str | None = None) -> dict:
    return tpu_row(name, "base", batch, target, run)


def fed_by_host(name: str, size: str, batch: int, target: str) -> dict:
    (row,) = [row for row in of_kind(name, "bench") if row["size"] == size and row["batch_size"] == batch
              and row["target"] == target and row.get("feed") == "host" and row["status"] == "ok"]
    return row


def rate_ratio(own: dict, other: dict) -> float:
    return own["samples_per_s"] / other["samples_per_s"]


def _tpu_base_row(batch: int) -> Callable[[], str]:
    """A row of the Mahjong base table: fp32 and bf16 beside the peer, base-fast, host-fed over device-fed."""
    def text() -> str:
        name = "tpu_mahjong_base.jsonl"
        fp32, fp32_peer = tpu_row(name, "base", batch, "jax:jit:fp32"), peer_row(name, batch, PEER_FP32)
        bf16, bf16_peer = tpu_row(name, "base", batch), peer_row(name, batch)
        fast, host = tpu_row(name, "base-fast", batch), fed_by_host(name, "base", batch, "jax:jit:bf16")
        return " | ".join([f"| {batch_cell(batch)}", n0(fp32["samples_per_s"]), n0(fp32_peer["samples_per_s"]),
                           f2(rate_ratio(fp32, fp32_peer)), n0(bf16["samples_per_s"]), n0(bf16_peer["samples_per_s"]),
                           f2(rate_ratio(bf16, bf16_peer)), n0(fast["samples_per_s"]), f2(rate_ratio(fast, bf16_peer)),
                           f2(rate_ratio(host, bf16))]) + " |"
    return text


def _tpu_base_words() -> str:
    name = "tpu_mahjong_base.jsonl"
    bf16 = [rate_ratio(tpu_row(name, "base", batch), peer_row(name, batch)) for batch in (64, 1024, 4096)]
    fast = [rate_ratio(tpu_row(name, "base-fast", batch), peer_row(name, batch)) for batch in (64, 1024, 4096)]
    cost = [1 - rate_ratio(fed_by_host(name, "base", batch, "jax:jit:bf16"), tpu_row(name, "base", batch))
            for batch in (64, 1024, 4096)]
    return (f"{f2(bf16[0])}x the peer at batch 64 (the peer is autocast-like too, `benchmarks/reference/jax_optax.py`: "
            f"bf16 matmul inputs, LayerNorm and softmax in fp32; what makes its small-batch step faster was not profiled), "
            f"and {f2(min(bf16[1:]))}-{f2(max(bf16[1:]))}x at 1,024 and up. `base-fast` (the residual stream in bf16, "
            f"matmuls padded to 128 lanes) is {f2(fast[0])}x at 64 and {f2(min(fast[1:]))}-{f2(max(fast[1:]))}x above. "
            f"- A host batch copied to the chip every step costs {share(cost[0])} at batch 64 (a 4 ms step), "
            f"{cost[1]:.1%} at 1,024 and {cost[2]:.1%} at 4,096.")


def _tpu_earlier_curve() -> str:
    rows = sorted((row for row in of_kind("tpu_exported_mahjong_base.jsonl", "bench")
                   if row["target"] == "jax:jit:fp32" and row["status"] == "ok"), key=lambda row: row["batch_size"])
    assert [row["batch_size"] for row in rows] == [64, 128, 256, 512, 1024, 2048, 4096]
    return "batch 64 to 4,096: " + " / ".join(n0(row["samples_per_s"]) for row in rows) + " samples/s"


def gb(value: float, digits: int = 2) -> str:
    return f"{value / 1e9:.{digits}f}"


def _tpu_temporaries_at_4096() -> str:
    fast = [tpu_row("tpu_mahjong_fused_bf16.jsonl", "base-fast", batch, run="161957") for batch in (1024, 4096)]
    fused = tpu_row("tpu_mahjong_fused_bf16.jsonl", FUSED, 4096, run="161957")
    growth = fast[1]["program_temp_bytes"] / fast[0]["program_temp_bytes"]
    return (f"at 4,096, XLA's temporaries of the bf16 step are already {gb(fast[1]['program_temp_bytes'])} GB "
            f"(`base-fast`) and {gb(fused['program_temp_bytes'])} GB (`+attn-fused-qkv`) of the chip's 16.9 GB "
            f"(15.75 GiB), after growing {growth:.1f}x from batch 1,024 ({gb(fast[0]['program_temp_bytes'])} GB, `base-fast`)")


def _tpu_named_row(workload: str, batch: int, label: str) -> Callable[[], str]:
    def text() -> str:
        (row,) = [row for row in of_kind("tpu_named_models.jsonl", "bench")
                  if row["workload"] == workload and row["batch_size"] == batch and row["status"] == "ok"]
        rate = f1(row["samples_per_s"]) if row["samples_per_s"] < 100 else n0(row["samples_per_s"])
        if workload == "hf:gpt2":
            rate += f" ({row['samples_per_s'] * 1024 / 1e3:.1f}k tokens/s)"
        step = row["step_time_s"] * 1e3
        flops = row["program_flops"] / (row["flops_per_sample"] * batch)
        return (f"| {label} | {batch} | {rate} | {step:.0f} ms | " if step >= 200 else f"| {label} | {batch} | {rate} | "
                f"{step:.1f} ms | ") + (f"{row['compile_s']:.1f} s | {pct(row['mfu'])} | {pct(of_nominal(row))} | "
                                        f"{f2(flops)} | {gb(row['program_temp_bytes'], 1)} GB |")
    return text


def _tpu_named_out_of_memory() -> str:
    """XLA's refusal of hf:gpt2 at 16, in the GiB its error gives."""
    (row,) = [row for row in of_kind("tpu_named_models.jsonl", "bench")
              if row["workload"] == "hf:gpt2" and row["batch_size"] == 16]
    found = re.search(r"HLO temporaries \(([\d.]+)G\) exceeds available HBM \(([\d.]+)G\)", row["error"])
    assert row["status"] == "oom" and found
    return f"| hf:gpt2 | 16 | out of memory | | (44 s to the error) | | | | {found[1]} GiB > {found[2]} GiB |"


def _tpu_why_row(batch: int) -> Callable[[], str]:
    """A row of the table of XLA's counts per sample (fp32 `base`, the first table's run)."""
    def text() -> str:
        row = tpu_row("tpu_mahjong_base.jsonl", "base", batch, "jax:jit:fp32")
        temps = row["program_temp_bytes"] / 1e9
        return (f"| {batch_cell(batch)} | {row['program_flops'] / batch / 1e9:.2f} G | "
                f"{row['program_bytes_accessed'] / batch / 1e6:.0f} MB | {temps:.2f} GB |" if temps < 1 else
                f"| {batch_cell(batch)} | {row['program_flops'] / batch / 1e9:.2f} G | "
                f"{row['program_bytes_accessed'] / batch / 1e6:.0f} MB | {temps:.1f} GB |")
    return text


def train_run(folder: str) -> tuple[dict, list[dict]]:
    summary = json.loads((RESULTS / folder / "summary.json").read_text())
    rows = [json.loads(line) for line in (RESULTS / folder / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return summary, [row for row in rows if row["kind"] == "train"]


def _tpu_train_row(batch: int) -> Callable[[], str]:
    def text() -> str:
        summary, windows = train_run(f"tpu_train_mahjong_tiny_b{batch}")
        goal = summary["time_to_target"]
        bench = bench_rate("tpu_mahjong_tiny_bench.jsonl", "jax:jit:fp32", batch)
        return (f"| {batch} | step {goal['step']} | {goal['samples']:,} | {f1(goal['train_s'])} "
                f"({f1(windows[0]['elapsed_s'])}) | {f1(goal['wall_s'])} s | {n0(summary['steady_samples_per_s'])} | "
                f"{n0(bench)} |")
    return text


def _tpu_train_after_first_window() -> str:
    after = []
    for batch in (64, 256):
        summary, windows = train_run(f"tpu_train_mahjong_tiny_b{batch}")
        after.append(summary["time_to_target"]["train_s"] - windows[0]["elapsed_s"])
    return f"the training after it took {after[0]:.2f} s at batch 64 and {after[1]:.2f} s at 256"


def _tpu_same_goal() -> str:
    rows = [row["values"] for row in records("tpu_vs_cpu_same_goal.jsonl")]

    def of(run: str, batch: int) -> dict:
        (row,) = [row for row in rows if row["run"] == run and row["batch"] == batch]
        return row
    tpu, torch_ = "TPU, exported steps", "CPU, cpu:eager:fp32 (torch)"
    train = [of(torch_, batch)["train_s"] / of(tpu, batch)["train_s"] for batch in (64, 256)]
    steady = [of(tpu, batch)["steady_samples_per_s"] / of(torch_, batch)["steady_samples_per_s"] for batch in (64, 256)]
    return (f"The chip reaches the goal in {train[0]:.1f}x less training time than torch on this CPU at batch 64, and "
            f"{train[1]:.1f}x at 256**, though 6-8 s of its 9 s are the program's compile and load. In steady samples/s "
            f"it is {steady[0]:.1f}x and {steady[1]:.1f}x the CPU.")


def plan_checks() -> list[dict]:
    return of_kind("tpu_plan_check.jsonl", "plan-check")


def _tpu_plan_heading() -> str:
    checks_ = plan_checks()
    worst = {batch: max(row["ratio"] for row in checks_ if row["global_batch"] == batch) for batch in (128, 256)}
    within = sum(row["within"] for row in checks_)
    return (f"one run predicts 128 within {math.ceil(round((worst[128] - 1) * 100, 6)):.0f}% and 256 within "
            f"{math.ceil(round((worst[256] - 1) * 100, 6)):.0f}% ({within} of {len(checks_)} checks within ±25%)")


def _tpu_plan_row(batch: int, seed: int) -> Callable[[], str]:
    """A row of the plan check's table: the check's steps, its seconds as start-up + wall to the goal, its ratio."""
    def text() -> str:
        (check,) = [row for row in plan_checks() if row["global_batch"] == batch and row["seed"] == seed]
        summary = json.loads((ROOT / check["run_dir"] / "summary.json").read_text())
        startup, wall = summary["startup_s"], summary["time_to_target"]["wall_s"]
        assert abs(startup + wall - check["measured_s"]) < 1e-6
        ratio = bold(f2(check["ratio"])) + ("" if check["within"] else " (outside ±25%, just)")
        cells = f"| {f1(check['measured_steps'])} | {f1(check['measured_s'])} ({f1(startup)} + {f1(wall)}) | {ratio} |"
        if seed:
            return f"| | | | {seed} " + cells
        (plan,) = [row for row in of_kind("tpu_plan_check.jsonl", "plan") if row["global_batch"] == batch]
        low, high = plan["predicted_s_ci95"]
        bound = " (a bound: extrapolated)" if plan["extrapolated"] else ""
        rate = bench_rate("tpu_plan_check_bench.jsonl", "jax:jit:fp32", batch)
        return (f"| {batch} | {n0(rate)} | {f1(plan['steps'])}{bound}, {f1(plan['predicted_s'])} {interval1(low, high)} | "
                f"0 " + cells)
    return text


def _tpu_plan_base() -> str:
    """The base run's row: its own steps and its prediction, its seconds as start-up + wall."""
    (plan,) = [row for row in of_kind("tpu_plan_check.jsonl", "plan") if row["global_batch"] == 64]
    summary = json.loads((RESULTS / "tpu_plan_check_b64" / "summary.json").read_text())
    startup, wall = summary["startup_s"], summary["time_to_target"]["wall_s"]
    low, high = plan["predicted_s_ci95"]
    return (f"| 64 (the base run) | {n0(bench_rate('tpu_plan_check_bench.jsonl', 'jax:jit:fp32', 64))} | "
            f"{f1(plan['steps'])} (its own), {f1(plan['predicted_s'])} {interval1(low, high)} | 0 | "
            f"{f1(plan['steps'])} | {f1(startup + wall)} "
            f"({f1(startup)} + {f1(wall)}) | - |")


def _tpu_plan_seconds() -> str:
    folders = ["tpu_plan_check_b64"] + [Path(row["run_dir"]).name for row in plan_checks()]
    runs_ = [train_run(folder) for folder in folders]
    seed0 = [windows[0]["elapsed_s"] for _, windows in runs_[:3]]
    others = [windows[0]["elapsed_s"] for _, windows in runs_[3:]]
    assert folders[1:3] == ["tpu_plan_check_b128", "tpu_plan_check_b256"]
    steps_ms = [summary["global_batch"] / summary["steady_samples_per_s"] * 1e3 for summary, _ in runs_]
    assert len(runs_) == 7
    return (f"({', '.join(f1(value) for value in seed0)} s at seed 0; {f1(min(others))}-{f1(max(others))} s at the other "
            f"seeds), and only 1.5-3.5 s of steady steps ({min(steps_ms):.2f}-{max(steps_ms):.2f} ms each over the "
            f"seven runs,")


def _tpu_attention_row(precision: str, batch: int, part: int) -> Callable[[], str]:
    """A row of the packed-heads table: its rates and ratio (part 0), its compile seconds (part 1)."""
    def text() -> str:
        return cells()[part]

    def cells() -> tuple[str, str]:
        name = "tpu_mahjong_attention.jsonl"
        base = "base-fast" if precision == "bf16" else "base"
        switch = f"{base}+attn-packed-heads"
        own = tpu_row(name, base, batch, f"jax:jit:{precision}")
        switched = next((row for row in of_kind(name, "bench") if row["size"] == switch and row["batch_size"] == batch
                         and row["status"] == "ok"), None)
        if switched is None:
            return (f"| {precision} | {batch_cell(batch)} | {n0(own['samples_per_s'])} | not measured | |",
                    f"| {f1(own['compile_s'])} / - |")
        return (f"| {precision} | {batch_cell(batch)} | {n0(own['samples_per_s'])} | {n0(switched['samples_per_s'])} | "
                f"{f2(rate_ratio(switched, own))} |", f"| {f1(own['compile_s'])} / {f1(switched['compile_s'])} |")
    return text


def temps(row: dict) -> str:
    return f"{row['program_temp_bytes'] / 1e9:.2f}"


def _tpu_fused_first_row(batch: int, run: str) -> Callable[[], str]:
    """The first bf16 table's samples/s, ratio, peer and temporaries (its MFUs are checked above)."""
    def text() -> str:
        name = "tpu_mahjong_fused_bf16.jsonl"
        base, fused = tpu_row(name, "base-fast", batch, run=run), tpu_row(name, FUSED, batch, run=run)
        peer = peer_row(name, batch, run=run)
        return (f"| {batch_cell(batch)} | {n0(base['samples_per_s'])} | {n0(fused['samples_per_s'])} | "
                f"{f2(rate_ratio(fused, base))} | {n0(peer['samples_per_s'])} | {f2(rate_ratio(fused, peer))} |")
    return text


def _tpu_fused_first_temps(batch: int, run: str) -> Callable[[], str]:
    def text() -> str:
        name = "tpu_mahjong_fused_bf16.jsonl"
        base, fused = tpu_row(name, "base-fast", batch, run=run), tpu_row(name, FUSED, batch, run=run)
        return f"| {temps(base)} → {temps(fused)} |"
    return text


def _tpu_fused_first_4096(call: str, run: str) -> Callable[[], str]:
    def text() -> str:
        name = "tpu_mahjong_fused_bf16.jsonl"
        base, fused = tpu_row(name, "base-fast", 4096, run=run), tpu_row(name, FUSED, 4096, run=run)
        return (f"| 4,096 ({call} call) | {n0(base['samples_per_s'])} | {n0(fused['samples_per_s'])} | "
                f"{f2(rate_ratio(fused, base))} | not measured |")
    return text


def _tpu_fourth_row(batch: int) -> Callable[[], str]:
    def text() -> str:
        name = "tpu_mahjong_fused_bf16.jsonl"
        fused, peer = tpu_row(name, FUSED, batch, run="T195350"), peer_row(name, batch, run="T195350")
        ratio = f2(rate_ratio(fused, peer))
        return (f"| {batch_cell(batch)} | {n0(fused['samples_per_s'])} | {n0(peer['samples_per_s'])} | "
                f"{bold(ratio) if batch != 256 else ratio} |")
    return text


def _tpu_fp32_first_row(batch: int) -> Callable[[], str]:
    def text() -> str:
        name = "tpu_mahjong_fused_fp32.jsonl"
        base = tpu_row(name, "base", batch, "jax:jit:fp32", run="162831")
        fused = tpu_row(name, "base+attn-fused-qkv", batch, "jax:jit:fp32", run="162831")
        peer = peer_row(name, batch, PEER_FP32, run="162831")
        return (f"| {batch_cell(batch)} | {n0(base['samples_per_s'])} | {n0(fused['samples_per_s'])} | "
                f"{f2(rate_ratio(fused, base))} | {n0(peer['samples_per_s'])} | {f2(rate_ratio(base, peer))} | "
                f"{f2(rate_ratio(fused, peer))} |")
    return text


def _tpu_flat_row(batch: int) -> Callable[[], str]:
    def text() -> str:
        name = "tpu_mahjong_fused_bf16.jsonl"
        fused, flat = tpu_row(name, FUSED, batch, run="T230747"), tpu_row(name, FLAT, batch, run="T230747")
        ratio = f2(rate_ratio(flat, fused))
        cells = f"| {batch_cell(batch)} | {n0(fused['samples_per_s'])} | {n0(flat['samples_per_s'])} | "
        if batch == 4096:
            return cells + (f"{bold(ratio)} ({pct(flat['mfu'])} MFU of the measured peak, {pct(of_nominal(flat))} of the "
                            f"nominal) | not reached | |")
        peer = peer_row(name, batch, run="T230747")
        return cells + (f"{bold(ratio) if batch == 64 else ratio} | {n0(peer['samples_per_s'])} | "
                        f"{f2(rate_ratio(flat, peer))} |")
    return text


LATER_BF16 = {64: "T023033", 128: "T024355", 256: "T023033", 512: "T024355", 1024: "T030842", 2048: "T030842",
              4096: "T023033"}
"""Where each row of the bf16 table after the cheaper dispatch comes from."""


def _tpu_later_bf16_row(batch: int) -> Callable[[], str]:
    """A row of that table up to its MFU cells (checked above): the fused step, `+flat-tokens`, the peer,
    their ratios, each of one run; no peer cell where the run has no peer row."""
    def text() -> str:
        name, run = "tpu_mahjong_fused_bf16.jsonl", LATER_BF16[batch]
        fused = tpu_row(name, FUSED, batch, run=run)
        flat = next((row for row in of_kind(name, "bench") if row["size"] == FLAT and row["batch_size"] == batch
                     and row["run_id"].endswith(run)), None)
        peer = next((row for row in of_kind(name, "bench") if row["target"] == PEER_BF16 and row["batch_size"] == batch
                     and row["run_id"].endswith(run)), None)
        cells = [f"| {batch_cell(batch)}", n0(fused["samples_per_s"]), n0(flat["samples_per_s"]) if flat else ""]
        if peer is None:
            cells += ["no row" if batch == 1024 else "not reached", "", ""]
        else:
            emphasis = {64: (True, True), 4096: (False, True)}.get(batch, (False, False))
            fused_ratio, flat_ratio = f2(rate_ratio(fused, peer)), f2(rate_ratio(flat, peer)) if flat else ""
            cells += [n0(peer["samples_per_s"]), bold(fused_ratio) if emphasis[0] else fused_ratio,
                      bold(flat_ratio) if emphasis[1] and flat else flat_ratio]
        return " | ".join(cells) + " |"
    return text


LATER_FP32 = {64: "T023627", 128: "T024758", 256: "T023627", 512: "T024758", 1024: "T024758", 2048: "T031140",
              4096: "T023627"}


def _tpu_later_fp32_row(batch: int) -> Callable[[], str]:
    def text() -> str:
        name, run = "tpu_mahjong_fused_fp32.jsonl", LATER_FP32[batch]
        found = {row["size"]: row for row in of_kind(name, "bench") if row["batch_size"] == batch
                 and row["run_id"].endswith(run) and row["target"] == "jax:jit:fp32" and row["status"] == "ok"}
        peer = peer_row(name, batch, PEER_FP32, run=run)
        sizes = ("base", "base+flat-tokens", "base+attn-fused-qkv+flat-tokens", "base+attn-fused-qkv")
        cells = [f"| {batch_cell(batch)}", *(n0(found[size]["samples_per_s"]) if size in found else "" for size in sizes),
                 n0(peer["samples_per_s"])]
        base = f2(rate_ratio(found["base"], peer)) if "base" in found else ""
        cells.append(bold(base) if batch == 64 else base)
        fastest = max((size for size in sizes[1:] if size in found), key=lambda size: found[size]["samples_per_s"])
        which = {"base+attn-fused-qkv+flat-tokens": "fused + flat", "base+attn-fused-qkv": "fused",
                 "base+flat-tokens": "flat"}[fastest]
        cells.append(f"{f2(rate_ratio(found[fastest], peer))} ({which})")
        return " | ".join(cells) + " |"
    return text


def _tpu_ahead_ranges() -> str:
    bf16 = [rate_ratio(tpu_row("tpu_mahjong_fused_bf16.jsonl", FUSED, batch, run=run),
                       peer_row("tpu_mahjong_fused_bf16.jsonl", batch, run=run))
            for batch, run in LATER_BF16.items() if batch not in (1024, 2048)]
    base = [rate_ratio(tpu_row("tpu_mahjong_fused_fp32.jsonl", "base", batch, "jax:jit:fp32", run=run),
                       peer_row("tpu_mahjong_fused_fp32.jsonl", batch, PEER_FP32, run=run))
            for batch, run in LATER_FP32.items() if batch in (64, 256, 2048, 4096)]
    fastest = [max(rate_ratio(row, peer_row("tpu_mahjong_fused_fp32.jsonl", batch, PEER_FP32, run=run))
                   for row in of_kind("tpu_mahjong_fused_fp32.jsonl", "bench") if row["batch_size"] == batch
                   and row["run_id"].endswith(run) and row["target"] == "jax:jit:fp32" and row["size"] != "base")
               for batch, run in LATER_FP32.items()]
    return (f"trainspeed's step is ahead at each: {f2(min(bf16))}-{f2(max(bf16))}x (fused) in bf16, and "
            f"{f2(min(base))}-{f2(max(base))}x (`base`) and {f2(min(fastest))}-{f2(max(fastest))}x (the fastest switch) "
            f"in fp32")


def _tpu_first_call_1024() -> str:
    name = "tpu_mahjong_fused_bf16.jsonl"
    ratio = rate_ratio(tpu_row(name, FUSED, 1024, run="161957"), peer_row(name, 1024, run="161957"))
    return f"before the cheaper dispatch it was {f2(ratio)}x (the first call, one run)"


def _tpu_like_for_like() -> str:
    fp32 = "tpu_mahjong_fused_fp32.jsonl"

    def base_over_peer(batch: int, run: str) -> str:
        return f2(rate_ratio(tpu_row(fp32, "base", batch, "jax:jit:fp32", run=run),
                             peer_row(fp32, batch, PEER_FP32, run=run)))
    after = " / ".join(base_over_peer(batch, "T023627") for batch in (64, 256, 4096))
    before = " / ".join(base_over_peer(batch, "T162831") for batch in (64, 256, 1024, 4096))
    bf16 = " / ".join(f2(rate_ratio(tpu_row("tpu_mahjong_base.jsonl", "base", batch),
                                    peer_row("tpu_mahjong_base.jsonl", batch))) for batch in (64, 1024, 4096))
    return (f"fp32, `base` against the fp32 peer: {after} at 64 / 256 / 4,096 (`tpu-fused-fp32-20261206T023627`) and "
            f"{base_over_peer(2048, 'T031140')} at 2,048 (`...T031140`), with the cheaper dispatch; {before} at 64 / 256 / "
            f"1,024 / 4,096 before it (`...T162831`, the fp32 table above). - bf16, `base` (torchax's autocast: an fp32 "
            f"residual stream, XLA's attention) against the bf16 peer: {bf16} at 64 / 1,024 / 4,096")


def _tpu_fused_compiles() -> str:
    seconds = [row["compile_s"] for name in ("tpu_mahjong_fused_bf16.jsonl", "tpu_mahjong_fused_fp32.jsonl")
               for row in of_kind(name, "bench") if row["target"].startswith("jax:jit") and row["status"] == "ok"]
    name = "tpu_mahjong_fused_bf16.jsonl"
    falls = [1 - tpu_row(name, FUSED, batch, run=run)["program_temp_bytes"]
             / tpu_row(name, "base-fast", batch, run=run)["program_temp_bytes"]
             for batch, run in ((64, "161957"), (128, "170455"), (256, "161957"), (512, "170455"), (1024, "161957"),
                                (4096, "161957"))]
    return (f"The compiles stay {f1(min(seconds))}-{f1(max(seconds))} s per program; XLA's temporaries fall by "
            f"{min(falls) * 100:.0f}-{share(max(falls))} in bf16")


def sg3(run: str) -> dict:
    (row,) = [row for row in of_kind("tpu_stylegan3_t256.jsonl", "bench") if row["run_id"].endswith(run)
              and row["status"] == "ok"]
    return row


def kimg(row: dict) -> float:
    return 1000 / row["samples_per_s"]


def _tpu_sg3_before() -> str:
    row = sg3("tpu-stylegan3-b8")
    return (f"| samples/s (2 windows of 16 steps, one R1 each) | {f2(row['samples_per_s'])} "
            f"({row['samples_per_s_min']:.3f}-{row['samples_per_s_max']:.3f}) | | s/kimg | {f1(kimg(row))} | | step | "
            f"{row['step_time_s']:.3f} s | | compile, both programs (G+D+R1 and G+D) | {f1(row['compile_s'])} s | | first "
            f"step (its program's compile included) | {f1(row['first_step_s'])} s | | XLA's temporaries of the G+D+R1 "
            f"program | {temps(row)} GB | | TFLOP/s (the workload's FLOPs) / MFU against the chip's measured "
            f"{f1(row['peak_tflops'])} / against its nominal 197 | {f1(row['achieved_tflops'])} / {pct(row['mfu'])} / "
            f"{pct(of_nominal(row))} |")


def _tpu_sg3_after() -> str:
    b8, b32 = sg3("T192259"), sg3("T193534")
    assert b32["micro_batches"] == 4 and b32["batch_size"] == 32 and b8["batch_size"] == 8

    def both(value: Callable[[dict], str]) -> str:
        return f"{value(b8)} | {value(b32)}"
    return (f"| samples/s (2 windows, min-max) | "
            + both(lambda r: f"{f2(r['samples_per_s'])} ({r['samples_per_s_min']:.3f}-{r['samples_per_s_max']:.3f})")
            + f" | | **s/kimg** | {f1(kimg(b8))} | **{f1(kimg(b32))}** | | step | "
            + both(lambda r: f"{r['step_time_s']:.3f} s") + " | | compile, both programs | "
            + both(lambda r: f"{f1(r['compile_s'])} s") + " | | XLA's temporaries, G+D+R1 program | "
            + both(lambda r: f"{temps(r)} GB") + f" | | TFLOP/s (the workload's FLOPs) / MFU against the chip's measured "
            f"{f1(b32['peak_tflops'])} / against its nominal 197 |")


def _tpu_sg3_ratios() -> str:
    before, b8, b32 = sg3("tpu-stylegan3-b8"), sg3("T192259"), sg3("T193534")
    return (f"**Keeping PyTorch's dtypes made the batch-8 step {before['step_time_s'] / b8['step_time_s']:.2f}x faster**: "
            f"{before['step_time_s']:.3f} s before (the row above, an earlier call) against {b8['step_time_s']:.3f} s")


def _tpu_sg3_micro() -> str:
    b8, b32 = sg3("T192259"), sg3("T193534")
    return (f"Batch 32 in micro-batches runs at the rate of batch 8 ({b32['samples_per_s'] / b8['samples_per_s']:.3f}x, "
            f"across the two calls)")


def _tpu_sg3_heading() -> str:
    return f"## StyleGAN3-T 256 on the chip: {f1(kimg(sg3('T193534')))} s/kimg at batch 32, in 4 micro-batches of 8"


def _tpu_fused_heading() -> str:
    best = tpu_row("tpu_mahjong_fused_bf16.jsonl", FUSED, 256, run="T023033")
    at_4096 = [tpu_row("tpu_mahjong_fused_bf16.jsonl", size, 4096, run="T023033") for size in (FUSED, FLAT)]
    return (f"`attn-fused-qkv`, {pct(best['mfu'])} MFU at batch 256, "
            f"{min(r['mfu'] for r in at_4096) * 100:.0f}-{max(r['mfu'] for r in at_4096) * 100:.0f}% at 4,096 (of the "
            f"measured peak; {pct(of_nominal(best))} and {min(of_nominal(r) for r in at_4096) * 100:.0f}-"
            f"{max(of_nominal(r) for r in at_4096) * 100:.0f}% of the nominal)")


TPU_CLAIMS: dict[str, Claim] = {
    **{f"tpu: mahjong base table, {batch}": Claim(TPU, _tpu_base_row(batch)) for batch in (64, 1024, 4096)},
    "tpu: mahjong base, in words": Claim(TPU, _tpu_base_words),
    "tpu: the earlier fp32 curve": Claim(TPU, _tpu_earlier_curve),
    "tpu: temporaries at 4,096": Claim(TPU, _tpu_temporaries_at_4096),
    **{f"tpu: named table, {workload} {batch}": Claim(TPU, _tpu_named_row(workload, batch, label))
       for workload, batch, label in (
        ("hf:gpt2", 8, "hf:gpt2 (124M, 1,024 tokens)"), ("timm:resnet50", 32, "timm:resnet50 (224×224)"),
        ("timm:resnet50", 64, "timm:resnet50"), ("timm:resnet50", 128, "timm:resnet50"))},
    **{f"tpu: XLA's counts per sample, {batch}": Claim(TPU, _tpu_why_row(batch)) for batch in (64, 1024, 4096)},
    **{f"tpu: training to the goal, {batch}": Claim(TPU, _tpu_train_row(batch)) for batch in (64, 256)},
    "tpu: training after the first window": Claim(TPU, _tpu_train_after_first_window),
    "tpu: the same goal on the CPU": Claim(TPU, _tpu_same_goal),
    "tpu: the plan check's heading": Claim(TPU, _tpu_plan_heading),
    **{f"tpu: plan check {batch}, seed {seed}": Claim(TPU, _tpu_plan_row(batch, seed))
       for batch in (128, 256) for seed in (0, 1000, 2000)},
    "tpu: the plan check's seconds": Claim(TPU, _tpu_plan_seconds),
    **{f"tpu: packed heads {precision} {batch}, {('rates', 'compiles')[part]}": Claim(
        TPU, _tpu_attention_row(precision, batch, part))
       for precision, batch in (("bf16", 64), ("bf16", 1024), ("bf16", 4096), ("fp32", 4096)) for part in (0, 1)},
    "tpu: named table, hf:gpt2 16": Claim(TPU, _tpu_named_out_of_memory),
    "tpu: plan check, the base run": Claim(TPU, _tpu_plan_base),
    **{f"tpu: fused bf16 table {batch} ({run}), rates": Claim(TPU, _tpu_fused_first_row(batch, run))
       for batch, run in ((64, "161957"), (128, "170455"), (256, "161957"), (512, "170455"), (1024, "161957"))},
    **{f"tpu: fused bf16 table {batch} ({run}), temporaries": Claim(TPU, _tpu_fused_first_temps(batch, run))
       for batch, run in ((64, "161957"), (128, "170455"), (256, "161957"), (512, "170455"), (1024, "161957"),
                          (4096, "161957"))},
    **{f"tpu: fused bf16 table 4096 ({call} call)": Claim(TPU, _tpu_fused_first_4096(call, run))
       for call, run in (("1st", "161957"), ("3rd", "170455"))},
    **{f"tpu: the fourth call, {batch}": Claim(TPU, _tpu_fourth_row(batch)) for batch in (64, 256, 4096)},
    **{f"tpu: fused fp32 table {batch}, rates": Claim(TPU, _tpu_fp32_first_row(batch)) for batch in (64, 256, 1024, 4096)},
    **{f"tpu: flat tokens, {batch}": Claim(TPU, _tpu_flat_row(batch)) for batch in (64, 256, 4096)},
    **{f"tpu: cheaper dispatch bf16, {batch}": Claim(TPU, _tpu_later_bf16_row(batch)) for batch in LATER_BF16},
    **{f"tpu: cheaper dispatch fp32, {batch}": Claim(TPU, _tpu_later_fp32_row(batch)) for batch in LATER_FP32},
    "tpu: ahead at each batch": Claim(TPU, _tpu_ahead_ranges),
    "tpu: the fused step at 1,024 against the peer": Claim(TPU, _tpu_first_call_1024),
    "tpu: like for like": Claim(TPU, _tpu_like_for_like),
    "tpu: the fused step's compiles and temporaries": Claim(TPU, _tpu_fused_compiles),
    "tpu: the fused section's heading": Claim(TPU, _tpu_fused_heading),
    "tpu: stylegan3 before the dtype fix": Claim(TPU, _tpu_sg3_before),
    "tpu: stylegan3 batch 8 and 32": Claim(TPU, _tpu_sg3_after),
    "tpu: stylegan3, the dtypes' gain": Claim(TPU, _tpu_sg3_ratios),
    "tpu: stylegan3, micro-batches": Claim(TPU, _tpu_sg3_micro),
    "tpu: stylegan3's heading": Claim(TPU, _tpu_sg3_heading),
}
CLAIMS.update(TPU_CLAIMS)
CLAIMS.update({f"{name}: {workload} {target} {batch}": Claim(TPU, _models_table_row(label, options, workload, target,
                                                                                  batch, run))
               for name, table in (("tpu models", MODELS_TABLE), ("tpu models, depthwise", DEPTHWISE_TABLE),
                                   ("tpu models, three more", MORE_MODELS_TABLE),
                                   ("tpu models, mobilenetv3", MOBILENET_TABLE))
               for label, options, workload, target, batch, run in table})
CLAIMS.update({"targets: recurrent layers on this CPU": Claim("targets.md", _targets_recurrent),
               "targets: a scanned ViT's compile on this CPU": Claim("targets.md", _targets_scan_compile)})
CLAIMS.update({f"tpu models in bf16: {workload} {target} {batch}": Claim(TPU, _models_table_row(label, options, workload,
                                                                                             target, batch, run))
               for label, options, workload, target, batch, run in BF16_TABLE})
CLAIMS.update({"tpu models in bf16: gpt2": Claim(TPU, _bf16_gpt2),
               "tpu models in bf16: resnet50": Claim(TPU, _bf16_resnet50),
               "tpu models in bf16: vit": Claim(TPU, _bf16_vit),
               "tpu models in bf16: vit exported again": Claim(TPU, _bf16_vit_again)})
CLAIMS.update({"tpu: a v5e 2x4 compiled ahead of time": Claim(TPU, _aot_table)})
CLAIMS.update({"tpu: deit_small's one row": Claim(TPU, _deit_small)})
CLAIMS.update({"tpu: mobilenetv3's one row": Claim(TPU, _mobilenetv3)})
CLAIMS.update({"tpu: the mesh of one device, the table": Claim(TPU, _mesh_table),
               "tpu: the mesh of one device, its worst pairing": Claim(TPU, _mesh_worst)})
CLAIMS.update({"tpu: like for like, the table": Claim(TPU, _like_for_like_table),
               "tpu: like for like, the stream's gain": Claim(TPU, _like_for_like_gains)})
CLAIMS.update({"tpu models: gpt2 against its peer": Claim(TPU, _models_gpt2_peer),
               "tpu models: vit": Claim(TPU, _models_vit),
               "tpu models: gpt2 compiles": Claim(TPU, _models_gpt2_compiles)})


@cache
def page(name: str) -> str:
    return re.sub(r"\s+", " ", (ROOT / "docs" / name).read_text())


@pytest.mark.parametrize("name", sorted(CLAIMS))
def test_the_page_prints_what_its_rows_give(name: str) -> None:
    """The passage, as its rows give it, is on its page once: a number changed in it is found (a
    second copy would still be there), and it quotes a number (an empty passage is on any page)."""
    claim = CLAIMS[name]
    expected = re.sub(r"\s+", " ", claim.text())
    assert re.search(r"\d", expected), f"the passage quotes no number: {expected!r}"
    found = page(claim.page).count(expected)
    assert found == 1, f"docs/{claim.page} prints {found} times, not once, as its rows give: {expected!r}"


TPU_TABLES = (
    "| batch | fp32 trainspeed | fp32 peer |", "| model | batch | samples/s | step | compile |",
    "| batch | FLOPs per sample (fp32) |", "| batch | reached at | samples |",
    "| batch | bench samples/s | predicted: steps, seconds [95%] |", "| | batch | `base-fast` (bf16) / `base` (fp32) |",
    "| batch | `base-fast` | `+attn-fused-qkv` | ratio | JAX peer |", "| batch | `+attn-fused-qkv` | JAX peer |",
    "| batch | `base` | `+attn-fused-qkv` | ratio | JAX peer |", "| batch | `base-fast+attn-fused-qkv` | `+flat-tokens` |",
    "| batch | bf16 fused | `+flat-tokens` | bf16 peer |", "| batch | fp32 `base` | `+flat-tokens` |",
    "| `t256`, bf16, batch 8, device-fed | |", "| `t256`, bf16, device-fed | batch 8 | batch 32 (4 x 8) |",
    "| model | options | batch | samples/s | compile (s) |",
    "| model | target's options | batch | samples/s | compile (s) |",
    "| step | batch per chip | global batch |", "| batch | no mesh (samples/s, two benches) |",
)
"""docs/tpu.md's headline tables: every number in their rows comes from a claim above."""


def tpu_table_rows() -> list[str]:
    lines, rows = (ROOT / "docs" / TPU).read_text().splitlines(), []
    for header in TPU_TABLES:
        starts = [index for index, line in enumerate(lines) if line.strip().startswith(header)]
        assert starts, f"docs/{TPU} has no table headed {header!r}"
        for start in starts:
            for line in lines[start + 2:]:
                if not line.strip().startswith("|"):
                    break
                rows.append(line.strip())
    return rows


def test_every_number_of_the_tpu_pages_headline_tables_is_recomputed_from_its_rows() -> None:
    """A table row's numbers are each in a passage a claim recomputes (batch sizes and the like aside,
    which every table repeats): a number changed on the page, or a row added, fails here or above."""
    said = " ".join(re.sub(r"\s+", " ", claim.text()) for claim in CLAIMS.values() if claim.page == TPU)
    missing = {row: [number for number in re.findall(r"\d[\d,.]*%?", row) if number.rstrip(".,") not in said]
               for row in tpu_table_rows()}
    assert tpu_table_rows() and not {row: numbers for row, numbers in missing.items() if numbers}
