"""The remote family as users run it: its names, and `bench` and `train` through it from the CLI,
against a server in this process (so a local run in the same process is bit-comparable), also one
serving a workload of the user's own (the tests' toy, tests/toy_workload.py) as `trainspeed serve
--workload` does."""

from __future__ import annotations

import json
import math
import shutil
import statistics

import pytest
import toy_workload
import torch
from child_commands import run_trainspeed, trainspeed_env

from trainspeed.bench.config import TimingPlan
from trainspeed.bench.timing import time_training
from trainspeed.cli import main
from trainspeed.errors import UsageError
from trainspeed.targets import all_target_names, get_target, target_family
from trainspeed.targets.remote import RemoteTarget
from trainspeed.workloads import get_workload

USER_WORKLOAD = "toy_workload:ToyWorkload"


@pytest.mark.parametrize(
    "text, name, in_flight, link",
    [
        ("remote:127.0.0.1:50051/cpu:eager:fp32", "remote:127.0.0.1:50051/cpu:eager:fp32", 1, None),
        ("remote:[::1]:1/cuda:compile:bf16/in-flight=2", "remote:[::1]:1/cuda:compile:bf16/in-flight=2", 2, None),
        ("remote:h:1/cpu:eager:fp32/link=1gbit-0.1ms+in-flight=1", "remote:h:1/cpu:eager:fp32/link=1gbit-0.1ms", 1, "1gbit-0.1ms"),
        ("remote:h:1/cpu:eager:fp32/rate=100mbit+rtt=1ms", "remote:h:1/cpu:eager:fp32/rate=100mbit+rtt=1ms", 1, None),
    ],
)
def test_names_parse_and_print_canonically(text, name, in_flight, link):
    spec = RemoteTarget.parse_spec(text)
    assert str(spec) == name and spec.switches.in_flight == in_flight and spec.switches.link == link
    assert spec.inner.device in ("cpu", "cuda") and spec.mode == spec.inner.mode


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("remote:127.0.0.1:50051", "write remote:HOST:PORT/device:mode:precision"),
        ("remote:127.0.0.1/cpu:eager:fp32", "bad address"),
        ("remote:127.0.0.1:1/cpu:eager", "is not device:mode:precision"),
        ("remote:127.0.0.1:1/remote:eager:fp32", "not another remote one"),
        ("remote:127.0.0.1:1/cpu:eager:fp32/in-flight=0", "in-flight must be a whole number >= 1"),
        ("remote:127.0.0.1:1/cpu:eager:fp32/speed=9", "unknown, empty or repeated switch 'speed=9'"),
        ("remote:127.0.0.1:1/cpu:eager:fp32/rate=fast", "bad rate 'fast'"),
        ("remote:127.0.0.1:1/cpu:eager:fp32/link=a b", "a link label is"),
    ],
)
def test_bad_names_say_what_is_wrong(text, fragment):
    with pytest.raises(UsageError, match=fragment):
        target_family(text)


def test_the_family_has_no_fixed_names_in_info():
    assert not [name for name in all_target_names() if name.startswith("remote")]


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_bench_through_the_cli_records_the_wire(server, capsys, tmp_results):
    remote = server.remote_name
    code, out, err = run_cli(
        capsys, "bench", "--targets", f"cpu:eager:fp32,{remote},{remote}/in-flight=2", "--batch-sizes", "16",
        "--windows", "2", "--min-window-s", "0.01", "--warmup-steps", "1", "--out", str(tmp_results), "--no-progress",
        "--no-plot", "--peak-tflops", "1",
    )
    assert code == 0, err
    rows = [json.loads(line) for line in tmp_results.read_text().splitlines()]
    assert len(rows) == 3 and all(row["status"] == "ok" for row in rows)
    local = [row for row in rows if row["target"] == "cpu:eager:fp32"]
    remote_rows = [row for row in rows if row["target"].startswith("remote:")]
    assert all(row["transport"] is None and row["server_step_s"] is None for row in local)
    for row in remote_rows:
        assert row["transport"] == "grpc" and row["link"] == "loopback" and row["in_flight"] in (1, 2)
        # The server's step time covers the client's timed windows, one sum per window: paired by
        # construction, not compared as timings.
        assert len(row["server_window_s"]) == len(row["window_s"]) == row["windows"] == 2
        assert row["server_step_s"] == statistics.median(s / row["steps_per_window"] for s in row["server_window_s"])
        assert row["wire_time_suspect"] is False
        assert row["bytes_sent_per_step"] < 100  # the batch stayed on the server
        assert "(remote, 127.0.0.1:" in row["device_name"]
    assert f"{remote}/in-flight=2" in out

    host_fed = tmp_results.with_name("host.jsonl")
    code, out, err = run_cli(
        capsys, "bench", "--targets", f"{remote}/in-flight=2", "--batch-sizes", "16", "--feed", "host", "--windows", "2",
        "--min-window-s", "0.01", "--warmup-steps", "1", "--out", str(host_fed), "--no-progress", "--no-plot",
        "--peak-tflops", "1",
    )
    assert code == 0, err
    (row,) = [json.loads(line) for line in host_fed.read_text().splitlines()]
    assert row["feed"] == "host" and row["bytes_per_step"] > 0
    assert row["bytes_per_step"] < row["bytes_sent_per_step"] < row["bytes_per_step"] * 1.01  # every batch crossed


