"""A TrainConfig's own `trainspeed train` command (`train_command`, generated from train's flag
table): train's parser reads it back into an equal config, whatever the config holds."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest

from trainspeed.cli import build_parser
from trainspeed.errors import UsageError
from trainspeed.flags import FlagGroup, OneLineParser, add_flags, config_argv, config_from_flags, flag
from trainspeed.train.config import BatchScheduleConfig, LaunchConfig, LRConfig, TrainConfig
from trainspeed.train.flags import TRAIN_FLAGS, config_of_command, train_command

CONFIGS = {
    "defaults": TrainConfig(),
    "study run to a goal": TrainConfig(
        size="tiny", data="runs/data", steps=128, batch_size_per_device=512, seed=3, num_workers=0,
        lr=LRConfig(base_lr=0.00094868, scaling="none", warmup_steps=2, min_lr_ratio=1.0),
        until="val/accuracy>=0.5", stop_at_target=True, eval_every_samples=4096, eval_batches=4,
        noise_scale_micro_batches=2, checkpoint_every=0, out_dir="runs/b512-lr1-s3", progress=False),
    "switches flipped": TrainConfig(synthetic_data=True, steps=1, resume=True, stop_at_target=True, progress=False),
    "floats": TrainConfig(data="d", epochs=0.1 + 0.2, noise_scale_smoothing=0.9,
                          lr=LRConfig(base_lr=1e-7, min_lr_ratio=1 / 3, scaling="linear", reference_batch=256),
                          launch=LaunchConfig(collective_timeout_s=12.5)),
    "several nodes": TrainConfig(synthetic_data=True, steps=5, threads=2, noise_scale="off",
                                 launch=LaunchConfig(nproc=2, nnodes=2, node_rank=1, rdzv_backend="static",
                                                     rdzv_endpoint="node0:29500", rdzv_id="job42")),
    "a branch of another run": TrainConfig(data="d", steps=2, resume=True, init_from="runs/base", init_step=40,
                                           lr=LRConfig(base_lr=3e-4, scaling="none", warmup_steps=0, min_lr_ratio=1.0)),
    "odd texts": TrainConfig(workload="timm:resnet18", size="tiny,n_layer=4", data="-data with spaces",
                             out_dir="-out", until="val/loss<=0.3", bench_jsonl="b.jsonl", steps=2),
}


@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS.keys())
def test_train_s_own_parser_reads_a_config_s_command_back_into_that_config(config: TrainConfig) -> None:
    command = train_command(config)
    args = build_parser().parse_args(command)
    assert args.command == "train" and config_from_flags(TrainConfig, args) == config
    assert config_of_command(command) == config


def test_a_command_holds_the_values_that_differ_from_the_defaults_and_the_configuration_s_coordinates() -> None:
    assert train_command(TrainConfig()) == ["train", "--workload", "mahjong", "--target", "cpu:eager:fp32",
                                            "--batch-size-per-device", "1024", "--nproc", "1"]
    command = train_command(CONFIGS["study run to a goal"])
    assert command[command.index("--lr") + 1] == "0.00094868" and "--min-lr-ratio" in command
    assert "--stop-at-target" in command and "--no-progress" in command and "--resume" not in command
    assert "--threads" not in command and "--checkpoint-every" not in command  # at their defaults


def test_a_value_no_command_can_state_is_refused() -> None:
    with pytest.raises(ValueError, match=r"TrainConfig.threads is None, which --threads cannot say"):
        train_command(TrainConfig(threads=None))


def test_a_help_or_an_unknown_flag_in_a_command_read_back_is_one_error_not_an_exit() -> None:
    for command in (["train", "--help"], ["train", "--steps", "1", "--no-such-flag"], ["bench", "--steps", "1"]):
        with pytest.raises(UsageError):
            config_of_command(command)


@dataclass(frozen=True)
class SweepConfig:
    """A config with what TrainConfig has none of: lists, and a field without a flag."""

    batches: tuple[int, ...] = (256, 1024)
    factors: tuple[float, ...] = (0.5, 1.0)
    names: tuple[str, ...] = ()
    quiet: bool = False
    unflagged: int = 0


def _comma_list(kind: type):
    def parse(text: str) -> tuple:
        return tuple(kind(item) for item in text.split(",") if item)
    return parse


SWEEP_FLAGS = (FlagGroup("sweep", (
    flag("--batches", "batches", "batches", type=_comma_list(int)),
    flag("--factors", "factors", "factors", type=_comma_list(float)),
    flag("--names", "names", "names", type=_comma_list(str)),
    flag("--quiet", "quiet", "no output"),
)),)


@pytest.mark.parametrize("config", [SweepConfig(), SweepConfig(batches=(8, 16, 2**40), factors=(0.1 + 0.2, 2.0, 1e-9)),
                                    SweepConfig(names=("-a", "b"), quiet=True), SweepConfig(batches=(1,))])
def test_a_config_s_lists_round_trip_comma_separated(config: SweepConfig) -> None:
    parser = OneLineParser(prog="sweep")
    add_flags(parser, SweepConfig, SWEEP_FLAGS)
    argv = config_argv(config, SWEEP_FLAGS)
    assert config_from_flags(SweepConfig, parser.parse_args(argv)) == config


def test_a_field_without_a_flag_away_from_its_default_is_refused_not_dropped() -> None:
    assert config_argv(SweepConfig(unflagged=0), SWEEP_FLAGS) == []
    with pytest.raises(ValueError, match="SweepConfig.unflagged has no flag"):
        config_argv(SweepConfig(unflagged=1), SWEEP_FLAGS)


def test_every_field_of_train_s_config_has_a_flag() -> None:
    """So `train_command` states every config a study can build (none is refused for want of a flag)."""
    parser = OneLineParser(prog="train")
    add_flags(parser, TrainConfig, TRAIN_FLAGS)
    nested = {"LRConfig": LRConfig, "LaunchConfig": LaunchConfig, "BatchScheduleConfig": BatchScheduleConfig}
    fields = {f"{field.name}.{inner.name}" if field.type in nested else field.name
              for field in dataclasses.fields(TrainConfig)
              for inner in (dataclasses.fields(nested[field.type]) if field.type in nested else [field])}
    assert fields <= {action.dest for action in parser._actions}
