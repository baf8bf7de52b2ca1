"""Every compilation a run of a compiled target makes, and what each one costs.

A compiled target (any mode but `eager`: `torch.compile`, CUDA graphs, XLA) compiles a graph for
each shape it runs, once: per per-device batch of the run, its training step; where one rank splits
its steps into k micro-batches to measure the noise scale unbiased, the step on B/k samples in its
place (the forward and backward run on the slices only); and its validation, a graph of its own
(no backward, evaluation mode). A run whose batch grows compiles each of these again at every
batch it reaches.

Each is read from what measured it, nearest first:
- the training graph at b: the bench row of the target at b (its first step beyond its steady
  step), else a run of the target at b per device (its first window beyond as many steady steps).
  A run's first graph also pays the compiler's start-up in its process (importing it, starting its
  workers); a bench row measured after another compilation of its process did not (its
  `compiles_before`), so that row gets its bench run's first compilation beyond its later ones;
- the micro-batch graph at b/k: the bench row of the target at b/k, else a run of the target at b
  per device that split its steps the same way (its first window);
- the validation graph at b: a run of the target at b per device that validated twice or more (its
  first validation beyond the later ones), else such a run at the nearest other batch, assumed at b.

A run that measured its noise scale on one step in K > 1 over k slices (`--noise-scale-every`)
steps whole in the others, so it compiles both the training graph at b and the step in slices: a
run of the target at b measured the same way (its first window, which holds both), else such a run
at the nearest other batch (assumed at b: the compile of a step varies little with its batch, while
the bench's first step misses what a run's first window holds beyond it: the second program, its
load, the first batches), else the bench rows at b and at b/k, each where there is one.

Where nothing measured one, it is "not measured", never 0, and the prediction says that its time
leaves it out. Nothing here imports torch.
"""

from __future__ import annotations

import math
import statistics
from typing import Sequence

from trainspeed.bench.results import ResultRow
from trainspeed.plan.inputs import PlanInputs, bench_row
from trainspeed.plan.rows import Compilation
from trainspeed.plan.run_costs import first_step_excess, first_validation_excess
from trainspeed.train.runs import TrainRun

AUTO_MICRO_BATCHES = 2
"""Slices of a one-rank `auto` step: one rank reads its noise scale without bias only over
micro-batches, which auto needs, so an `auto` run of one rank compiles their graph too."""


def compiles(target: str) -> bool:
    """Whether the target compiles a graph per shape: its mode is not `eager` (a remote target's
    mode is its server's, `remote:HOST:PORT/device:mode:precision`)."""
    inner = target.split("/")[1] if target.startswith("remote:") and "/" in target else target
    parts = inner.split(":")
    return len(parts) < 2 or parts[1] != "eager"


def slice_batch(batch: int, micro_batches: int) -> int:
    """The per-device batch one slice of a step runs on: a step of b in k micro-batches runs its
    forward and backward k times on b/k samples (b where k does not divide it: no slices)."""
    return batch // micro_batches if micro_batches > 1 and batch % micro_batches == 0 else batch


