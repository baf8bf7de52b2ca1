"""An image folder read where it lies: torchvision's ImageFolder layout, listed, never converted.

    ROOT/CLASS/**/IMAGE                 classes are the folders, sorted; 5% held out by a hash of each path
    ROOT/CLASS/... + ROOT/val/CLASS/... a validation tree beside the class folders (`val/` holds folders only)
    ROOT/train/CLASS/... + ROOT/val/CLASS/...   ImageNet's layout

Images are the files whose names end in one of torchvision's image extensions (case-insensitive);
other files are left alone, and hidden ones (`.name`) too. Folders are walked in sorted order,
following symlinks as torchvision does, so the sample order never depends on the file system's.

Refused in one line before anything trains: no class folders or no images at all, an empty class
folder, images lying in ROOT beside the class folders (they would belong to no class), a class
folder named like an image file (`cat.jpg/`), a symlink loop, a link to nothing named like an
image, a validation class that training lacks. Only names and sizes are read when the folder is
opened; pixels are decoded by the loader's workers (`trainspeed.data.decode`), and `data verify`
decodes every image. Each image is opened as a sample's file (`trainspeed.data.sample_files`): one
replaced by a FIFO or a device since the folder was listed is a bad sample, never a read that waits.

The split without a `val/` tree: an image is held out when a fixed hash of its path relative to
ROOT falls in the lowest 5% (`trainspeed.data.order.in_validation_split`), whatever the seed,
rank count or file system order.
"""

from __future__ import annotations

import errno
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from trainspeed.data.decode import BadSample, ImagePlan, check_image, decode_image, sample_rng
from trainspeed.data.order import VAL_PER_MILLE, in_validation_split
from trainspeed.data.sample_files import open_sample_file
from trainspeed.data.sources import IMAGE_FOLDER, IMAGE_SUFFIXES, STAT_COVERS, DataSource, PathTable, stat_fingerprint
from trainspeed.errors import UsageError

VAL_TREE = "val"
TRAIN_TREE = "train"


def is_image_name(name: str) -> bool:
    return name.lower().endswith(IMAGE_SUFFIXES)


@dataclass(frozen=True)
class ImageSplit:
    """The images of one split: paths relative to the folder's root, and their class numbers."""

    paths: PathTable
    labels: np.ndarray  # int64

    def __len__(self) -> int:
        return len(self.paths)


@dataclass(frozen=True)
class ImageFolder:
    root: Path
    classes: tuple[str, ...]
    train: ImageSplit
    val: ImageSplit
    split: str
    """How validation images were chosen, in words."""
    fingerprint: str

    def split_of(self, name: str) -> ImageSplit:
        return self.train if name == "train" else self.val

    def source(self, split: str) -> DataSource:
        ours = self.split_of(split)
        return DataSource(IMAGE_FOLDER, str(self.root), files=len(self.train) + len(self.val), samples=len(ours),
                          fingerprint=self.fingerprint, fingerprint_covers=STAT_COVERS,
                          details={"classes": len(self.classes), "split": self.split})


def _stat_error(path: Path) -> OSError | None:
    try:
        os.stat(path)
    except OSError as error:
        return error
    return None


def _loop_error(path: Path) -> UsageError:
    return UsageError(f"{path}: a symlink loop (it leads back to a folder above it); remove the link")


