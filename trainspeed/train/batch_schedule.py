"""A global batch that grows as the run trains: an explicit schedule, or `auto`.

`--batch-schedule 64@0,128@20000,256@60000` names each global batch and the samples trained from
which it holds: the first at @0, samples and batches both increasing, every batch a multiple of the
devices. A step that starts at or past an entry's samples trains at its batch.

`--batch-schedule auto --global-batch-min M --global-batch-max X` starts at M and, at each reading
of the gradient noise scale (every logged window the meter measured in), estimates the critical
batch B_crit = c x B_simple (B_simple the meter's moving average; c the calibration of
`--critical-batch` rows at the samples trained so far, 1 without them). Two rules, the first that
moves the batch decides:

1. **A confident jump.** The reading's lower confidence bound on B_simple, tr(Sigma) /
   (max(|G|^2, 0) + 2 SE) (`NoiseScaleReading.confident_lower`: one-sided, about 97.7%), times c,
   bounds B_crit from below. The batch goes at once to the largest batch M x 2^j at or below that
   bound that fits (at most X, its per-device batch at most the memory cap), where that is at
   least twice the current one: a doubling, or several, in one reading.
2. **Agreeing readings.** A reading that says B_crit >= 2 x the current batch agrees to double;
   after `AUTO_PATIENCE` agreeing readings in a row the batch doubles, if the doubled batch fits.
   A reading whose noise scale is not resolved (|G|^2 within its noise of 0) agrees where its
   lower bound times c is at least the current batch: the noise scale is then at least the batch
   and may be any larger. One whose bound is below the batch does not agree: with a meter that
   measures one step in K its |G|^2 is as often unresolved for want of measurements as for a large
   noise scale, and doubling on that would double on ignorance.

With step times, one rule replaces both: the batch goes to the one of the current
and the larger batches auto may take that needs the least time to the same progress, t(B) x
(1 + B_noise / B) (McCandlish et al. 2018: the steps to a goal are S_min (1 + B_noise / B), each
costing the bench's step time t(B)), with B_noise = c x B_simple (where unresolved, c x the lower
confidence bound of rule 1: the least it may be). Time is what it weighs, so it takes the estimate,
not a bound: a bound low of the noise scale is no safer in time, where it keeps a batch too small.
Where a step's cost barely grows with its batch (a small model, a device far from full) that
batch lies above the critical batch, which rules 1 and 2 never pass: they count steps, not seconds;
where it grows in proportion (one CPU thread), no larger batch saves time, and rules 1 and 2 would
spend samples on one. The step times come from the run itself (`--auto-step-times run`, the
default): each logged window without compilations or a switch's settling steps, after the run's
timing warm-up, whose steps were all plain (a point at its batch) or all measured by the meter in k
micro-batches (a point at batch / k, at the window's seconds / k: a micro-batch's forward and
backward, the meter's slices being the same computation), gives one point; t(B) at a batch is the
median of its windows, between batches linear, above the largest linear through the two largest
(held between the largest batch's time and that time scaled by the batch: a larger step costs no
less and no more per sample). From two batches on these decide; before, the bench's step times
(`--bench-jsonl` rows of this workload, size and target at auto's per-device batches:
`bench_step_seconds`) where given, else rules 1 and 2. Times measured in the run differ between
runs, so with them a resumed run may switch where an uninterrupted one did not; `--auto-step-times
off` decides by the noise scale and the bench rows alone, the same at every run.

Where it starts: the meter measures every step of the run's first `AUTO_FIRST_READING_WINDOWS`
windows (`first_reading_steps`; one step in `--noise-scale-every` after them), so the first
reading comes from as many steps as a window holds, and rule 1 takes the batch from M to where
that reading puts it at once. auto never steps in micro-batches: it stops below the cap, where an
explicit schedule goes past it.

What every switch keeps (`trainspeed.train.loop`):
- the data order: the loader reads batches of one unit (the greatest common divisor of the
  schedule's batches), and a step of k units concatenates k consecutive global batches of that
  unit, which are consecutive entries of the epoch's one permutation; a step that does not fit into
  what is left of an epoch starts the next one (the rest of the epoch is dropped, as a fixed batch
  drops its last incomplete global batch), so no sample is read twice in an epoch or skipped
  before its end;
- the learning rate: the peak at the new batch by the run's scaling rule (linear or sqrt relative
  to the reference batch), times the warm-up and cosine, which are defined over samples trained;
- the memory cap (`--max-batch-per-device`, or the largest per-device batch `--bench-jsonl`'s bench
  rows ran below their first out-of-memory batch): past it a step runs over equal micro-batches of
  at most the cap, accumulated into one optimizer step;
- the noise-scale meter measures at the new per-rank batch.

The calibration of `--critical-batch`: each row (kind `critical-batch`, or any JSON row with the
fields) gives a ratio critical_batch / b_simple at its samples; the ratio at the samples trained so
far is the linear interpolation between the rows on either side, the nearest row's beyond them.

This module imports no torch: the launcher's checks, the plan and the tests read it.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from trainspeed.errors import UsageError
from trainspeed.flags import MAX_BATCH_POWER, MAX_BATCH_SIZE
from trainspeed.rows import WHOLE_MAX as SAMPLES_MAX
from trainspeed.user_json import cut_short

if TYPE_CHECKING:
    from trainspeed.gradients.rows import NoiseScaleRecord
    from trainspeed.train.config import TrainConfig

AUTO = "auto"
AUTO_PATIENCE = 2
"""Readings in a row that must say B_crit >= 2 x the batch before auto doubles it on its point
estimate (rule 2): one reading is a moving average of a noisy estimate, and a doubling is never
taken back. A reading whose lower confidence bound allows the doubling takes it at once (rule 1)."""
AUTO_CONFIDENCE_Z = 2.0
"""Standard errors of |G|^2 in auto's lower confidence bound on B_simple (rule 1): one-sided, about
97.7% of readings' bounds lie below the noise scale they bound (`trainspeed.gradients.rows`)."""
AUTO_FIRST_READING_WINDOWS = 2
"""Logged windows at the run's start whose every step the meter measures under auto: its first
reading, after which rule 1 may leave the minimum batch at once."""
STEP_TIME_WINDOWS_KEPT = 16
"""The newest windows' step times kept per batch (and carried by a checkpoint): the median of that
many shrugs off a validation's or another job's spikes."""
CRITICAL_BATCH_KIND = "critical-batch"
UNGIVEN_BATCH_PER_DEVICE = 1024
"""TrainConfig's default --batch-size-per-device, read as "not given" beside a schedule."""
ENTRY = re.compile(r"\s*(\d+)\s*@\s*(\d+)\s*")
SHOWN_SCHEDULE = 80
"""Characters of a schedule shown in an error line (a flag may hold thousands)."""


