"""WebDataset tar shards read where they lie, with the standard library's `tarfile`.

    shards/000000.tar ... (or one .tar)   members KEY.jpg|png|webp + KEY.cls (a class number as text),
                                          or KEY.npy (one window of token ids); KEY may hold folders
    shards/train-*.tar + shards/val-*.tar the splits by name; otherwise 5% of the samples held out by position

A sample is the run of consecutive members sharing a KEY (the name up to the first dot of its last
part), as WebDataset writes them. Every shard's headers are read once when it is opened (512 bytes
a member, the data skipped; the class files, a few bytes each, read on the way), which gives each
member's offset and size: samples are then read with one `pread` each, by any worker, at any
position. So the order is the global one every loader follows (`trainspeed.data.order`, the
chunked order of shards: runs of neighbouring samples of one tar, shuffled, each rank's slice read
forward through its tar) and a resumed run reads exactly what it would have, which a stream through
`webdataset`'s pipeline (shard shuffling plus a shuffle buffer) does not give.

Refused before training: a shard that is not a regular file (a FIFO named like one: opened
without blocking, `trainspeed.user_files`), a compressed tar (no random access), a tar that ends
early (a tar ends with two 512-byte blocks of zeros; one without them, or whose last member runs
past the end of the file, was cut: it is refused naming the samples it holds, never read as a
shorter set), a member that is not a regular file (a link, a device), whose name has no extension
or that is larger than a sample may be (`trainspeed.data.sample_files`), a sample without an image
and a class (or a token window), a class that is not a class number.
"""

from __future__ import annotations

import os
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from trainspeed.data.arrays import read_header
from trainspeed.data.base import LoaderConfig
from trainspeed.data.decode import BadSample, ImagePlan, check_image, decode_image, sample_rng
from trainspeed.data.ids import ID_LIMIT
from trainspeed.data.in_place_report import InPlaceReport
from trainspeed.data.labels import class_number_problem
from trainspeed.data.order import VAL_PER_MILLE, chunk_bounds, chunked_order, in_validation_split
from trainspeed.data.sample_files import member_size_problem
from trainspeed.data.sources import IMAGE_SUFFIXES, WEBDATASET, DataSource, stat_fingerprint
from trainspeed.errors import UsageError
from trainspeed.user_files import FileRefused, open_regular

IMAGE_EXTENSIONS = tuple(suffix.lstrip(".") for suffix in IMAGE_SUFFIXES)
LABEL_EXTENSION = "cls"
TOKEN_EXTENSION = "npy"
MAX_LABEL_BYTES = 32
END_OF_ARCHIVE = bytes(2 * tarfile.BLOCKSIZE)
"""What every tar writer puts after the last member: two blocks of zeros."""
COVERS = "relative paths, sizes and modification times (ns) of the tar files"


@dataclass(frozen=True)
class Members:
    """Per sample, where one kind of member lies in its tar (-1: the sample has none)."""

    offsets: np.ndarray
    sizes: np.ndarray


@dataclass(frozen=True)
class TarShards:
    root: Path
    shards: tuple[Path, ...]
    split_of_shard: tuple[str | None, ...]
    """"train" or "val" by the shard's name, or None (the 5% split by position)."""
    keys: tuple[str, ...]
    shard_of: np.ndarray  # (samples,) int32
    images: Members
    tokens: Members
    labels: np.ndarray  # (samples,) int64, -1 where the sample has no class file
    fingerprint: str

    def names(self, sample: int) -> str:
        return f"{self.shards[int(self.shard_of[sample])]}:{self.keys[sample]}"

    def split_samples(self, split: str) -> np.ndarray:
        """The samples of a split, in tar order."""
        if any(name is not None for name in self.split_of_shard):
            in_split = np.array([name == split for name in self.split_of_shard], dtype=bool)
            return np.flatnonzero(in_split[self.shard_of])
        held = in_validation_split(np.arange(len(self.keys), dtype=np.int64), VAL_PER_MILLE)
        return np.flatnonzero(held if split == "val" else ~held)


def _shard_split(path: Path) -> str | None:
    name = path.name.lower()
    if name.startswith("train"):
        return "train"
    if name.startswith(("val", "validation", "test")):
        return "val"
    return None


def _split_key(name: str) -> tuple[str, str]:
    folder, _, base = name.rpartition("/")
    key, dot, extension = base.partition(".")
    return (f"{folder}/{key}" if folder else key), (extension.lower() if dot else "")


def _ends_early(path: Path, samples: int, why: str) -> UsageError:
    return UsageError(f"{path}: ends early after {samples} samples ({why}); the file was cut (a copy or download "
                      "stopped, or it is still being written): copy it again")


