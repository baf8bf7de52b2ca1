"""Exporting a step and training it as a user would, and reading what that wrote (shared by
tests/exported)."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import zipfile
from pathlib import Path

import numpy as np

BATCH = 8
EXPORT = ["export", "--workload", "mahjong", "--size", "tiny", "--target", "jax:jit:fp32", "--platform", "cpu",
          "--batch-sizes", f"{BATCH},16"]
GOAL = "val/accuracy>=0.99"
"""A goal the short runs never meet: their checkpoints carry the goal's watch."""


def train_args(exported: Path, data: Path, out: Path, *extra: str, steps: int = 20) -> list[str]:
    """`trainspeed train --exported` of `steps` steps of batch 8, a checkpoint and a validation
    every 10 steps, every checkpoint kept."""
    return ["train", "--exported", str(exported), "--data", str(data), "--batch-size-per-device", str(BATCH),
            "--steps", str(steps), "--checkpoint-every", "10", "--keep-checkpoints", "0", "--eval-every", "10",
            "--eval-batches", "2", "--log-every", "5", "--until", GOAL, "--no-progress", "--out", str(out), *extra]


def copy_of(folder: Path, where: Path) -> Path:
    shutil.copytree(folder, where)
    return where


def snapshot(folder: Path) -> dict[str, tuple]:
    """Every file under `folder` (the lock file aside) by its path, with its size, modification time
    and (of one under 16 MiB: a test's sparse file is not read) sha256: what a refusal must leave as
    it was."""
    def described(path: Path) -> tuple:
        status = path.stat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if status.st_size < 1 << 24 else None
        return status.st_size, status.st_mtime_ns, digest

    return {str(path.relative_to(folder)): described(path)
            for path in sorted(folder.rglob("*")) if path.is_file() and path.name != ".lock"}


def rows(run: Path, kind: str) -> list[dict]:
    return [row for row in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if row["kind"] == kind]


def edit_manifest(folder: Path, edit) -> Path:
    """`edit(manifest)` applied to the folder's manifest (a dict), written back."""
    path = folder / "manifest.json"
    manifest = json.loads(path.read_text())
    edit(manifest)
    path.write_text(json.dumps(manifest))
    return folder


def declare_file(folder: Path, name: str) -> None:
    """The manifest's size and sha256 of `name` made those of the file as it is now (a folder
    whose files were changed and whose manifest was made to agree: only its contents can tell)."""
    data = (folder / name).read_bytes()
    digest = hashlib.sha256(data).hexdigest()

    def agree(manifest: dict) -> None:
        manifest["file_bytes"][name] = len(data)
        if name == "state.npz":
            manifest["state_sha256"] = digest
        elif name == "batch.npz":
            manifest["batch_sha256"] = digest

    edit_manifest(folder, agree)


def npz_members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {info.filename: archive.read(info) for info in archive.infolist()}


def write_npz_members(path: Path, members: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def declaring(shape: tuple[int, ...], dtype: str = "<f4") -> bytes:
    """An npy member whose header declares `shape` and which holds 64 bytes of data."""
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": dtype, "fortran_order": False, "shape": shape})
    return buffer.getvalue() + bytes(64)


def rewrite_checkpoint(path: Path, edit_position=None, members: dict[str, bytes] | None = None) -> None:
    """The checkpoint `path` with its position edited (`edit_position(position)`, a dict) and
    members replaced, and its checksum made to agree: a file whose sha256 holds, which only its
    contents can tell from the trainer's own."""
    contents = npz_members(path)
    if edit_position is not None:
        position = json.loads(np.lib.format.read_array(io.BytesIO(contents["position_json.npy"])).tobytes())
        edit_position(position)
        buffer = io.BytesIO()
        np.save(buffer, np.frombuffer(json.dumps(position).encode(), dtype=np.uint8))
        contents["position_json.npy"] = buffer.getvalue()
    contents.update(members or {})
    write_npz_members(path, contents)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    (path.parent / f"{path.name}.sha256").write_text(f"{digest}  {path.name}\n")
