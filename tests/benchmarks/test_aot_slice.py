"""benchmarks/aot_slice.py: the collectives a compiled step runs per step, and the estimate built on
them. The HLO below has the forms a TPU's optimized data-parallel step holds: a gradient all-reduce
in the entry computation, one in a scanned layer's loop body (whose trip count only its condition's
bound gives: a TPU program carries no `known_trip_count`), and an async all-gather pair. The compile
for a slice itself needs libtpu, which CI lacks."""

from __future__ import annotations

import pytest

from benchmarks.aot_slice import collective_bytes, with_estimate

PROGRAM = """HloModule jit_step, is_scheduled=true

%cond.1 (param.1: (s32[], f32[4,8])) -> pred[] {
  %gte.1 = s32[] get-tuple-element(%param.1), index=0
  %constant.12 = s32[]{:T(128)} constant(12)
  ROOT %lt = pred[] compare(%gte.1, %constant.12), direction=LT
}

%body.1 (param.2: (s32[], f32[4,8])) -> (s32[], f32[4,8]) {
  %gte.2 = f32[4,8]{1,0:T(8,128)} get-tuple-element(%param.2), index=1
  %all-reduce.7 = f32[4,8]{1,0:T(8,128)} all-reduce(%gte.2), replica_groups={{0,1,2,3,4,5,6,7}}, to_apply=%add
  ROOT %tuple.2 = (s32[], f32[4,8]) tuple(%gte.1, %all-reduce.7)
}

ENTRY %main.9_spmd (param.5: bf16[1024,256], param.6: f32[4,8]) -> bf16[1024,256] {
  %all-reduce.1 = (bf16[1024,256]{1,0:T(8,128)(2,1)}, f32[10]{0}) all-reduce(%param.5, %x), replica_groups={{0,1,2,3,4,5,6,7}}
  %while.3 = (s32[]{:T(128)}, f32[4,8]{1,0:T(8,128)}) while(%tuple.1), condition=%cond.1, body=%body.1, metadata={op_name="while"}
  %all-gather-start.2 = (bf16[16,8]{1,0}, bf16[128,8]{1,0}) all-gather-start(bf16[16,8]{1,0} %p), dimensions={0}
  %all-gather-done.2 = bf16[128,8]{1,0} all-gather-done(%all-gather-start.2)
  ROOT %r = bf16[1024,256] copy(%all-reduce.1)
}
"""


def test_each_collective_counts_once_per_run_and_a_loop_body_s_as_often_as_its_condition_allows() -> None:
    found = collective_bytes(PROGRAM)
    assert found["all-reduce"] == {"ops": 1 + 12, "bytes": 1024 * 256 * 2 + 10 * 4 + 12 * 4 * 8 * 4}
    assert found["all-gather"] == {"ops": 1, "bytes": 128 * 8 * 2}  # its output, once for the async pair
    assert found["reduce-scatter"] == {"ops": 0, "bytes": 0} and found["loops_of_unknown_trips"] == []


def test_the_estimate_adds_a_ring_all_reduce_at_the_chips_interconnect_bandwidth() -> None:
    collectives = {kind: {"ops": 0, "bytes": 0} for kind in ("all-reduce", "reduce-scatter", "all-gather",
                                                              "collective-permute", "all-to-all")}
    collectives["all-reduce"] = {"ops": 1, "bytes": 100_000_000}
    row = with_estimate({"topology": "v5e:2x4", "devices": 8, "global_batch": 2048, "batch_size_per_device": 256,
                         "collectives": collectives}, step_s=0.010, one_chip="rows *run")
    ring_s = 2 * 7 / 8 * 100e6 / (2 * 50e9)  # 2(N-1)/N of the bytes, over two ports at 50 GB/s each way
    assert row["all_reduce_s"] == pytest.approx(ring_s)
    assert row["estimate_samples_per_s"] == pytest.approx([2048 / (0.010 + ring_s), 2048 / 0.010])
    assert row["estimate_scaling"][1] == pytest.approx(8.0) and row["estimate_scaling"][0] < 8.0


def test_rows_append_to_one_csv_under_one_header_and_a_file_of_other_columns_is_refused(tmp_path) -> None:
    from benchmarks.aot_slice import append_csv

    out = tmp_path / "aot.csv"
    append_csv(out, {"workload": "mahjong", "fits": True})
    append_csv(out, {"workload": "hf:gpt2", "fits": False})
    assert out.read_text() == "workload,fits\nmahjong,True\nhf:gpt2,False\n"
    with pytest.raises(SystemExit, match="other columns"):
        append_csv(out, {"workload": "x"})
    assert out.read_text().count("\n") == 3  # nothing written