def _index_shard(path: Path, number: int, rows: dict[str, list]) -> None:
    """Append the samples of one tar to `rows` (module docstring: what is refused)."""
    with open_regular(path) as raw:
        size = os.fstat(raw.fileno()).st_size
        magic = raw.read(262)
        if magic[:2] in (b"\x1f\x8b", b"BZ", b"\xfd7") or magic[:3] == b"\x28\xb5\x2f":
            raise UsageError(f"{path}: a compressed tar; samples are read at their offsets, so shards are plain "
                             "(uncompressed) tar files")
        raw.seek(0)
        try:
            archive = tarfile.open(fileobj=raw, mode="r:")
        except tarfile.TarError as error:
            raise UsageError(f"{path}: not a tar file ({error})") from None
        except OSError as error:
            raise UsageError(f"{path}: cannot be read ({error.strerror})") from None
        with archive:
            _index_members(path, archive, size, number, rows)
            end = archive.offset
        marker = os.pread(raw.fileno(), len(END_OF_ARCHIVE), end)
    if marker != END_OF_ARCHIVE:
        raise _ends_early(path, rows["shard"].count(number), _marker_problem(marker, end))


def _marker_problem(found: bytes, at: int) -> str:
    """What lies at byte `at` of a tar, where its end-of-archive marker (two zero blocks) should."""
    if not found:
        return f"nothing after byte {at:,}, where its end-of-archive marker should be"
    if not found.strip(b"\0"):
        return f"its end-of-archive marker at byte {at:,} is cut short ({len(found)} of {len(END_OF_ARCHIVE)} bytes)"
    return f"at byte {at:,} neither a member's header nor the end-of-archive marker (a damaged header)"


def _index_members(path: Path, archive: tarfile.TarFile, size: int, number: int, rows: dict[str, list]) -> None:
    current, last = None, None
    while True:
        try:
            member = archive.next()
        except tarfile.ReadError as error:
            if "unexpected end of data" in str(error):  # the padding to 512 bytes after the last member's data
                raise _ends_early(path, rows["shard"].count(number), f"cut in the padding after member {last!r}") \
                    from None
            raise UsageError(f"{path}: a damaged tar ({error})") from None
        except tarfile.TarError as error:
            raise UsageError(f"{path}: a damaged tar ({error})") from None
        if member is None:
            return
        archive.members = []  # the index keeps arrays, not a TarInfo per member
        last = member.name
        if member.isdir():
            continue
        if not member.isfile():
            raise UsageError(f"{path}: member {member.name!r} is not a regular file (a link or a device), not a "
                             "sample; shards hold KEY.jpg + KEY.cls (or KEY.npy) files only")
        key, extension = _split_key(member.name)
        if not extension or not key:
            raise UsageError(f"{path}: member {member.name!r} has no KEY.EXTENSION name, so belongs to no sample; "
                             "shards hold KEY.jpg + KEY.cls (or KEY.npy) files only")
        if key != current:
            current = key
            rows["keys"].append(key)
            rows["shard"].append(number)
            for kind in ("image", "token"):
                rows[f"{kind}_offset"].append(-1)
                rows[f"{kind}_size"].append(-1)
            rows["label"].append(-1)
        if member.offset_data + member.size > size:
            raise _ends_early(path, rows["shard"].count(number) - 1,
                              f"member {member.name!r} is cut short: {size - member.offset_data:,} of its "
                              f"{member.size:,} bytes")
        too_large = member_size_problem(member.size)
        if too_large is not None:
            raise UsageError(f"{path}: member {member.name!r} {too_large}; shards hold one sample's image or "
                             "window per member")
        if extension in IMAGE_EXTENSIONS:
            rows["image_offset"][-1], rows["image_size"][-1] = member.offset_data, member.size
        elif extension == TOKEN_EXTENSION or extension.endswith("." + TOKEN_EXTENSION):
            rows["token_offset"][-1], rows["token_size"][-1] = member.offset_data, member.size
        elif extension == LABEL_EXTENSION:
            rows["label"][-1] = _label(path, member, archive)


def _label(path: Path, member: tarfile.TarInfo, archive: tarfile.TarFile) -> int:
    handle = archive.extractfile(member)
    text = handle.read(MAX_LABEL_BYTES + 1) if handle is not None else b""
    problem = class_number_problem(text, MAX_LABEL_BYTES)
    if problem is not None:
        raise UsageError(f"{path}: member {member.name!r} holds {text[:20]!r}{'...' if len(text) > 20 else ''}, "
                         f"{problem}")
    return int(text.strip())