def _walk(folder: Path, root: Path, ancestors: frozenset[tuple[int, int]]) -> Iterator[str]:
    """Image paths under `folder` (relative to `root`), sorted, following symlinks; a folder that
    is its own ancestor is a loop."""
    try:
        status = os.stat(folder)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise _loop_error(folder) from None
        raise UsageError(f"{folder}: cannot be read ({error.strerror})") from None
    key = (status.st_dev, status.st_ino)
    if key in ancestors:
        raise _loop_error(folder)
    inner = ancestors | {key}
    try:
        with os.scandir(folder) as listing:
            entries = sorted(listing, key=lambda entry: entry.name)
    except OSError as error:
        raise UsageError(f"{folder}: cannot be listed ({error.strerror})") from None
    for entry in entries:
        if entry.name.startswith("."):
            continue
        path = Path(entry.path)
        if entry.is_symlink():
            problem = _stat_error(path)
            if problem is not None and problem.errno == errno.ELOOP:
                raise _loop_error(path)
            if problem is not None:
                if is_image_name(entry.name):
                    raise UsageError(f"{path}: a link to nothing ({problem.strerror}); remove it or restore its file")
                continue
        if entry.is_dir():
            yield from _walk(path, root, inner)
        elif entry.is_file() and is_image_name(entry.name):
            yield path.relative_to(root).as_posix()


def _class_folders(tree: Path, skip: set[str]) -> list[Path]:
    """The class folders of one tree; UsageError for images beside them or a folder named like one."""
    try:
        entries = sorted(p for p in tree.iterdir() if not p.name.startswith(".") and p.name not in skip)
    except OSError as error:
        raise UsageError(f"{tree}: cannot be listed ({error.strerror})") from None
    loose = [p for p in entries if is_image_name(p.name) and not p.is_dir()]
    if loose:
        raise UsageError(f"{loose[0]}: an image directly in {tree}, in no class folder ({len(loose)} such); the "
                         "layout is ROOT/CLASS/IMAGE: move images into their class's folder")
    folders = []
    for path in entries:
        problem = _stat_error(path) if path.is_symlink() else None
        if problem is not None and problem.errno == errno.ELOOP:
            raise _loop_error(path)
        if not path.is_dir():
            continue
        if is_image_name(path.name):
            raise UsageError(f"{path}: a class folder named like an image file; name each class folder after its "
                             "class (an image belongs inside one)")
        folders.append(path)
    return folders


def _tree_images(tree: Path, root: Path, classes: list[str], skip: set[str]) -> tuple[list[str], list[int], list[str]]:
    """(paths relative to root, class numbers, the tree's class names) of one tree."""
    folders = _class_folders(tree, skip)
    if not folders:
        raise UsageError(f"{tree}: no class folders; the layout is ROOT/CLASS/IMAGE (one folder per class)")
    tree_status = os.stat(tree)
    listed = [list(_walk(folder, root, frozenset({(tree_status.st_dev, tree_status.st_ino)}))) for folder in folders]
    if not any(listed):
        raise UsageError(f"{tree}: no images at all in its {len(folders)} class folder(s) (no "
                         f"{', '.join(s.lstrip('.') for s in IMAGE_SUFFIXES[:5])} ... files); the layout is "
                         "ROOT/CLASS/IMAGE")
    paths, labels, names = [], [], []
    for folder, found in zip(folders, listed):
        if not found:
            raise UsageError(f"{folder}: an empty class folder (no {', '.join(s.lstrip('.') for s in IMAGE_SUFFIXES[:5])} "
                             "... images); add its images or remove the folder")
        label = classes.index(folder.name) if folder.name in classes else -1
        if label < 0:
            raise UsageError(f"{folder}: class {folder.name!r} of the validation tree is not a class of training "
                             f"({', '.join(classes[:5])}{' ...' if len(classes) > 5 else ''}); name it as its "
                             "training folder is named")
        paths.extend(found)
        labels.extend([label] * len(found))
        names.append(folder.name)
    return paths, labels, names


def _is_tree_of_folders(path: Path) -> bool:
    try:
        entries = [p for p in path.iterdir() if not p.name.startswith(".")]
    except OSError:
        return False
    return bool(entries) and all(p.is_dir() for p in entries)


