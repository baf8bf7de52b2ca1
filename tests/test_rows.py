"""Reading result rows: what a row says it is, in one line naming what is wrong, and files that are
no regular files refused before they are read."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest
from child_commands import python_argv, run_child

from trainspeed.errors import UsageError
from trainspeed.machine import Machine
from trainspeed.rows import (
    Batch,
    Loss,
    NonNegative,
    Positive,
    PositiveInterval,
    Provenance,
    Signed,
    Source,
    parse_row,
    read_records,
    record_kind,
    row_record,
)

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("record, said", [
    ({"kind": "mahjong-eval", "schema_version": "2"}, "a row whose schema_version is \"2\", not a whole number"),
    ({"kind": "mahjong-eval", "schema_version": True}, "a row whose schema_version is true, not a whole number"),
    ({"kind": 7, "schema_version": 2}, "a row whose kind is 7, not a name"),
    ({"kind": "bench"}, "a row without its schema_version"),
    ({"timestamp": "2026"}, "a row without a kind and schema_version"),
], ids=["version-a-string", "version-a-bool", "kind-a-number", "no-version", "neither"])
def test_a_row_that_says_its_kind_or_version_wrongly_is_told_what_is_wrong(record: dict, said: str) -> None:
    with pytest.raises(UsageError) as refused:
        record_kind(record, Source("rows.jsonl", 3))
    assert str(refused.value).startswith("rows.jsonl:3: ") and said in str(refused.value)


@pytest.mark.e2e
def test_a_rows_file_that_is_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    """Reading a FIFO waits for a writer that never comes: a subprocess with a deadline."""
    fifo = tmp_path / "rows.jsonl"
    os.mkfifo(fifo)
    code = ("import sys\nfrom trainspeed.errors import UsageError\nfrom trainspeed.rows import read_records\n"
            f"try:\n    read_records({str(fifo)!r})\nexcept UsageError as error:\n    sys.exit(str(error))")
    result = run_child(python_argv("-c", code), timeout=60)
    assert result.returncode == 1 and result.stderr == f"{fifo}: is a FIFO (named pipe), not a regular file\n"


def _nested(depth: int) -> list:
    """A list nested `depth` deep, built without recursion (JSON's reader and writer recurse)."""
    outer = inner = []
    for _ in range(depth):
        inner.append([])
        inner = inner[0]
    return outer


@pytest.mark.parametrize("record, said", [
    ([{"kind": "bench"}], "not a JSON object but list"),
    ({"kind": _nested(100_000), "schema_version": 1}, "a row whose kind is a deeply nested value, not a name"),
], ids=["a-list", "kind-nested-too-deeply"])
def test_a_value_that_is_no_row_is_told_what_it_is(record, said: str) -> None:
    with pytest.raises(UsageError) as refused:
        record_kind(record, Source("rows.jsonl", 3))
    assert str(refused.value).startswith(f"rows.jsonl:3: {said}"), refused.value


@dataclass(frozen=True)
class Reading:
    """A row kind of the tests' own (every reader of rows parses its kind the same way)."""

    KIND: ClassVar[str] = "reading"
    SCHEMA_VERSION: ClassVar[int] = 1

    sensor: str
    values: list[float] | None = None


def test_extra_fields_never_shadow_a_rows_own() -> None:
    with pytest.raises(ValueError, match=r"extra fields \['sensor'\] would shadow the reading row's own fields"):
        row_record(Reading("a"), extra={"sensor": "b", "note": "kept"})
    assert row_record(Reading("a"), extra={"note": "kept"}) == {
        "kind": "reading", "schema_version": 1, "sensor": "a", "values": None, "note": "kept"}


@pytest.mark.parametrize("record, said", [
    ({"kind": "bench", "schema_version": 1, "sensor": "a"}, "a 'bench' row where a 'reading' row belongs"),
    ({"kind": "reading", "schema_version": 1, "values": [1.5]}, "reading row without its field sensor"),
    ({"kind": "reading", "schema_version": 1, "sensor": "a", "values": "many"},
     'reading row: field values must be list[float] | None, not "many"'),
    ({"kind": "reading", "schema_version": 1, "sensor": "a", "values": _nested(100_000)},
     "reading row: field values must be list[float] | None, not a deeply nested value"),
], ids=["another-kind", "missing-field", "mistyped-field", "field-nested-too-deeply"])
def test_a_record_that_does_not_fit_its_row_kind_is_one_line(record: dict, said: str) -> None:
    """A value nested too deeply to write back as JSON once escaped as a RecursionError."""
    with pytest.raises(UsageError) as refused:
        parse_row(Reading, record, Source("rows.jsonl", 3))
    assert str(refused.value) == f"rows.jsonl:3: {said}"


def _sensor_of_version_1(record: dict) -> dict:
    return {key: value for key, value in record.items() if key != "name"} | {"sensor": record.get("name")}


@dataclass(frozen=True)
class RenamedReading:
    """Version 2 of a kind whose version 1 called its sensor `name`."""

    KIND: ClassVar[str] = "reading"
    SCHEMA_VERSION: ClassVar[int] = 2
    OLDER_VERSIONS: ClassVar[dict] = {1: _sensor_of_version_1}

    sensor: str
    values: list[float] | None = None


def test_a_row_of_an_older_version_its_class_reads_is_read_as_the_current_one() -> None:
    old = {"kind": "reading", "schema_version": 1, "name": "a", "values": [1.5], "note": "kept"}
    assert parse_row(RenamedReading, old, Source("rows.jsonl", 1)) == (RenamedReading("a", [1.5]), {"note": "kept"})
    current = {"kind": "reading", "schema_version": 2, "sensor": "b"}
    assert parse_row(RenamedReading, current, Source("rows.jsonl", 2)) == (RenamedReading("b"), {})
    # What the upgrade could not make a field of is named as the reader names any field.
    with pytest.raises(UsageError) as refused:
        parse_row(RenamedReading, {"kind": "reading", "schema_version": 1, "name": 7}, Source("rows.jsonl", 3))
    assert str(refused.value) == "rows.jsonl:3: reading row: field sensor must be str, not 7"
    with pytest.raises(UsageError) as refused:
        parse_row(RenamedReading, {"kind": "reading", "schema_version": 3, "sensor": "c"}, Source("rows.jsonl", 4))
    assert str(refused.value) == ("rows.jsonl:4: a reading row of schema_version 3; this trainspeed reads version 2 "
                                  "of it (use the trainspeed that wrote it, or rewrite the row)")


@pytest.mark.parametrize("text, said", [
    ('{"kind": "bench"}\n\x00\n', "rows.jsonl: not a text file of JSON rows (it holds NUL bytes)"),
    ("{\n" + '"values": ' + "[" * 100_000 + "]" * 100_000 + "\n}\n", "rows.jsonl: JSON nested too deeply to be a row"),
    ("rows of a spreadsheet\n1,2,3\n",
     "rows.jsonl:1: not a trainspeed result row (not JSON: Expecting value at column 1)"),
], ids=["nul-bytes", "a-document-nested-too-deeply", "neither-rows-nor-a-document"])
def test_a_file_that_holds_no_rows_is_one_line_naming_it(tmp_path: Path, monkeypatch, text: str, said: str) -> None:
    monkeypatch.chdir(tmp_path)
    Path("rows.jsonl").write_text(text)
    with pytest.raises(UsageError) as refused:
        read_records("rows.jsonl")
    assert str(refused.value) == said


def test_blank_lines_between_rows_are_no_rows(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text('{"kind": "reading"}\n\n   \n{"kind": "bench"}\n')
    assert read_records(path) == [({"kind": "reading"}, Source(str(path), 1)),
                                  ({"kind": "bench"}, Source(str(path), 4))]


def test_a_pretty_printed_document_is_one_record(tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    path.write_text('{\n  "kind": "train-summary",\n  "schema_version": 1\n}\n')
    assert read_records(path) == [({"kind": "train-summary", "schema_version": 1}, Source(str(path)))]


@dataclass(frozen=True)
class Timing:
    """A row kind whose numbers have ranges: markers on some fields, the defaults on the others."""

    KIND: ClassVar[str] = "timing"
    SCHEMA_VERSION: ClassVar[int] = 1

    step_s: Positive
    batch: Batch
    loss: Loss
    wait_s: NonNegative | None = None
    interval: PositiveInterval | None = None
    windows_s: list[float] | None = None
    steps: int = 0
    deltas: list[Signed] | None = None
    per_network: dict[str, Positive] | None = None
    machine: Machine | None = None


TIMING = {"kind": "timing", "schema_version": 1, "step_s": 0.5, "batch": 64, "loss": 2.5}
MACHINE = {"hostname": "h", "cpu_model": "c", "cores_total": 4, "cores_usable": 4, "load_average_start": 0.5,
           "load_average_end": 0.5, "torch_threads": 4, "torch_interop_threads": 4, "python_version": "3",
           "torch_version": "2", "torch_xla_version": None}


@pytest.mark.parametrize("change, said", [
    ({"step_s": 0}, "field step_s must be a positive finite number, not 0.0"),
    ({"step_s": -1.5}, "field step_s must be a positive finite number, not -1.5"),
    ({"step_s": float("inf")}, "field step_s must be a positive finite number, not Infinity"),
    ({"batch": 0}, "field batch must be a whole number from 1 to 1099511627776, not 0"),
    ({"batch": 2**70}, "field batch must be a whole number from 1 to 1099511627776, not 1180591620717411303424"),
    ({"wait_s": -0.1}, "field wait_s must be a finite number of at least 0, not -0.1"),
    ({"interval": [2.0, 1.0]}, "field interval must be an interval [low, high] with low <= high, not [2.0, 1.0]"),
    ({"interval": [1.0]}, "field interval must be an interval [low, high] with low <= high, not [1.0]"),
    ({"interval": [float("inf"), float("nan")]}, "field interval[0] must be a positive finite number, not Infinity"),
    ({"windows_s": [1.0, float("nan")]}, "field windows_s[1] must be a finite number, not NaN"),
    ({"steps": -3}, "field steps must be a whole number from 0 to 9223372036854775807, not -3"),
    ({"steps": 2**64}, "field steps must be a whole number from 0 to 9223372036854775807, not 18446744073709551616"),
    ({"per_network": {"g": 1.0, "d": 0}}, "field per_network.d must be a positive finite number, not 0.0"),
    ({"machine": {**MACHINE, "load_average_end": float("-inf")}},
     "field machine.load_average_end must be a finite number, not -Infinity"),
    ({"machine": {**MACHINE, "cores_total": -4}},
     "field machine.cores_total must be a whole number from 0 to 9223372036854775807, not -4"),
], ids=["zero-seconds", "negative-seconds", "infinite-seconds", "batch-0", "batch-2^70", "negative-wait",
        "interval-reversed", "interval-of-one", "interval-inf-nan", "nan-in-a-list", "negative-count", "count-past-int64",
        "in-a-mapping", "in-a-nested-row", "negative-cores"])
def test_a_number_outside_its_fields_range_is_one_line_naming_file_line_and_field(change: dict, said: str) -> None:
    """A NaN, an infinity, a time of 0 or a batch of 2^70 passes every type check, and then broke
    the arithmetic that read it (a traceback) or ranked a negative time first."""
    with pytest.raises(UsageError) as refused:
        parse_row(Timing, {**TIMING, **change}, Source("rows.jsonl", 3))
    assert str(refused.value) == (f"rows.jsonl:3: timing row: {said} (the file was edited or written by another "
                                  "program)")


def test_numbers_within_their_ranges_read_and_a_diverged_loss_is_kept() -> None:
    row, _ = parse_row(Timing, {**TIMING, "loss": float("nan"), "wait_s": 0, "interval": [0.4, 0.6],
                                "windows_s": [-1.0, 2.0], "deltas": [-25_000, 12_000], "steps": 2**63 - 1,
                                "machine": MACHINE}, Source("rows.jsonl", 3))
    assert row.loss != row.loss and row.wait_s == 0.0 and row.deltas == [-25_000, 12_000]
    assert parse_row(Timing, TIMING, Source("rows.jsonl", 3))[0].interval is None  # None: legitimately missing


@pytest.mark.parametrize("final_loss, said", [(None, "loss –"), (float("nan"), "loss nan")],
                         ids=["no-window-logged", "diverged"])
def test_a_run_summary_without_a_final_loss_or_with_a_diverged_one_reads(tmp_path: Path, final_loss, said) -> None:
    """A run that logged no window wrote NaN, which a range check would refuse: it writes None now;
    a loss that diverged (NaN) is a measurement and reads as one."""
    import json

    from trainspeed.train.runs import read_summary_file

    committed = REPO_ROOT / "docs" / "results" / "plan_charlm" / "runs" / "ranks1-b8" / "summary.json"
    path = tmp_path / "summary.json"
    path.write_text(json.dumps({**json.loads(committed.read_text()), "final_loss": final_loss}))
    assert said in read_summary_file(path).lines()[2]


def test_a_provenance_spreads_into_a_row_the_fields_its_kind_records():
    """Built once, spread into every row: a kind takes the fields it declares, by name, and keeps its schema."""
    from trainspeed.bench.results import ResultRow
    from trainspeed.studies.time_to_target.rows import TimeToTargetFitRow, TimeToTargetRunRow
    from trainspeed.train.rows import RunSummary

    machine = Machine.at_start()
    provenance = Provenance(command="trainspeed bench", workload_module="trainspeed.workloads.mahjong.workload",
                            workload_version="1", workload_sha256="ab" * 32, machine=machine)
    assert provenance.fields_of(ResultRow) == {"command": "trainspeed bench", "machine": machine,
                                               "workload_module": "trainspeed.workloads.mahjong.workload",
                                               "workload_version": "1", "workload_sha256": "ab" * 32}
    assert provenance.fields_of(RunSummary).keys() == {"workload_module", "workload_version", "workload_sha256", "machine"}
    assert provenance.fields_of(TimeToTargetRunRow).keys() == {"command", "machine"}
    assert provenance.fields_of(TimeToTargetFitRow).keys() == {"workload_module", "workload_version", "workload_sha256"}


@pytest.mark.parametrize("text, said", [
    ('{"kind": "timing"}\n{"kind": "timing", "batch": ' + "1" * 5000 + "}\n",
     "rows.jsonl:2: the number 11111111111111111111... (5000 digits) is larger than any number a float holds"),
    ('{"kind": "timing", "step_s": ' + "1" * 400 + "}\n",
     "rows.jsonl:1: the number 11111111111111111111... (400 digits) is larger than any number a float holds"),
    ('{\n  "kind": "train-summary",\n  "wall_s": ' + "1" * 400 + "\n}\n",
     "rows.jsonl: the number 11111111111111111111... (400 digits) is larger than any number a float holds"),
], ids=["5000-digits-on-line-2", "400-digits", "400-digits-in-a-document"])
def test_a_number_no_float_holds_is_one_line_naming_the_file_and_line(tmp_path: Path, monkeypatch, text: str,
                                                                    said: str) -> None:
    """An integer of 5,000 digits was a ValueError of Python's (4,300 at most), one of 400 an
    OverflowError where the row converted it to a float: each a traceback."""
    monkeypatch.chdir(tmp_path)
    Path("rows.jsonl").write_text(text)
    with pytest.raises(UsageError) as refused:
        read_records("rows.jsonl")
    assert str(refused.value).startswith(said)


def test_an_integer_no_float_holds_in_a_float_field_is_out_of_range_not_an_overflow() -> None:
    """A record built in Python (not read by the JSON policy) may hold one too."""
    with pytest.raises(UsageError) as refused:
        parse_row(Timing, {**TIMING, "step_s": 10**400}, Source("rows.jsonl", 3))
    assert str(refused.value).startswith("rows.jsonl:3: timing row: field step_s must be a positive finite number, "
                                         "not 1000000")


def test_a_row_whose_number_its_readers_refuse_is_never_written() -> None:
    """Its readers would refuse the whole file it lands in (a NaN where a number belongs); a loss
    that diverged is a measurement its type allows, and is written."""
    with pytest.raises(ValueError, match=r"a timing row whose field step_s is NaN, not a positive finite number"):
        row_record(Timing(step_s=float("nan"), batch=64, loss=2.5))
    with pytest.raises(ValueError, match=r"field per_network.d is Infinity"):
        row_record(Timing(step_s=0.5, batch=64, loss=2.5, per_network={"d": float("inf")}))
    assert math.isnan(row_record(Timing(step_s=0.5, batch=64, loss=float("nan")))["loss"])