def open_tar_shards(path: str | os.PathLike) -> TarShards:
    """The samples of one .tar or a folder of them, indexed from their headers."""
    root = Path(path)
    shards = tuple(sorted(p for p in root.iterdir() if p.suffix.lower() == ".tar")) if root.is_dir() else (root,)
    if not shards:
        raise UsageError(f"{root}: no .tar shards")
    rows: dict[str, list] = {name: [] for name in ("keys", "shard", "image_offset", "image_size", "token_offset",
                                                   "token_size", "label")}
    for number, shard in enumerate(shards):
        _index_shard(shard, number, rows)
    if not rows["keys"]:
        raise UsageError(f"{root}: the tar shards hold no samples")
    base = root if root.is_dir() else root.parent
    splits = tuple(_shard_split(s) for s in shards)
    if any(s is not None for s in splits) and "train" not in splits:
        raise UsageError(f"{root}: validation shards but no train* shards; name the training shards train-*.tar")

    def array(name: str) -> np.ndarray:
        return np.asarray(rows[name], dtype=np.int64)

    return TarShards(root, shards, splits if "train" in splits else tuple(None for _ in shards), tuple(rows["keys"]),
                     np.asarray(rows["shard"], np.int32), Members(array("image_offset"), array("image_size")),
                     Members(array("token_offset"), array("token_size")), array("label"),
                     stat_fingerprint(base, [s.relative_to(base).as_posix() for s in shards]))


def _missing(shards: TarShards, samples: np.ndarray, present: np.ndarray, needs: str) -> None:
    lacking = samples[~present[samples]]
    if len(lacking):
        raise UsageError(f"{shards.names(int(lacking[0]))}: a member that is not a sample of {needs} "
                         f"({len(lacking)} such samples); every KEY needs {needs}")


class _Reads:
    """Member bytes by `os.pread`, a regular file per shard opened in the process that reads (a
    shard replaced by a FIFO since it was indexed is refused, not waited on)."""

    def __init__(self, shards: TarShards) -> None:
        self.shards = shards
        self._files: dict[int, BinaryIO] = {}
        self._pid = -1

    def read(self, sample: int, members: Members) -> bytes:
        if self._pid != os.getpid():
            self._files, self._pid = {}, os.getpid()
        shard = int(self.shards.shard_of[sample])
        if shard not in self._files:
            try:
                self._files[shard] = open_regular(self.shards.shards[shard])
            except FileRefused as refused:
                raise BadSample(self.shards.names(sample), refused.reason) from None
        size, offset = int(members.sizes[sample]), int(members.offsets[sample])
        data = os.pread(self._files[shard].fileno(), size, offset)
        if len(data) != size:
            raise BadSample(self.shards.names(sample), f"cut short ({len(data)} of {size} bytes)")
        return data

    def __getstate__(self) -> dict:
        return {"shards": self.shards, "_files": {}, "_pid": -1}


class _TarReader:
    def __init__(self, shards: TarShards, split: str) -> None:
        self.shards = shards
        self.samples = shards.split_samples(split)
        self.reads = _Reads(shards)
        per_shard = np.bincount(shards.shard_of, minlength=len(shards.shards))
        self.segment_starts = np.searchsorted(self.samples, np.concatenate([[0], np.cumsum(per_shard)])).astype(np.int64)

    def __len__(self) -> int:
        return len(self.samples)

    def epoch_order(self, config: LoaderConfig, epoch: int) -> np.ndarray:
        """Runs of neighbouring samples of one tar, shuffled (`chunked_order`), so reads go forward."""
        return chunked_order(chunk_bounds(self.segment_starts), len(self.samples), config, epoch)

    def _source(self, details: dict) -> DataSource:
        return DataSource(WEBDATASET, str(self.shards.root), files=len(self.shards.shards), samples=len(self.samples),
                          fingerprint=self.shards.fingerprint, fingerprint_covers=COVERS, details=details)


class TarImageReader(_TarReader):
    """One split's KEY.jpg + KEY.cls samples (as an image folder's: `images`, `labels`)."""

    def __init__(self, shards: TarShards, split: str, plan: ImagePlan, seed: int) -> None:
        super().__init__(shards, split)
        everything = np.arange(len(shards.keys))
        _missing(shards, everything, shards.images.offsets >= 0, "an image (KEY.jpg, .png ...)")
        _missing(shards, everything, shards.labels >= 0, "a class (KEY.cls)")
        self.classes = int(shards.labels.max()) + 1
        self.plan, self.seed = plan, seed
        self.source = self._source({"classes": self.classes})
        self.layout = {"images": (np.dtype(np.uint8), (3, plan.resolution, plan.resolution)),
                       "labels": (np.dtype(np.int64), ())}

    def read(self, index: int, epoch: int, row: dict[str, np.ndarray]) -> None:
        sample = int(self.samples[index])
        name = self.shards.names(sample)
        rng = sample_rng(self.seed, epoch, index) if self.plan.train else None
        decode_image(self.reads.read(sample, self.shards.images), name, self.plan, rng, row["images"])
        row["labels"][...] = self.shards.labels[sample]


