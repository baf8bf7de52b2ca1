"""Which models users bring run on the `jax` family: each model of a fixed list, at a small size on
this CPU, is (1) traced and lowered for a TPU (`trainspeed check --target jax:jit:bf16 --platform
tpu`'s own check) and (2) trained STEPS steps on one fixed synthetic batch on `jax:jit:fp32` and
on `cpu:eager:fp32`, from the same weights. A model is covered when it lowers for the TPU as one
program with no missing op and no host read, and its jax losses are eager's within TOLERANCE at
every step; otherwise the row holds the refusal, which names the aten op and the model's line.

    python benchmarks/model_coverage.py --out docs/results/model_coverage.jsonl --md docs/model_coverage.md
    python benchmarks/model_coverage.py --only hf:gpt2,timm:resnet18 --out /tmp/some.jsonl

The rows are `measurement` rows (benchmark `model-coverage`), one per model, which `trainspeed
report` reads; the page is written from them.

Each model runs in a process of its own (a crash or a hang is that model's row, not the run's),
one torch and XLA thread each, under a time limit. Dropout is off in the training comparison (its
masks are drawn by torch in eager and by JAX on the jax family, so the losses would differ by the
masks); the lowering check keeps the model as built, dropout included.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from trainspeed.rows import row_line  # noqa: E402

STEPS, BATCH, SEED = 4, 8, 0
TOLERANCE = 2e-3
"""Of each step's difference, relative to the first step's eager loss (the scale of the problem:
near ln(classes) or ln(vocabulary)), so a loss that falls near zero is not held to its own tiny
size. A step moves these losses by 1% to 50% of the first, so a dropped or doubled update is off by
tens of tolerances; the two float32 implementations (XLA's and ATen's kernels, summing in other
orders, through BatchNorm of 4 samples and deep stacks) agree to about 1e-6 to 1e-4."""
SPREAD_FACTOR = 3.0
"""The rule beside the plain count: a model whose eager losses under 1 and 2 torch threads already
differ (a deep network whose BatchNorm sees a few values per channel amplifies the order of float
sums: torchvision's ResNet-50 parts by 2% at its second step) is also counted where the jax losses
lie within this many times that spread. Fixed before the run it judges."""
LIMIT_S = 900
BENCHMARK = "model-coverage"
COMMAND = "python benchmarks/model_coverage.py --out docs/results/model_coverage.jsonl --md docs/model_coverage.md"

MODELS: list[tuple[str, str]] = [
    ("timm:resnet18", "tiny"), ("timm:resnet50", "tiny"), ("timm:efficientnet_b0", "tiny"),
    ("timm:convnext_tiny", "tiny"), ("timm:vit_small_patch16_224", "tiny"), ("timm:vit_base_patch16_224", "tiny"),
    ("timm:swin_tiny_patch4_window7_224", "tiny,res=224"), ("timm:deit_small_patch16_224", "tiny"),
    ("timm:regnety_002", "tiny"), ("timm:mobilenetv3_small_100", "tiny"), ("timm:mixer_b16_224", "tiny"),
    ("torchvision:resnet50", "tiny"), ("torchvision:mobilenet_v3_small", "tiny"), ("torchvision:densenet121", "tiny"),
    ("torchvision:vgg16_bn", "tiny"), ("torchvision:vit_b_16", "tiny,res=224"),
    ("torchvision:efficientnet_b0", "tiny"),
    ("hf:gpt2", "tiny"), ("hf:llama", "tiny"), ("hf:mistral", "tiny"), ("hf:qwen2", "tiny"), ("hf:phi", "tiny"),
    ("hf:gemma", "tiny"), ("hf:opt", "tiny"), ("hf:gpt_neox", "tiny"), ("hf:qwen3", "tiny"), ("hf:falcon", "tiny"),
    ("hf:bert", "tiny"), ("hf:roberta", "tiny,max_position_embeddings=130"), ("hf:distilbert", "tiny"), ("hf:albert", "tiny"),
    ("hf:electra", "tiny"),
    ("user_models:small_cnn", "default"), ("user_models:lstm_lm", "default"), ("user_models:gru_lm", "default"),
]
"""(workload, size). `user_models` are the models of benchmarks/coverage/user_models.py, written
from docs/python.md alone."""


@dataclass
class CoverageRow:
    model: str
    size: str
    family: str
    parameters: int | None = None
    lowered_for_tpu: bool = False
    missing_ops: dict[str, list[str]] = field(default_factory=dict)
    """aten op -> the model's lines that called it, from the TPU lowering."""
    untraceable: str | None = None
    """Why the TPU lowering's trace stopped, with the model's line."""
    programs_per_step: int | None = None
    eager_losses: list[float] = field(default_factory=list)
    """Eager PyTorch on 1 torch thread."""
    eager_losses_two_threads: list[float] = field(default_factory=list)
    """The same on 2 threads: another order of float sums, which says how far rounding alone moves the losses."""
    jax_losses: list[float] = field(default_factory=list)
    max_relative_difference: float | None = None
    """The largest |jax - eager| over the steps, over the first step's eager loss."""
    tolerance: float = TOLERANCE
    eager_spread: float | None = None
    """The largest |eager on 2 threads - eager on 1| over the steps, over the first step's loss."""
    trains_as_eager: bool = False
    """Within TOLERANCE at every step (the plain count)."""
    trains_within_eager_spread: bool = False
    """Within TOLERANCE, or within SPREAD_FACTOR times eager's own spread (the rule)."""
    refusal: str | None = None
    """The one line the jax family gave, where a step was refused or failed."""
    covered: bool = False
    """Lowers for the TPU and trains as eager (the plain count)."""
    covered_by_spread: bool = False
    """Lowers for the TPU and trains within eager's spread (the rule)."""
    seconds: float = 0.0
    benchmark: str = BENCHMARK
    steps: int = STEPS
    batch_size: int = BATCH
    versions: dict[str, str] = field(default_factory=dict)
    machine: dict[str, Any] = field(default_factory=dict)
    """trainspeed's Machine record: CPU, cores, load at the model's start and end."""


def family(model: str) -> str:
    prefix = model.partition(":")[0]
    return prefix if prefix in ("timm", "torchvision", "hf") else "user"


def without_dropout(network) -> None:
    """Every dropout of `network` off: nn.Dropout's p, stochastic depth (timm's DropPath,
    torchvision's StochasticDepth), and the float rates that library modules keep for their
    functional dropout (HF attention's `attention_dropout`)."""
    from torch import nn

    for module in network.modules():
        if isinstance(module, nn.modules.dropout._DropoutNd) or type(module).__name__ == "StochasticDepth":
            module.p = 0.0
        for name, value in list(vars(module).items()):
            if isinstance(value, float) and any(word in name.lower() for word in ("dropout", "drop_prob", "drop_rate",
                                                                                    "pdrop")):
                setattr(module, name, 0.0)


def _scale_learning_rates(trainable, workload) -> None:
    """The learning rates `train` would use at BATCH (linear in the batch from the workload's
    reference batch, as `--lr-scaling linear` scales them): the recipes' rates at batch 4 (SGD at
    0.1 for 256 images) throw a network with BatchNorm into a chaotic regime in a few steps, where
    float rounding alone parts two runs and no tolerance says anything."""
    reference = getattr(workload, "reference_batch", None)
    if not reference:
        return
    for optimizer in trainable.optimizers.values():
        for group in optimizer.param_groups:
            group["lr"] = group["lr"] * BATCH / reference


def _fixed_masked_positions(trainable) -> None:
    """A masked language model trains on validation's fixed pattern of masked positions: drawn, they
    would come from torch's generator on one target and JAX's on the other."""
    choose = getattr(trainable, "_inputs_and_labels", None)
    if choose is not None and getattr(getattr(trainable, "size", None), "objective", None) == "masked":
        trainable._inputs_and_labels = lambda batch, training: choose(batch, training=False)


def losses(target_name: str, workload, size: str) -> list[float]:
    """STEPS steps of a fresh trainable (seed 0, dropout off) on one fixed synthetic batch."""
    import jax
    import torch

    from trainspeed.targets import get_target

    target = get_target(target_name)
    with jax.default_matmul_precision("float32"):
        trainable = workload.build(size, seed=SEED)
        for network in trainable.networks.values():
            without_dropout(network)
        _fixed_masked_positions(trainable)
        trainable = target.prepare(trainable)
        _scale_learning_rates(trainable, workload)
        batch = target.move_batch(workload.synthetic_batch(size, BATCH, torch.Generator().manual_seed(SEED)))
        returned = [target.run_step(trainable, batch) for _ in range(STEPS)]
        values = torch.stack([value.float() for value in returned]).tolist()
    target.sync()
    return values


def measure(model: str, size_text: str) -> CoverageRow:
    """One model's row, in this process."""
    import torch

    from trainspeed.targets.jaxjit.functional import StepNotTraceable
    from trainspeed.targets.jaxjit.lowering import check_lowering
    from trainspeed.workloads import get_workload, resolve_size

    from trainspeed.machine import Machine

    torch.set_num_threads(1)
    started = time.perf_counter()
    machine = Machine.at_start()
    workload = get_workload(model)
    size = resolve_size(workload, None if size_text == "default" else size_text)
    row = CoverageRow(model=model, size=size, family=family(model), versions=_versions())
    try:
        trainable = workload.build(size, seed=SEED)
        row.parameters = sum(p.numel() for net in trainable.networks.values() for p in net.parameters())
        findings = check_lowering(workload, size, "bf16", "tpu", BATCH, SEED)
        row.missing_ops, row.untraceable = findings.missing_ops, findings.untraceable
        row.programs_per_step = findings.programs_per_step
        row.lowered_for_tpu = not findings.missing_ops and not findings.untraceable and findings.programs_per_step == 1
        row.eager_losses = losses("cpu:eager:fp32", workload, size)
        torch.set_num_threads(2)
        row.eager_losses_two_threads = losses("cpu:eager:fp32", workload, size)
        torch.set_num_threads(1)
        row.jax_losses = losses("jax:jit:fp32", workload, size)
        scale = max(abs(row.eager_losses[0]), 1e-12)
        row.max_relative_difference = max(abs(j - e) / scale for e, j in zip(row.eager_losses, row.jax_losses))
        row.eager_spread = max(abs(t - e) / scale for e, t in zip(row.eager_losses, row.eager_losses_two_threads))
        row.trains_as_eager = row.max_relative_difference <= TOLERANCE
        row.trains_within_eager_spread = row.max_relative_difference <= max(TOLERANCE, SPREAD_FACTOR * row.eager_spread)
    except StepNotTraceable as error:
        row.refusal = str(error)
    except Exception as error:  # noqa: BLE001 - any other failure is this model's row
        row.refusal = f"{type(error).__name__}: {str(error).strip().splitlines()[0][:300] if str(error).strip() else ''}"
    row.covered = row.lowered_for_tpu and row.trains_as_eager
    row.covered_by_spread = row.lowered_for_tpu and row.trains_within_eager_spread
    row.seconds = round(time.perf_counter() - started, 1)
    row.machine = asdict(machine.at_end())
    return row


def _versions() -> dict[str, str]:
    import importlib.metadata

    names = ("torch", "torchax", "jax", "timm", "torchvision", "transformers")
    found = {}
    for name in names:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return found


def run_one_process(model: str, size: str) -> CoverageRow:
    """`measure` in a child process of its own, under LIMIT_S."""
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "benchmarks" / "coverage"),
                                                               os.environ.get("PYTHONPATH", "")]),
                   "JAX_PLATFORMS": "cpu", "OMP_NUM_THREADS": "1",
                   "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"}
    started = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, __file__, "--one", model, "--size", size], capture_output=True, text=True,
                              timeout=LIMIT_S, env=environment, cwd=REPO)
    except subprocess.TimeoutExpired:
        return CoverageRow(model=model, size=size, family=family(model), refusal=f"did not finish within {LIMIT_S} s",
                           seconds=LIMIT_S)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
        return CoverageRow(model=model, size=size, family=family(model),
                           refusal=f"the process ended with exit code {done.returncode}: {tail}",
                           seconds=round(time.perf_counter() - started, 1))
    return CoverageRow(**json.loads(lines[-1]))


