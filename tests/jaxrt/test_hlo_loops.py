"""A compiled program's loops and how often each runs: XLA's annotation where a CPU or GPU program
carries one, else the bound of a scan's condition (a TPU program carries no annotation), else
unknown."""

from __future__ import annotations

from trainspeed.jaxrt.hlo_loops import loop_trips

TPU_FORM = """HloModule jit_step, is_scheduled=true

%cond.1 (param.1: (s32[], f32[4,8])) -> pred[] {
  %gte.1 = s32[] get-tuple-element(%param.1), index=0
  %constant.12 = s32[]{:T(128)} constant(12)
  ROOT %lt = pred[] compare(%gte.1, %constant.12), direction=LT
}

%body.1 (param.2: (s32[], f32[4,8])) -> (s32[], f32[4,8]) {
  ROOT %tuple.2 = (s32[], f32[4,8]) tuple(%gte.1, %gte.2)
}

%cond.2 (param.3: (s32[], s32[])) -> pred[] {
  %gte.3 = s32[] get-tuple-element(%param.3), index=0
  %gte.4 = s32[] get-tuple-element(%param.3), index=1
  ROOT %lt.2 = pred[] compare(%gte.3, %gte.4), direction=LT
}

%body.2 (param.4: (s32[], s32[])) -> (s32[], s32[]) {
  ROOT %tuple.3 = (s32[], s32[]) tuple(%gte.3, %gte.4)
}

ENTRY %main.9_spmd (param.5: f32[4,8]) -> f32[4,8] {
  %while.3 = (s32[]{:T(128)}, f32[4,8]{1,0:T(8,128)}) while(%tuple.1), condition=%cond.1, body=%body.1, metadata={op_name="while"}
  %while.4 = (s32[], s32[]) while(%tuple.4), condition=%cond.2, body=%body.2
  ROOT %r = f32[4,8] copy(%param.5)
}
"""


def test_a_tpu_scan_s_trips_are_its_condition_s_bound_and_a_loop_bounded_by_a_value_is_unknown() -> None:
    assert loop_trips(TPU_FORM) == {"body.1": 12, "body.2": None}


def test_xla_s_annotation_is_taken_where_the_program_carries_one() -> None:
    annotated = TPU_FORM.replace('metadata={op_name="while"}',
                                 'backend_config={"known_trip_count":{"n":"7"}}, metadata={op_name="while"}')
    assert loop_trips(annotated) == {"body.1": 7, "body.2": None}


def test_a_condition_that_is_not_a_counter_below_one_constant_is_unknown() -> None:
    above = TPU_FORM.replace("direction=LT", "direction=GT")
    assert loop_trips(above)["body.1"] is None
    assert loop_trips("HloModule empty\n") == {}
