"""Which models users bring run on the `jax` family: each model of a fixed list, at a small size on
this CPU, is (1) traced and lowered for a TPU (`trainspeed check --target jax:jit:bf16 --platform
tpu`'s own check) and (2) trained STEPS steps on one fixed synthetic batch on `jax:jit:fp32` and
on `cpu:eager:fp32`, from the same weights. A model is covered when it lowers for the TPU as one
program with no missing op and no host read, and its jax losses are eager's within TOLERANCE at
every step; otherwise the row holds the refusal, which names the aten op and the model's line.

    python benchmarks/model_coverage.py --out docs/results/model_coverage.jsonl --md docs/model_coverage.md
    python benchmarks/model_coverage.py --only hf:gpt2,timm:resnet18 --out /tmp/some.jsonl

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

REPO = Path(__file__).resolve().parent.parent
STEPS, BATCH, SEED = 4, 4, 0
TOLERANCE = 2e-3
"""Of each step's difference, relative to the first step's eager loss (the scale of the problem:
near ln(classes) or ln(vocabulary)), so a loss that falls near zero is not held to its own tiny
size. A step moves these losses by 1% to 50% of the first, so a dropped or doubled update is off by
tens of tolerances; the two float32 implementations (XLA's and ATen's kernels, summing in other
orders, through BatchNorm of 4 samples and deep stacks) agree to about 1e-6 to 1e-4."""
LIMIT_S = 900
BENCHMARK = "model-coverage"

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
    ("hf:bert", "tiny"), ("hf:roberta", "tiny"), ("hf:distilbert", "tiny"), ("hf:albert", "tiny"),
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
    host_read: str | None = None
    programs_per_step: int | None = None
    eager_losses: list[float] = field(default_factory=list)
    jax_losses: list[float] = field(default_factory=list)
    max_relative_difference: float | None = None
    """The largest |jax - eager| over the steps, over the first step's eager loss."""
    tolerance: float = TOLERANCE
    trains_as_eager: bool = False
    refusal: str | None = None
    """The one line the jax family gave, where a step was refused or failed."""
    covered: bool = False
    seconds: float = 0.0
    benchmark: str = BENCHMARK
    steps: int = STEPS
    batch_size: int = BATCH
    versions: dict[str, str] = field(default_factory=dict)


def family(model: str) -> str:
    prefix = model.partition(":")[0]
    return prefix if prefix in ("timm", "torchvision", "hf") else "user"


def without_dropout(network) -> None:
    """Every dropout of `network` off: nn.Dropout's p, timm's DropPath, and the float rates that
    library modules keep for their functional dropout (HF attention's `attention_dropout`)."""
    from torch import nn

    for module in network.modules():
        if isinstance(module, nn.modules.dropout._DropoutNd):
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

    torch.set_num_threads(1)
    started = time.perf_counter()
    workload = get_workload(model)
    size = resolve_size(workload, None if size_text == "default" else size_text)
    row = CoverageRow(model=model, size=size, family=family(model), versions=_versions())
    try:
        trainable = workload.build(size, seed=SEED)
        row.parameters = sum(p.numel() for net in trainable.networks.values() for p in net.parameters())
        findings = check_lowering(workload, size, "bf16", "tpu", BATCH, SEED)
        row.missing_ops, row.host_read = findings.missing_ops, findings.host_read
        row.programs_per_step = findings.programs_per_step
        row.lowered_for_tpu = not findings.missing_ops and not findings.host_read and findings.programs_per_step == 1
        row.eager_losses = losses("cpu:eager:fp32", workload, size)
        row.jax_losses = losses("jax:jit:fp32", workload, size)
        scale = max(abs(row.eager_losses[0]), 1e-12)
        row.max_relative_difference = max(abs(j - e) / scale for e, j in zip(row.eager_losses, row.jax_losses))
        row.trains_as_eager = row.max_relative_difference <= TOLERANCE
    except StepNotTraceable as error:
        row.refusal = str(error)
    except Exception as error:  # noqa: BLE001 - any other failure is this model's row
        row.refusal = f"{type(error).__name__}: {str(error).strip().splitlines()[0][:300] if str(error).strip() else ''}"
    row.covered = row.lowered_for_tpu and row.trains_as_eager
    row.seconds = round(time.perf_counter() - started, 1)
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


def markdown(rows: list[CoverageRow], command: str) -> str:
    covered = sum(row.covered for row in rows)
    lines = [
        "# Models users bring, on the jax family",
        "",
        f"Written by `{command}` from `docs/results/model_coverage.jsonl`.",
        "",
        f"**{covered} of {len(rows)} models ({100 * covered / len(rows):.0f}%) lower for a TPU as one program and "
        f"train {STEPS} steps on `jax:jit:fp32` to `cpu:eager:fp32`'s losses** (each step within {TOLERANCE:g} of the "
        "first step's loss).",
        "",
        "Each model, at a small size on this CPU, was:",
        "",
        "1. traced and lowered for a TPU in bf16 (`trainspeed check --target jax:jit:bf16 --platform tpu`'s own "
        "check), which names every aten op with no JAX lowering and the model's line that called it, a value read "
        "on the host, and a program that changes from step to step;",
        f"2. trained {STEPS} steps at batch {BATCH} on one fixed synthetic batch on `jax:jit:fp32` and on "
        "`cpu:eager:fp32` from the same weights (seed 0), with dropout off (its masks are drawn by torch in one and "
        "by JAX in the other), at the learning rate `train` scales to that batch from the model's reference batch "
        "(`--lr-scaling linear`).",
        "",
        "| model | size | parameters | lowers for TPU | trains as eager (max relative difference) | seconds | "
        "refusal |",
        "|---|---|---:|---|---|---:|---|",
    ]
    for row in rows:
        lowered = "yes" if row.lowered_for_tpu else ("missing: " + ", ".join(row.missing_ops) if row.missing_ops else
                                                      "no" if row.host_read or row.refusal else "no")
        trained = (f"yes ({row.max_relative_difference:.1e})" if row.trains_as_eager else
                   f"no ({row.max_relative_difference:.1e})" if row.max_relative_difference is not None else "no")
        parameters = f"{row.parameters:,}" if row.parameters else ""
        refusal = (row.refusal or row.host_read or "").replace("|", "\\|")
        lines.append(f"| `{row.model}` | `{row.size}` | {parameters} | {lowered} | {trained} | {row.seconds:.0f} | "
                     f"{refusal} |")
    versions = next((row.versions for row in rows if row.versions), {})
    lines += ["", "Versions: " + ", ".join(f"{name} {version}" for name, version in versions.items()) + "."]
    return "\n".join(lines) + "\n"


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
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--size", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.one:
        print(json.dumps(asdict(measure(arguments.one, arguments.size))), flush=True)
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
              f"{row.refusal or row.host_read or ''}", flush=True)
        rows.append(row)
    write_atomically(arguments.out, "".join(json.dumps(asdict(row)) + "\n" for row in rows))
    if arguments.md:
        command = "python benchmarks/model_coverage.py --out docs/results/model_coverage.jsonl --md docs/model_coverage.md"
        write_atomically(arguments.md, markdown(rows, command))


if __name__ == "__main__":
    main()
