"""Rows of the batch-size study: does a larger global batch give a better Mahjong policy?

The report reads one row per training run, `kind: "batch-size-study"`:

| field | what |
|---|---|
| `global_batch` | ranks x per-device batch |
| `lr` (or `peak_lr`) | the peak learning rate of the run |
| `seed` | the run's seed |
| `samples`, `steps` | what the run trained (equal samples for every batch) |
| `val_loss`, `val_accuracy` | validation at the end of the run: equal samples |
| `equal_steps`, `equal_steps_val_loss`, `equal_steps_val_accuracy` | validation at the step where the largest batch ends: equal steps |
| `wall_s` (or `train_wall_s`) | the run's training time |
| `mean_rank`, `mean_rank_ci95` | self-play strength of the run's policy, with its 95% interval |
| `command` | the command that wrote the row |

`benchmarks/batch_size_study.py` writes rows of these names with other kinds, also read:
`batch-study-run` (one per run, as above, without the strength), `batch-study-batch` (one per
global batch: its best learning rate, the mean over seeds, the pooled strength),
`batch-study-comparison` (mean rank of the largest batch minus another, deal by deal) and
`batch-study-config` (the study's settings and command). Every other field is kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainspeed.errors import UsageError

RUN_KIND = "batch-size-study"
STUDY_KINDS = {
    RUN_KIND: "run",
    "batch-study-run": "run",
    "batch-study-batch": "batch",
    "batch-study-comparison": "comparison",
    "batch-study-config": "config",
}
SYNONYMS = {"lr": ("lr", "peak_lr"), "wall_s": ("wall_s", "train_wall_s")}


@dataclass(frozen=True)
class StudyRow:
    role: str
    """"run" (one training run), "batch" (one global batch over its seeds), "comparison" or "config"."""
    fields: dict[str, Any]
    source: object

    def get(self, name: str, default: Any = None) -> Any:
        for key in SYNONYMS.get(name, (name,)):
            if self.fields.get(key) is not None:
                return self.fields[key]
        return default

    @property
    def command(self) -> str | None:
        return self.fields.get("command")

    @property
    def seed_label(self) -> str:
        seeds = self.get("seeds")
        if isinstance(seeds, list):
            return "mean of seeds " + ",".join(str(s) for s in seeds)
        seed = self.get("seed")
        return "" if seed is None else str(seed)

    @property
    def rank_interval(self) -> tuple[float, float] | None:
        interval = self.get("mean_rank_ci95")
        if isinstance(interval, (list, tuple)) and len(interval) == 2 and all(isinstance(v, (int, float)) for v in interval):
            return float(interval[0]), float(interval[1])
        return None


def study_row(record: dict[str, Any], source: object) -> StudyRow:
    role = STUDY_KINDS[record["kind"]]
    if role in ("run", "batch") and not isinstance(record.get("global_batch"), int):
        raise UsageError(f"{source}: {record['kind']} row without an integer global_batch")
    if role == "run" and not any(record.get(name) is not None for name in ("val_loss", "mean_rank")):
        raise UsageError(f"{source}: {record['kind']} row with neither val_loss nor mean_rank")
    return StudyRow(role=role, fields=dict(record), source=source)