def scan_image_folder(root: str | os.PathLike) -> ImageFolder:
    """The folder's classes and images by split (module docstring); UsageError for any layout problem."""
    root = Path(root)
    if not root.is_dir():
        raise UsageError(f"{root}: not a folder; an image folder is ROOT/CLASS/IMAGE")
    top = {p.name for p in root.iterdir() if not p.name.startswith(".") and p.is_dir()}
    has_val = VAL_TREE in top and _is_tree_of_folders(root / VAL_TREE)
    separate_train = TRAIN_TREE in top and top <= {TRAIN_TREE, VAL_TREE}
    train_tree = root / TRAIN_TREE if separate_train else root
    skip = {VAL_TREE} if has_val and not separate_train else set()
    classes = sorted(p.name for p in _class_folders(train_tree, skip))
    train_paths, train_labels, _ = _tree_images(train_tree, root, classes, skip)
    if has_val:
        val_paths, val_labels, _ = _tree_images(root / VAL_TREE, root, classes, set())
        split = f"the {VAL_TREE}/ tree"
    else:
        keys = np.array([zlib.crc32(p.encode("utf-8", "surrogateescape")) for p in train_paths], dtype=np.int64)
        held = in_validation_split(keys, VAL_PER_MILLE)
        labels = np.asarray(train_labels, np.int64)
        val_paths = [p for p, h in zip(train_paths, held) if h]
        train_paths = [p for p, h in zip(train_paths, held) if not h]
        val_labels, train_labels = labels[held].tolist(), labels[~held].tolist()
        split = f"{VAL_PER_MILLE / 10:g}% held out by a hash of each path"
    fingerprint = stat_fingerprint(root, [*train_paths, *val_paths])
    return ImageFolder(root, tuple(classes), ImageSplit(PathTable(train_paths), np.asarray(train_labels, np.int64)),
                       ImageSplit(PathTable(val_paths), np.asarray(val_labels, np.int64)), split, fingerprint)


def verify_image_folder(root: str | os.PathLike) -> tuple[ImageFolder, list[str]]:
    """The folder (its layout checked as when training) and every image it cannot decode."""
    folder = scan_image_folder(root)
    problems = []
    for split in (folder.train, folder.val):
        for name in split.paths:
            try:
                with open_sample_file(folder.root / name) as handle:
                    check_image(handle, str(folder.root / name))
            except BadSample as bad:
                problems.append(str(bad))
    return folder, problems


def summarize_image_folder(root: str | os.PathLike) -> dict:
    folder = scan_image_folder(root)
    counts = np.bincount(np.concatenate([folder.train.labels, folder.val.labels]), minlength=len(folder.classes))
    return {"format": IMAGE_FOLDER, "classes": len(folder.classes),
            "class_names": list(folder.classes[:20]) + (["..."] if len(folder.classes) > 20 else []),
            "images": int(counts.sum()), "train_images": len(folder.train), "val_images": len(folder.val),
            "fewest_per_class": int(counts.min()), "most_per_class": int(counts.max()), "split": folder.split,
            "fingerprint": folder.fingerprint, "fingerprint_covers": STAT_COVERS}


class ImageFolderReader:
    """One split of an image folder for `trainspeed.data.samples.SampleLoader`: `images` uint8
    (3, res, res) decoded as `plan` says, `labels` int64."""

    def __init__(self, folder: ImageFolder, split: str, plan: ImagePlan, seed: int) -> None:
        self.root = folder.root
        ours = folder.split_of(split)
        self.paths, self.labels = ours.paths, ours.labels
        self.plan, self.seed = plan, seed
        self.source = folder.source(split)
        self.layout = {"images": (np.dtype(np.uint8), (3, plan.resolution, plan.resolution)),
                       "labels": (np.dtype(np.int64), ())}

    def __len__(self) -> int:
        return len(self.paths)

    def read(self, index: int, epoch: int, row: dict[str, np.ndarray]) -> None:
        path = self.root / self.paths[index]
        rng = sample_rng(self.seed, epoch, index) if self.plan.train else None
        with open_sample_file(path) as handle:
            decode_image(handle, str(path), self.plan, rng, row["images"])
        row["labels"][...] = self.labels[index]
