"""`trainspeed export` refuses, before it traces a program, what would fail once every program was
traced: an `--out` under a file, a name longer than the file system takes, batch sizes whose
synthetic batch does not fit in memory or whose dimension JAX cannot index. A long `--out` the
file system takes is written (its staging folder has a short name of its own)."""

from __future__ import annotations

from pathlib import Path

import pytest
from exported_runs import EXPORT

from trainspeed.exported.out_folder import write_folder
from trainspeed.targets.jaxjit import JaxTarget

pytestmark = [
    pytest.mark.skipif(JaxTarget.unavailable_reason() is not None, reason=str(JaxTarget.unavailable_reason())),
    pytest.mark.filterwarnings("ignore:Explicitly requested dtype int64"),
]


@pytest.fixture
def nothing_traced(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tracing a program fails the test: a refusal must come first."""
    def traced(*args, **kwargs):
        raise AssertionError("a program was traced before the refusal")

    monkeypatch.setattr("trainspeed.exported.write._exported_step", traced)


def test_an_out_below_a_file_is_refused_before_anything_is_traced(tmp_path: Path, cli_error, nothing_traced) -> None:
    (tmp_path / "afile").write_text("a file")
    error = cli_error(*EXPORT, "--out", str(tmp_path / "afile" / "sub"))
    assert f"{tmp_path / 'afile'} is a file, not a folder" in error
    assert (tmp_path / "afile").read_text() == "a file"


def test_a_name_longer_than_the_file_system_takes_is_refused_before_anything_is_traced(
        tmp_path: Path, cli_error, nothing_traced) -> None:
    error = cli_error(*EXPORT, "--out", str(tmp_path / ("x" * 300)))
    assert "is 300 bytes, and this file system takes names of at most 255; give a shorter --out" in error
    assert list(tmp_path.iterdir()) == []


def test_a_250_character_out_is_written_whole(tmp_path: Path) -> None:
    """The name an export's temporary folder had (`.NAME.` and 8 more characters) was longer than
    255 for a 250-character `--out`."""
    out = tmp_path / ("y" * 250)
    write_folder(out, {"manifest.json": b"{}\n"})
    assert [path.name for path in tmp_path.iterdir()] == [out.name]
    assert (out / "manifest.json").read_bytes() == b"{}\n"


@pytest.mark.parametrize("flags, says", [
    (["--batch-sizes", "2^30"], "the synthetic batch of 1,073,741,824 samples (the largest --batch-sizes) takes"),
    (["--batch-sizes", "2^40", "--batch-rows", "8"], "--batch-sizes: 1,099,511,627,776 is more than 2,147,483,647"),
], ids=["its-batch-in-memory", "a-dimension-jax-indexes"])
def test_batch_sizes_that_cannot_be_exported_are_refused_before_anything_is_traced(
        tmp_path: Path, cli_error, nothing_traced, flags: list[str], says: str) -> None:
    out = tmp_path / "out"
    assert says in cli_error(*EXPORT[:-2], *flags, "--out", str(out))
    assert not out.exists()
