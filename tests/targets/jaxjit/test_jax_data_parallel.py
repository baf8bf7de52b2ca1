"""`train --nproc N` on the jax family: one process, one program over a mesh of N local devices
(here JAX's host devices), the global batch split over them; with `--nnodes 2`, two processes of
4 devices each, one program over all 8 (JAX's distributed runtime on 127.0.0.1), each reading
its own part of every global batch. At one global batch the runs at N = 1, 2, 4, 8 and 2 x 4 end
with the same parameters: the same program, partitioned, whose gradient all-reduce sums in
another order. A workload's runs in one process (N = 1, 2, 4, 8) train one after another in one
child, as `trainspeed.api.train` calls (its JAX made 8 host devices at its start; a run of N takes
the first N): each run is the one `train --nproc N` runs, less the interpreter and JAX started
again. Mahjong's runs read self-play shards, one loader per device (`PerDeviceLoader`): a device's
slice of a global batch holds other samples than one loader's cut would give it, and the global
batch the same ones.

Tolerance: the runs' parameters, as one vector, lie within 1e-3 of the distance training moved them
from where they started (observed: 7e-5 for Mahjong tiny at 4 devices). Float32 sums in another
order move single values by ~1e-7, and AdamW turns a gradient that is zero but for rounding
(attention's key bias, to which softmax is blind) into steps of the learning rate either way; a run
that trained on another batch, or took one device's gradient for the whole one, is a distance of
the order of the movement itself away.
"""

from __future__ import annotations

import glob
import json
import socket
import subprocess
from pathlib import Path

import pytest
import torch
from child_commands import EXAMPLES, run_ok, start_child, trainspeed_argv

from trainspeed.targets.jaxjit import JaxTarget

pytestmark = [pytest.mark.skipif(JaxTarget.unavailable_reason() is not None, reason=str(JaxTarget.unavailable_reason())),
              pytest.mark.e2e, pytest.mark.slow]

GLOBAL_BATCH, STEPS, TOLERANCE = 32, 6, 1e-3


def source(data: Path | None) -> list[str]:
    """The run's data: `data` (read by one loader per device where a process drives several, each
    in the training process: worker processes per device loader are tests/data/test_per_device.py's,
    and 8 devices' workers would be 8 more processes here), or synthetic batches."""
    return ["--data", str(data), "--num-workers", "0"] if data is not None else ["--synthetic-data"]


RUNS_IN_ONE_PROCESS = """
import json
import sys

from trainspeed import api

for keywords in json.loads(sys.argv[1]):
    api.train(**keywords)
"""
HOST_DEVICES = 8


