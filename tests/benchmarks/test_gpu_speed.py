"""The GPU speed script and its helpers, checked without a GPU (the whole script's CPU dry run is
`GPU_SPEED_DRY_RUN=1 bash benchmarks/gpu_speed.sh`, a few minutes; docs/results/gpu_speed.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from child_commands import run_child

from benchmarks import bench_sizes, gpu_speed_table
from trainspeed.bench.results import read_rows

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_speed.sh"


@pytest.mark.e2e
def test_the_script_parses():
    parsed = run_child(["bash", "-n", str(SCRIPT)], timeout=60)
    assert parsed.returncode == 0, parsed.stderr


def test_every_default_stage_exists():
    text = SCRIPT.read_text()
    default = re.search(r"STAGES=\$\{GPU_SPEED_STAGES:-([a-z0-9,-]+)\}", text).group(1).split(",")
    defined = re.findall(r"^stage ([a-z0-9-]+) \d+ ", text, flags=re.MULTILINE)
    assert default == defined  # run in the order written, none forgotten
    assert "GPU_SPEED=1" in (ROOT / "benchmarks" / "gpu_session.sh").read_text()


def test_bench_sizes_runs_trainspeed_bench_once_per_size(tmp_path, capsys):
    out = tmp_path / "rows.jsonl"
    code = bench_sizes.main(["--sizes", "tiny,tiny+pad-matmuls", "--", "--workload", "mahjong", "--targets",
                             "cpu:eager:fp32", "--batch-sizes", "8", "--windows", "1", "--min-window-s", "0.01",
                             "--warmup-steps", "1", "--peak-tflops", "1", "--no-plot", "--no-progress", "--out", str(out)])  # fmt: skip
    assert code == 0
    assert [row.size for row in read_rows(out)] == ["tiny", "tiny+pad-matmuls"]
    with pytest.raises(SystemExit):
        bench_sizes.main(["--sizes", "tiny", "--", "--size", "small"])


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows) + '{"cut line', encoding="utf-8")
    return path


def test_the_tables_read_rows_and_say_what_was_not_measured(tmp_path):
    mahjong = _write(tmp_path / "m.jsonl", [
        {"size": "base", "target": "cuda:cudagraphs:bf16", "batch_size": 4096, "status": "ok", "samples_per_s": 60000.0,
         "mfu": 0.39, "peak_tflops_source": "nominal", "peak_memory_bytes": 2**33, "first_step_s": 9.0},
        {"size": "base-fast", "target": "cuda:cudagraphs:bf16", "batch_size": 4096, "status": "ok",
         "samples_per_s": 90000.0, "mfu": 0.585, "first_step_s": 9.5},
        {"size": "base+attn-sdpa-cudnn", "target": "cuda:cudagraphs:bf16", "batch_size": 4096, "status": "error",
         "error": "RuntimeError: no kernel"},
    ])  # fmt: skip
    stylegan3 = _write(tmp_path / "s.jsonl", [
        {"size": "t256", "batch_size": 32, "variant": "activation", "target": "cuda:eager:bf16", "lrelu_path": "plain",
         "s_per_kimg": 120.0, "peak_memory_bytes": 37 * 2**30, "first_step_s": 18.0},
        {"size": "t256", "batch_size": 32, "variant": "triton", "target": "cuda:eager:bf16", "lrelu_path": "triton",
         "s_per_kimg": 40.0, "peak_memory_bytes": 39 * 2**30, "first_step_s": 30.0},
        {"size": "t256", "batch_size": 32, "variant": "triton+channels-last", "target": "cuda:eager:bf16:cudnn-benchmark",
         "lrelu_path": "triton", "s_per_kimg": 30.0, "peak_memory_bytes": 41 * 2**30, "first_step_s": 30.0},
    ])  # fmt: skip
    out = tmp_path / "table.md"
    assert gpu_speed_table.main(["--mahjong", str(mahjong), "--stylegan3", str(stylegan3), "--out", str(out)]) == 0
    text = out.read_text()
    assert "| base-fast | cuda:cudagraphs:bf16 | 4096 | 90.0k | 58.5% | 1.50x |" in text  # a row that names no peak
    assert "| base | cuda:cudagraphs:bf16 | 4096 | 60.0k | 39.0% (nominal) | 1.00x |" in text
    assert "58.5% (base-fast, cuda:cudagraphs:bf16, batch 4096)" in text
    assert "| Mahjong base: >= 45k samples/s at batch 256 | not measured |" in text
    assert "error: RuntimeError: no kernel" in text
    assert "| t256:32 | triton | cuda:eager:bf16 | triton | 40.0 | 3.00x | 39.0 GiB |" in text
    assert "40.0 s/kimg in 39.0 GiB (triton, cuda:eager:bf16)" in text  # the 30 s/kimg row needs 41 GiB
    assert "Attention backends: not measured." in text and "kernel check: not measured." in text
