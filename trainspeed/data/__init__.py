"""Workload-agnostic data pieces: the loader protocol (`base`), the global sample order (`order`),
columnar shards of a caller's schema (`shards`), their per-rank loader (`loader`) and checks
(`verify`), and datasets of your own arrays (`dataset`: `write_dataset` and `open_dataset`).

What a dataset holds is the workload's business (`trainspeed.workloads.<name>`); nothing here imports
a workload.
"""

from typing import Any

__all__ = ["open_dataset", "write_dataset"]


def __getattr__(name: str) -> Any:
    """`trainspeed.data.open_dataset` and `write_dataset`, imported when first used: reading a
    dataset needs torch, while checking one (`trainspeed data verify`) or a flag does not."""
    if name in __all__:
        from trainspeed.data import dataset

        return getattr(dataset, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