def _percent(count: int, total: int) -> str:
    return f"{count} of {total} ({100 * count / total:.0f}%)"


def _machines(rows: list[CoverageRow]) -> str:
    """The CPU, its cores and the load averages the rows were measured under."""
    cpus = sorted({str(row.machine.get("cpu_model")) for row in rows if row.machine})
    cores = sorted({str(row.machine.get("cores_usable")) for row in rows if row.machine})
    loads = [value for row in rows if row.machine
             for value in (row.machine.get("load_average_start"), row.machine.get("load_average_end")) if value is not None]
    load = f", load average {min(loads):.1f} to {max(loads):.1f}" if loads else ""
    return f"{', '.join(cpus)}, {', '.join(cores)} usable cores{load}"


def markdown(rows: list[CoverageRow], command: str) -> str:
    total = len(rows)
    lowered = sum(row.lowered_for_tpu for row in rows)
    plain = sum(row.covered for row in rows)
    by_spread = sum(row.covered_by_spread for row in rows)
    moved = [row.model for row in rows if row.covered_by_spread and not row.covered]
    lines = [
        "# Models users bring, on the jax family",
        "",
        f"Written by `{command}` (rows: `docs/results/model_coverage.jsonl`), one process per model, on "
        f"{_machines(rows)}.",
        "",
        f"- **Counted plainly: {_percent(plain, total)} models lower for a TPU as one program and train {STEPS} steps "
        f"on `jax:jit:fp32` to `cpu:eager:fp32`'s losses**, each step within {TOLERANCE:g} of the first step's loss.",
        f"- {_percent(lowered, total)} lower for a TPU as one program, with no op missing and no value read on the "
        "host.",
        f"- The rule, fixed before the run: a model is also counted where its jax losses lie within "
        f"{SPREAD_FACTOR:g} times the spread of eager PyTorch's own losses on 1 and 2 torch threads (the order of "
        f"float sums alone). Under it: {_percent(by_spread, total)}. It moves "
        + (", ".join(f"`{model}`" for model in moved) if moved else "no model") + ".",
        "",
        "Each model, at a small size, was:",
        "",
        "1. traced and lowered for a TPU in bf16 (`trainspeed check --target jax:jit:bf16 --platform tpu`'s own "
        "check), which names every aten op with no JAX lowering and the model's line that called it, a value read "
        "on the host, and a program that changes from step to step;",
        f"2. trained {STEPS} steps at batch {BATCH} on one fixed synthetic batch on `jax:jit:fp32`, and on "
        "`cpu:eager:fp32` under 1 and 2 torch threads, from the same weights (seed 0), with dropout off (its masks "
        "are drawn by torch in one and by JAX in the other; a masked language model's masked positions are "
        "validation's fixed pattern for the same reason), at the learning rate `train` scales to that batch from the "
        "model's reference batch (`--lr-scaling linear`).",
        "",
        "| model | size | parameters | lowers for TPU | jax - eager (of the first loss) | eager's own spread | "
        "counted | seconds | refusal |",
        "|---|---|---:|---|---:|---:|---|---:|---|",
    ]
    for row in rows:
        lowers = "yes" if row.lowered_for_tpu else ("missing: " + ", ".join(row.missing_ops) if row.missing_ops else "no")
        difference = f"{row.max_relative_difference:.1e}" if row.max_relative_difference is not None else ""
        spread = f"{row.eager_spread:.1e}" if row.eager_spread is not None else ""
        counted = "yes" if row.covered else "by the rule" if row.covered_by_spread else "no"
        parameters = f"{row.parameters:,}" if row.parameters else ""
        refusal = (row.refusal or row.untraceable or "").replace("|", "\\|")
        lines.append(f"| `{row.model}` | `{row.size}` | {parameters} | {lowers} | {difference} | {spread} | {counted} | "
                     f"{row.seconds:.0f} | {refusal} |")
    versions = next((row.versions for row in rows if row.versions), {})
    lines += ["", "Versions: " + ", ".join(f"{name} {version}" for name, version in versions.items()) + "."]
    return "\n".join(lines) + "\n"


