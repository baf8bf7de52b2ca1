"""Workload-agnostic data pieces: the loader protocol (`base`), the global sample order (`order`),
columnar shards of a caller's schema (`shards`), their per-rank loader (`loader`) and checks (`verify`).

What a dataset holds is the workload's business (`trainspeed.workloads.<name>`); nothing here imports
a workload.
"""
