"""Workload-agnostic data pieces: the loader protocol (`base`), the global sample order (`order`),
columnar shards of a caller's schema (`shards`), their per-rank loader (`loader`) and checks
(`verify`), and datasets of your own arrays (`dataset`: `write_dataset` and `open_dataset`).

What a dataset holds is the workload's business (`trainspeed.workloads.<name>`); nothing here imports
a workload.
"""

from trainspeed.data.dataset import open_dataset, write_dataset

__all__ = ["open_dataset", "write_dataset"]
