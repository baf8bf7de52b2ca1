"""One StyleGAN3 training step with R1 on the PJRT CPU client; prints the aten:: counters (ops
that fell back to the host) as a JSON list.

Run by test_workload.py in a process of its own, with XLA_FLAGS set before the client starts: at
LLVM's -O0 XLA:CPU compiles the step's one graph about 4x cheaper, and which ops lower (the
counters) is decided before LLVM runs.
"""

from __future__ import annotations

import dataclasses
import json
import os

import torch
import torch_xla
import torch_xla.debug.metrics as metrics

from trainspeed.targets import get_target
from trainspeed.workloads.stylegan3.configs import get_config
from trainspeed.workloads.stylegan3.workload import build_trainable

SMALL = dataclasses.replace(
    get_config("tiny-t"), resolution=16, num_layers=3, num_critical=1, z_dim=16, w_dim=16,
    g_channel_base=256, g_channel_max=8, d_channel_base=128, d_channel_max=16,
)  # fmt: skip
"""A 16 px, 3-layer network of tiny-t's kinds of layer (2x, the last crop), narrow."""


def main() -> None:
    torch.set_num_threads(int(os.environ.get("TRAINSPEED_TEST_THREADS", "2")))  # the test session's threads
    target = get_target("xla:lazy:fp32")  # hands over XLA's activation checkpoint
    trainable = target.prepare(build_trainable(SMALL))
    batch = target.move_batch({"images": torch.randint(0, 256, (2, 3, 16, 16), dtype=torch.uint8)})
    metrics.clear_counters()
    loss = trainable.train_step(batch)
    torch_xla.sync()
    assert torch.isfinite(loss.cpu()), loss
    print(json.dumps([name for name in metrics.counter_names() if name.startswith("aten::")]))


if __name__ == "__main__":
    main()