@dataclass(frozen=True)
class ScheduleEntry:
    """From `from_samples` samples trained on, the global batch is `global_batch`."""

    global_batch: int
    from_samples: int


def _entry_number(digits: str, high: int, what: str, where: str) -> int:
    """One number of an entry, at most `high`: its digits counted before they are converted (Python
    refuses more than 4,300 digits with an error of its own, and a batch of 400 digits overflows
    the arithmetic of the run's length)."""
    if len(digits.lstrip("0")) > len(str(high)) or int(digits) > high:
        raise UsageError(f"{where}: {what} {cut_short(digits)} is more than {high:,}, the most a run takes; write "
                         "e.g. 64@0,128@20000,256@60000")
    return int(digits)


def parse_schedule(text: str, devices: int = 1) -> tuple[ScheduleEntry, ...]:
    """The entries of `B@S,B@S,...`; UsageError for text that is not that, a batch past 2^40 or
    samples past 2^63-1, a first entry not at @0, samples or batches that do not increase, or a
    batch that is not a multiple of `devices`."""
    where = f"train: --batch-schedule {cut_short(text, SHOWN_SCHEDULE)!r}"
    entries = []
    for item in (part for part in text.split(",") if part.strip()):
        match = ENTRY.fullmatch(item)
        if match is None:
            raise UsageError(f"{where}: {cut_short(item.strip(), SHOWN_SCHEDULE)!r} is not GLOBAL_BATCH@SAMPLES; "
                             "write e.g. 64@0,128@20000,256@60000, or auto")
        entries.append(ScheduleEntry(_entry_number(match.group(1), MAX_BATCH_SIZE, "global batch", where),
                                     _entry_number(match.group(2), SAMPLES_MAX, "samples", where)))
    if not entries:
        raise UsageError(f"{where}: no entry; write e.g. 64@0,128@20000,256@60000, or auto")
    if entries[0].from_samples != 0:
        raise UsageError(f"{where}: the first batch must start at @0 (the run's first step), not "
                         f"@{entries[0].from_samples}")
    for before, after in zip(entries, entries[1:]):
        if after.from_samples <= before.from_samples:
            raise UsageError(f"{where}: the samples must increase from entry to entry, and "
                             f"{after.global_batch}@{after.from_samples} follows {before.global_batch}@{before.from_samples}")
        if after.global_batch <= before.global_batch:
            raise UsageError(f"{where}: the batch must grow from entry to entry, and "
                             f"{after.global_batch}@{after.from_samples} follows {before.global_batch}@{before.from_samples}")
    for entry in entries:
        if entry.global_batch < 1:
            raise UsageError(f"{where}: a global batch of 0 trains nothing; give batches of 1 or more")
        if entry.global_batch % devices:
            raise UsageError(f"{where}: global batch {entry.global_batch} is not a multiple of the run's {devices} "
                             f"devices (--nproc x --nnodes); give multiples of {devices}")
    return tuple(entries)


