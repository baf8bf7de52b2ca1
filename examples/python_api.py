# %% [markdown]
# # trainspeed from Python
#
# A model of your own, from plain PyTorch pieces: checked for XLA, benched on two backends at two
# batch sizes, trained on two ranks and planned, each a function call that returns typed rows.
# The notebook `python_api.ipynb` is this script's export (`python examples/export_notebook.py
# examples/python_api.py`); `python examples/python_api.py` runs the script, in a few minutes on
# a 2-core CPU. Either writes its results to a new folder `python_api-*` in the folder it runs in.
# `TRAINSPEED_EXAMPLE_QUICK=1` runs every call with a few steps, in about a minute (the test of
# this script). docs/python.md says more.

# %%
import functools
import importlib.util
import os
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

import trainspeed
from trainspeed.data import open_dataset, write_dataset

QUICK = os.environ.get("TRAINSPEED_EXAMPLE_QUICK") == "1"

# %% [markdown]
# ## A workload of plain PyTorch pieces
#
# A model factory, a loss of (outputs, batch), an optimizer factory and an example batch: its
# dtypes, shapes and value ranges are what the synthetic batches of the bench have. The model is
# called on the batch's first item (here `x`). `metrics` adds to the validation loss, `data` opens
# a dataset of `trainspeed data from-arrays` for training on real data.

# %%
def model() -> nn.Module:
    return nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4))


def loss(outputs: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    return F.cross_entropy(outputs, batch["label"])


def accuracy(outputs: torch.Tensor, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {"accuracy": (outputs.argmax(dim=1) == batch["label"]).float().mean()}


features = torch.randn(8192, 16, generator=torch.Generator().manual_seed(0))
labels = features[:, :4].argmax(dim=1)  # a rule the model can learn: which of the first four is largest

workload = trainspeed.workload_from(
    model=model, loss=loss, optimizer=functools.partial(torch.optim.SGD, lr=0.1, momentum=0.9),
    batch={"x": features[:256], "label": labels[:256]}, metrics=accuracy, data=open_dataset)

# %% [markdown]
# ## Is its step ported to XLA?
#
# Checked first: PyTorch's autograd cannot take an XLA device on after a backward pass has run in
# the process without it.

# %%
if importlib.util.find_spec("torch_xla") is not None:  # pip install torch_xla for this check
    check = trainspeed.check(workload=workload, target="xla:lazy:fp32", batch_size=64, steps=2 if QUICK else 3)
    print("ported" if check[0].ported else "not ported")

# %% [markdown]
# ## Bench it: eager and compiled, at two batch sizes, in one call
#
# Every row has the FLOPs per sample torch's formulas counted on one training step.

# %%
out = Path(tempfile.mkdtemp(prefix="python_api-", dir="."))
timing = dict(windows=1, warmup_steps=1, max_steps_per_window=2, no_progress=True) if QUICK else dict(windows=3)
rows = trainspeed.bench(workload=workload, targets=["cpu:eager:fp32", "cpu:compile:fp32"], batch_sizes=[64, 256],
                        min_window_s=0.2, out=out / "bench.jsonl", no_plot=True, **timing)
for row in rows:
    print(f"{row.target} batch {row.batch_size}: {row.samples_per_s:,.0f} samples/s, "
          f"{row.flops_per_sample:,.0f} FLOPs per sample ({row.mfu_flops_source})")

# %%
rows.figure()

# %% [markdown]
# ## Train it on two ranks, to a goal
#
# Each rank is a process of its own, which rebuilds the workload from its pieces: it runs this
# script's imports and definitions, and nothing the script does (no bench, no folder made again).
# Pieces defined in a notebook cell cannot be found so; there the workload trains in the
# notebook's own process (`nproc=1`).

# %%
write_dataset({"x": features.numpy(), "label": labels.numpy()}, out / "data")
run = trainspeed.train(workload=workload, data=out / "data", nproc=2 if workload.portable else 1,
                       batch_size_per_device=64, steps=8 if QUICK else 60, eval_every=2 if QUICK else 10,
                       until="val/accuracy>=0.5" if QUICK else "val/accuracy>=0.8", num_workers=0, out=out / "run",
                       no_progress=True)
print(run.summary.validation, run.summary.time_to_target.reached)

# %%
run.figure()

# %% [markdown]
# ## Plan: which configuration reaches the goal first?
#
# From the bench rows (step time per target and batch) and the run (steps to the goal, by its
# gradient noise scale).

# %%
plan = trainspeed.plan(inputs=[out / "bench.jsonl", out / "run"], out=out / "plan.jsonl")
print(f"{len(plan)} configurations planned; the rows are in {plan.path}")
