"""The torchrun command line for one node and for several (the documented multi-node options)."""

from __future__ import annotations

from pathlib import Path

from trainspeed.train.config import LaunchConfig, TrainConfig
from trainspeed.train.launch import torchrun_command


def _command(**launch: object) -> list[str]:
    config = TrainConfig(synthetic_data=True, steps=1, launch=LaunchConfig(**launch)).validate()
    return torchrun_command(config, Path("run/train_config.json"))


def test_one_node_is_standalone_and_starts_the_rank_supervisor() -> None:
    command = _command(nproc=2)
    assert command[1:3] == ["-m", "torch.distributed.run"]
    assert "--nproc-per-node=2" in command and "--standalone" in command and "--max-restarts=0" in command
    assert command[-3:] == ["-m", "trainspeed.train.worker", "run/train_config.json"]


def test_several_nodes_meet_at_a_c10d_rendezvous_endpoint() -> None:
    command = _command(nproc=8, nnodes=2, rdzv_endpoint="node0:29500", rdzv_id="job42")
    assert "--nnodes=2" in command and "--standalone" not in command
    assert {"--rdzv-backend=c10d", "--rdzv-endpoint=node0:29500", "--rdzv-id=job42"} <= set(command)


def test_static_rendezvous_passes_the_node_rank_and_node_0_address() -> None:
    command = _command(nproc=8, nnodes=2, node_rank=1, rdzv_backend="static", rdzv_endpoint="10.0.0.1:29500")
    assert {"--node-rank=1", "--master-addr=10.0.0.1", "--master-port=29500"} <= set(command)


def test_the_config_survives_the_json_file_the_ranks_read() -> None:
    config = TrainConfig(synthetic_data=True, steps=7, launch=LaunchConfig(nproc=2, collective_timeout_s=30.0))
    assert TrainConfig.from_json(config.to_json()) == config