def losses(run_dir) -> list[float]:
    return [row["loss"] for row in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines())
            if row.get("kind") == "train"]


TRAIN = ("train", "--synthetic-data", "--size", "tiny", "--batch-size-per-device", "16", "--log-every", "2",
         "--no-progress", "--threads", "1")


def test_train_through_the_cli_matches_local_and_resumes_from_the_servers_state(server, capsys, tmp_path):
    code, _, err = run_cli(capsys, *TRAIN, "--target", "cpu:eager:fp32", "--steps", "6", "--out", str(tmp_path / "local"))
    assert code == 0, err
    code, out, err = run_cli(capsys, *TRAIN, "--target", server.remote_name, "--steps", "6", "--out", str(tmp_path / "remote"))
    assert code == 0, err
    assert f"on {server.remote_name} x1" in out
    assert losses(tmp_path / "remote") == losses(tmp_path / "local") and len(losses(tmp_path / "local")) == 3

    # A pipelined run that checkpoints the server's state, continued from its step-4 checkpoint (as
    # if stopped there) in a fresh session: the same losses as the local run.
    pipelined, run_dir = f"{server.remote_name}/in-flight=2", tmp_path / "resumed"
    code, _, err = run_cli(capsys, *TRAIN, "--target", pipelined, "--steps", "6", "--checkpoint-every", "2", "--out", str(run_dir))
    assert code == 0, err
    (run_dir / "checkpoints" / "latest").write_text("step-000000004.pt\n")
    code, out, err = run_cli(capsys, *TRAIN, "--target", pipelined, "--steps", "6", "--resume", "--out", str(run_dir))
    assert code == 0, err
    assert "resumed from" in out and "at step 4" in out
    assert losses(run_dir) == losses(tmp_path / "local")


def test_train_through_a_remote_target_runs_one_rank(server, capsys, tmp_path):
    code, _, err = run_cli(capsys, *TRAIN, "--target", server.remote_name, "--steps", "2", "--nproc", "2",
                           "--out", str(tmp_path / "run"))
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "trains on one rank only" in lines[0], err
    assert not (tmp_path / "run").exists()


def test_the_servers_step_time_covers_the_timed_windows_only(server):
    """The first step, the warm-up and the probe step run on the server too; only the steps of the
    windows the bench keeps may go into `server_step_s`, or the wire time (client step - server
    step) is that of other steps."""
    target = get_target(server.remote_name)
    workload = get_workload("mahjong")
    trainable = target.build(workload, "tiny", 0)
    batch = target.move_batch(workload.synthetic_batch("tiny", 8, torch.Generator().manual_seed(0)))
    plan = TimingPlan(warmup_steps=3, windows=3, min_window_s=0.0, min_steps_per_window=2)
    timing = time_training(target, trainable, batch, plan)
    fields, every_step_s = target.row_fields(), trainable.session.stats.server_step_s
    before = 1 + plan.warmup_steps + 1  # the first step, the warm-up, the probe step
    assert timing.steps_per_window == 2 and timing.restarts == 0
    assert len(every_step_s) == before + plan.windows * timing.steps_per_window
    windows = [every_step_s[before + 2 * i: before + 2 * i + 2] for i in range(plan.windows)]
    assert fields["server_window_s"] == [math.fsum(w) for w in windows]
    assert fields["server_step_s"] == statistics.median(math.fsum(w) / 2 for w in windows)


def test_a_workload_the_server_does_not_build_is_one_line_before_any_row_or_run(server, capsys, tmp_path):
    out, run_dir = tmp_path / "rows.jsonl", tmp_path / "run"
    for command in (("bench", "--batch-sizes", "8", "--out", str(out), "--no-progress", "--no-plot"),
                    ("train", "--synthetic-data", "--steps", "2", "--out", str(run_dir), "--no-progress")):
        flag = "--targets" if command[0] == "bench" else "--target"
        code, _, err = run_cli(capsys, *command, "--workload", USER_WORKLOAD, "--size", "tiny", flag, server.remote_name)
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1, err
        assert lines[0] == (f"trainspeed: error: target {server.remote_name}: the server at {server.address} does not "
                            "build workload 'toy' (it builds mahjong, stylegan3); start it with "
                            "`trainspeed serve --workload toy_workload:FACTORY` on the same code")
    assert not out.exists() and not run_dir.exists()


