"""The protocol hooks a family whose device lives elsewhere needs, shown with a family defined here:
its own spelling of target names, extra fields in result rows, its own peak, one rank only, and a
lost device that stops a sweep with one line."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from trainspeed.bench.config import BenchConfig, TimingPlan
from trainspeed.bench.sweep import run_sweep
from trainspeed.cli import main
from trainspeed.errors import DeviceLost, UsageError
from trainspeed.targets import get_target, target_family
from trainspeed.targets.base import Target, TargetSpec

QUICK = TimingPlan(warmup_steps=1, windows=2, min_window_s=0.01, max_steps_per_window=3)


@dataclasses.dataclass(frozen=True)
class FarSpec(TargetSpec):
    place: str = ""

    def __str__(self) -> str:
        return f"far:{self.place}:{self.mode}:{self.precision}"


class FarTarget(Target):
    """Spelled `far:PLACE:eager:fp32` (four parts, which the default parser refuses); steps run on the host, but the family pretends they ran
    elsewhere: it reports a peak and a row field of its own, and trains on one rank only."""

    device_type = "cpu"
    modes = ("eager",)
    precisions = ("fp32",)
    data_parallel = "single"
    steps_before_loss: int | None = None

    @classmethod
    def parse_spec(cls, text: str) -> TargetSpec:
        parts = text.split(":")
        if len(parts) != 4 or not all(parts):
            raise UsageError(f"bad target {text!r}: write far:PLACE:eager:fp32")
        return FarSpec("far", parts[2], parts[3], place=parts[1])

    @classmethod
    def check_reachable(cls, spec: TargetSpec) -> None:
        if spec.place == "nowhere":
            raise UsageError(f"target {spec}: nothing answers at {spec.place}")

    @classmethod
    def unavailable_reason(cls) -> str | None:
        return None

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    def device_name(self) -> str:
        return f"far away at {self.spec.place}"

    def sync(self) -> None:
        """Host kernels finish before they return."""

    def is_oom(self, error: BaseException) -> bool:
        return isinstance(error, MemoryError)

    def run_step(self, trainable, batch):
        if self.steps_before_loss is not None:
            if self.steps_before_loss == 0:
                raise DeviceLost(f"target {self}: the far device went away")
            self.steps_before_loss -= 1
        return super().run_step(trainable, batch)

    def measured_peak_tflops(self) -> float:
        return 123.0

    def row_fields(self) -> dict:
        return {"transport": "pigeon", "link": self.spec.place}


@pytest.fixture
def far_family(monkeypatch):
    monkeypatch.setenv("TRAINSPEED_TARGET_FAMILIES", f"far={__name__}:FarTarget")


def test_a_family_parses_its_own_names(far_family):
    target = get_target("far:there:eager:fp32")
    assert isinstance(target, FarTarget) and target.spec.place == "there"
    assert str(target) == "far:there:eager:fp32"
    with pytest.raises(UsageError, match="write far:PLACE"):
        get_target("far:there:eager")
    with pytest.raises(UsageError, match="nothing answers at nowhere"):
        target_family("far:nowhere:eager:fp32")


def test_row_fields_and_the_familys_peak_go_into_rows(far_family, tmp_results):
    config = BenchConfig(workload="mahjong", size="tiny", targets=["far:there:eager:fp32"], batch_sizes=[8],
                         out=tmp_results, plan=QUICK)
    (row,) = run_sweep(config)
    assert row.status == "ok" and row.transport == "pigeon" and row.link == "there"
    assert row.peak_tflops == 123.0 and row.peak_tflops_source == "measured"


def test_a_lost_device_stops_the_sweep_with_one_line(far_family, tmp_results, capsys):
    FarTarget.steps_before_loss = 2
    try:
        code = main(["bench", "--targets", "far:there:eager:fp32", "--batch-sizes", "8,16", "--out", str(tmp_results),
                     "--windows", "2", "--min-window-s", "0.01", "--warmup-steps", "1", "--no-progress"])
    finally:
        FarTarget.steps_before_loss = None
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and err == ["trainspeed: error: target far:there:eager:fp32: the far device went away"]
    assert not tmp_results.exists() or tmp_results.read_text() == ""


def test_a_single_rank_family_refuses_several_ranks(far_family, tmp_path, capsys):
    code = main(["train", "--synthetic-data", "--target", "far:here:eager:fp32", "--nproc", "2", "--steps", "2",
                 "--batch-size-per-device", "8", "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "trains on one rank only" in err[0], err
