"""A port check says what it is doing while a part of it runs long (XLA compiling a large graph for
minutes says nothing but its own alarm), and compiling that long is a finding of the check."""

from __future__ import annotations

import dataclasses
import threading

from trainspeed.bench.port_check import Progress
from trainspeed.bench.port_check_rows import PORTED, PortCheck, verdict
from trainspeed.rows import Source, parse_row, row_record


class Lines:
    """A stream that keeps the lines written to it and says when the first has come."""

    def __init__(self) -> None:
        self.text = ""
        self.first = threading.Event()

    def write(self, text: str) -> None:
        self.text += text
        if "\n" in self.text:
            self.first.set()

    def flush(self) -> None:
        pass


def test_a_part_that_runs_long_says_what_it_does_and_what_xla_has_compiled_meanwhile() -> None:
    compiled = iter([(3, 10.0), (5, 70.0)])  # before the part, and when its line is written
    stream = Lines()
    progress = Progress(lambda: next(compiled), stream=stream, after_s=0.0, every_s=3600.0)
    with progress.part("running warm-up step 1 of 3 of lstm_lm tiny on xla:lazy:fp32"):
        assert stream.first.wait(60)  # the part runs until its line has been written
    (line,) = stream.text.splitlines()
    assert line == ("check: still running warm-up step 1 of 3 of lstm_lm tiny on xla:lazy:fp32 after 0 s; XLA compiles "
                    "a step's graph the first time it runs it (graphs compiled since this began: 2, in 1 min 0 s)")


def test_a_part_that_ends_soon_says_nothing() -> None:
    stream = Lines()
    with Progress(lambda: (0, 0.0), stream=stream, after_s=3600.0).part("building"):
        pass
    assert stream.text == ""


def test_compiling_longer_than_a_minute_is_a_finding_and_a_line_of_the_check() -> None:
    assert verdict([], 0, 0.0, compile_s=12.0) == PORTED
    said = verdict([], 0, 0.0, compile_s=312.0)
    assert said.startswith("not ported: compiling took 5 min 12 s (a graph this large, as a Python loop over time "
                           "steps or an RNN unrolled step by step makes, compiles again on every new shape)")
    check = PortCheck(timestamp="2026-01-01T00:00:00+00:00", workload="lstm_lm", size="tiny", target="xla:lazy:fp32",
                      device_name="XLA CPU", batch_size=8, warmup_steps=3, steps=5, fallback_ops=[],
                      compiles_in_steps=0, device_to_host_per_step=0.0, final_loss=5.5, verdict=said, ported=False,
                      compile_s=312.0)
    assert "time compiling, warm-up included: 5 min 12 s" in check.lines()
    # a check written before the time was recorded still reads, without it
    record = row_record(check)
    del record["compile_s"]
    read, _ = parse_row(PortCheck, record, Source("check.json"))
    assert read == dataclasses.replace(check, compile_s=None)
    assert not any(line.startswith("time compiling") for line in read.lines())
