"""The report's TPU section, from the TPU rows and run directories committed in docs/results: the
trainspeed step beside the JAX peer of its own run, the named models, the training runs; a row
that does not exist says "not measured"; inputs without a TPU row get no such section."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from trainspeed.kinds import read_inputs, render

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"
BENCH_FILES = ["tpu_mahjong_base.jsonl", "tpu_exported_mahjong_base.jsonl", "tpu_mahjong_tiny_bench.jsonl",
               "tpu_named_models.jsonl"]
RUNS = ["tpu_train_mahjong_tiny_b64", "tpu_train_mahjong_tiny_b256", "tpu_train_mahjong_tiny_whole",
        "tpu_train_mahjong_tiny_killed_resumed"]
PEER = "reference-jax:tpu:jit:"


def _records(name: str) -> list[dict]:
    return [json.loads(line) for line in (RESULTS / name).read_text().splitlines() if line.strip()]


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


def _section(page: str, name: str) -> str | None:
    parts = page.split(f'<section id="{name}">')
    return parts[1].split("</section>")[0] if len(parts) > 1 else None


def _tables(section: str) -> dict[str, list[list[str]]]:
    """Each table's caption and the text of its body's cells, row by row."""
    tables = {}
    for caption, body in re.findall(r"<caption>(.*?) <span.*?<tbody>(.*?)</tbody>", section, re.S):
        rows = re.findall(r"<tr>(.*?)</tr>", body, re.S)
        tables[html.unescape(caption)] = [[html.unescape(cell) for cell in re.findall(r"<td[^>]*>([^<]*)</td>", row)]
                                          for row in rows]
    return tables


def _table(section: str, starts: str) -> list[list[str]]:
    (rows,) = [rows for caption, rows in _tables(section).items() if caption.startswith(starts)]
    return rows


@pytest.fixture(scope="module")
def committed() -> str:
    """The TPU section of a page of every committed TPU file and run directory."""
    page = render(read_inputs([RESULTS / name for name in BENCH_FILES + RUNS]))
    section = _section(page, "tpu")
    assert section is not None
    return section


def test_the_tpu_section_shows_the_committed_rows_by_workload_size_and_precision(committed: str) -> None:
    assert "<h2>TPU v5e</h2>" in committed
    captions = list(_tables(committed))
    for label in ("mahjong@a1cba34fe42c base fp32", "mahjong@a1cba34fe42c base bf16",
                  "mahjong@a1cba34fe42c base-fast bf16", "mahjong@b510945ca1c3 tiny fp32"):
        assert any(caption.startswith(f"{label} on TPU v5e") for caption in captions), label
    assert committed.count('<figure class="figure"') == 1 and "<svg" in committed
    assert "host runsc, 13 host cores, load average 0.00" in committed  # which machine, how loaded

    named = _table(committed, "Named models")
    oom = [row for row in named if row[0].startswith("hf:gpt2") and row[3] == "16"]
    assert oom and oom[0][4].startswith("oom: JaxRuntimeError: RESOURCE_EXHAUSTED") and oom[0][5] == "oom"
    assert any(row[0].startswith("timm:resnet50") and row[3] == "128" and row[5] == "1,259" for row in named)

    runs = {row[0]: row for row in _table(committed, "Training runs")}
    assert set(runs) == set(RUNS)
    assert runs["tpu_train_mahjong_tiny_b64"][5:10] == ["val/accuracy>=0.85", "768", "49,152", "8.8", "20,611"]
    assert runs["tpu_train_mahjong_tiny_whole"][5:7] == ["none", "no goal"]
    assert "docs/tpu.md" in committed


def test_each_trainspeed_row_is_divided_by_the_peer_row_of_its_own_run(committed: str) -> None:
    records = _records("tpu_mahjong_base.jsonl")
    for precision in ("fp32", "bf16"):
        table = _table(committed, f"mahjong@a1cba34fe42c base {precision} on")
        for batch in (64, 1024, 4096):
            (own,) = [r for r in records if r["target"] == f"jax:jit:{precision}" and r["size"] == "base"
                      and r["batch_size"] == batch and r["feed"] == "device"]
            (peer,) = [r for r in records if r["target"] == PEER + precision and r["batch_size"] == batch]
            assert own["run_id"] == peer["run_id"]
            (row,) = [row for row in table if row[1] == f"{batch:,}"]
            assert row[2:5] == [f"{own['samples_per_s']:,.0f}", f"{peer['samples_per_s']:,.0f}",
                                f"{own['samples_per_s'] / peer['samples_per_s']:.2f}x"]
    bf16 = _table(committed, "mahjong@a1cba34fe42c base bf16 on")
    (at_64,) = [row for row in bf16 if row[1] == "64"]
    assert at_64[-2:] == ["11,459", "0.78x"]  # host-fed over device-fed, the same run


def test_a_peer_row_of_another_run_is_not_paired(tmp_path: Path) -> None:
    records = [{**r, "run_id": "another-run"} if r["target"].startswith(PEER) else r
               for r in _records("tpu_mahjong_base.jsonl")]
    page = render(read_inputs([_write(tmp_path / "tpu.jsonl", records)]))
    table = _table(_section(page, "tpu") or "", "mahjong@a1cba34fe42c base fp32 on")
    own = [row for row in table if row[0] != "another-run"]
    assert own and all(row[3:5] == ["not measured", "not measured"] for row in own)
    peer_only = [row for row in table if row[0] == "another-run"]
    assert [row[2] for row in peer_only] == ["not measured"] * 3 and all(row[3] != "not measured" for row in peer_only)


def test_a_missing_peer_is_marked_not_measured(committed: str) -> None:
    for starts in ("mahjong@a1cba34fe42c base-fast bf16 on", "mahjong@02d1da066aa3 base fp32 on",
                   "mahjong@b510945ca1c3 tiny fp32 on"):
        table = _table(committed, starts)
        assert table and all(row[3] == "not measured" and row[4] == "not measured" for row in table), starts
        assert all(row[2] not in ("not measured", "–") for row in table), starts


def test_inputs_without_tpu_rows_leave_the_section_off(tmp_path: Path) -> None:
    records = [{**r, "device_name": "Test CPU (2 threads)"} for r in _records("tpu_mahjong_base.jsonl")]
    page = render(read_inputs([_write(tmp_path / "cpu.jsonl", records), RESULTS / "time_to_target_one_rank"]))
    assert _section(page, "ratio") is not None and _section(page, "training") is not None
    assert _section(page, "tpu") is None


def test_mfu_is_shown_against_the_chips_nominal_peak_with_the_measured_peaks_beside(committed: str) -> None:
    """The committed rows divide by the matmul chain measured in their run; the table adds MFU as
    the field counts it, against the v5e's nominal 197 TFLOP/s (fp32 rows too: JAX runs their
    matmuls as bf16 passes), for trainspeed's row and the peer's."""
    assert all(f">{header}</th>" in committed for header in (
        "MFU, nominal peak", "MFU, measured peak", "peer MFU, nominal peak", "peer MFU, measured peak"))
    records = _records("tpu_mahjong_base.jsonl")
    for precision in ("fp32", "bf16"):
        table = _table(committed, f"mahjong@a1cba34fe42c base {precision} on")
        for batch in (64, 1024, 4096):
            (own,) = [r for r in records if r["target"] == f"jax:jit:{precision}" and r["size"] == "base"
                      and r["batch_size"] == batch and r["feed"] == "device"]
            (peer,) = [r for r in records if r["target"] == PEER + precision and r["batch_size"] == batch]
            (row,) = [row for row in table if row[1] == f"{batch:,}"]
            assert own["peak_tflops_source"] == "measured"
            assert row[5:9] == [f"{own['achieved_tflops'] / 197 * 100:.1f}%", f"{own['mfu'] * 100:.1f}%",
                                f"{peer['achieved_tflops'] / 197 * 100:.1f}%",
                                f"{peer['achieved_tflops'] / own['peak_tflops'] * 100:.1f}%"], (precision, batch)

    named = _table(committed, "Named models")
    (resnet,) = [r for r in _records("tpu_named_models.jsonl") if r["workload"] == "timm:resnet50"
                 and r["batch_size"] == 128]
    (row,) = [row for row in named if row[0].startswith("timm:resnet50") and row[3] == "128"]
    assert row[7:9] == [f"{resnet['achieved_tflops'] / 197 * 100:.1f}%", f"{resnet['mfu'] * 100:.1f}%"]


def test_a_row_of_a_chip_without_a_nominal_peak_has_only_its_measured_mfu(tmp_path: Path) -> None:
    records = [{**r, "device_name": "TPU v4 lite"} for r in _records("tpu_mahjong_base.jsonl")]
    page = render(read_inputs([_write(tmp_path / "tpu.jsonl", records)]))
    table = _table(_section(page, "tpu") or "", "mahjong@a1cba34fe42c base fp32 on")
    assert table and all(row[5] == "–" and row[6].endswith("%") and row[7] == "–" for row in table)


def test_a_row_written_with_the_nominal_peak_shows_the_same_two_mfus(tmp_path: Path) -> None:
    """A row of today's bench divides by the nominal peak and keeps the measured one beside: the
    table shows what it showed for the same numbers written the old way."""
    def as_today(record: dict) -> dict:
        if not record["target"].startswith("jax:") or record.get("peak_tflops_source") != "measured":
            return record
        return {**record, "peak_tflops": 197.0, "peak_tflops_source": "nominal", "mfu": record["achieved_tflops"] / 197,
                "nominal_peak_chip": "TPU v5e fp32", "nominal_peak_source": "Google Cloud",
                "measured_peak_tflops": record["peak_tflops"], "mfu_of_measured_peak": record["mfu"]}

    old = _records("tpu_mahjong_base.jsonl")
    pages = [render(read_inputs([_write(tmp_path / name, records)]))
             for name, records in (("old.jsonl", old), ("today.jsonl", [as_today(r) for r in old]))]
    tables = [_table(_section(page, "tpu") or "", "mahjong@a1cba34fe42c base fp32 on") for page in pages]
    assert tables[0] and [row[5:9] for row in tables[0]] == [row[5:9] for row in tables[1]]
