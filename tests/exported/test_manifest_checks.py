"""A manifest edited by hand, every field of its type, is refused in one line naming what is wrong,
before anything is written or measured: its values out of range, or programs that do not take what
it says (another batch size, another platform). A refused `train --exported` leaves no run folder,
so the same command is not later told that `--out` "already holds a run"."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from exported_runs import BATCH, copy_of, edit_manifest

from trainspeed.targets.jaxjit import JaxTarget

pytestmark = [
    pytest.mark.e2e,  # the session's self-play data is made by a child process
    pytest.mark.skipif(JaxTarget.unavailable_reason() is not None, reason=str(JaxTarget.unavailable_reason())),
    pytest.mark.filterwarnings("ignore:Explicitly requested dtype int64"),
]


def _set(path: tuple, value):
    """An edit setting the field at `path` (keys and list indexes) to `value`."""
    def edit(manifest: dict) -> None:
        container = manifest
        for key in path[:-1]:
            container = container[key]
        container[path[-1]] = value

    return edit


def _negative_leaf_dimension(manifest: dict) -> None:
    manifest["state"][0]["shape"][0] = -1


EDITS = {
    "negative-leaf-shape": (_negative_leaf_dimension, "has a negative dimension"),
    "negative-column-shape": (_set(("columns", 0, "sample_shape"), [-86, 34]), "has a negative dimension"),
    "bad-leaf-dtype": (_set(("state", 0, "dtype"), "float33"), "has dtype 'float33', none of bool"),
    "bad-column-dtype": (_set(("columns", 1, "dtype"), "object"), "has dtype 'object', none of bool"),
    "huge-seed": (_set(("seed",), 2**70), f"seed {2**70} is not one of 0..2147483647"),
    "boolean-seed": (_set(("seed",), True), 'field "seed" - should be "int" instead of value "True" of type "bool"'),
    "zero-reference-batch": (_set(("lr_reference_batch",), 0), "lr_reference_batch 0 is not one of 1..2^40"),
    "negative-val-per-mille": (_set(("data_split", "val_per_mille"), -5), "val_per_mille -5 is not one of 0..1000"),
    "wrong-split-column": (_set(("data_split", "column"), "features"), "splits its data by the integer column 'features', "
                                                                     "and the data has float16[86, 34] per sample"),
    "no-optimizer-groups": (_set(("optimizer_groups",), []), "optimizer_groups is empty"),
    "no-batch-rows": (_set(("batch_rows",), 0), "batch_rows 0 is not one of 1..16"),
    "another-batch-size": (_set(("programs", 0, "batch_size"), 4),
                           "train_b8.jaxexport: the program takes float16[8, 86, 34] as input 133 (column features), "
                           "and the manifest says float16[4, 86, 34] (batch size 4)"),
    "platforms-not-the-programs": (_set(("platforms",), ["cpu", "tpu"]),
                                   "train_b8.jaxexport: lowered for cpu, and the manifest says cpu,tpu"),
    "flops-not-a-number": (_set(("flops_per_sample",), math.nan), "flops_per_sample nan is not a number above 0"),
    "a-file-without-its-size": (lambda manifest: manifest["file_bytes"].pop("state.npz"),
                                "file_bytes does not name every file of the folder, and only those (state.npz)"),
    "a-size-no-state-takes": (_set(("file_bytes", "state.npz"), 2**36),
                              "file_bytes says state.npz holds 68,719,476,736 bytes"),
}


@pytest.mark.parametrize("edit, says", EDITS.values(), ids=EDITS.keys())
def test_a_type_correct_edit_is_refused_in_one_line_and_leaves_no_run_folder(
        small_export: Path, selfplay_data: Path, tmp_path: Path, cli_error, edit, says: str) -> None:
    folder = edit_manifest(copy_of(small_export, tmp_path / "export"), edit)
    batch = "4" if "(batch size 4)" in says else str(BATCH)  # the size the edited manifest says it exported
    out = tmp_path / "run"
    error = cli_error("train", "--exported", str(folder), "--data", str(selfplay_data), "--batch-size-per-device",
                      batch, "--steps", "2", "--no-progress", "--out", str(out))
    assert says in error, error
    assert not out.exists()


def test_a_bench_of_a_manifest_whose_flops_are_not_a_number_measures_nothing(
        small_export: Path, tmp_path: Path, cli_error) -> None:
    folder = edit_manifest(copy_of(small_export, tmp_path / "export"), _set(("flops_per_sample",), math.nan))
    rows = tmp_path / "rows.jsonl"
    assert "flops_per_sample nan is not a number above 0" in cli_error(
        "bench", "--exported", str(folder), "--out", str(rows), "--no-plot", "--no-progress")
    assert not rows.exists()