def as_measurement(row: CoverageRow) -> Any:
    """The row as a `measurement` row: its values flat (each missing op as `OP: LINES`, the
    versions as one string) and its machine in the row's own field."""
    from trainspeed.bench.measurement import MeasurementRow
    from trainspeed.machine import Machine

    values = {name: value for name, value in asdict(row).items() if name not in ("machine", "benchmark")}
    values["missing_ops"] = [f"{op}: {'; '.join(lines) or 'no line of the model'}" for op, lines in row.missing_ops.items()]
    values["versions"] = ", ".join(f"{name} {version}" for name, version in row.versions.items())
    machine = Machine(**row.machine) if row.machine else None
    return MeasurementRow(benchmark=BENCHMARK, values=values, command=COMMAND, timestamp=None, machine=machine)


def from_measurement(record: dict[str, Any]) -> CoverageRow:
    """A row `as_measurement` wrote, back as the script's own (the page is drawn from these)."""
    values = dict(record["values"])
    values["missing_ops"] = {op: [line for line in lines.split("; ") if line != "no line of the model"]
                             for op, _, lines in (entry.partition(": ") for entry in values["missing_ops"])}
    values["versions"] = dict(part.rsplit(" ", 1) for part in values["versions"].split(", ") if part)
    return CoverageRow(**values, machine=record.get("machine") or {})


