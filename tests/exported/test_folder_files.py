"""Every file of an exported folder is checked against what its manifest declares before it is
read: its size before a byte is read (a sparse state.npz of 64 GiB, 404 KB on disk, is refused
at once, not read whole to be hashed), and each array's header before the array is allocated
(a header declaring 2^36 floats is refused, not allocated)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from exported_runs import copy_of, declare_file, declaring, npz_members, write_npz_members

from trainspeed.targets.jaxjit import JaxTarget

pytestmark = [
    pytest.mark.skipif(JaxTarget.unavailable_reason() is not None, reason=str(JaxTarget.unavailable_reason())),
    pytest.mark.filterwarnings("ignore:Explicitly requested dtype int64"),
]


def bench(folder: Path, tmp_path: Path) -> list[str]:
    return ["bench", "--exported", str(folder), "--out", str(tmp_path / "rows.jsonl"), "--no-plot", "--no-progress"]


def test_a_sparse_state_file_of_64_gib_is_refused_by_its_size_before_it_is_read(
        small_export: Path, tmp_path: Path, cli_error) -> None:
    folder = copy_of(small_export, tmp_path / "export")
    declared = json.loads((folder / "manifest.json").read_text())["file_bytes"]["state.npz"]
    os.truncate(folder / "state.npz", 64 << 30)  # sparse: a few blocks on disk
    error = cli_error(*bench(folder, tmp_path))
    assert f"state.npz: 68,719,476,736 bytes, and the manifest says {declared:,}" in error
    assert not (tmp_path / "rows.jsonl").exists()


def test_an_array_whose_header_declares_2_to_the_36_floats_is_refused_before_it_is_allocated(
        small_export: Path, tmp_path: Path, cli_error) -> None:
    """The manifest made to agree with the changed file (its size and sha256): only the header
    can tell the array is not the manifest's leaf."""
    folder = copy_of(small_export, tmp_path / "export")
    manifest = json.loads((folder / "manifest.json").read_text())
    index, leaf = next((index, leaf) for index, leaf in enumerate(manifest["state"]) if leaf["source"] == "file")
    members = npz_members(folder / "state.npz")
    members[f"leaf{index:05d}.npy"] = declaring((2**36,))
    write_npz_members(folder / "state.npz", members)
    declare_file(folder, "state.npz")
    error = cli_error(*bench(folder, tmp_path))
    assert f"state.npz: array leaf{index:05d} holds float32[68719476736], not float32{leaf['shape']}" in error
    assert not (tmp_path / "rows.jsonl").exists()


def test_a_batch_array_of_another_shape_is_refused_by_its_header(small_export: Path, tmp_path: Path,
                                                                   cli_error) -> None:
    folder = copy_of(small_export, tmp_path / "export")
    members = npz_members(folder / "batch.npz")
    members["action.npy"] = declaring((3,), "<i4")
    write_npz_members(folder / "batch.npz", members)
    declare_file(folder, "batch.npz")
    assert "batch.npz: array action holds int32[3], not int32[16]" in cli_error(*bench(folder, tmp_path))
