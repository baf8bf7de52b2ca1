"""Checkpoint files: the latest pointer, pruning, checksums, plain data only, RNG round trip."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch
from child_commands import run_child

from trainspeed.errors import UsageError
from trainspeed.targets import available_targets, get_target
from trainspeed.train.checkpoint import (
    capture_rng_states,
    find_checkpoint,
    load_checkpoint,
    read_latest,
    restore_rng_states,
    save_checkpoint,
)


AVAILABLE = available_targets()


def _names(run_dir: Path) -> list[str]:
    return sorted(p.name for p in (run_dir / "checkpoints").iterdir())


def test_latest_points_at_the_newest_and_only_two_are_kept_each_with_its_checksum(tmp_path: Path) -> None:
    assert read_latest(tmp_path) == (None, None) and find_checkpoint(tmp_path) is None
    for step in (10, 20, 30):
        save_checkpoint(tmp_path, step, {"step": step, "weight": torch.full((2,), float(step))})
    latest = read_latest(tmp_path)[0]
    assert latest is not None and load_checkpoint(latest)["step"] == 30
    assert _names(tmp_path) == [
        "latest", "step-000000020.pt", "step-000000020.pt.sha256", "step-000000030.pt", "step-000000030.pt.sha256"
    ]


def test_a_checkpoint_takes_its_name_only_once_its_checksum_is_beside_it(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A kill between the two writes then leaves no checkpoint without its checksum (a resume refuses
    one, and the run's first checkpoint would have had none to fall back on)."""
    import os

    rename, renamed = os.replace, []

    def watched(source, destination) -> None:
        if str(destination).endswith(".pt"):
            renamed.append(Path(f"{destination}.sha256").is_file())
        rename(source, destination)

    monkeypatch.setattr(os, "replace", watched)
    save_checkpoint(tmp_path, 5, {"step": 5, "weight": torch.zeros(2)})
    assert renamed == [True]