def scheduled_batch(entries: Iterable[ScheduleEntry], samples: int) -> int:
    """The global batch of a step that starts after `samples` samples."""
    batch = None
    for entry in entries:
        if entry.from_samples <= samples:
            batch = entry.global_batch
    assert batch is not None, "a schedule starts at @0"
    return batch


@dataclass(frozen=True)
class RunLength:
    """How long a run with a schedule trains: `total_steps` optimizer steps where known in advance
    (an explicit schedule), else until `budget_samples`; the LR's warm-up and cosine end at
    `total_samples`."""

    total_samples: int
    total_steps: int | None = None
    budget_samples: int | None = None

    def done(self, step: int, samples: int) -> bool:
        if self.total_steps is not None:
            return step >= self.total_steps
        assert self.budget_samples is not None
        return samples >= self.budget_samples


def walk(entries: tuple[ScheduleEntry, ...], *, steps: int | None = None, samples: int | None = None) -> tuple[int, int]:
    """(steps, samples) after `steps` steps of the schedule, or at its first step boundary at or
    past `samples` samples; each segment between entries in closed form."""
    done_steps, done_samples = 0, 0
    for index, entry in enumerate(entries):
        following = entries[index + 1].from_samples if index + 1 < len(entries) else math.inf
        if done_samples >= following:
            continue
        segment = math.inf if following == math.inf else math.ceil((following - done_samples) / entry.global_batch)
        if samples is not None:
            segment = min(segment, math.ceil(max(0, samples - done_samples) / entry.global_batch))
        if steps is not None:
            segment = min(segment, steps - done_steps)
        done_steps += int(segment)
        done_samples += int(segment) * entry.global_batch
        if (steps is not None and done_steps >= steps) or (samples is not None and done_samples >= samples):
            break
    return done_steps, done_samples


def run_length(config: "TrainConfig", train_samples: int | None) -> RunLength:
    """The length of a run with a schedule: from --steps (an explicit schedule's steps), --samples,
    or --epochs E as a budget of E x the training split's samples."""
    budget = config.samples
    if config.epochs is not None:
        assert train_samples is not None
        budget = max(1, math.ceil(config.epochs * train_samples))
    schedule = config.batch.schedule
    assert schedule is not None
    if schedule == AUTO:
        assert budget is not None, "auto is refused with --steps"
        return RunLength(total_samples=budget, budget_samples=budget)
    entries = parse_schedule(schedule, config.world_size)
    steps, samples = walk(entries, steps=config.steps, samples=budget)
    return RunLength(total_samples=samples, total_steps=steps)


def first_reading_steps(config: "TrainConfig") -> int:
    """Steps at the start of the run whose every one the noise-scale meter measures: auto's first
    reading (`AUTO_FIRST_READING_WINDOWS` windows); 0 without auto."""
    if config.batch.schedule != AUTO:
        return 0
    return AUTO_FIRST_READING_WINDOWS * config.log_every


def start_batch(config: "TrainConfig") -> int:
    """The global batch the schedule starts at."""
    if config.batch.schedule == AUTO:
        assert config.batch.global_batch_min is not None
        return config.batch.global_batch_min
    assert config.batch.schedule is not None
    return parse_schedule(config.batch.schedule, config.world_size)[0].global_batch


def batches_of(config: "TrainConfig") -> list[int]:
    """Every global batch the schedule may train at (auto: its min doubled up to its max)."""
    if config.batch.schedule == AUTO:
        low, high = config.batch.global_batch_min, config.batch.global_batch_max
        assert low is not None and high is not None
        batches = [low]
        while batches[-1] * 2 <= high:
            batches.append(batches[-1] * 2)
        return batches
    assert config.batch.schedule is not None
    return [entry.global_batch for entry in parse_schedule(config.batch.schedule, config.world_size)]


