"""An image folder's layout as training and `data verify` see it: what is left alone, what is
refused in one line, and an image gone after the folder was opened."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from in_place_data import corrupt, image_bytes, write_image_folder

from trainspeed.data.base import LoaderConfig
from trainspeed.data.image_folder import scan_image_folder, verify_image_folder
from trainspeed.data.in_place import open_images
from trainspeed.data.samples import MAX_SUBSTITUTES
from trainspeed.errors import UsageError

RES = 8


def _photos(tmp_path: Path) -> Path:
    return write_image_folder(tmp_path / "photos", per_class=2, classes=("ant", "bee"))


def test_hidden_files_other_files_and_links_to_nothing_of_other_names_are_left_alone(tmp_path: Path) -> None:
    root = _photos(tmp_path)
    (root / ".DS_Store").write_bytes(b"\0")
    (root / "README.txt").write_text("photos of insects")
    (root / "ant" / ".hidden.jpg").write_bytes(image_bytes(0, (9, 9), "JPEG"))
    os.symlink(root / "ant" / "gone.txt", root / "ant" / "notes.txt")
    folder = scan_image_folder(root)
    assert folder.classes == ("ant", "bee")
    assert sorted([*folder.train.paths, *folder.val.paths]) == ["ant/000.jpg", "ant/001.png", "bee/000.jpg", "bee/001.png"]


def test_a_link_to_nothing_named_like_an_image_is_one_line(tmp_path: Path) -> None:
    root = _photos(tmp_path)
    os.symlink(root / "ant" / "moved.jpg", root / "ant" / "003.jpg")
    with pytest.raises(UsageError) as raised:
        open_images(root, LoaderConfig(batch_size=1), RES)
    assert str(raised.value) == f"{root / 'ant' / '003.jpg'}: a link to nothing (No such file or directory); remove it or restore its file"


def test_a_class_folder_that_is_a_symlink_loop_is_one_line(tmp_path: Path) -> None:
    root = _photos(tmp_path)
    os.symlink(root / "loop", root / "loop")
    with pytest.raises(UsageError, match=r"loop: a symlink loop \(it leads back to a folder above it\); remove the link$"):
        scan_image_folder(root)


def test_a_val_tree_with_a_class_training_lacks_is_one_line(tmp_path: Path) -> None:
    root = _photos(tmp_path)
    (root / "val" / "dog").mkdir(parents=True)
    (root / "val" / "dog" / "v.png").write_bytes(image_bytes(1, (9, 9), "PNG"))
    with pytest.raises(UsageError) as raised:
        open_images(root, LoaderConfig(batch_size=1, split="val"), RES)
    assert "val/dog: class 'dog' of the validation tree is not a class of training (ant, bee)" in str(raised.value)


def test_an_empty_train_tree_beside_a_val_tree_is_one_line(tmp_path: Path) -> None:
    root = tmp_path / "imagenet"
    (root / "train").mkdir(parents=True)
    write_image_folder(root / "val", per_class=1, classes=("ant",))
    with pytest.raises(UsageError, match=r"imagenet/train: no class folders; the layout is ROOT/CLASS/IMAGE"):
        open_images(root, LoaderConfig(batch_size=1), RES)


def test_a_file_is_not_an_image_folder(tmp_path: Path) -> None:
    (tmp_path / "one.jpg").write_bytes(image_bytes(0, (9, 9), "JPEG"))
    with pytest.raises(UsageError, match="one.jpg: not a folder; an image folder is ROOT/CLASS/IMAGE"):
        scan_image_folder(tmp_path / "one.jpg")


def test_verify_names_every_image_it_cannot_decode_and_keeps_the_layout(tmp_path: Path) -> None:
    root = _photos(tmp_path)
    corrupt(root / "bee" / "000.jpg")
    folder, problems = verify_image_folder(root)
    assert len(folder.classes) == 2 and len(problems) == 1
    assert problems[0].startswith(f"{root / 'bee' / '000.jpg'}: ") and len(problems[0].splitlines()) == 1


@pytest.mark.parametrize("policy", ["refuse", "skip"])
def test_an_image_removed_after_the_folder_was_opened_is_a_bad_sample(tmp_path: Path, policy: str,
                                                                      capfd: pytest.CaptureFixture) -> None:
    root = _photos(tmp_path)
    loader = open_images(root, LoaderConfig(batch_size=1, num_workers=0, shuffle=False, drop_last=False,
                                            bad_samples=policy), RES).loader
    gone = root / "ant" / "000.jpg"
    gone.unlink()
    if policy == "refuse":
        with pytest.raises(UsageError) as raised:
            list(loader)
        assert str(raised.value).startswith(f"{gone}: no such file; remove or replace it, or train with --bad-samples skip")
        return
    batches = list(loader)
    assert len(batches) == loader.num_samples and loader.data_record()["skipped"] == 1
    assert f"warning: {gone}: no such file; skipped" in capfd.readouterr().err


def test_a_folder_of_junk_is_refused_even_when_skipping_after_a_run_of_unreadable_samples(tmp_path: Path) -> None:
    root = tmp_path / "junk"
    (root / "ant").mkdir(parents=True)
    for i in range(MAX_SUBSTITUTES + 1):
        (root / "ant" / f"{i:03d}.jpg").write_bytes(b"not an image")
    loader = open_images(root, LoaderConfig(batch_size=1, num_workers=0, shuffle=False, bad_samples="skip"), RES).loader
    with pytest.raises(UsageError) as raised:
        next(iter(loader))
    assert str(raised.value).startswith(f"{MAX_SUBSTITUTES} unreadable samples in a row, the first {root / 'ant'}/")
    assert str(raised.value).endswith("; `trainspeed data verify` lists every one")


@pytest.mark.parametrize(("config", "said"), [
    (dict(split="test"), "split 'test': use one of train, val"),
    (dict(bad_samples="ignore"), "bad samples 'ignore': use one of refuse, skip"),
], ids=["split", "bad-samples"])
def test_a_loader_setting_of_no_meaning_is_one_line(tmp_path: Path, config: dict, said: str) -> None:
    with pytest.raises(UsageError) as raised:
        open_images(_photos(tmp_path), LoaderConfig(batch_size=1, **config), RES)
    assert str(raised.value) == said