def _window(data: bytes, where: str) -> np.ndarray:
    import io

    header = read_header(io.BytesIO(data), where)
    if header.dtype.kind not in "iu" or len(header.shape) != 1 or header.data_offset + header.nbytes != len(data):
        raise UsageError(f"{where}: not a 1-D array of integer ids ({header.dtype} {header.shape})")
    return np.frombuffer(data, dtype=header.dtype, offset=header.data_offset, count=header.shape[0])


class TarTokenReader(_TarReader):
    """One split's KEY.npy windows of exactly `seq` ids: `tokens` (seq,) int64. Every window is read
    once when the shards are opened, for the id range and the lengths."""

    def __init__(self, shards: TarShards, split: str, sequence: int) -> None:
        super().__init__(shards, split)
        everything = np.arange(len(shards.keys))
        _missing(shards, everything, shards.tokens.offsets >= 0, "a token window (KEY.npy)")
        low, high = 0, 0
        for sample in everything:
            window = _window(self.reads.read(int(sample), shards.tokens), shards.names(int(sample)))
            if len(window) != sequence:
                raise UsageError(f"{shards.names(int(sample))}: a window of {len(window)} ids; the model trains on "
                                 f"windows of seq={sequence} (write windows of that length, or set seq=)")
            if window.size:
                low, high = min(low, int(window.min())), max(high, int(window.max()))
        self.id_range = (low, high)
        self.sequence = sequence
        self.source = self._source({"window": sequence})
        self.layout = {"tokens": (np.dtype(np.int64), (sequence,))}

    def read(self, index: int, epoch: int, row: dict[str, np.ndarray]) -> None:
        sample = int(self.samples[index])
        row["tokens"][:] = _window(self.reads.read(sample, self.shards.tokens), self.shards.names(sample))


def verify_tar_shards(path: str | os.PathLike, vocabulary: int | None):
    """The shards' form (as opening them checks it) and every image decoded, or every window's ids
    compared with the vocabulary."""
    shards = open_tar_shards(path)
    reads = _Reads(shards)
    problems: list[str] = []
    everything = np.arange(len(shards.keys))
    if (shards.tokens.offsets >= 0).any() and not (shards.images.offsets >= 0).any():
        _missing(shards, everything, shards.tokens.offsets >= 0, "a token window (KEY.npy)")
        stop = ID_LIMIT if vocabulary is None else min(vocabulary, ID_LIMIT)
        for sample in everything:
            window = _window(reads.read(int(sample), shards.tokens), shards.names(int(sample)))
            if window.size and (int(window.min()) < 0 or int(window.max()) >= stop):
                problems.append(f"{shards.names(int(sample))}: ids from {window.min()} to {window.max()}, outside "
                                f"0..{stop - 1} ({'--vocab' if vocabulary else 'int32'})")
        return InPlaceReport(f"{len(shards.shards)} tar shards, {len(everything):,} token windows", problems)
    if vocabulary is not None:
        raise UsageError(f"--vocab: {path} holds images, not token ids; drop --vocab")
    _missing(shards, everything, shards.images.offsets >= 0, "an image (KEY.jpg, .png ...)")
    _missing(shards, everything, shards.labels >= 0, "a class (KEY.cls)")
    for sample in everything:
        try:
            check_image(reads.read(int(sample), shards.images), shards.names(int(sample)))
        except BadSample as bad:
            problems.append(str(bad))
    return InPlaceReport(f"{len(shards.shards)} tar shards, {len(everything):,} images of "
                         f"{int(shards.labels.max()) + 1} classes", problems)


def summarize_tar_shards(path: str | os.PathLike) -> dict:
    shards = open_tar_shards(path)
    has_images = bool((shards.images.offsets >= 0).any())
    return {"format": WEBDATASET, "shards": len(shards.shards), "samples": len(shards.keys),
            "kind": "images" if has_images else "token windows",
            **({"classes": int(shards.labels.max()) + 1} if has_images else {}),
            "train_samples": len(shards.split_samples("train")), "val_samples": len(shards.split_samples("val")),
            "fingerprint": shards.fingerprint, "fingerprint_covers": COVERS}