@pytest.mark.slow
def test_a_user_workload_served_with_serve_workload_benches_and_trains_through_the_remote_target(capsys, tmp_path,
                                                                                                monkeypatch, serve):
    """The server in this process, serving the workload as `trainspeed serve --workload` does (the
    setting that flag gives); the client reaches it over gRPC as it would reach another machine."""
    running = serve(workloads=(USER_WORKLOAD,))
    name = running.remote_name
    out = tmp_path / "rows.jsonl"
    code, _, err = run_cli(capsys, "bench", "--workload", USER_WORKLOAD, "--size", "tiny", "--targets", name,
                           "--batch-sizes", "8,16", "--windows", "2", "--min-window-s", "0.01", "--warmup-steps", "1",
                           "--out", str(out), "--no-progress", "--no-plot", "--peak-tflops", "1")
    assert code == 0, err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(row["workload"], row["batch_size"], row["status"], row["transport"]) for row in rows] == [
        ("toy", 8, "ok", "grpc"), ("toy", 16, "ok", "grpc")]

    train = ("train", "--workload", USER_WORKLOAD, "--synthetic-data", "--size", "tiny", "--batch-size-per-device", "8",
             "--steps", "4", "--log-every", "2", "--no-progress", "--threads", "1")
    code, _, err = run_cli(capsys, *train, "--target", "cpu:eager:fp32", "--out", str(tmp_path / "local"))
    assert code == 0, err
    code, _, err = run_cli(capsys, *train, "--target", name, "--out", str(tmp_path / "remote"))
    assert code == 0, err
    assert losses(tmp_path / "remote") == losses(tmp_path / "local") and len(losses(tmp_path / "local")) == 2

    # Real data: the loader's own keys (its sample ids) stay on the client.
    data = ("--data", str(toy_workload.write_toy_data(tmp_path / "data")), "--num-workers", "0")
    on_data = tuple(arg for arg in train if arg != "--synthetic-data") + data
    code, _, err = run_cli(capsys, *on_data, "--target", "cpu:eager:fp32", "--out", str(tmp_path / "local-data"))
    assert code == 0, err
    code, _, err = run_cli(capsys, *on_data, "--target", name, "--out", str(tmp_path / "remote-data"))
    assert code == 0, err
    assert losses(tmp_path / "remote-data") == losses(tmp_path / "local-data") and len(losses(tmp_path / "local-data")) == 2

    # The same workload, edited here but not on the server: another definition under its name.
    edited = tmp_path / "edited" / "edited_workload.py"
    edited.parent.mkdir()
    shutil.copy(toy_workload.__file__, edited)
    edited.write_text(edited.read_text() + "\n# edited on the client only\n")
    monkeypatch.syspath_prepend(str(edited.parent))
    code, _, err = run_cli(capsys, "bench", "--workload", "edited_workload:ToyWorkload", "--size", "tiny",
                           "--targets", name, "--batch-sizes", "8", "--out", str(tmp_path / "edited.jsonl"),
                           "--no-progress", "--no-plot")
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert "builds another definition of workload 'toy' (server: module toy_workload, sha256 " in lines[0]
    assert "here: module edited_workload, sha256 " in lines[0] and lines[0].endswith("run the same code on both machines")
    assert not (tmp_path / "edited.jsonl").exists()


@pytest.mark.e2e
def test_remote_training_with_loader_workers_prints_no_grpc_fork_lines(server, tmp_path):
    """Forking loader workers in a process that talks gRPC made gRPC's core print "Other threads
    are currently calling into gRPC, skipping fork() handlers" on the user's terminal. The run is a
    child process with the environment a user's shell has (no gRPC variables of the test session)."""
    data, run_dir = tmp_path / "selfplay", tmp_path / "run"
    assert main(["data", "mahjong-selfplay", "--games", "4", "--out", str(data), "--no-progress"]) == 0
    env = {key: value for key, value in trainspeed_env().items() if not key.startswith("GRPC_")}
    result = run_trainspeed("train", "--target", server.remote_name, "--data", str(data), "--size", "tiny",
                            "--batch-size-per-device", "16", "--steps", "4", "--num-workers", "2", "--threads", "1",
                            "--no-progress", "--out", str(run_dir), env=env)
    assert result.returncode == 0, result.stderr
    assert "fork" not in result.stderr and result.stderr == "", result.stderr


def test_a_remote_target_looks_up_the_servers_chip_by_the_name_its_device_gives(server, monkeypatch):
    """The row's device name adds where the server is; the nominal peak is the server's chip's."""
    from types import SimpleNamespace

    target = get_target(server.remote_name)
    assert target.nominal_peak() is None  # the server's CPU has none
    monkeypatch.setattr(target, "info", SimpleNamespace(device_name="NVIDIA H200"))
    assert target.device_name().startswith("NVIDIA H200 (remote, ")
    assert target.nominal_peak().entry == "NVIDIA H200 fp32" and target.nominal_peak().tflops == 67.0
