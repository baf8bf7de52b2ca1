"""`trainspeed data from-arrays`, then `data verify` and `data inspect`, on a user's own arrays:
from an .npz file or a folder of .npy files, never unpickling, never writing into a folder in use."""

from __future__ import annotations

import json
import pickle
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from child_commands import run_trainspeed

from trainspeed.cli import main


def _arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"tokens": rng.integers(0, 256, (500, 17)).astype(np.uint8), "document": np.arange(500) // 25}


def _one_error_line(capsys) -> str:
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("trainspeed: error: ")
    return line


@pytest.mark.parametrize("source", ["npz", "npy folder"])
def test_from_arrays_then_verify_and_inspect(tmp_path: Path, capsys, source: str) -> None:
    if source == "npz":
        path = tmp_path / "arrays.npz"
        np.savez(path, **_arrays())
    else:
        path = tmp_path / "arrays"
        path.mkdir()
        for name, array in _arrays().items():
            np.save(path / f"{name}.npy", array)
    out = tmp_path / "data"
    assert main(["data", "from-arrays", str(path), "--out", str(out), "--split-by", "document",
                 "--val-fraction", "0.2", "--samples-per-shard", "128"]) == 0
    assert "500 samples" in capsys.readouterr().out
    assert main(["data", "verify", str(out)]) == 0
    assert capsys.readouterr().out.strip() == f"{out}: OK, 4 shards, 500 samples"
    assert main(["data", "inspect", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["format"], summary["shards"], summary["samples"]) == ("trainspeed-arrays", 4, 500)
    assert summary["columns"]["tokens"] == {"dtype": "|u1", "shape": [17]}
    assert summary["split"]["by"] == "document"
    assert summary["split"]["train_samples"] + summary["split"]["val_samples"] == 500

    shard = out / "shard-000002.bin"
    data = bytearray(shard.read_bytes())
    data[10] ^= 0xFF
    shard.write_bytes(bytes(data))
    assert main(["data", "verify", str(out)]) == 1
    assert capsys.readouterr().out.splitlines()[0] == (
        f"FAIL {shard}: checksum mismatch (the file changed after it was written)")


def test_a_pickle_is_never_loaded(tmp_path: Path, capsys) -> None:
    marker = tmp_path / "payload-ran"

    class Payload:
        def __reduce__(self):
            return (Path.touch, (marker,))

    disguised = tmp_path / "arrays.npz"
    disguised.write_bytes(pickle.dumps(Payload()))
    objects = tmp_path / "objects"
    objects.mkdir()
    np.save(objects / "column.npy", np.array([Payload()], dtype=object), allow_pickle=True)
    marker.unlink(missing_ok=True)  # np.save pickled the payload; unpickling it would touch the marker
    for source, said in ((disguised, "not a numpy array file (.npy) or an archive of them (.npz)"),
                         (objects, "an array of dtype |O; columns hold numbers or booleans only (arrays of Python "
                                   "objects are never unpickled)"),
                         (objects / "column.npy", "one array, not an .npz")):
        assert main(["data", "from-arrays", str(source), "--out", str(tmp_path / "out")]) == 2
        line = _one_error_line(capsys)
        assert said in line and "unsafe" not in line and "pickled (object) data" not in line, line
    assert not marker.exists() and not (tmp_path / "out").exists()


def _source(path: Path, kind: str) -> Path:
    if kind == "folder without arrays":
        path.mkdir()
    elif kind == "one .npy array":
        path = path.with_suffix(".npy")
        np.save(path, np.zeros(3))
    elif kind == "damaged zip":
        path.write_bytes(b"PK\x03\x04 truncated")
    return path


@pytest.mark.parametrize(("kind", "message"), [
    ("missing", "no such file or folder"),
    ("folder without arrays", "a folder without .npy files"),
    ("one .npy array", "one array, not an .npz"),
    ("damaged zip", "a damaged .npz archive (BadZipFile"),
])
def test_a_source_that_is_not_arrays_is_one_line(tmp_path: Path, capsys, kind, message) -> None:
    source = _source(tmp_path / "source", kind)
    assert main(["data", "from-arrays", str(source), "--out", str(tmp_path / "out")]) == 2
    assert message in _one_error_line(capsys)
    assert not (tmp_path / "out").exists()


def test_an_out_in_use_is_never_written_into(tmp_path: Path, capsys) -> None:
    np.savez(tmp_path / "arrays.npz", **_arrays())
    out = tmp_path / "data"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert main(["data", "from-arrays", str(tmp_path / "arrays.npz"), "--out", str(out)]) == 2
    assert "holds files of something else (notes.txt), not a dataset of `trainspeed data from-arrays`" \
        in _one_error_line(capsys)
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


@pytest.mark.e2e
@pytest.mark.parametrize("kind", ["fifo", "symlink-to-dev-zero"])
def test_an_npy_that_is_no_regular_file_is_one_line_never_a_hang(tmp_path: Path, kind: str) -> None:
    """A FIFO named x.npy once hung the command for ever (a subprocess with a deadline)."""
    import os

    folder = tmp_path / "arrays"
    folder.mkdir()
    np.save(folder / "a.npy", np.arange(4))
    if kind == "fifo":
        os.mkfifo(folder / "x.npy")
    else:
        (folder / "x.npy").symlink_to("/dev/zero")
    result = run_trainspeed("data", "from-arrays", str(folder), "--out", str(tmp_path / "out"), timeout=60)
    what = "a FIFO (named pipe)" if kind == "fifo" else "a character device"
    assert result.returncode == 2 and result.stderr == f"trainspeed: error: {folder / 'x.npy'}: is {what}, not a regular file\n"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("content", [b"just some text\nof a file\n", bytes(range(256)) * 8], ids=["text", "random"])
def test_a_file_that_is_no_array_file_is_named_as_such_with_no_advice_to_unpickle(
        tmp_path: Path, capsys, content: bytes) -> None:
    source = tmp_path / "arrays.npz"
    source.write_bytes(content)
    assert main(["data", "from-arrays", str(source), "--out", str(tmp_path / "out")]) == 2
    line = _one_error_line(capsys)
    assert line == f"trainspeed: error: {source}: not a numpy array file (.npy) or an archive of them (.npz); save " \
                   "arrays with np.save or np.savez"


def test_a_header_that_declares_more_than_its_member_holds_is_refused_before_reading(tmp_path: Path, capsys) -> None:
    """An .npz member whose header says 2^40 float64 values in a few bytes: refused from the
    header and the zip directory, before anything is decompressed."""
    import zipfile

    header = np.lib.format.header_data_from_array_1_0(np.zeros(3))
    header["shape"] = (2**40,)
    member = __import__("io").BytesIO()
    np.lib.format.write_array_header_1_0(member, header)
    member.write(np.zeros(3).tobytes())
    source = tmp_path / "lies.npz"
    with zipfile.ZipFile(source, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("x.npy", member.getvalue())
    assert main(["data", "from-arrays", str(source), "--out", str(tmp_path / "out")]) == 2
    line = _one_error_line(capsys)
    assert "member 'x.npy': declares an array of <f8 [1099511627776] (8,796,093,022,208 bytes) but holds 24 bytes" in line
    assert not (tmp_path / "out").exists()


def _peak_allocated_mib(*argv: str) -> float:
    """The most memory `trainspeed ARGV` held allocated at once (Python objects and numpy arrays
    allocated while it ran), run in this process with its imports done."""
    tracemalloc.start()
    try:
        assert main(list(argv)) == 0
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def test_a_highly_compressed_member_is_streamed_into_shards_never_decompressed_whole(tmp_path: Path) -> None:
    """64 MiB of zeros deflate to a few hundred KB; reading the member whole holds 64 MiB,
    streaming it a shard at a time about a shard's size (here 4 MiB)."""
    source = tmp_path / "large.npz"
    np.savez_compressed(source, x=np.zeros((8192, 1024), dtype=np.float64))
    assert source.stat().st_size < 2**20
    peak = _peak_allocated_mib("data", "from-arrays", str(source), "--out", str(tmp_path / "large"),
                               "--samples-per-shard", "512")
    assert peak < 32, f"{peak:.0f} MiB held at once: the member was read whole"
    assert main(["data", "verify", str(tmp_path / "large")]) == 0


def test_inspect_shows_terminal_escape_codes_in_an_index_escaped_never_raw(tmp_path: Path, capsys) -> None:
    """Column names (and any other text) of an index are someone else's: ESC [2J would clear the
    terminal, ESC ]0; retitle it."""
    out = tmp_path / "data"
    assert main(["data", "from-arrays", str(_npz(tmp_path)), "--out", str(out)]) == 0
    index = json.loads((out / "index.json").read_text())
    index["columns"] = {"\x1b[2Jtokens": index["columns"]["tokens"], **{k: v for k, v in index["columns"].items()
                                                                        if k != "tokens"}}
    index["note\x1b]0;owned\x07"] = "\x1b[31mred"
    (out / "index.json").write_text(json.dumps(index))
    capsys.readouterr()
    assert main(["data", "inspect", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "\x1b" not in printed and "\x07" not in printed
    assert "\\x1b[2Jtokens" in printed and "note\\x1b]0;owned\\x07" in printed


def _npz(folder: Path) -> Path:
    path = folder / "arrays.npz"
    np.savez(path, **_arrays())
    return path


def _npy_bytes(header: str, version: int = 1) -> bytes:
    """An .npy file's magic, version and header as written by hand: what a damaged or foreign file
    holds where numpy's header would be."""
    text = header.encode("latin1")
    return b"\x93NUMPY" + bytes([version, 0]) + len(text).to_bytes(2 if version == 1 else 4, "little") + text


@pytest.mark.parametrize(("content", "said"), [
    (b"plain text, no array", "not a numpy array file (.npy) or an archive of them (.npz)"),
    (_npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", version=4),
     "numpy array format version 4, which this trainspeed does not read"),
    (b"\x93NUMPY\x02\x00" + (1 << 30).to_bytes(4, "little"),
     "an array header of 1073741824 bytes, far more than numpy writes; not an array file"),
    (_npy_bytes("{'descr': '<f8', 'fortran_order'"), "a damaged array header (not the dictionary numpy writes)"),
    (_npy_bytes("[1, 2, 3]"), "a damaged array header (not the dictionary numpy writes)"),
    (_npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (-1,), }"), "a damaged array header (shape (-1,))"),
    (_npy_bytes("{'descr': 'no-such-type', 'fortran_order': False, 'shape': (3,), }"),
     "an array of dtype no-such-type; columns hold numbers or booleans only"),
], ids=["no-magic", "version-4", "huge-header", "unparsable-header", "not-a-dict", "negative-shape", "unknown-dtype"])
def test_a_damaged_npy_header_is_one_line_naming_the_file(tmp_path: Path, capsys, content: bytes, said: str) -> None:
    """The header is parsed by hand (numpy's loader would suggest unpickling): every way it can be
    wrong is refused before a byte of data is read."""
    folder = tmp_path / "arrays"
    folder.mkdir()
    (folder / "x.npy").write_bytes(content)
    assert main(["data", "from-arrays", str(folder), "--out", str(tmp_path / "out")]) == 2
    assert _one_error_line(capsys).startswith(f"trainspeed: error: {folder / 'x.npy'}: {said}")
    assert not (tmp_path / "out").exists()


def test_a_column_of_empty_rows_is_written_and_verifies(tmp_path: Path, capsys) -> None:
    """A (5, 0) array holds no bytes, which cannot be memory-mapped: it is read as zeros of its shape."""
    folder = tmp_path / "arrays"
    folder.mkdir()
    np.save(folder / "a.npy", np.arange(5))
    np.save(folder / "nothing.npy", np.zeros((5, 0)))
    out = tmp_path / "data"
    assert main(["data", "from-arrays", str(folder), "--out", str(out)]) == 0
    assert main(["data", "verify", str(out)]) == 0
    capsys.readouterr()
    assert main(["data", "inspect", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["samples"] == 5 and summary["columns"]["nothing"] == {"dtype": "<f8", "shape": [0]}


def test_npz_rows_read_in_any_order_are_the_arrays_rows(tmp_path: Path) -> None:
    """A member is a stream: rows after the ones read are reached by reading on, earlier ones by
    opening the member again."""
    from trainspeed.data.arrays import load_arrays

    array = np.arange(3000 * 4, dtype=np.int32).reshape(3000, 4)
    np.savez_compressed(tmp_path / "arrays.npz", x=array)
    column = load_arrays(tmp_path / "arrays.npz")["x"]
    for start, stop in ((2000, 2010), (10, 20), (2990, 3100), (0, 1)):
        assert np.array_equal(column.rows(start, stop), array[start:stop]), (start, stop)


def _zip_directory_entry(data: bytes) -> int:
    """Where the (only) central directory entry of a zip file starts."""
    return data.index(b"PK\x01\x02")


def _damaged_npz(path: Path, damage: str) -> Path:
    import io
    import struct
    import zipfile

    array = np.arange(4096, dtype=np.int64)
    if damage == "a changed byte":  # a stored member whose CRC fails once it is read to its end
        np.savez(path, x=array)
        data = bytearray(path.read_bytes())
        data[data.index(array[100:108].tobytes())] ^= 1
    elif damage in ("a damaged deflate stream", "a damaged lzma stream"):
        member = io.BytesIO()
        np.save(member, array)
        method = zipfile.ZIP_DEFLATED if damage == "a damaged deflate stream" else zipfile.ZIP_LZMA
        with zipfile.ZipFile(path, "w", compression=method) as archive:
            archive.writestr("x.npy", member.getvalue())
        data = bytearray(path.read_bytes())
        start = data.index(b"x.npy") + len("x.npy")  # the compressed bytes follow the local header's name
        for offset in range(start + 8, start + 48):
            data[offset] ^= 0x55
    elif damage == "a short member":  # the zip directory says the member is longer than its data
        member = io.BytesIO()
        np.save(member, np.arange(100, dtype=np.int64))
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("x.npy", member.getvalue()[:-400])
        data = bytearray(path.read_bytes())
        struct.pack_into("<I", data, _zip_directory_entry(data) + 24, len(member.getvalue()))
    else:  # "an encrypted member": the directory's flag says a password is needed
        np.savez(path, x=array)
        data = bytearray(path.read_bytes())
        data[_zip_directory_entry(data) + 8] |= 1
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize(("damage", "said"), [
    ("a changed byte", "damaged (BadZipFile: Bad CRC-32 for file 'x.npy')"),
    ("a damaged deflate stream", "damaged (error: Error -3 while decompressing data"),
    ("a damaged lzma stream", "damaged (LZMAError: "),
    ("a short member", "ends before the array its header declares (truncated)"),
    ("an encrypted member", "damaged (RuntimeError: "),
])
def test_a_damaged_npz_member_is_one_line_and_leaves_out_as_it_was(tmp_path: Path, capsys, damage: str,
                                                                   said: str) -> None:
    """Damage found while a member's header or rows are read (zlib's and lzma's errors are no
    OSError, and once escaped as tracebacks): one line, and --out holds nothing of the set."""
    source = _damaged_npz(tmp_path / "arrays.npz", damage)
    out = tmp_path / "out"
    assert main(["data", "from-arrays", str(source), "--out", str(out)]) == 2
    line = _one_error_line(capsys)
    assert line.startswith(f"trainspeed: error: {source}: member 'x.npy': {said}"), line
    assert not out.exists() or list(out.iterdir()) == []


def test_an_npz_member_that_is_no_array_or_in_fortran_order_is_refused(tmp_path: Path, capsys) -> None:
    import zipfile

    notes = tmp_path / "notes.npz"
    with zipfile.ZipFile(notes, "w") as archive:
        archive.writestr("notes.txt", "not an array")
    fortran = tmp_path / "fortran.npz"
    np.savez(fortran, x=np.asfortranarray(np.arange(12.0).reshape(4, 3)))
    for source, said in ((notes, "member 'notes.txt' is not an array (an .npz holds only NAME.npy members"),
                         (fortran, "member 'x.npy': stored in Fortran order, which cannot be read row by row; "
                                   "save it with np.savez(path, name=np.ascontiguousarray(array))")):
        assert main(["data", "from-arrays", str(source), "--out", str(tmp_path / "out")]) == 2
        assert _one_error_line(capsys).startswith(f"trainspeed: error: {source}: {said}")
    assert not (tmp_path / "out").exists()