def write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="JSONL rows, one per model (replaced)")
    parser.add_argument("--md", type=Path, help="the markdown page (replaced)")
    parser.add_argument("--only", help="comma-separated models of the list")
    parser.add_argument("--page-from", type=Path, help="write --md from these rows, measuring nothing")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--size", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.one:
        print(json.dumps(asdict(measure(arguments.one, arguments.size))), flush=True)
        return
    if arguments.page_from:
        if not arguments.md:
            parser.error("--page-from writes the page: give --md")
        records = [json.loads(line) for line in arguments.page_from.read_text().splitlines() if line.strip()]
        write_atomically(arguments.md, markdown([from_measurement(record) for record in records], COMMAND))
        return
    if not arguments.out:
        parser.error("--out is needed")
    chosen = MODELS
    if arguments.only:
        wanted = arguments.only.split(",")
        unknown = [name for name in wanted if name not in dict(MODELS)]
        if unknown:
            parser.error(f"--only: not in the list: {', '.join(unknown)}")
        chosen = [(name, size) for name, size in MODELS if name in wanted]
    rows = []
    for model, size in chosen:
        row = run_one_process(model, size)
        print(f"{model}: {'covered' if row.covered else 'NOT covered'} ({row.seconds:.0f} s) "
              f"{row.refusal or row.untraceable or ''}", flush=True)
        rows.append(row)
    write_atomically(arguments.out, "".join(row_line(as_measurement(row)) + "\n" for row in rows))
    if arguments.md:
        write_atomically(arguments.md, markdown(rows, COMMAND))


if __name__ == "__main__":
    main()