@pytest.mark.e2e
def test_the_checksum_files_are_in_the_format_of_coreutils_sha256sum(tmp_path: Path) -> None:
    """So anyone can check a run by hand."""
    for step in (10, 20):
        save_checkpoint(tmp_path, step, {"step": step, "weight": torch.full((2,), float(step))})
    checked = run_child(["sha256sum", "-c", "step-000000010.pt.sha256", "step-000000020.pt.sha256"],
                        cwd=tmp_path / "checkpoints", timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_keep_zero_keeps_every_checkpoint_and_keep_three_the_newest_three(tmp_path: Path) -> None:
    for step in (10, 20, 30, 40):
        save_checkpoint(tmp_path / "all", step, {"step": step}, keep=0)
        save_checkpoint(tmp_path / "three", step, {"step": step}, keep=3)
    assert [n for n in _names(tmp_path / "all") if n.endswith(".pt")] == [
        "step-000000010.pt", "step-000000020.pt", "step-000000030.pt", "step-000000040.pt"]
    assert [n for n in _names(tmp_path / "three") if n.endswith(".pt")] == [
        "step-000000020.pt", "step-000000030.pt", "step-000000040.pt"]


def test_writing_an_earlier_step_never_deletes_a_later_checkpoint(tmp_path: Path) -> None:
    """A run resumed from step 20 while a step-90 file lies there (damaged, or of the run's future)
    must not prune its own new checkpoints because they sort before step 90."""
    for step in (20, 90):
        save_checkpoint(tmp_path, step, {"step": step})
    for step in (30, 40, 50):
        save_checkpoint(tmp_path, step, {"step": step})
    assert [name for name in _names(tmp_path) if name.endswith(".pt")] == [
        "step-000000040.pt", "step-000000050.pt", "step-000000090.pt"
    ]
    assert read_latest(tmp_path)[0].name == "step-000000050.pt"


@pytest.mark.parametrize("name", [n for n in ("cpu:eager:fp32", "xla:lazy:fp32") if AVAILABLE[n] is None])
def test_rng_states_round_trip_through_a_checkpoint_on_the_host_and_the_device(name: str, tmp_path: Path) -> None:
    target = get_target(name)

    def draw() -> tuple[float, ...]:
        on_device = torch.rand((), device=target.device)
        target.after_step()
        return random.random(), float(np.random.rand()), float(np.random.randn()), float(torch.rand(())), \
            float(on_device.cpu())

    np.random.randn()  # leaves a cached gaussian in numpy's state
    save_checkpoint(tmp_path, 1, {"rng": capture_rng_states(target)})
    drawn = draw()
    restore_rng_states(load_checkpoint(read_latest(tmp_path)[0])["rng"], target)
    assert draw() == drawn


def test_a_truncated_checkpoint_is_a_usage_error_naming_the_file(tmp_path: Path) -> None:
    path = save_checkpoint(tmp_path, 1, {"step": 1})
    path.write_bytes(path.read_bytes()[:20])
    with pytest.raises(UsageError, match=f"{path} fails its sha256 check"):
        load_checkpoint(path)


def test_a_checkpoint_without_its_checksum_file_is_refused(tmp_path: Path) -> None:
    path = save_checkpoint(tmp_path, 1, {"step": 1})
    path.with_name(path.name + ".sha256").unlink()
    with pytest.raises(UsageError, match="has no checksum file"):
        load_checkpoint(path)


def test_a_state_that_is_not_plain_data_is_refused_when_written_naming_where(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"checkpoint\['ranks'\]\[0\]\['loader'\] is a numpy.ndarray"):
        save_checkpoint(tmp_path, 1, {"step": 1, "ranks": [{"loader": np.zeros(3)}]})
    assert find_checkpoint(tmp_path) is None


def test_a_dict_key_that_is_neither_text_nor_a_number_is_refused_when_written(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"checkpoint\['ranks'\] has a key of type tuple"):
        save_checkpoint(tmp_path, 1, {"step": 1, "ranks": {(0, 1): "rank"}})
    assert find_checkpoint(tmp_path) is None


def _with_checksum(path: Path, content: bytes) -> Path:
    """`content` as a checkpoint file whose checksum file matches it: only the load can refuse it."""
    import hashlib

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    path.with_name(path.name + ".sha256").write_text(f"{hashlib.sha256(content).hexdigest()}  {path.name}\n")
    return path


def test_a_checkpoint_that_is_no_dict_or_a_cut_torch_file_is_refused_naming_the_file(tmp_path: Path) -> None:
    import io

    saved = io.BytesIO()
    torch.save([1, 2, 3], saved)
    a_list = _with_checksum(tmp_path / "list" / "step-000000001.pt", saved.getvalue())
    with pytest.raises(UsageError) as refused:
        load_checkpoint(a_list)
    assert str(refused.value) == f"{a_list} is not a trainspeed checkpoint (it holds a list)"
    saved = io.BytesIO()
    torch.save({"step": 1, "weight": torch.zeros(1000)}, saved)
    cut = _with_checksum(tmp_path / "cut" / "step-000000001.pt", saved.getvalue()[:2000])  # a copy cut short
    with pytest.raises(UsageError) as refused:
        load_checkpoint(cut)
    assert str(refused.value) == f"{cut} is not a readable checkpoint (RuntimeError)"


@pytest.mark.skipif(not Path("/proc/self/mem").exists(), reason="needs Linux's /proc")
def test_a_checkpoint_whose_read_fails_is_refused_naming_the_kernels_reason(tmp_path: Path) -> None:
    """A regular file that the kernel refuses to read (EIO: /proc/self/mem at offset 0), as a
    failing disk would: a refusal, never an OSError."""
    path = _with_checksum(tmp_path / "step-000000001.pt", b"")
    path.unlink()
    path.symlink_to("/proc/self/mem")
    with pytest.raises(UsageError) as refused:
        load_checkpoint(path)
    assert str(refused.value) == f"{path} cannot be read (Input/output error)"


@pytest.mark.parametrize(("sidecar", "said"), [
    ("folder", "has an unreadable checksum file (step-000000001.pt.sha256 is a folder, not a regular file)"),
    (b"\xff\xfe not ascii", "has a checksum file step-000000001.pt.sha256 that is not a sha256 line for it"),
    ("0" * 64 + "  step-000000002.pt\n", "has a checksum file step-000000001.pt.sha256 that is not a sha256 line for it"),
], ids=["a-folder", "not-ascii", "another-files-line"])
def test_a_checksum_file_that_is_no_sha256_line_for_its_checkpoint_is_refused(
    tmp_path: Path, sidecar: str | bytes, said: str
) -> None:
    path = save_checkpoint(tmp_path, 1, {"step": 1})
    checksum = path.with_name(path.name + ".sha256")
    checksum.unlink()
    if sidecar == "folder":
        checksum.mkdir()
    elif isinstance(sidecar, bytes):
        checksum.write_bytes(sidecar)
    else:
        checksum.write_text(sidecar)
    with pytest.raises(UsageError) as refused:
        load_checkpoint(path)
    assert str(refused.value) == f"{path} {said}"


def test_a_latest_pointer_that_is_a_fifo_is_passed_over_never_read(tmp_path: Path) -> None:
    """Reading a FIFO waits for a writer that never comes: it is named and the newest checkpoint is used."""
    import os

    for step in (1, 2):
        save_checkpoint(tmp_path, step, {"step": step})
    pointer = tmp_path / "checkpoints" / "latest"
    pointer.unlink()
    os.mkfifo(pointer)
    found = find_checkpoint(tmp_path)
    assert found is not None and found.path.name == "step-000000002.pt"
    assert found.skipped == ("checkpoints/latest is a FIFO (named pipe), not a regular file",)
