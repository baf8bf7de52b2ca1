"""Training on data read where it lies, from the command line: an image folder with a named vision
model (and its kill -9 and resume), a token file with hf:gpt2, a corrupt JPEG refused or skipped as
--bad-samples says, ids past the vocabulary refused before training."""

from __future__ import annotations

import json
import os
import signal
import tarfile
from pathlib import Path

import pytest
import torch
from child_commands import start_child, trainspeed_argv, trainspeed_env
from in_place_data import (add_member, corrupt, image_bytes, snapshot, write_hf_images, write_image_folder,
                           write_tar_shards, write_tokens)
from train_runs import all_networks

from trainspeed.cli import main

VISION = ["--workload", "timm:test_resnet", "--size", "tiny,res=16,classes=3", "--no-progress", "--threads", "1",
          "--batch-size-per-device", "4", "--lr", "0.05"]
STEPS = 8

KILLED_WORKLOAD = '''
import os
import signal

from trainspeed.workloads.named.timm_models import WORKLOAD


class KilledAtStep(WORKLOAD):
    """timm's test_resnet, whose process kills itself with SIGKILL (kill -9) inside training step
    KILL_AT_STEP of the invocation where that variable is set."""

    def __init__(self):
        super().__init__("test_resnet")

    def build(self, size, seed=0):
        trainable = super().build(size, seed)
        kill_at = int(os.environ.get("KILL_AT_STEP", "0"))
        step, calls = trainable.train_step, [0]

        def train_step(batch):
            calls[0] += 1
            if calls[0] == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            return step(batch)

        trainable.train_step = train_step
        return trainable
'''


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_image_folder(tmp_path_factory.mktemp("in_place") / "photos")


