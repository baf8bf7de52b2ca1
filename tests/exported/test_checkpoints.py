"""Checkpoints of `train --exported` carry their sha256 beside them and a position that is checked
before a resume continues from it: a step its file name says (not -5, not 10^12, not `true`),
samples of those steps, a clock of seconds, a goal's watch of known fields. Each such file is
refused in one line, and the run folder is left as it was; a checkpoint that is not whole (no
checksum, another size) is passed over for the one before, said so; a header declaring more than
the manifest's leaf is refused before anything is allocated."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from exported_runs import copy_of, declaring, rewrite_checkpoint, rows, snapshot, train_args

from trainspeed.cli import main
from trainspeed.targets.jaxjit import JaxTarget

pytestmark = [
    pytest.mark.e2e,  # the session's self-play data is made by a child process
    pytest.mark.skipif(JaxTarget.unavailable_reason() is not None, reason=str(JaxTarget.unavailable_reason())),
    pytest.mark.filterwarnings("ignore:Explicitly requested dtype int64"),
]

LAST = "step-000000020.npz"
BEFORE = "step-000000010.npz"


def _set(key: str, value):
    def edit(position: dict) -> None:
        position[key] = value

    return edit


def _text_clock(position: dict) -> None:
    position["clock"]["train_s"] = "ten seconds"


def _extra_goal_key(position: dict) -> None:
    position["goal"]["reached_twice"] = None


POSITIONS = {
    "negative-step": (_set("step", -5), "records step -5, and its name says step 20"),
    "step-past-any-name": (_set("step", 10**12), "records step 1000000000000, and its name says step 20"),
    "boolean-step": (_set("step", True), 'field "step" - should be "int" instead of value "True" of type "bool"'),
    "boolean-samples": (_set("samples", False), 'field "samples" - should be "int" instead of value "False"'),
    "other-samples": (_set("samples", 7), "records 7 samples, not 20 steps of batch 8"),
    "text-clock": (_text_clock, 'field "clock.train_s" - should be "float" instead of value "ten seconds"'),
    "extra-goal-key": (_extra_goal_key, 'can not match "reached_twice" to any data class field'),
    "negative-clock": (lambda position: position["clock"].update(wall_s=-1.0), "not seconds and resumes >= 0"),
}


def resume(export: Path, data: Path, run: Path, *extra: str) -> list[str]:
    """The finished run's command continued to step 30 (a longer --steps, which a resume may give)."""
    return [*train_args(export, data, run, *extra, steps=30), "--resume"]


@pytest.mark.parametrize("edit, says", POSITIONS.values(), ids=POSITIONS.keys())
def test_a_position_that_does_not_hold_is_refused_in_one_line_and_nothing_changes(
        small_export: Path, selfplay_data: Path, finished_run: Path, tmp_path: Path, cli_error, edit, says) -> None:
    run = copy_of(finished_run, tmp_path / "run")
    rewrite_checkpoint(run / "checkpoints" / LAST, edit)
    before = snapshot(run)
    error = cli_error(*resume(small_export, selfplay_data, run))
    assert says in error and LAST in error, error
    assert snapshot(run) == before


def test_a_header_declaring_2_to_the_36_floats_is_refused_before_it_is_allocated(
        small_export: Path, selfplay_data: Path, finished_run: Path, tmp_path: Path, cli_error) -> None:
    run = copy_of(finished_run, tmp_path / "run")
    rewrite_checkpoint(run / "checkpoints" / LAST, members={"leaf00000.npy": declaring((2**36,))})
    before = snapshot(run)
    error = cli_error(*resume(small_export, selfplay_data, run))
    assert f"{LAST}: array leaf00000 holds float32[68719476736], not float32[1, 34, 64]" in error
    assert snapshot(run) == before


def test_checkpoints_carry_their_sha256_and_one_without_it_is_passed_over_for_the_one_before(
        small_export: Path, selfplay_data: Path, finished_run: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    import hashlib

    for name in (BEFORE, LAST):
        digest = hashlib.sha256((finished_run / "checkpoints" / name).read_bytes()).hexdigest()
        assert (finished_run / "checkpoints" / f"{name}.sha256").read_text() == f"{digest}  {name}\n"
    run = copy_of(finished_run, tmp_path / "run")
    (run / "checkpoints" / f"{LAST}.sha256").unlink()  # as a kill between the file and its checksum leaves it
    assert main(resume(small_export, selfplay_data, run)) == 0
    said = capsys.readouterr().out
    assert f"{LAST} has no checksum file ({LAST}.sha256 is missing); resuming from {BEFORE}" in said
    assert [row["step"] for row in rows(run, "train")] == [5, 10, 15, 20, 25, 30]


def test_a_run_whose_checkpoints_are_none_of_them_whole_is_refused_not_started_over(
        small_export: Path, selfplay_data: Path, finished_run: Path, tmp_path: Path, cli_error) -> None:
    """A sparse file of 64 GiB is refused by its size, never read to be hashed."""
    run = copy_of(finished_run, tmp_path / "run")
    os.truncate(run / "checkpoints" / LAST, 64 << 30)
    (run / "checkpoints" / f"{BEFORE}.sha256").unlink()
    before = snapshot(run)
    error = cli_error(*resume(small_export, selfplay_data, run))
    assert f"{LAST} is 68,719,476,736 bytes, more than the" in error
    assert f"{BEFORE} has no checksum file" in error and "no whole checkpoint is left" in error
    assert snapshot(run) == before
