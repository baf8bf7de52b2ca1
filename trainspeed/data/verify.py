"""Check a shard folder against its index: files present, sizes, checksums, sample counts.

`verify_shards` collects every problem (naming the shard file) instead of stopping at the first,
so one run tells the whole damage. What the values must satisfy (Mahjong: legal actions, finite
features) is the workload's to say: it passes a `ColumnCheck`, run on every shard whose bytes match
the index's checksum.

`index_problems` is the part that needs no reading of shard bytes (the index agrees with itself and
with the schema: sample totals, sizes, no shard listed twice); the loader runs it too, so a set that
`verify` refuses for its index never trains.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from trainspeed.data.shards import (
    INDEX_NAME,
    ShardColumns,
    ShardSchema,
    file_sha256,
    open_shard,
    read_index,
    shard_size_problem,
)

ColumnCheck = Callable[[Path, dict, ShardColumns], list[str]]
"""(shard file, its index entry, its memory-mapped columns) -> problems, each naming the file."""


@dataclass
class VerifyReport:
    shards: int = 0
    samples: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def is_ok(self) -> bool:
        return not self.problems


def shard_file_problem(path: Path, info: dict, schema: ShardSchema, trust_unchanged: bool = False) -> str | None:
    """Why the shard's bytes cannot be trusted (missing, wrong size, changed), or None.

    With `trust_unchanged` a file whose inode change time is still the one recorded when it was
    written is not hashed again (a reader checking every shard once per run); `verify` hashes always."""
    problem = shard_size_problem(path, schema.section_offsets(int(info["samples"]))["end"])
    if problem is not None:
        return problem
    if trust_unchanged and info.get("ctime_ns") == path.stat().st_ctime_ns:
        return None
    try:
        digest = file_sha256(path)
    except OSError as error:
        return f"{path}: cannot read ({error.strerror})"
    if digest != info["sha256"]:
        return f"{path}: checksum mismatch (the file changed after it was written)"
    return None


def index_problems(folder: Path, index: dict, schema: ShardSchema) -> list[str]:
    """Where the index (as `read_index` returned it) disagrees with itself or its schema."""
    index_path = folder / INDEX_NAME
    problems, seen = [], set()
    for info in index["shards"]:
        if info["file"] in seen:
            problems.append(f"{index_path}: lists {info['file']} twice (its samples would be read twice)")
        seen.add(info["file"])
        expected = schema.section_offsets(info["samples"])["end"]
        if info["nbytes"] != expected:
            problems.append(f"{index_path}: says {info['file']} has {info['nbytes']} bytes; "
                            f"{info['samples']} samples of this schema take {expected}")
    total = sum(info["samples"] for info in index["shards"])
    if total != index["samples"]:
        problems.append(f"{index_path}: says {index['samples']} samples, shards hold {total}")
    return problems


def verify_shards(folder: str | os.PathLike, schema: ShardSchema, check_columns: ColumnCheck | None = None) -> VerifyReport:
    """Every problem of the folder, each naming its file; raises UsageError only for a bad index."""
    folder = Path(folder)
    index = read_index(folder, schema)
    report = VerifyReport(shards=len(index["shards"]), samples=sum(info["samples"] for info in index["shards"]))
    report.problems.extend(index_problems(folder, index, schema))
    for info in index["shards"]:
        path = folder / info["file"]
        problem = shard_file_problem(path, info, schema)
        if problem is not None:
            report.problems.append(problem)
        elif check_columns is not None:
            report.problems.extend(check_columns(path, info, open_shard(folder, info, schema)))
    return report