def trained_in_one_process(workload: str, size: str, runs: list[tuple[int, str]], out: Path,
                           data: Path | None) -> list[dict[str, torch.Tensor]]:
    """The parameters each run of `runs` ((devices, target), each at the global batch GLOBAL_BATCH)
    ends with, the runs trained one after another in one child process of HOST_DEVICES host devices."""
    from child_commands import python_argv, run_child, trainspeed_env

    fed = {"data": str(data), "num_workers": 0} if data is not None else {"synthetic_data": True}
    keywords = [{"workload": workload, "size": size, "target": target, **fed, "nproc": devices,
                 "batch_size_per_device": GLOBAL_BATCH // devices, "steps": STEPS, "seed": 0,
                 "no_progress": True, "out": str(out / f"run{index}")}
                for index, (devices, target) in enumerate(runs)]
    env = trainspeed_env(EXAMPLES, XLA_FLAGS=f"--xla_force_host_platform_device_count={HOST_DEVICES}",
                         JAX_PLATFORMS="cpu")
    result = run_child(python_argv("-c", RUNS_IN_ONE_PROCESS, json.dumps(keywords)), env=env, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return [last_checkpoint(out / f"run{index}") for index in range(len(runs))]


def trained_steps(workload: str, size: str, devices: int, out: Path, steps: int, target: str = "jax:jit:fp32",
                  data: Path | None = None) -> dict[str, torch.Tensor]:
    run_ok("train", "--workload", workload, "--size", size, "--target", target, *source(data),
           "--nproc", str(devices), "--batch-size-per-device", str(GLOBAL_BATCH // devices), "--steps", str(steps),
           "--seed", "0", "--out", str(out), path=(EXAMPLES,), timeout=600)
    return last_checkpoint(out)


def last_checkpoint(out: Path) -> dict[str, torch.Tensor]:
    (last,) = sorted(glob.glob(str(out / "checkpoints" / "step-*.pt")))[-1:]
    networks = torch.load(last, weights_only=True)["trainable"]["networks"]
    return {f"{network}/{name}": tensor for network, tensors in networks.items() for name, tensor in tensors.items()
            if tensor.is_floating_point()}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def process_command(workload: str, size: str, target: str, processes: int, devices_each: int, rank: int,
                    endpoint: str, out: Path, *extra: str, data: Path | None = None) -> list[str]:
    """`train` arguments of process `rank` of `processes`, `devices_each` host devices each, at the
    global batch GLOBAL_BATCH, into `out/process{rank}`."""
    return ["train", "--workload", workload, "--size", size, "--target", target, *source(data),
            "--nproc", str(devices_each), "--nnodes", str(processes), "--rdzv-backend", "static",
            "--node-rank", str(rank), "--rdzv-endpoint", endpoint,
            "--batch-size-per-device", str(GLOBAL_BATCH // (processes * devices_each)), "--seed", "0",
            "--out", str(out / f"process{rank}"), *extra]


def trained_on_processes(workload: str, size: str, processes: int, devices_each: int, out: Path,
                         target: str = "jax:jit:fp32", data: Path | None = None) -> dict[str, torch.Tensor]:
    """The parameters `processes` commands of `devices_each` host devices each end with, one
    program over all their devices (JAX's distributed runtime on 127.0.0.1); process 0's checkpoint."""
    endpoint = f"127.0.0.1:{_free_port()}"

    def command(rank: int) -> list[str]:
        return process_command(workload, size, target, processes, devices_each, rank, endpoint, out,
                               "--collective-timeout-s", "60", "--steps", str(STEPS), data=data)

    others = [start_child(trainspeed_argv(*command(rank)), path=(EXAMPLES,), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True) for rank in range(1, processes)]
    try:
        run_ok(*command(0), path=(EXAMPLES,), timeout=600)
        outputs = [other.communicate(timeout=120)[0] for other in others]
    finally:
        for other in others:
            if other.poll() is None:
                other.kill()
                other.wait(30)
    assert [other.returncode for other in others] == [0] * len(others), outputs
    summary = json.loads((out / "process0" / "summary.json").read_text())
    assert summary["world_size"] == processes * devices_each and summary["global_batch"] == GLOBAL_BATCH
    return last_checkpoint(out / "process0")


def built(workload: str, size: str) -> dict[str, torch.Tensor]:
    """The parameters a run starts from (seed 0), to see that the runs moved them."""
    from trainspeed.workloads import get_workload, resolve_size

    chosen = get_workload(workload)
    trainable = chosen.build(resolve_size(chosen, size), seed=0)
    return {f"{network}/{name}": tensor for network, module in trainable.networks.items()
            for name, tensor in module.state_dict().items() if tensor.is_floating_point()}


def flat(parameters: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.cat([parameters[name].float().reshape(-1) for name in sorted(parameters)])


@pytest.mark.parametrize("workload, size, runs", [
    # the fused attention op: its kernel runs per device on a mesh (XLA cannot partition a Pallas call)
    # "2x4": two processes of four devices each, one program (JAX's distributed runtime)
    ("mahjong", "tiny+attn-fused-qkv", ((2, "jax:jit:fp32"), (8, "jax:jit:fp32"), (4, "jax:jit:fp32:shard-state"),
                                        ("2x4", "jax:jit:fp32"))),
    ("char_lm_workload:CharLMWorkload", "tiny", ((4, "jax:jit:fp32"), ("2x4", "jax:jit:fp32"))),
    # the language-model loss over chunks of tokens: each device takes its own samples' chunks
    ("hf:gpt2", "tiny,resid_pdrop=0,embd_pdrop=0,attn_pdrop=0", ((4, "jax:jit:fp32"),)),
])
def test_runs_over_more_devices_end_with_the_parameters_of_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                selfplay_data: Path, workload: str, size: str,
                                                                runs: tuple[tuple[int | str, str], ...]) -> None:
    """Replicated or, with `shard-state`, split over the devices, in one process or over two (each
    reading its own part of every global batch onto its own devices, Mahjong's with one loader per
    device from its self-play shards): the state a run ends with is one device's."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    data = selfplay_data if workload == "mahjong" else None
    in_one_process = [(1, "jax:jit:fp32"), *((devices, target) for devices, target in runs if isinstance(devices, int))]
    one, *others = trained_in_one_process(workload, size, in_one_process, tmp_path / "one-process", data)
    start = built(workload, size)
    assert start.keys() == one.keys()
    movement = float((flat(one) - flat(start)).norm())
    assert movement > 0
    for (devices, target), many in zip(in_one_process[1:], others):
        assert float((flat(many) - flat(one)).norm()) <= TOLERANCE * movement, (devices, target)
    for devices, target in runs:
        if isinstance(devices, str):
            processes, devices_each = map(int, devices.split("x"))
            many = trained_on_processes(workload, size, processes, devices_each, tmp_path / f"x{devices}", target,
                                        data)
            assert float((flat(many) - flat(one)).norm()) <= TOLERANCE * movement, (devices, target)


SHARDED_STATE = """
import json
import torch
from trainspeed.targets import get_target
from trainspeed.workloads import get_workload, resolve_size

target = get_target("jax:jit:fp32:shard-state")
target.start_spmd(4)
put_batch = target.spmd_placer(4)
workload = get_workload("mahjong")
size = resolve_size(workload, "tiny")
trainable = target.build(workload, size, 0)
batch = put_batch(workload.synthetic_batch(size, 16, torch.Generator().manual_seed(0)))
for _ in range(2):
    target.run_step(trainable, batch)
target.sync()
print(json.dumps({"programs": trainable.train_programs.count, "leaves": {
    name: [list(array.shape), list(array.addressable_shards[0].data.shape), str(array.dtype)]
    for name, array in trainable.state.items()}}))
"""


def test_shard_state_splits_every_floating_array_the_devices_divide_and_keeps_it_split(tmp_path: Path) -> None:
    """Each device holds a quarter of each parameter and moment after two steps of the one program;
    the dropout key, and an array no dimension of which 4 divides, stay whole."""
    from child_commands import python_argv, run_child, trainspeed_env

    result = run_child(python_argv("-c", SHARDED_STATE), env=trainspeed_env(
        XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu"), timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["programs"] == 1
    split = whole = 0
    for name, (shape, shard, dtype) in found["leaves"].items():
        divisible = "float" in dtype and any(extent % 4 == 0 for extent in shape)
        expected = shape.copy()
        if divisible:
            axis = next(index for index, extent in enumerate(shape) if extent % 4 == 0)
            expected[axis] //= 4
        assert shard == expected, (name, shape, shard)
        split, whole = split + divisible, whole + (not divisible)
    assert split > 0 and whole > 0  # parameters and moments split; the key and step counts whole


def test_more_devices_than_jax_has_is_one_line(tmp_path: Path) -> None:
    from child_commands import run_trainspeed, trainspeed_env

    result = run_trainspeed("train", "--workload", "mahjong", "--size", "tiny", "--target", "jax:jit:fp32",
                            "--synthetic-data", "--nproc", "4", "--batch-size-per-device", "4", "--steps", "1",
                            "--out", str(tmp_path / "run"),
                            env=trainspeed_env(XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu"))
    assert result.returncode != 0
    assert "train: --nproc 4, but JAX sees 2 local devices here; use --nproc 2 or fewer" in result.stderr, result.stderr
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_a_process_killed_stops_the_other_and_resume_ends_where_one_device_ends(tmp_path: Path,
                                                                                   selfplay_data: Path) -> None:
    """kill -9 of process 1 of 2 after their first checkpoint: process 0 stops within its collective
    timeout and says which process it lost; both commands again with --resume end with the
    parameters one device ends with at the same global batch, each from its own run folder. Then
    folders that would resume from different steps are refused by both processes."""
    import os
    import shutil
    import signal
    import time

    steps, timeout_s = 16, 10
    one = trained_steps("mahjong", "tiny", 1, tmp_path / "one", steps, data=selfplay_data)
    endpoint = f"127.0.0.1:{_free_port()}"

    def command(rank: int, *extra: str) -> list[str]:
        return trainspeed_argv(*process_command(
            "mahjong", "tiny", "jax:jit:fp32", 2, 4, rank, endpoint, tmp_path, "--collective-timeout-s",
            str(timeout_s), "--checkpoint-every", "2", "--steps", str(steps), "--no-progress", *extra,
            data=selfplay_data))

    processes = [start_child(command(rank), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True) for rank in (0, 1)]
    try:
        latest = tmp_path / "process1" / "checkpoints" / "latest"
        deadline = time.monotonic() + 300
        while not latest.exists() and time.monotonic() < deadline and processes[1].poll() is None:
            time.sleep(0.01)
        os.killpg(processes[1].pid, signal.SIGKILL)
        killed_at = time.monotonic()
        output0 = processes[0].communicate(timeout=timeout_s + 120)[0]
        stopped_after = time.monotonic() - killed_at
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait(30)
    assert processes[0].returncode == 1 and not (tmp_path / "process0" / "summary.json").exists()
    assert stopped_after < timeout_s + 90, stopped_after
    said = [line for line in output0.splitlines() if line.startswith("train: process 0 of 2 stopped: ")]
    assert len(said) == 1 and "process 1 of this run is gone" in said[0] and said[0].endswith(
        "start every process again with --resume"), output0[-2000:]

    resumed = [start_child(command(rank, "--resume"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
               for rank in (0, 1)]
    outputs = [process.communicate(timeout=600)[0] for process in resumed]
    assert [process.returncode for process in resumed] == [0, 0], outputs
    summary = json.loads((tmp_path / "process0" / "summary.json").read_text())
    assert 0 < summary["first_step"] < summary["last_step"] == steps
    movement = float((flat(one) - flat(built("mahjong", "tiny"))).norm())
    finished = last_checkpoint(tmp_path / "process0")
    assert float((flat(finished) - flat(one)).norm()) <= TOLERANCE * movement

    # Process 1's folder loses its checkpoints (copied from elsewhere, or a kill between writing its
    # copy and pointing at it): both refuse to go on, before either loads one, rather than continue
    # from different steps.
    shutil.rmtree(tmp_path / "process1" / "checkpoints")
    refused = [start_child(command(rank, "--resume", "--steps", str(steps + 2)), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True) for rank in (0, 1)]
    errors = [process.communicate(timeout=300)[1] for process in refused]
    refusal = (f"train: the run's processes would continue from different checkpoints (no checkpoint to step {steps}); "
               "give every process's run folder the same latest checkpoint")
    for process, error in zip(refused, errors):
        assert process.returncode != 0 and refusal in error.strip().splitlines()[-1], error[-2000:]
    assert json.loads((tmp_path / "process0" / "summary.json").read_text())["last_step"] == steps
