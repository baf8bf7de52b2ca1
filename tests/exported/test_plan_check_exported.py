"""`plan --check ... --check-exported FOLDER`: the plan's checks train exported steps, as on a host
with JAX only, with the recipe a torch check would train, and a folder that cannot train a checked
configuration is refused before anything runs."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from trainspeed.errors import UsageError
from trainspeed.exported.train import refuse_unsupported
from trainspeed.plan.check import check_exported, check_recipe, check_runs
from trainspeed.plan.inputs import read_plan_inputs
from trainspeed.plan.model import steps_model
from trainspeed.plan.rows import PlanRow
from trainspeed.train.flags import config_of_command
from trainspeed.typed_json import typed

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"
TPU_BASE_RUN = RESULTS / "tpu_plan_check_b64"
"""A base run `train --exported` wrote on a TPU, to 85% validation accuracy at batch 64."""


def plan_rows() -> list[PlanRow]:
    """The plan rows the committed TPU plan printed (jax:jit:fp32, one device, batch 64, 128, 256)."""
    rows = []
    for line in (RESULTS / "tpu_plan_check.jsonl").read_text().splitlines():
        raw = json.loads(line)
        if raw["kind"] == "plan":
            rows.append(typed(PlanRow, {k: v for k, v in raw.items() if k not in ("kind", "schema_version")}))
    return rows


def at_batch(row: PlanRow, batch: int, **changes) -> PlanRow:
    return dataclasses.replace(row, global_batch=batch, batch_size_per_device=batch,
                               config=f"{row.target}/{row.devices}/{batch}", **changes)


def test_a_check_of_exported_steps_trains_the_folder_with_the_base_run_s_recipe_at_the_row_s_batch(small_export):
    inputs = read_plan_inputs([RESULTS / "tpu_plan_check_bench.jsonl", TPU_BASE_RUN], False)
    model = steps_model(inputs)
    row = next(row for row in plan_rows() if row.global_batch == 128)
    runs = check_runs(check_recipe(inputs, model), [row], {row.config: Path("checks/b128")}, [1000, 1001],
                      exported=small_export)
    assert [run.seed for run in runs] == [1000, 1001]
    config = config_of_command(runs[1].command)
    assert config.exported == str(small_export) and "--target" not in runs[1].command
    assert (config.batch_size_per_device, config.seed, config.out_dir) == (128, 1001, "checks/b128/seed-1001")
    assert (config.until, config.stop_at_target, config.noise_scale_micro_batches) == ("val/accuracy>=0.85", True, 2)
    assert (config.eval_every_samples, config.eval_batches) == (8192, 4)  # the base run's 8 x 64 samples
    refuse_unsupported(config)  # the exported trainer takes every setting the check hands it


def test_a_folder_that_cannot_train_a_checked_configuration_is_refused_in_one_line(small_export):
    row = at_batch(plan_rows()[0], 8)
    check_exported(small_export, [row])  # jax:jit:fp32, one device, an exported batch: accepted
    refusals = [
        (at_batch(row, 32), r"batch 32 was not exported to .* \(it holds 8,16\); export it with --batch-sizes"),
        (dataclasses.replace(row, target="jax:jit:bf16"), r"holds jax:jit:fp32's step, and --check .* trains jax:jit:bf16"),
        (dataclasses.replace(row, devices=2), r"trains on one device, and --check .* is of 2"),
        (dataclasses.replace(row, schedule="auto"), r"runs fixed batches"),
    ]
    for refused, message in refusals:
        with pytest.raises(UsageError, match=message):
            check_exported(small_export, [refused])


def test_check_exported_without_check_is_refused_in_one_line(cli_error, tmp_path):
    assert "--check-exported is the folder --check trains; give --check too" in cli_error(
        "plan", str(RESULTS / "tpu_plan_check_bench.jsonl"), str(TPU_BASE_RUN), "--check-exported", str(tmp_path))
