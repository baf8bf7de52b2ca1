"""The elastic agent's settings for one node and for several (the documented multi-node options),
and which failure of several ranks is reported as the cause."""

from __future__ import annotations


from torch.distributed.elastic.multiprocessing.errors import ProcessFailure

from trainspeed.train.agent import first_cause, launch_config
from trainspeed.train.config import LaunchConfig, TrainConfig


def _launch(**launch: object):
    return launch_config(TrainConfig(synthetic_data=True, steps=1, launch=LaunchConfig(**launch)).validate())


def test_one_node_meets_at_a_local_rendezvous_of_its_own() -> None:
    config = _launch(nproc=2)
    assert (config.min_nodes, config.max_nodes, config.nproc_per_node, config.max_restarts) == (1, 1, 2, 0)
    assert config.rdzv_backend == "c10d" and config.rdzv_endpoint == "localhost:0"
    assert config.run_id != _launch(nproc=2).run_id


def test_several_nodes_meet_at_a_c10d_rendezvous_endpoint() -> None:
    config = _launch(nproc=8, nnodes=2, rdzv_endpoint="node0:29500", rdzv_id="job42")
    assert (config.min_nodes, config.max_nodes, config.nproc_per_node) == (2, 2, 8)
    assert (config.rdzv_backend, config.rdzv_endpoint, config.run_id) == ("c10d", "node0:29500", "job42")


def test_static_rendezvous_passes_the_node_rank_and_node_0_address() -> None:
    config = _launch(nproc=8, nnodes=2, node_rank=1, rdzv_backend="static", rdzv_endpoint="10.0.0.1:29500")
    assert (config.rdzv_backend, config.rdzv_endpoint, config.rdzv_configs["rank"]) == ("static", "10.0.0.1:29500", 1)


def test_the_config_survives_the_json_file_the_ranks_read() -> None:
    config = TrainConfig(synthetic_data=True, steps=7, launch=LaunchConfig(nproc=2, collective_timeout_s=30.0))
    assert TrainConfig.from_json(config.to_json()) == config


def _failure(tmp_path, rank: int, exitcode: int, message: str | None = None, timestamp: int = 100) -> ProcessFailure:
    error_file = tmp_path / f"error-{rank}-{exitcode}-{timestamp}.json"
    if message is not None:
        error_file.write_text(
            '{"message": {"message": "%s", "extraInfo": {"py_callstack": "...", "timestamp": "%d"}}}' % (message, timestamp)
        )
    return ProcessFailure(local_rank=rank, pid=1000 + rank, exitcode=exitcode, error_file=str(error_file))


def test_a_rank_s_own_error_is_the_cause_not_the_peers_it_broke(tmp_path) -> None:
    failures = {
        0: _failure(tmp_path, 0, 1, "RuntimeError: [gloo] Connection closed by peer", timestamp=99),
        1: _failure(tmp_path, 1, 1, "RuntimeError: injected failure", timestamp=100),
    }
    cause = first_cause(failures)
    assert (cause.rank, cause.description, cause.exit_code) == (1, "RuntimeError: injected failure", 1)


def test_bad_input_and_signals_keep_the_exit_codes_of_one_rank(tmp_path) -> None:
    usage = first_cause({1: _failure(tmp_path, 1, 1, "UsageError: train: the data is damaged")})
    assert (usage.description, usage.exit_code) == ("train: the data is damaged", 2)
    killed = first_cause({1: _failure(tmp_path, 1, 137), 0: _failure(tmp_path, 0, 1, "RuntimeError: gloo timed out")})
    assert (killed.rank, killed.description, killed.exit_code) == (1, "killed by signal 9 (SIGKILL)", 137)
    assert first_cause({0: _failure(tmp_path, 0, 143), 1: _failure(tmp_path, 1, 143)}) is None
    assert first_cause({0: _failure(tmp_path, 0, 130), 1: _failure(tmp_path, 1, 130)}) is None  # Ctrl-C