@pytest.mark.e2e
@pytest.mark.slow
def test_kill_9_then_resume_on_an_image_folder_ends_with_the_parameters_of_an_uninterrupted_run(
        photos: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """The killed run is a child process (it kills itself); the uninterrupted run and the resume run
    in this one: what is tested is what the checkpoint carries through the kill, not their processes."""
    before = snapshot(photos)
    run = [*VISION, "--data", str(photos), "--steps", str(STEPS), "--checkpoint-every", "3", "--num-workers", "2"]
    assert main(["train", *run, "--out", str(tmp_path / "whole")]) == 0, capsys.readouterr().err[-2000:]
    summary = json.loads((tmp_path / "whole" / "summary.json").read_text())
    assert summary["data"]["format"] == "image-folder" and summary["data"]["files"] == 18
    assert summary["data"]["skipped"] == 0 and len(summary["data"]["fingerprint"]) == 64

    (tmp_path / "killed_workload.py").write_text(KILLED_WORKLOAD)
    killed_run = [*run, "--workload", "killed_workload:KilledAtStep", "--out", str(tmp_path / "killed")]
    process = start_child(trainspeed_argv("train", *killed_run), env=trainspeed_env(tmp_path, KILL_AT_STEP="7"),
                          start_new_session=True)
    assert process.wait(timeout=300) == -signal.SIGKILL
    assert not (tmp_path / "killed" / "summary.json").exists()
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("KILL_AT_STEP", raising=False)  # the workload kills the process only where it is set
    capsys.readouterr()
    assert main(["train", *killed_run, "--resume"]) == 0, capsys.readouterr().err[-2000:]
    assert "resumed from" in capsys.readouterr().out
    assert json.loads((tmp_path / "killed" / "summary.json").read_text())["first_step"] == 6  # mid-epoch 1
    finished, reference = all_networks(tmp_path / "killed"), all_networks(tmp_path / "whole")
    assert [name for name in reference if not torch.equal(finished[name], reference[name])] == []
    assert snapshot(photos) == before


@pytest.mark.parametrize("policy", ["refuse", "skip"])
def test_a_corrupt_jpeg_is_refused_or_counted_as_bad_samples_says_and_never_a_traceback(
        tmp_path: Path, policy: str, capsys: pytest.CaptureFixture) -> None:
    folder = write_image_folder(tmp_path / "photos", per_class=3)
    corrupt(folder / "bee" / "000.jpg")
    before = snapshot(folder)
    code = main(["train", *VISION, "--data", str(folder), "--epochs", "2", "--num-workers", "1",
                 "--bad-samples", policy, "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert snapshot(folder) == before  # the damaged file is neither moved, fixed nor marked
    assert "Traceback" not in err
    if policy == "refuse":
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1, err
        assert lines[0].startswith(f"trainspeed: error: {folder / 'bee' / '000.jpg'}: not a readable image")
        return
    assert code == 0, err
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["data"]["skipped"] >= 1  # once per epoch that reads it
    assert f"warning: {folder / 'bee' / '000.jpg'}: not a readable image" in err


def test_hf_gpt2_trains_on_a_token_bin_from_the_command_line_and_data_verify_checks_it(
        tmp_path: Path, capsys: pytest.CaptureFixture, cli_error) -> None:
    tokens = tmp_path / "text.bin"
    sources = b"".join(path.read_bytes() for path in sorted(Path(json.__file__).parent.glob("*.py")))
    torch.frombuffer(bytearray(sources[:40_000]), dtype=torch.uint8).to(torch.int16).numpy().tofile(tokens)
    assert main(["data", "verify", str(tokens), "--vocab", "256"]) == 0
    assert "OK, 1 token file(s), 40,000 uint16 ids" in capsys.readouterr().out
    size = "tiny,seq=17,n_layer=1,n_embd=32,n_head=2"
    code = main(["train", "--workload", "hf:gpt2", "--size", size, "--data", str(tokens), "--batch-size-per-device", "8",
                 "--steps", "4", "--threads", "1", "--no-progress", "--out", str(tmp_path / "run")])
    assert code == 0, capsys.readouterr().err
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["data"]["format"] == "tokens" and summary["data"]["details"]["window"] == 17
    assert summary["validation"]["bits_per_token"] > 0
    line = cli_error("train", "--workload", "hf:gpt2", "--size", f"{size},vocab_size=100", "--data", str(tokens),
                     "--steps", "1", "--out", str(tmp_path / "refused"))
    assert f"--data {tokens} holds token ids up to" in line and "set vocab_size=" in line
    assert not (tmp_path / "refused").exists()


def _image_folder_with(problem: str):
    def make(tmp_path: Path) -> Path:
        root = write_image_folder(tmp_path / "photos", per_class=2, classes=("ant", "bee"))
        if problem == "empty-class-folder":
            (root / "cat").mkdir()
        elif problem == "class-folder-named-like-a-file":
            (root / "dog.jpg").mkdir()
            (root / "dog.jpg" / "000.png").write_bytes((root / "ant" / "001.png").read_bytes())
        elif problem == "symlink-loop":
            os.symlink(root, root / "ant" / "again")
        elif problem == "no-images-at-all":
            for path in sorted(root.rglob("*.*")):
                path.rename(path.with_suffix(".txt"))
        return root
    return make


def _tokens_not_whole_ids(tmp_path: Path) -> Path:
    (tmp_path / "odd.bin").write_bytes(b"\x01\x02\x03" * 101)
    return tmp_path / "odd.bin"


def _tokens_past_the_vocabulary(tmp_path: Path) -> Path:
    return write_tokens(tmp_path / "wide.bin", 400, vocabulary=5000)


def _hf_without_a_label_column(tmp_path: Path) -> Path:
    return write_hf_images(tmp_path / "hf", label="target")


def _tar_with_a_member_that_is_no_sample(tmp_path: Path) -> Path:
    shards = write_tar_shards(tmp_path / "tars", shards=1, per_shard=3)
    with tarfile.open(shards / "000001.tar", "w") as archive:
        add_member(archive, "000100.jpg", image_bytes(0, (9, 9), "JPEG"))
        add_member(archive, "000100.cls", b"1")
        add_member(archive, "LICENSE", b"text")
    return shards


GPT2 = ["--workload", "hf:gpt2", "--size", "tiny,seq=9,n_layer=1,n_embd=16,n_head=2,vocab_size=300"]


@pytest.mark.parametrize(("make", "workload", "said"), [
    pytest.param(_image_folder_with("empty-class-folder"), VISION, "cat: an empty class folder", id="empty-class"),
    pytest.param(_image_folder_with("no-images-at-all"), VISION, "no images at all in its 2 class folder(s)",
                 id="no-images"),
    pytest.param(_image_folder_with("class-folder-named-like-a-file"), VISION,
                 "dog.jpg: a class folder named like an image file", id="class-named-like-a-file"),
    pytest.param(_image_folder_with("symlink-loop"), VISION, "a symlink loop", id="symlink-loop"),
    pytest.param(_tokens_not_whole_ids, GPT2, "303 bytes is not a whole number of uint16 ids", id="not-whole-ids"),
    pytest.param(_tokens_past_the_vocabulary, GPT2, "holds token ids up to", id="ids-past-the-vocabulary"),
    pytest.param(_hf_without_a_label_column, VISION, "no label column (label or labels)", id="hf-without-column"),
    pytest.param(_tar_with_a_member_that_is_no_sample, VISION, "member 'LICENSE' has no KEY.EXTENSION name",
                 id="tar-member-no-sample"),
])
def test_bad_data_is_refused_in_one_line_before_training_and_left_as_it_was(tmp_path: Path, make, workload, said,
                                                                            cli_error) -> None:
    data = make(tmp_path)
    before = snapshot(data) if data.is_dir() else data.stat().st_mtime_ns
    listing = sorted(p.name for p in tmp_path.iterdir())
    line = cli_error("train", *workload, "--data", str(data), "--steps", "1", "--no-progress",
                     "--out", str(tmp_path / "run"))
    assert said in line, line
    assert (snapshot(data) if data.is_dir() else data.stat().st_mtime_ns) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == listing  # no run folder, nothing beside the data
