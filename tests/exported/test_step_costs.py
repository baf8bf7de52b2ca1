"""What XLA's costs a bench row of exported steps takes: a phased workload runs one program per list
of phases (StyleGAN3's step 0 of 16 with R1), so the row's FLOPs per step are the mean over that
cycle and its memory the largest program's, not the costs of whichever program ran first."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainspeed.exported.bench import step_costs


@dataclass
class Programs:
    costs: dict[str, Any]

    def last_costs(self) -> dict[str, Any]:
        return self.costs


@dataclass
class Manifest:
    step_phases: list[str] = field(default_factory=list)

    def phases_of_step(self, step: int) -> str | None:
        return self.step_phases[step % len(self.step_phases)] if self.step_phases else None


@dataclass
class Steps:
    manifest: Manifest
    programs: dict[tuple[str, int, str | None], Programs]


def test_a_phased_step_costs_the_mean_of_its_cycle_and_holds_its_largest_program() -> None:
    with_r1 = Programs({"program_flops": 32.0, "program_bytes_accessed": 16.0, "program_temp_bytes": 9.0})
    without = Programs({"program_flops": 16.0, "program_bytes_accessed": 8.0, "program_temp_bytes": 7.0})
    steps = Steps(Manifest(["G+D+R1"] + ["G+D"] * 15), {("train", 8, "G+D+R1"): with_r1, ("train", 8, "G+D"): without,
                                                         ("train", 16, "G+D"): Programs({"program_flops": 1e9})})
    costs = step_costs(steps, 8)  # type: ignore[arg-type]
    assert costs == {"program_flops": (32 + 15 * 16) / 16, "program_bytes_accessed": (16 + 15 * 8) / 16,
                     "program_temp_bytes": 9.0}


def test_a_cycle_with_a_program_not_compiled_or_looped_has_no_flop_count_and_keeps_the_loops() -> None:
    looped = Programs({"program_loop_trips": [4], "program_temp_bytes": 5.0})
    steps = Steps(Manifest(["G+D+R1", "G+D"]), {("train", 32, "G+D+R1"): looped})
    assert step_costs(steps, 32) == {"program_temp_bytes": 5.0, "program_loop_trips": [4]}  # type: ignore[arg-type]


def test_one_program_gives_its_own_costs() -> None:
    own = {"program_flops": 3.0, "program_temp_bytes": 2.0, "program_argument_bytes": 1.0}
    steps = Steps(Manifest(), {("train", 4, None): Programs(own)})
    assert step_costs(steps, 4) == own  # type: ignore[arg-type]