def loader_unit(config: "TrainConfig") -> int:
    """The per-device batch the loader reads: the greatest common divisor of every per-device batch
    of the schedule, so that each step is a whole number of the loader's batches."""
    return math.gcd(*(batch // config.world_size for batch in batches_of(config)))


def micro_batches_for(per_device: int, cap: int | None, at_least: int = 1) -> int:
    """Equal micro-batches a step of `per_device` samples per device runs over: the fewest, a
    multiple of `at_least` (the noise scale's own slices) dividing `per_device`, of at most `cap`
    samples each."""
    for parts in range(at_least, per_device + 1, at_least):
        if per_device % parts == 0 and (cap is None or per_device // parts <= cap):
            return parts
    raise UsageError(f"train: a per-device batch of {per_device} cannot be cut into {at_least} equal slices")


def check_schedule_settings(config: "TrainConfig") -> None:
    """UsageError, naming the flag, for a schedule's settings that no run could follow (what needs
    the workload or the data is `trainspeed.train.launch`'s to check)."""
    settings = config.batch
    auto_only = (("--global-batch-min", settings.global_batch_min), ("--global-batch-max", settings.global_batch_max),
                 ("--critical-batch", settings.critical_batch))
    if settings.schedule is None:
        for flag, value in (*auto_only, ("--max-batch-per-device", settings.max_batch_per_device)):
            if value is not None:
                raise UsageError(f"train: {flag} belongs to a --batch-schedule; give one, or drop {flag} (a fixed "
                                 "run's batch is --batch-size-per-device)")
        return
    devices = config.world_size
    if settings.schedule == AUTO:
        low, high = settings.global_batch_min, settings.global_batch_max
        if low is None or high is None:
            raise UsageError("train: --batch-schedule auto needs --global-batch-min N (where it starts) and "
                             "--global-batch-max N (where it stops doubling)")
        if low > high:
            raise UsageError(f"train: --global-batch-min {low} is more than --global-batch-max {high}; give a min at "
                             "most the max")
        if low % devices:
            raise UsageError(f"train: --global-batch-min {low} is not a multiple of the run's {devices} devices "
                             f"(--nproc x --nnodes); give a multiple of {devices}")
        cap = settings.max_batch_per_device
        if cap is not None and low // devices > cap:
            raise UsageError(f"train: --global-batch-min {low} is {low // devices} per device, more than "
                             f"--max-batch-per-device {cap}, and auto never steps in micro-batches; give a smaller min")
        if config.steps is not None:
            raise UsageError("train: --batch-schedule auto decides its batches as it trains, so --steps N says no number "
                             "of samples, and the learning rate's schedule runs over samples; give --samples N or "
                             "--epochs E")
        if config.noise_scale == "off":
            raise UsageError("train: --batch-schedule auto follows the gradient noise scale, which --noise-scale off "
                             "does not measure; drop --noise-scale off")
        if devices == 1 and config.noise_scale_micro_batches < 2:
            raise UsageError("train: --batch-schedule auto on one device reads the noise scale, which one rank measures "
                             "without bias only over micro-batches; give --noise-scale-micro-batches 2 (or more)")
        start = low
    else:
        for flag, value in auto_only:
            if value is not None:
                raise UsageError(f"train: {flag} is for --batch-schedule auto; an explicit schedule names its batches")
        start = parse_schedule(settings.schedule, devices)[0].global_batch
    micro = config.noise_scale_micro_batches
    for batch in batches_of(config):
        if micro > 1 and (batch // devices) % micro:
            raise UsageError(f"train: --noise-scale-micro-batches {micro} must divide every per-device batch of the "
                             f"schedule, and global batch {batch} is {batch // devices} per device")
    per_device = config.batch_size_per_device
    if per_device != UNGIVEN_BATCH_PER_DEVICE and per_device != start // devices:
        raise UsageError(f"train: --batch-size-per-device {per_device} beside --batch-schedule, which starts at global "
                         f"batch {start} ({start // devices} per device); drop --batch-size-per-device")


# --- the memory cap and the calibration -------------------------------------------------------------

def bench_memory_cap(path: str, workload: str, size: str, target: str) -> int | None:
    """The largest per-device batch the bench rows of this workload, size and target ran at below
    the smallest batch that ran out of memory; None where none ran out of memory. UsageError
    where the file has no row of this configuration, or where every batch ran out of memory."""
    from trainspeed.bench.results import read_rows

    try:
        rows = read_rows(Path(path))
    except UsageError as error:
        raise UsageError(f"train: --bench-jsonl: {error}") from None
    mine = [row for row in rows if (row.workload, row.size, row.target) == (workload, size, target)]
    if not mine:
        raise UsageError(f"train: --bench-jsonl {path} has no row of {workload}/{size} on {target} to find its memory "
                         "cap in; run `trainspeed bench` for it first, or give --max-batch-per-device N")
    out_of_memory = [row.batch_size for row in mine if row.status == "oom"]
    if not out_of_memory:
        return None
    smallest = min(out_of_memory)
    ran = [row.batch_size for row in mine if row.status in ("ok", "invalid") and row.batch_size < smallest]
    if not ran:
        raise UsageError(f"train: --bench-jsonl {path}: {workload}/{size} on {target} ran out of memory at every batch "
                         f"the bench ran (from {smallest}); bench smaller batches, or give --max-batch-per-device N")
    return max(ran)


@dataclass(frozen=True)
class CalibrationPoint:
    """B_crit / B_simple at `samples` samples trained, from critical-batch rows."""

    samples: int
    ratio: float


CALIBRATION_MAX = 2.0**MAX_BATCH_POWER
"""The largest ratio B_crit / B_simple a calibration row may give, and 1 over it the smallest:
both are batches, from 1 to 2^40 samples, so no measured ratio lies beyond. Past it the
calibration times a reading overflows or vanishes, and auto doubles at every reading."""


def bench_step_seconds(path: str, workload: str, size: str, target: str) -> tuple[tuple[int, float], ...]:
    """Seconds per step at each per-device batch the bench rows of this workload, size and target
    ran (`ok`, without the meter, on the device feed or a host one where the device's is not there;
    the fastest row of a batch where several are), from their samples/s; () for none. UsageError
    where the file cannot be read."""
    from trainspeed.bench.results import read_rows

    try:
        rows = read_rows(Path(path))
    except UsageError as error:
        raise UsageError(f"train: --bench-jsonl: {error}") from None
    rates: dict[int, float] = {}
    for row in rows:
        if ((row.workload, row.size, row.target) != (workload, size, target) or row.status != "ok"
                or row.noise_scale is not None or not row.samples_per_s):
            continue
        rates[row.batch_size] = max(rates.get(row.batch_size, 0.0), row.samples_per_s)
    return tuple((batch, batch / rate) for batch, rate in sorted(rates.items()))


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def calibration_point(record: Any, source: Any) -> CalibrationPoint | None:
    """The calibration point of one row: a critical-batch row (kind `critical-batch`, or no kind)
    with `samples`, `critical_batch` and a resolved, positive `b_simple`; None for a row of another
    kind, or one without them (a point whose critical batch or noise scale is unknown holds None
    there; a measured B_simple not above 0, from a tr(Sigma) estimate below 0, gives no ratio).
    UsageError naming the row for values no study measures: they are handed in, so refused, never
    passed over (a NaN or infinity, a critical batch outside the batches a run takes, a ratio of
    the two beyond `CALIBRATION_MAX`)."""
    if not isinstance(record, dict) or record.get("kind", CRITICAL_BATCH_KIND) != CRITICAL_BATCH_KIND:
        return None
    samples, critical, simple = record.get("samples"), record.get("critical_batch"), record.get("b_simple")
    if samples is None or critical is None or simple is None:
        return None
    where = f"train: --critical-batch {source}: critical-batch row"
    if not (isinstance(samples, int) and not isinstance(samples, bool) and 0 <= samples <= SAMPLES_MAX):
        raise UsageError(f"{where}: samples must be a whole number from 0 to {SAMPLES_MAX}, not {_shown(samples)}")
    if not (_number(critical) and 1 <= critical <= MAX_BATCH_SIZE):
        raise UsageError(f"{where}: critical_batch must be a batch, from 1 to 2^{MAX_BATCH_POWER}, not {_shown(critical)}")
    if not (_number(simple) and math.isfinite(simple)):
        raise UsageError(f"{where}: b_simple must be a finite number, not {_shown(simple)}")
    if simple <= 0:
        return None
    ratio = critical / simple
    if not 1 / CALIBRATION_MAX <= ratio <= CALIBRATION_MAX:
        raise UsageError(f"{where}: critical_batch {critical:g} / b_simple {simple:g} = {ratio:.3g}, a calibration no "
                         f"study measures (B_crit / B_simple from 2^-{MAX_BATCH_POWER} to 2^{MAX_BATCH_POWER}); give "
                         "the rows `trainspeed study critical-batch` wrote")
    return CalibrationPoint(samples, ratio)


def _shown(value: Any) -> str:
    return cut_short(repr(value))


def read_calibration(path: str) -> tuple[CalibrationPoint, ...]:
    """The calibration points of critical-batch rows (`calibration_point`): every `*.jsonl` of a
    folder (rows of other kinds passed over), or one file; the ratios of rows at the same samples
    averaged. UsageError where there is none, or a row holds values no study measures."""
    from trainspeed.rows import read_records

    folder = Path(path)
    if not folder.exists():
        raise UsageError(f"train: --critical-batch {path}: no such file or directory")
    files = sorted(folder.glob("*.jsonl")) if folder.is_dir() else [folder]
    ratios: dict[int, list[float]] = {}
    for file in files:
        for record, source in read_records(file):
            point = calibration_point(record, source)
            if point is not None:
                ratios.setdefault(point.samples, []).append(point.ratio)
    if not ratios:
        raise UsageError(f"train: --critical-batch {path} holds no critical-batch rows (samples, critical_batch and a "
                         "resolved b_simple); give the folder of `trainspeed study critical-batch`, or drop "
                         "--critical-batch (the calibration is then 1)")
    return tuple(CalibrationPoint(samples, sum(values) / len(values)) for samples, values in sorted(ratios.items()))


def calibration_at(points: tuple[CalibrationPoint, ...], samples: int) -> float:
    """c at `samples`: linear between the points on either side, the nearest point's beyond them, 1
    without points."""
    if not points:
        return 1.0
    if samples <= points[0].samples:
        return points[0].ratio
    for before, after in zip(points, points[1:]):
        if samples <= after.samples:
            share = (samples - before.samples) / (after.samples - before.samples)
            return before.ratio + share * (after.ratio - before.ratio)
    return points[-1].ratio


# --- auto ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class NoiseReading:
    """The noise scale at one reading: its value, or, where it is not resolved, None with a lower
    bound where the meter gives one."""

    b_simple: float | None
    lower: float | None
    resolved: bool
    low: float | None = None
    """A lower confidence bound on B_simple, resolved or not (`NoiseScaleReading.confident_lower`,
    `AUTO_CONFIDENCE_Z` standard errors): what rule 1 jumps by; None where unknown."""

    @property
    def bound(self) -> float | None:
        """`low`, or where it is not given, an unresolved reading's lower bound (the same number)."""
        return self.low if self.low is not None or self.resolved else self.lower


def noise_reading(record: NoiseScaleRecord) -> NoiseReading:
    """The reading of one noise-scale row (`NoiseScaleRecord.reading`): its moving average B_simple
    where resolved; else none, with the row's lower bound where it has one (auto reads it as larger
    than any batch tried). A row not assessed for resolution (written before the meter kept a
    standard error) is read by its value, and one without a positive |G|^2 (no value) as unresolved."""
    reading = record.reading
    resolved = reading.resolved is not False and reading.value is not None
    return NoiseReading(b_simple=reading.value if resolved else None, lower=reading.lower_bound, resolved=resolved,
                        low=reading.confident_lower(AUTO_CONFIDENCE_Z))


def least_reading(readings: list[NoiseReading]) -> NoiseReading | None:
    """The reading of several networks that allows the smallest batch (an unresolved one the largest)."""
    resolved = [reading for reading in readings if reading.resolved]
    if resolved:
        return min(resolved, key=lambda reading: reading.b_simple or 0.0)
    return readings[0] if readings else None


@dataclass(frozen=True)
class AutoRule:
    """What auto may do: its batches, the devices, the memory cap, the calibration."""

    global_batch_min: int
    global_batch_max: int
    devices: int
    max_batch_per_device: int | None = None
    calibration: tuple[CalibrationPoint, ...] = ()
    patience: int = AUTO_PATIENCE
    step_seconds: tuple[tuple[int, float], ...] = ()
    """(per-device batch, seconds per step) of the bench rows (`bench_step_seconds`); () without them."""

    def seconds_at(self, global_batch: int) -> float | None:
        """The bench's seconds per step at `global_batch`'s per-device batch; None where it did not run it."""
        return dict(self.step_seconds).get(global_batch // self.devices)

    def fastest_to_progress(self, global_batch: int, noise: float,
                            seconds_at: Callable[[int], float | None]) -> int | None:
        """Of `global_batch` and its doublings that fit and have a step time (`seconds_at`: the
        run's or the bench's), the one of least t(B) (1 + noise / B), the time to the same
        progress; None where the current one has no step time."""
        if seconds_at(global_batch) is None:
            return None
        best, best_time, batch = global_batch, math.inf, global_batch
        while self.fits(batch) or batch == global_batch:
            seconds = seconds_at(batch)
            if seconds is not None and seconds * (1.0 + noise / batch) < best_time:
                best, best_time = batch, seconds * (1.0 + noise / batch)
            batch *= 2
        return best

    def fits(self, global_batch: int) -> bool:
        per_device = global_batch // self.devices
        return global_batch <= self.global_batch_max and (self.max_batch_per_device is None
                                                          or per_device <= self.max_batch_per_device)

    def largest_within(self, global_batch: int, limit: float) -> int:
        """The largest of `global_batch` doubled 0 or more times that is at most `limit` and fits."""
        while 2 * global_batch <= limit and self.fits(2 * global_batch):
            global_batch *= 2
        return global_batch


@dataclass(frozen=True)
class AutoDecision:
    """One reading's outcome: the batch after it, the readings in a row that agreed to double, and
    what it read."""

    global_batch: int
    agreeing: int
    critical_batch: float
    """c x B_simple, infinite where the noise scale is not resolved (rule 2 then reads `critical_batch_low`)."""
    calibration: float
    critical_batch_low: float | None = None
    """c x the reading's lower confidence bound on B_simple (None: unknown): rule 1's bound."""
    confident: bool = False
    """True where rule 1 or the step times moved the batch (by that bound), False where rule 2 did or none."""
    timed: bool = False
    """True where the step times decided, whether or not the batch moved."""
    timed_by: str | None = None
    """Whose step times decided: `run` (measured in the run) or `bench` (`AutoRule.step_seconds`); None where none did."""

    def doubled(self, before: int) -> bool:
        return self.global_batch > before


def window_step_time(global_batch: int, steps: int, split_steps: int, parts: int,
                     seconds_per_step: float) -> tuple[int, float] | None:
    """A logged window's point of t(B), (global batch, seconds per step): its batch where no step
    was split, batch / k at a k-th of its seconds where the meter split every one into k slices
    (module docstring); None for a window of both kinds, which is neither."""
    if steps < 1 or not math.isfinite(seconds_per_step) or seconds_per_step <= 0:
        return None
    if split_steps == 0:
        return global_batch, seconds_per_step
    if split_steps == steps and parts > 1 and global_batch % parts == 0:
        return global_batch // parts, seconds_per_step / parts
    return None


def run_seconds_at(points: tuple[tuple[int, float], ...], global_batch: int) -> float | None:
    """t(`global_batch`) from the run's points (batch, median seconds; ascending): a batch's own,
    linear between two, above the largest linear through the two largest, held between the
    largest's time and that time scaled by the batch; None below the smallest or from fewer than 2."""
    if len(points) < 2 or global_batch < points[0][0]:
        return None
    for (low_batch, low_seconds), (high_batch, high_seconds) in zip(points, points[1:]):
        if global_batch == low_batch:
            return low_seconds
        if global_batch <= high_batch:
            share = (global_batch - low_batch) / (high_batch - low_batch)
            return low_seconds + share * (high_seconds - low_seconds)
    (low_batch, low_seconds), (high_batch, high_seconds) = points[-2], points[-1]
    guess = high_seconds + (high_seconds - low_seconds) / (high_batch - low_batch) * (global_batch - high_batch)
    return min(max(guess, high_seconds), high_seconds * global_batch / high_batch)


def auto_step(rule: AutoRule, global_batch: int, agreeing: int, reading: NoiseReading, samples: int,
              run_times: tuple[tuple[int, float], ...] = ()) -> AutoDecision:
    """The rules of auto at one reading (module docstring), as a pure function of its state;
    `run_times` the run's own points of t(B) (`BatchPlan.step_times`)."""
    calibration = calibration_at(rule.calibration, samples)
    critical = math.inf if not reading.resolved or reading.b_simple is None else calibration * reading.b_simple
    low = None if reading.bound is None else calibration * reading.bound
    noise = max(critical, 0.0) if critical != math.inf else low  # the estimate; where unresolved, the least it may be
    if noise is not None:
        sources = (("run", lambda batch: run_seconds_at(run_times, batch)), ("bench", rule.seconds_at))
        for timed_by, seconds_at in sources:
            fastest = rule.fastest_to_progress(global_batch, noise, seconds_at)
            if fastest is not None:
                return AutoDecision(fastest, 0, critical, calibration, low,
                                    confident=fastest > global_batch and noise == low, timed=True, timed_by=timed_by)
    if low is not None:
        jump = rule.largest_within(global_batch, low)
        if jump >= 2 * global_batch:
            return AutoDecision(jump, 0, critical, calibration, low, confident=True)
    if critical == math.inf:  # unresolved: at least the batch, and maybe any larger
        agrees = low is not None and low >= global_batch
    else:
        agrees = critical >= 2 * global_batch
    agreeing = min(rule.patience, agreeing + 1) if agrees else 0
    if agreeing >= rule.patience and rule.fits(2 * global_batch):
        return AutoDecision(2 * global_batch, 0, critical, calibration, low)
    return AutoDecision(global_batch, agreeing, critical, calibration, low)


# --- the schedule while a run trains ----------------------------------------------------------------

@dataclass(frozen=True)
class SwitchMade:
    """One switch of the batch: the first step at the new batch, the samples trained before it."""

    step: int
    samples: int
    from_global_batch: int
    to_global_batch: int


@dataclass
class BatchPlan:
    """The schedule while a run trains: the current global batch, the switches made and auto's count
    of agreeing readings; a checkpoint carries its `state()`."""

    entries: tuple[ScheduleEntry, ...] | None
    rule: AutoRule | None
    global_batch: int
    agreeing: int = 0
    switches: list[SwitchMade] = field(default_factory=list)
    next_global_batch: int | None = None
    """auto: the batch its last reading decided on, until the switch to it."""
    last_decision: AutoDecision | None = None
    pending: dict[str, Any] | None = None
    """The fields of the last switch's `batch-switch` row, until the first step at its batch ran."""
    window_seconds: dict[int, list[float]] = field(default_factory=dict)
    """auto with `--auto-step-times run`: the seconds per step of the run's timed windows by
    global batch (`window_step_time`), the newest `STEP_TIME_WINDOWS_KEPT` of each."""

    @classmethod
    def of(cls, config: "TrainConfig", max_batch_per_device: int | None,
           step_seconds: tuple[tuple[int, float], ...] = ()) -> "BatchPlan":
        if config.batch.schedule == AUTO:
            assert config.batch.global_batch_min is not None and config.batch.global_batch_max is not None
            calibration = read_calibration(config.batch.critical_batch) if config.batch.critical_batch else ()
            rule = AutoRule(config.batch.global_batch_min, config.batch.global_batch_max, config.world_size,
                            max_batch_per_device, calibration, step_seconds=step_seconds)
            return cls(entries=None, rule=rule, global_batch=rule.global_batch_min)
        assert config.batch.schedule is not None
        entries = parse_schedule(config.batch.schedule, config.world_size)
        return cls(entries=entries, rule=None, global_batch=entries[0].global_batch)

    @property
    def text(self) -> str:
        if self.entries is None:
            return AUTO
        return ",".join(f"{entry.global_batch}@{entry.from_samples}" for entry in self.entries)

    def due(self, samples: int) -> int:
        """The global batch of the next step, which starts after `samples` samples."""
        if self.entries is not None:
            return scheduled_batch(self.entries, samples)
        return self.next_global_batch or self.global_batch

    def time_window(self, point: tuple[int, float] | None) -> None:
        """Keep a window's point of t(B) (`window_step_time`; None: nothing to keep)."""
        if point is None:
            return
        kept = self.window_seconds.setdefault(point[0], [])
        kept.append(point[1])
        del kept[:-STEP_TIME_WINDOWS_KEPT]

    @property
    def step_times(self) -> tuple[tuple[int, float], ...]:
        """The run's points of t(B): (global batch, median seconds per step), ascending."""
        return tuple((batch, statistics.median(seconds)) for batch, seconds in sorted(self.window_seconds.items())
                     if seconds)

    def read(self, reading: NoiseReading, samples: int) -> AutoDecision:
        """auto's reading at `samples`: the batch of the steps after it (`due`)."""
        assert self.rule is not None
        decision = auto_step(self.rule, self.global_batch, self.agreeing, reading, samples, self.step_times)
        self.agreeing = decision.agreeing
        self.next_global_batch = decision.global_batch
        self.last_decision = decision
        return decision

    def switch(self, step: int, samples: int) -> SwitchMade:
        """Switch to the due batch before step `step` + 1."""
        made = SwitchMade(step + 1, samples, self.global_batch, self.due(samples))
        self.global_batch = made.to_global_batch
        self.next_global_batch = None
        self.switches.append(made)
        return made

    def state(self) -> dict[str, Any]:
        """Plain values for a checkpoint."""
        return {"global_batch": self.global_batch, "agreeing": self.agreeing,
                "switches": [[made.step, made.samples, made.from_global_batch, made.to_global_batch]
                             for made in self.switches],
                "pending": dict(self.pending) if self.pending is not None else None,
                "window_seconds": [[batch, list(seconds)] for batch, seconds in sorted(self.window_seconds.items())]}

    def load_state(self, state: Any) -> None:
        """Continue from a checkpoint's `state()`; ValueError for one that is not."""
        if not isinstance(state, dict):
            raise ValueError(f"the batch schedule's state is {type(state).__name__}, not the dict a run writes")
        self.global_batch, self.agreeing = int(state["global_batch"]), int(state["agreeing"])
        self.switches = [SwitchMade(*(int(value) for value in made)) for made in state["switches"]]
        self.next_global_batch = None
        pending = state.get("pending")
        if pending is not None and not isinstance(pending, dict):
            raise ValueError(f"the batch schedule's pending switch is {type(pending).__name__}, not a dict")
        self.pending = pending
        self.window_seconds = _window_seconds(state.get("window_seconds", []))  # absent in older checkpoints


def _window_seconds(saved: Any) -> dict[int, list[float]]:
    """A checkpoint's `window_seconds` back as a dict; ValueError for one that is not a list of
    [batch, [seconds, ...]] of positive numbers."""
    if not isinstance(saved, list):
        raise ValueError(f"the batch schedule's step times are {type(saved).__name__}, not a list")
    loaded: dict[int, list[float]] = {}
    for entry in saved:
        if (not isinstance(entry, list) or len(entry) != 2 or not isinstance(entry[0], int) or entry[0] < 1
                or not isinstance(entry[1], list)
                or not all(_number(seconds) and 0 < seconds < math.inf for seconds in entry[1])):
            raise ValueError(f"the batch schedule's step times hold {cut_short(repr(entry), SHOWN_SCHEDULE)}, "
                             "not [batch, [seconds, ...]]")
        loaded[entry[0]] = [float(seconds) for seconds in entry[1][-STEP_TIME_WINDOWS_KEPT:]]
    return loaded