def _metered(run: TrainRun) -> tuple[int, int]:
    """(k, K) of a one-rank run that measured its noise scale over k micro-batches on one step in
    K; (1, 1) for a run that measured it otherwise, or not at all (several ranks measure it over
    their ranks)."""
    for row in run.noise_curve:
        if row.method == "micro-batches" and row.small_batch > 0:
            return max(1, row.big_batch // row.small_batch), row.measure_every or 1
    return 1, 1


def micro_batches_of(run: TrainRun) -> int:
    """How many micro-batches the run split each step into. A run that measured one step in K > 1
    (`--noise-scale-every`) stepped whole batches in all the others: 1, and what its measured steps
    cost more is in its efficiency against the whole batch's bench row."""
    slices, every = _metered(run)
    return slices if every == 1 else 1


def sliced_too(run: TrainRun) -> int:
    """k, for a run that measured one step in K > 1 over k micro-batches and stepped the others
    whole (it compiles both graphs); 1 for any other run."""
    slices, every = _metered(run)
    return slices if every > 1 else 1


def bench_compile_s(row: ResultRow) -> float | None:
    """A bench row's first step beyond its steady one: its compilation (None where it timed none)."""
    if row.first_step_s is None or not row.samples_per_s:
        return None
    return max(0.0, row.first_step_s - (row.step_time_s or row.batch_size / row.samples_per_s))


def compiler_start_up(inputs: PlanInputs, run_id: str) -> float | None:
    """What a bench run's first compilation took beyond its later ones (the median of each):
    the compiler's start-up in a process, which a training run pays at its first graph. None where
    the rows do not say which came first (older rows), or hold no first or no later one."""
    rows = [read.row for read in inputs.bench if read.row.run_id == run_id and read.row.compiles_before is not None]
    first = [excess for row in rows if row.compiles_before == 0 and (excess := bench_compile_s(row)) is not None]
    later = [excess for row in rows if row.compiles_before and (excess := bench_compile_s(row)) is not None]
    if not first or not later:
        return None
    return max(0.0, statistics.median(first) - statistics.median(later))


def _bench_excess(inputs: PlanInputs, target: str, batch: int, first_graph: bool = False
                  ) -> tuple[float, str] | None:
    """The bench row's compilation at this batch; for a run's first graph (`first_graph`) from a
    row its bench process measured after another compilation, plus the compiler's start-up that
    row did not pay."""
    read = bench_row(inputs, target, batch)
    excess = bench_compile_s(read.row) if read is not None else None
    if read is None or excess is None:
        return None
    source = f"bench {read.source}: first step beyond the steady one"
    if not first_graph or not read.row.compiles_before:
        return excess, source
    start_up = compiler_start_up(inputs, read.row.run_id)
    if start_up is None:
        return excess, source + (f"; its process had compiled {read.row.compiles_before} configuration(s) before "
                                 "it, and the compiler's start-up there is not measured")
    return excess + start_up, source + (f", + {start_up:,.1f} s of the compiler's start-up (its bench run's first "
                                        "compilation beyond its later ones), which a run pays at its first graph")


def _runs_at(inputs: PlanInputs, target: str, batch: int) -> list[TrainRun]:
    return [run for run in inputs.runs if run.row.target == target and run.row.batch_size_per_device == batch]


def _run_first_step(inputs: PlanInputs, target: str, batch: int, micro: int, sliced: int = 1
                    ) -> tuple[float, str] | None:
    """The median first-step excess of the runs of this target, batch and micro-batches (and
    steps in slices beside the whole ones)."""
    found = [(run, first_step_excess(run)) for run in _runs_at(inputs, target, batch)
             if run.row.world_size == 1 or micro == 1]
    measured = [(run, excess) for run, excess in found if excess is not None and micro_batches_of(run) == micro
                and sliced_too(run) == sliced]
    if not measured:
        return None
    value = statistics.median(excess.seconds for _, excess in measured)  # type: ignore[union-attr]
    return value, f"first window beyond its steady steps, run {measured[0][0].source}" + (
        f" and {len(measured) - 1} more" if len(measured) > 1 else "")


def _run_first_validation(inputs: PlanInputs, target: str, batch: int) -> tuple[float, str] | None:
    measured = [(run, excess) for run in _runs_at(inputs, target, batch)
                if (excess := first_validation_excess(run)) is not None]
    if not measured:
        return None
    value = statistics.median(excess for _, excess in measured)
    return value, f"first validation beyond the later ones, run {measured[0][0].source}"


def _other_batches(inputs: PlanInputs, target: str, batch: int) -> list[int]:
    """The per-device batches the target's runs trained at, other than `batch`, nearest first (in
    the logarithm: a compile measured at 2b stands in for b before one at b/4)."""
    return sorted({run.row.batch_size_per_device for run in inputs.runs if run.row.target == target} - {batch},
                  key=lambda other: abs(math.log(other / batch)))


def _validation_compile(inputs: PlanInputs, target: str, batch: int) -> Compilation:
    """The validation graph at `batch`: a run of the target there that validated twice, else such a
    run at the nearest other batch, assumed at `batch` (as the training graph's is: a graph's
    compile varies little with its batch, and a compile left out is a sure miss)."""
    found = _run_first_validation(inputs, target, batch)
    if found is not None:
        return Compilation("validation", batch, found[0], found[1])
    for other in _other_batches(inputs, target, batch):
        near = _run_first_validation(inputs, target, other)
        if near is not None:
            return Compilation("validation", batch, near[0], f"{near[1]} at {other}/device, assumed at {batch}")
    return Compilation("validation", batch, None, f"no run of {target} validated twice")


def compilations(inputs: PlanInputs, target: str, batches: Sequence[int], micro_batches: int = 1,
                 validates: bool = True, sliced: int = 1) -> list[Compilation]:
    """Every graph a run of `target` compiles at these per-device batches (none for an eager
    target), with `micro_batches` slices of each step (one rank) and a validation where it validates.
    A step split into k slices runs its forward and backward on the slices only
    (`trainspeed.gradients.accumulation`), so it compiles the graph at b/k in place of the one at b;
    `sliced` k > 1: one step in K runs in k slices and the others whole, so it compiles both."""
    if not compiles(target):
        return []
    found = []
    for index, batch in enumerate(dict.fromkeys(batches)):
        first = index == 0
        piece = slice_batch(batch, micro_batches)
        micro = batch // piece
        run = _run_first_step(inputs, target, batch, micro, sliced if micro == 1 else 1)
        if micro == 1 and sliced > 1:
            found += _both_graphs(inputs, target, batch, sliced, run, first)
        elif micro > 1:
            small = _bench_excess(inputs, target, piece, first)
            if small is not None:
                found.append(Compilation("micro-batch", piece, small[0], small[1]))
            elif run is not None:
                found.append(Compilation("micro-batch", piece, run[0], run[1] + f" (in {micro} micro-batches)"))
            else:
                found.append(Compilation("micro-batch", piece, None,
                                         f"no bench row of {target} at {piece}, or run of it at {batch}/device "
                                         f"in {micro} micro-batches"))
        else:
            bench = _bench_excess(inputs, target, batch, first)
            if bench is not None:
                found.append(Compilation("training", batch, bench[0], bench[1]))
            elif run is not None:
                found.append(Compilation("training", batch, run[0], run[1]))
            else:
                found.append(Compilation("training", batch, None, f"no bench row or run of {target} at {batch}/device"))
        if validates:
            found.append(_validation_compile(inputs, target, batch))
    return found


def _bench_shift(inputs: PlanInputs, target: str, here: Sequence[int], there: Sequence[int]) -> float | None:
    """What the bench rows' compiles of the graphs at the batches `here` add up to beyond those at
    `there` (None where a row is missing). A run's first window at another batch stands in for a
    batch no run trained at, shifted by this: a graph's compile grows with its batch (on a TPU
    v5e, Mahjong tiny's step compiles in 4.5 s at batch 64 and 9.3 s at 1,024), which the run's
    window alone would miss."""
    def total(batches: Sequence[int]) -> float | None:
        seconds = [bench_compile_s(read.row) if (read := bench_row(inputs, target, size)) is not None else None
                   for size in dict.fromkeys(batches)]
        return None if any(value is None for value in seconds) else sum(seconds)  # type: ignore[arg-type]

    here_s, there_s = total(here), total(there)
    return None if here_s is None or there_s is None else here_s - there_s


def _both_graphs(inputs: PlanInputs, target: str, batch: int, sliced: int,
                 run: tuple[float, str] | None, first: bool) -> list[Compilation]:
    """The training graph at `batch` and the step in `sliced` slices: a run's first window that
    compiled both, else each from its bench row."""
    piece = slice_batch(batch, sliced)
    both = f" (with its step in {sliced} micro-batches)"
    if run is not None:
        return [Compilation("training", batch, run[0], run[1] + both)]
    for other in _other_batches(inputs, target, batch):
        near = _run_first_step(inputs, target, other, 1, sliced)
        if near is None:
            continue
        shift = _bench_shift(inputs, target, (batch, piece), (other, slice_batch(other, sliced)))
        if shift is None:
            return [Compilation("training", batch, near[0], f"{near[1]} at {other}/device{both}, assumed at {batch}")]
        return [Compilation("training", batch, max(0.0, near[0] + shift),
                            f"{near[1]} at {other}/device{both}, {shift:+,.1f} s for {batch}/device: its bench "
                            f"rows' compiles at {batch} and {piece} less those at {other} and "
                            f"{slice_batch(other, sliced)}")]
    found = []
    for graph, size in (("training", batch), ("micro-batch", piece)):
        bench = _bench_excess(inputs, target, size, first and graph == "training")
        found.append(Compilation(graph, size, bench[0], bench[1]) if bench is not None else
                     Compilation(graph, size, None, f"no bench row or run of {target} at {size}/device"))
    return found
