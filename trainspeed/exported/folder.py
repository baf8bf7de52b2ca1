"""An exported folder's files, each read only once it is checked: the manifest (typed, then its
values in their ranges, `trainspeed.exported.manifest_checks`), and every file it names (its size
against the manifest's before a byte is read, then its sha256). A folder is data, never code: a cut,
grown, changed or edited file is one line naming it, not a crash on the device.
"""

from __future__ import annotations

import os
from pathlib import Path

import dacite

from trainspeed.errors import UsageError
from trainspeed.exported.manifest import FORMAT, FORMAT_VERSION, MANIFEST, MAX_MANIFEST_BYTES, Manifest, sha256_of
from trainspeed.exported.manifest_checks import check_manifest
from trainspeed.typed_json import first_line, typed
from trainspeed.user_files import FileRefused, open_regular, read_regular
from trainspeed.user_json import parse_json


def read_manifest(folder: Path) -> Manifest:
    """The folder's manifest, typed and checked (`trainspeed.exported.manifest_checks`); one
    UsageError line for anything that is not one, before anything else of the folder is read."""
    what = f"--exported {folder}"
    if not folder.is_dir():
        raise UsageError(f"{what}: not a folder; give the --out folder of `trainspeed export`")
    try:
        text = read_regular(folder / MANIFEST, f"{what}/{MANIFEST}", MAX_MANIFEST_BYTES)
    except FileRefused as error:
        raise UsageError(f"{error}; give the --out folder of `trainspeed export`") from None
    if len(text) > MAX_MANIFEST_BYTES:
        raise UsageError(f"{what}/{MANIFEST}: over {MAX_MANIFEST_BYTES >> 20} MiB, no manifest is that long")
    try:
        raw = parse_json(text.decode("utf-8"), f"{what}/{MANIFEST}")
    except UnicodeDecodeError:
        raise UsageError(f"{what}/{MANIFEST}: not UTF-8 text") from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise UsageError(f"{what}: {MANIFEST} is not a trainspeed exported-step manifest")
    if raw.get("format_version") != FORMAT_VERSION:
        raise UsageError(f"{what}: manifest format version {raw.get('format_version')!r}, this trainspeed reads "
                         f"{FORMAT_VERSION}; export the step again with this trainspeed")
    try:
        manifest = typed(Manifest, raw)
    except (dacite.DaciteError, TypeError, ValueError) as error:
        raise UsageError(f"{what}/{MANIFEST}: {first_line(error)}; export the step again") from None
    check_manifest(manifest, f"{what}/{MANIFEST}")
    return manifest


def read_checked(folder: Path, name: str, sha256: str, size: int) -> bytes:
    """A file the manifest names, once its size is the manifest's `size` (checked on the open file,
    before a byte is read: a sparse file of 64 GiB is refused, not hashed) and then its sha256."""
    if "/" in name or name.startswith(".") or not name:
        raise UsageError(f"--exported {folder}: the manifest names {name!r}, not a file of the folder")
    what = f"--exported {folder}/{name}"
    try:
        with open_regular(folder / name, what) as handle:
            found = os.fstat(handle.fileno()).st_size
            if found != size:
                raise UsageError(f"{what}: {found:,} bytes, and the manifest says {size:,} (cut, grown or "
                                 "changed since it was exported); export the step again")
            data = handle.read(size + 1)
    except OSError as error:
        raise UsageError(f"{what}: cannot be read ({error.strerror})") from None
    if len(data) != size:
        raise UsageError(f"{what}: {len(data):,} bytes were read, and the manifest says {size:,} (it changed while "
                         "it was read); export the step again")
    if sha256_of(data) != sha256:
        raise UsageError(f"{what}: its sha256 is not the manifest's (cut or changed since it was "
                         "exported); export the step again")
    return data


def check_runtime(manifest: Manifest, folder: Path, jax_version: str, platform: str, workload: str | None) -> None:
    """Refuse, before anything runs, an artifact of another JAX, platform or workload."""
    what = f"--exported {folder}"
    if manifest.jax_version != jax_version:
        raise UsageError(f"{what}: exported with jax {manifest.jax_version}, and this machine has jax {jax_version}; "
                         f"export it again with jax {jax_version} (jax.export artifacts are read by the JAX that wrote them)")
    if platform not in manifest.platforms:
        raise UsageError(f"{what}: exported for {','.join(manifest.platforms)}, and this machine's JAX runs on {platform}; "
                         f"export it again with --platform {platform}")
    if workload is not None and workload != manifest.workload:
        raise UsageError(f"{what}: holds the steps of workload {manifest.workload!r}, not {workload!r}")
