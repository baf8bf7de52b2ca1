"""benchmarks/tpu_profile.py and benchmarks/hlo_ops.py: what an exported step's traced ops are.

The HLO lines below are of the forms a TPU's optimized Mahjong step holds (tiled layouts, `S(1)`
for on-chip memory, matmuls written as convolutions); the end-to-end test traces a Mahjong tiny
step exported for this machine's CPU in a process without torch, where every matmul the trace
ran must add up to the workload's own FLOPs per sample.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from child_commands import run_child
from peer_helpers import ROOT
from without_torch import script_without_torch

from benchmarks.hlo_ops import Buffer, category, parse_program, source
from trainspeed.targets.jaxjit import JaxTarget

LINEAR = 'metadata={op_name="jit(call)/call_exported/jit(train)/jvp(linear)/...a,ba->...b/dot_general"}'
PROGRAM = f"""HloModule jit_call, is_scheduled=true

%fused_computation.1 (param_0.1: bf16[64,34,512], param_1.1: bf16[2048,512,1]) -> bf16[64,34,2048] {{
  %param_0.1 = bf16[64,34,512]{{2,1,0:T(8,128)(2,1)S(1)}} parameter(0)
  %param_1.1 = bf16[2048,512,1]{{1,0,2:T(8,128)(2,1)}} parameter(1)
  ROOT %convolution.1 = bf16[64,34,2048]{{2,1,0:T(8,128)(2,1)}} convolution(%param_0.1, %param_1.1), window={{size=1}}, dim_labels=b0f_oi0->b0f, {LINEAR}
}}

%fused_computation.2 (param_0.2: f32[512,34,64]) -> f32[512,64,34] {{
  %param_0.2 = f32[512,34,64]{{2,1,0:T(8,128)}} parameter(0)
  ROOT %transpose.2 = f32[512,64,34]{{2,1,0:T(8,128)}} transpose(%param_0.2), dimensions={{0,2,1}}
}}

