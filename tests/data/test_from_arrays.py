"""`trainspeed data from-arrays`, then `data verify` and `data inspect`, on a user's own arrays:
from an .npz file or a folder of .npy files, never unpickling, never writing into a folder in use."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest

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


def _trainspeed(*argv: str, timeout: float = 120):
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "trainspeed", *argv], cwd=root, env=env, capture_output=True,
                          text=True, timeout=timeout)


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
    result = _trainspeed("data", "from-arrays", str(folder), "--out", str(tmp_path / "out"), timeout=60)
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
    """The most memory `trainspeed ARGV` held allocated at once (Python objects and numpy arrays,
    traced from after the imports), run in a process of its own."""
    code = ("import sys, tracemalloc\nimport trainspeed.data.dataset\nfrom trainspeed.cli import main\n"
            "tracemalloc.start()\ncode = main(sys.argv[1:])\nprint(tracemalloc.get_traced_memory()[1])\nsys.exit(code)")
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    result = subprocess.run([sys.executable, "-c", code, *argv], cwd=root, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    return int(result.stdout.strip().splitlines()[-1]) / 2**20


def test_a_highly_compressed_member_is_streamed_into_shards_never_decompressed_whole(tmp_path: Path) -> None:
    """256 MiB of zeros deflate to a few hundred KB; reading the member whole holds 256 MiB,
    streaming it a shard at a time about a shard's size (here 8 MiB)."""
    source = tmp_path / "large.npz"
    np.savez_compressed(source, x=np.zeros((32768, 1024), dtype=np.float64))
    assert source.stat().st_size < 2**20
    peak = _peak_allocated_mib("data", "from-arrays", str(source), "--out", str(tmp_path / "large"),
                               "--samples-per-shard", "1024")
    assert peak < 64, f"{peak:.0f} MiB held at once: the member was read whole"
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
