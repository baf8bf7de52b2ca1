"""The Mahjong policy workload: the study's first model, as a trainspeed workload."""

from __future__ import annotations

import os

import torch

from trainspeed.data.base import BatchLoader, LoaderConfig
from trainspeed.workloads.base import Batch, Trainable
from trainspeed.workloads.mahjong.model import (
    NUM_ACTIONS,
    NUM_FEATURES,
    NUM_TILE_TYPES,
    SIZES,
    SWITCHES,
    VARIANTS,
    MahjongPolicy,
    policy_config,
    training_flops_per_sample,
)

LEARNING_RATE = 3e-4
WEIGHT_DECAY = 0.1
BETAS = (0.9, 0.95)


class PolicyTrainable(Trainable):
    def __init__(self, policy: MahjongPolicy) -> None:
        super().__init__({"policy": policy})

    def setup_optimizers(self, fused: bool = False) -> None:
        policy = self.networks["policy"]
        if policy.config.compiled_optimizer:
            # A tensor learning rate: a schedule changes it in place, without recompiling the step.
            optimizer = torch.optim.AdamW(
                policy.parameters(), lr=torch.tensor(LEARNING_RATE), betas=BETAS, weight_decay=WEIGHT_DECAY
            )
        else:
            optimizer = torch.optim.AdamW(
                policy.parameters(), lr=LEARNING_RATE, betas=BETAS, weight_decay=WEIGHT_DECAY, fused=fused or None
            )
        self.optimizers = {"policy": optimizer}
        self._compiled_step = None

    def _learning_rates_as_tensors(self) -> None:
        """A schedule that assigns a float learning rate would recompile the compiled step at every
        new value; turn it back into a tensor first."""
        for group in self.optimizers["policy"].param_groups:
            if not isinstance(group["lr"], torch.Tensor):
                group["lr"] = torch.tensor(float(group["lr"]))

    def _compiled_optimizer_step(self) -> None:
        """Compiled at the first step, not in `setup_optimizers`: a learning-rate scheduler attached
        in between wraps `optimizer.step` to see that it ran, and compiling the unwrapped method
        would hide every step from it."""
        if self._compiled_step is None:
            self._compiled_step = torch.compile(self.optimizers["policy"].step)
        self._compiled_step()

    def train_step(self, batch: Batch) -> torch.Tensor:
        optimizer = self.optimizers["policy"]
        _, loss = self.wrapped["policy"](batch["features"], batch["mask"], batch["action"])
        loss.backward()
        if self.networks["policy"].config.compiled_optimizer:
            self._learning_rates_as_tensors()
            self._compiled_optimizer_step()
        else:
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    @torch.no_grad()
    def eval_metrics(self, batch: Batch) -> dict[str, torch.Tensor]:
        policy = self.networks["policy"]
        logits, _ = policy(batch["features"], batch["mask"])
        action = batch["action"]
        return {
            "loss_sum": torch.nn.functional.cross_entropy(logits, action, reduction="sum"),
            "correct": (logits.argmax(dim=1) == action).sum(),
            "count": torch.tensor(action.numel(), device=logits.device),
            # a comparison with every action id, not bincount, whose length depends on the values (no
            # compiled program, XLA's or JAX's, can have an output of a length read from its input)
            "action_counts": (action[:, None] == torch.arange(NUM_ACTIONS, device=action.device)).sum(0),
        }

    def summarize_eval(self, totals: dict[str, torch.Tensor]) -> dict[str, float]:
        """Loss and action accuracy, beside the majority baseline: the accuracy of always answering
        the most common action of the split (if one discard were 30% of all decisions, 30% would
        be free), so accuracy is read against what costs nothing."""
        count = float(totals["count"])
        return {
            "loss": float(totals["loss_sum"]) / count,
            "accuracy": float(totals["correct"]) / count,
            "majority_baseline": float(totals["action_counts"].max()) / count,
            "samples": count,
        }


class MahjongWorkload:
    """Sizes are the architectures (`SIZES`), named speed variants (`base-fast`), or any of them
    followed by speed switches: `base+bf16-stream+attn-explicit` (the bench takes those too)."""

    name = "mahjong"
    sizes = tuple(name for size in SIZES for name in (size, *(v for v in VARIANTS if v.startswith(f"{size}-"))))
    default_size = "tiny"
    size_switches = tuple(SWITCHES)
    reference_batch = 512
    """LEARNING_RATE is the study's, at its one-GPU batch of 512."""

    def _config(self, size: str):
        return policy_config(size)

    def build(self, size: str, seed: int = 0) -> PolicyTrainable:
        config = self._config(size)
        torch.manual_seed(seed)
        return PolicyTrainable(MahjongPolicy(config))

    def synthetic_batch(self, size: str, batch_size: int, generator: torch.Generator) -> Batch:
        """Sparse quarter-valued features, ~15% legal actions, a legal action chosen at random; in
        the dtypes of the real data's batches (float16 features, as the shards store them, which
        hold quarters exactly), as the workload protocol asks and the trainer and servers check."""
        self._config(size)
        features = torch.randint(0, 5, (batch_size, NUM_FEATURES, NUM_TILE_TYPES), generator=generator) / 4
        features = features * (torch.rand(features.shape, generator=generator) < 0.2)
        mask = torch.rand(batch_size, NUM_ACTIONS, generator=generator) < 0.15
        mask[torch.arange(batch_size), torch.randint(0, NUM_ACTIONS, (batch_size,), generator=generator)] = True
        action = (torch.rand(batch_size, NUM_ACTIONS, generator=generator) * mask).argmax(dim=1)
        return {"features": features.half(), "mask": mask, "action": action}

    def flops_per_sample(self, size: str) -> float:
        return float(training_flops_per_sample(self._config(size)))

    @property
    def shard_batches(self):
        """The columns and split its shard sets are read with (a trainer of exported steps, where
        no torch is, reads the same shards by them)."""
        from trainspeed.workloads.mahjong.data.loader import MAHJONG_BATCHES

        return MAHJONG_BATCHES

    def open_dataset(self, path: os.PathLike[str] | str, size: str, config: LoaderConfig) -> BatchLoader:
        """Every model size reads the same inputs, so `size` does not constrain the shards."""
        from trainspeed.workloads.mahjong.data.loader import open_mahjong_shards

        return open_mahjong_shards(path, config)