ENTRY %main.1 (p0: bf16[64,34,512], p1: bf16[2048,512,1]) -> bf16[64,34,2048] {{
  %p0 = bf16[64,34,512]{{2,1,0:T(8,128)(2,1)S(1)}} parameter(0)
  %p1 = bf16[2048,512,1]{{1,0,2:T(8,128)(2,1)}} parameter(1)
  %p2 = f32[64,34,512]{{2,1,0:T(8,128)}} parameter(2)
  %p3 = f32[64,34,2048]{{2,1,0:T(8,128)}} parameter(3)
  %q = f32[512,34,64]{{2,1,0:T(8,128)}} parameter(4)
  %k = f32[512,64,34]{{2,1,0:T(8,128)}} parameter(5)
  %w = f32[1536,512,1]{{1,0,2:T(8,128)}} parameter(6)
  %weight_gradient = f32[512,2048,1]{{0,1,2:T(8,128)}} convolution(%p2, %p3), window={{size=34}}, dim_labels=f0b_i0o->bf0
  %scores = f32[512,34,34]{{1,2,0:T(8,128)}} convolution(%q, %k), window={{size=512 stride=511 lhs_dilate=512}}, dim_labels=0bf_0io->0bf
  %input_gradient = f32[64,34,1536]{{2,1,0:T(8,128)}} convolution(%w, %p2), window={{size=34 pad=33_33 rhs_reversal=1}}, dim_labels=bf0_o0i->f0b
  %fusion.2 = f32[512,64,34]{{2,1,0:T(8,128)}} fusion(%q), kind=kLoop, calls=%fused_computation.2
  %copy-start.1 = (f32[512,34,64]{{2,1,0:T(8,128)S(1)}}, f32[512,34,64]{{2,1,0:T(8,128)}}, u32[]{{:S(2)}}) copy-start(%q)
  ROOT %fusion.1 = bf16[64,34,2048]{{2,1,0:T(8,128)(2,1)}} fusion(%p0, %p1), kind=kOutput, calls=%fused_computation.1, {LINEAR}
}}
"""


def test_a_tiled_layout_counts_the_padding_of_its_two_minor_dimensions() -> None:
    # bf16 packs two rows per (8,128) tile of 32-bit words: 34 rows take 48, 64 lanes take 128.
    assert Buffer("bf16", [8192, 34, 64], "2,1,0:T(8,128)(2,1)").tiled_bytes == 8192 * 48 * 128 * 2
    # Minor to major {1,2,0}: the 34 of dimension 1 lies along the 128 lanes, dimension 2 pads to 40 rows.
    scores = Buffer("f32", [8192, 34, 34], "1,2,0:T(8,128)")
    assert scores.tiled_bytes == 8192 * 40 * 128 * 4 and scores.logical_bytes == 8192 * 34 * 34 * 4
    assert Buffer("f32", [8192, 34], "1,0:T(8,128)S(1)").on_chip
    assert not scores.on_chip


def test_the_matmul_flops_of_each_convolution_form_a_tpu_writes() -> None:
    program = parse_program(PROGRAM)
    flops = {name: program.matmul_flops(program.instructions[name])
             for name in ("fusion.1", "weight_gradient", "scores", "input_gradient", "fusion.2")}
    assert flops == {
        "fusion.1": 2 * 64 * 34 * 2048 * 512,  # a Linear: the kernel's 512 input features
        "weight_gradient": 2 * 512 * 2048 * 64 * 34,  # summed over the batch and the 34 tokens
        "scores": 2 * 512 * 34 * 34 * 64,  # a batched matmul through a dilated window
        "input_gradient": 2 * 64 * 34 * 1536 * 512,  # a window padded around an input of 1 meets it once
        "fusion.2": 0,
    }


def test_each_op_is_told_by_its_fused_computation_and_its_source_by_the_pass_and_the_pytorch_op() -> None:
    program = parse_program(PROGRAM)
    kinds = {name: category(program, program.instructions[name]) for name in ("fusion.1", "fusion.2", "copy-start.1")}
    assert kinds == {"fusion.1": "matmul/conv", "fusion.2": "copy/transpose/layout", "copy-start.1": "async start/done"}
    assert source(program.instructions["fusion.1"].op_name) == "forward linear: dot_general"
    prefix = "jit(call)/call_exported/jit(train)/"
    assert source(prefix + "transpose(jvp(scaled_dot_product_attention))/aten::bmm/dot_general") == \
        "backward scaled_dot_product_attention: dot_general"
    assert source("").startswith("(no source")


@pytest.mark.e2e
@pytest.mark.skipif(JaxTarget.unavailable_reason() is not None, reason=str(JaxTarget.unavailable_reason()))
@pytest.mark.filterwarnings("ignore:Explicitly requested dtype int64")
def test_measure_traces_every_matmul_of_the_exported_step_in_a_process_without_torch(tmp_path: Path) -> None:
    from trainspeed.cli import main

    folder = tmp_path / "mahjong-tiny"
    assert main(["export", "--workload", "mahjong", "--size", "tiny", "--target", "jax:jit:fp32", "--platform", "cpu",
                 "--batch-sizes", "8,16", "--out", str(folder)]) == 0
    out = tmp_path / "profile"
    result = run_child([*script_without_torch(str(ROOT / "benchmarks" / "tpu_profile.py")), "measure",
                        "--exported", str(folder), "--batch-sizes", "8,16", "--out", str(out)], timeout=240)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    flops_per_sample = json.loads((folder / "manifest.json").read_text())["flops_per_sample"]
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary) == ["mahjong-tiny_b8", "mahjong-tiny_b16"]
    for config in summary.values():
        assert config["device_s_per_step"] > 0
        assert config["all"]["matmul_flops_per_step"] == pytest.approx(flops_per_sample * config["batch_size"], rel=0.01)
        assert config["categories"]["matmul/conv"]["s_per_step"] > 0
    assert "| all ops |" in (out / "summary.md").read_text()


@pytest.mark.e2e
def test_summarize_refuses_a_folder_that_is_not_there_in_one_line(tmp_path: Path) -> None:
    result = run_child([*script_without_torch(str(ROOT / "benchmarks" / "tpu_profile.py")), "summarize",
                        str(tmp_path / "missing"), "--out", str(tmp_path)], timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "is not a folder" in result.stderr
