"""trainspeed's commands as Python functions: their keywords are the command line's flags, they build
the config the command line builds, bad input is `trainspeed.UsageError` with the command line's own
line (nothing exits the interpreter), and they return the rows the command wrote."""

from __future__ import annotations

import argparse
import functools
import inspect
import signal
import sys
import threading
from pathlib import Path

import matplotlib
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from child_commands import EXAMPLES, python_argv, run_child, trainspeed_env
from torch import nn

import trainspeed
from trainspeed.api import command_parser
from trainspeed.bench.config import BenchConfig
from trainspeed.bench.results import read_rows
from trainspeed.cli import build_parser, main
from trainspeed.flags import config_from_flags
from trainspeed.studies import STUDIES
from trainspeed.train.config import TrainConfig
from trainspeed.train.flags import TRAIN_FLAGS, config_of_command
from trainspeed.plan.rows import PlanCheckRow, PlanRow
from trainspeed.rows import read_records
from trainspeed.train.rows import EvalRecord, RunSummary
from trainspeed.train.runs import read_run
from trainspeed.workloads.pieces import IN_PROCESS

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"
FUNCTIONS = ("bench", "check", "train", "plan", "report")


def cli_keywords(parser: argparse.ArgumentParser) -> set[str]:
    """What the command line takes, read from the parser's own table of option strings: every long
    flag without its dashes, and every positional argument's name."""
    flags = {option for option in parser._option_string_actions if option.startswith("--") and option != "--help"}
    positionals = {action.dest for action in parser._get_positional_actions()}
    return {flag[2:].replace("-", "_") for flag in flags} | positionals


def command_parser_of_cli(*names: str) -> argparse.ArgumentParser:
    parser = build_parser()
    for name in names:
        parser = next(action for action in parser._actions
                      if isinstance(action, argparse._SubParsersAction)).choices[name]
    return parser


@pytest.mark.parametrize("command", FUNCTIONS)
def test_each_function_takes_exactly_the_flags_of_its_command(command):
    function = getattr(trainspeed, command)
    keywords = set(inspect.signature(function).parameters)
    assert keywords == cli_keywords(command_parser_of_cli(command))
    assert all(parameter.kind is inspect.Parameter.KEYWORD_ONLY and parameter.default is None
               for parameter in inspect.signature(function).parameters.values())


def test_train_takes_every_flag_of_train_s_flag_table():
    keywords = set(inspect.signature(trainspeed.train).parameters)
    assert {row.name[2:].replace("-", "_") for group in TRAIN_FLAGS for row in group.flags} <= keywords


@pytest.mark.parametrize("name", list(STUDIES))
def test_a_study_takes_exactly_the_flags_of_its_command(name):
    assert set(inspect.signature(trainspeed.study).parameters) == {"name", "values"}
    from trainspeed.api import flag_keywords

    assert set(flag_keywords(command_parser("study", name))) == cli_keywords(command_parser_of_cli("study", name))


def args_of(function_name: str, **values) -> argparse.Namespace:
    from trainspeed.api import parse_command

    return parse_command(function_name, values)


def test_a_call_builds_the_config_its_command_line_builds(tmp_path):
    argv = ["train", "--workload", "mahjong", "--target", "cpu:eager:fp32", "--nproc", "2", "--batch-size-per-device",
            "64", "--synthetic-data", "--lr", "0.003", "--until", "val/loss<=0.5", "--out", str(tmp_path / "run"),
            "--no-progress", "--noise-scale", "off", "--steps", "7"]
    called = args_of("train", workload="mahjong", target="cpu:eager:fp32", nproc=2, batch_size_per_device=64,
                     synthetic_data=True, lr=0.003, until="val/loss<=0.5", out=tmp_path / "run", no_progress=True,
                     noise_scale="off", steps=7, resume=False)
    assert config_from_flags(TrainConfig, called) == config_of_command(argv)
    bench = args_of("bench", targets=["cpu:eager:fp32", "cpu:compile:fp32"], batch_sizes=[256, 64], feed=("device", "host"),
                    min_window_s=0.25, peak_tflops=1.5, out=tmp_path / "b.jsonl")
    cli = build_parser().parse_args(["bench", "--targets", "cpu:eager:fp32,cpu:compile:fp32", "--batch-sizes", "256,64",
                                     "--feed", "device,host", "--min-window-s", "0.25", "--peak-tflops", "1.5",
                                     "--out", str(tmp_path / "b.jsonl")])
    assert config_from_flags(BenchConfig, bench) == config_from_flags(BenchConfig, cli)
    assert bench.command_line == ("trainspeed bench --targets cpu:eager:fp32,cpu:compile:fp32 --batch-sizes 256,64 "
                                  f"--feed device,host --min-window-s 0.25 --peak-tflops 1.5 --out {tmp_path / 'b.jsonl'}")
    report = args_of("report", results=[RESULTS / "a.jsonl", "-odd"], baseline=["cpu:eager:fp32", "xla:lazy:fp32"])
    assert (report.results, report.baseline) == ([RESULTS / "a.jsonl", Path("-odd")], ["cpu:eager:fp32", "xla:lazy:fp32"])


@pytest.mark.parametrize("command, values, argv", [
    ("bench", {"batch_sizes": [64, 0]}, ["--batch-sizes", "64,0"]),
    ("bench", {"min_window_s": float("nan")}, ["--min-window-s", "nan"]),
    ("train", {"nproc": 0}, ["--nproc", "0"]),
    ("check", {"target": "cpu:eager:fp32"}, ["--target", "cpu:eager:fp32"]),
], ids=["a-batch-of-0", "nan", "no-processes", "check-off-xla"])
def test_a_bad_argument_raises_usage_error_with_the_command_line_s_line(cli_error, command, values, argv):
    line = cli_error(command, *argv)
    with pytest.raises(trainspeed.UsageError) as raised:  # SystemExit is no Exception: it would fail the test
        getattr(trainspeed, command)(**values)
    assert f"trainspeed: error: {raised.value}" == line


def test_a_keyword_the_command_does_not_take_is_one_line():
    with pytest.raises(trainspeed.UsageError, match=r"^bench: no keyword batch_size=, did you mean batch_sizes=\?; it "
                                                    r"takes workload, size, "):
        trainspeed.bench(batch_size=8)
    with pytest.raises(trainspeed.UsageError, match=r"^bench: no_plot= is a switch \(--no-plot\); give True or False"):
        trainspeed.bench(no_plot="yes")
    with pytest.raises(trainspeed.UsageError, match="^no such command 'nosuch': choose one of"):
        trainspeed.study("nosuch")


def test_the_public_names_are_those_of_all():
    namespace: dict = {}
    exec("from trainspeed import *", namespace)
    assert set(namespace) - {"__builtins__"} == set(trainspeed.__all__)
    assert trainspeed.UsageError is __import__("trainspeed.errors").errors.UsageError
    assert callable(trainspeed.bench) and trainspeed.bench.results is sys.modules["trainspeed.bench.results"]


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


def loss(outputs, batch):
    return F.cross_entropy(outputs, batch["y"])


def test_bench_returns_the_rows_it_appended(tmp_path):
    workload = trainspeed.workload_from(model=mlp, loss=loss, optimizer=functools.partial(torch.optim.SGD, lr=0.1),
                                        batch={"x": torch.randn(8, 4), "y": torch.randint(0, 3, (8,))})
    rows = trainspeed.bench(workload=workload, targets=["cpu:eager:fp32"], batch_sizes=[4, 8], windows=1,
                            warmup_steps=0, min_window_s=0.01, max_steps_per_window=2, peak_tflops=1.0,
                            out=tmp_path / "b.jsonl", no_plot=True, no_progress=True)  # a peak given: no probe (small_bench)
    assert isinstance(rows, trainspeed.Rows) and rows == read_rows(tmp_path / "b.jsonl") and rows.path == tmp_path / "b.jsonl"
    assert [(row.batch_size, row.status, row.mfu_flops_source) for row in rows] == [(4, "ok", "counted"), (8, "ok", "counted")]
    assert rows[0].command.startswith("trainspeed bench --workload 'python:{")
    table = rows.to_pandas()
    assert list(table["batch_size"]) == [4, 8] and set(table["kind"]) == {"bench"} and "machine.cpu_model" in table
    assert isinstance(rows.figure(), matplotlib.figure.Figure)


def test_a_server_given_its_reference_benches_it_for_a_remote_client(serve, tmp_path):
    workload = trainspeed.workload_from(model=mlp, loss=loss, optimizer=functools.partial(torch.optim.SGD, lr=0.1),
                                        batch={"x": torch.randn(8, 4), "y": torch.randint(0, 3, (8,))}, name="remote-mlp")
    del IN_PROCESS[workload.reference]  # the server rebuilds it from the reference, as its own process would
    server = serve(workloads=(workload.reference,), threads=1)
    rows = trainspeed.bench(workload=workload, targets=[server.remote_name], batch_sizes=[4], windows=1, warmup_steps=0,
                            min_window_s=0.01, max_steps_per_window=2, feed=["host"], peak_tflops=1.0,
                            out=tmp_path / "b.jsonl", no_plot=True, no_progress=True)  # no probe (small_bench)
    assert [(row.workload, row.status, row.transport, row.mfu_flops_source) for row in rows] == [
        ("remote-mlp", "ok", "grpc", "counted")]


def test_rows_without_pandas_say_how_to_get_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # as where pandas is not installed
    with pytest.raises(trainspeed.UsageError, match=r"^Rows.to_pandas\(\) needs pandas, which is not installed here: "
                                                    "pip install pandas$"):
        trainspeed.Rows(read_rows(RESULTS / "bench_cpu_mahjong_tiny.jsonl")).to_pandas()


def test_report_returns_every_row_it_read(tmp_path, capsys):
    rows = trainspeed.report(results=[RESULTS / "bench_cpu_mahjong_tiny.jsonl"], out=tmp_path / "page.html")
    assert rows == read_rows(RESULTS / "bench_cpu_mahjong_tiny.jsonl") and (tmp_path / "page.html").stat().st_size
    assert rows.path == tmp_path / "page.html" and "report: " in capsys.readouterr().out
    with pytest.raises(trainspeed.UsageError, match="no figure of mahjong-eval rows"):
        trainspeed.Rows(trainspeed.report(results=[RESULTS / "mahjong_eval.jsonl"], out=tmp_path / "e.html")
                        ).figure()


def features_label(count: int, seed: int) -> dict[str, np.ndarray]:
    x = np.random.default_rng(seed).normal(size=(count, 4)).astype(np.float32)
    return {"x": x, "y": x[:, :3].argmax(axis=1).astype(np.int64)}


def accuracy(outputs, batch):
    return {"accuracy": (outputs.argmax(dim=1) == batch["y"]).float().mean()}


def test_train_in_this_process_on_real_data_returns_its_run(tmp_path):
    from trainspeed.data import open_dataset, write_dataset

    write_dataset(features_label(2048, 0), tmp_path / "data")
    workload = trainspeed.workload_from(model=lambda: mlp(), loss=loss, metrics=accuracy, data=open_dataset,
                                        optimizer=functools.partial(torch.optim.SGD, lr=0.5),
                                        batch={k: torch.from_numpy(v[:8]) for k, v in features_label(8, 1).items()})
    run = trainspeed.train(workload=workload, data=tmp_path / "data", steps=4, eval_every=2, batch_size_per_device=32,
                           num_workers=0, out=tmp_path / "run", no_progress=True, noise_scale="off")
    assert isinstance(run.summary, RunSummary) and run.summary.last_step == 4 and run.path == tmp_path / "run"
    assert [row.step for row in run.of(EvalRecord)] == [2, 4]
    assert set(run.summary.validation) == {"loss", "accuracy"}
    assert isinstance(run.figure(), matplotlib.figure.Figure)


def test_a_workload_only_this_process_holds_is_never_handed_to_other_processes(tmp_path):
    workload = trainspeed.workload_from(model=lambda: mlp(), loss=loss, optimizer=functools.partial(torch.optim.SGD, lr=0.1),
                                        batch={"x": torch.randn(8, 4), "y": torch.randint(0, 3, (8,))})
    with pytest.raises(trainspeed.UsageError, match=r"^train: the 2 rank processes of this run cannot rebuild workload "
                                                    r"'model' \(model= is a lambda\): run it in this process \(train: "
                                                    r"nproc=1\)"):
        trainspeed.train(workload=workload, nproc=2, synthetic_data=True, out=tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_a_study_of_pieces_runs_at_their_size_where_its_commands_can_rebuild_them(tmp_path):
    workload = trainspeed.workload_from(model=mlp, loss=loss, optimizer=functools.partial(torch.optim.SGD, lr=0.1),
                                        batch={"x": torch.randn(8, 4), "y": torch.randint(0, 3, (8,))})
    # its size (`default`, not the preset's `tiny`) is accepted: the estimate is what refuses it
    with pytest.raises(trainspeed.UsageError, match=r"^study throughput: the estimate is .* longer than --max-hours"):
        trainspeed.study("throughput", workload=workload, out=tmp_path / "study", preset="smoke", max_hours=1e-6)
    unportable = trainspeed.workload_from(model=lambda: mlp(), loss=loss, batch={"x": torch.randn(8, 4), "y": torch.zeros(8).long()},
                                          optimizer=functools.partial(torch.optim.SGD, lr=0.1))
    with pytest.raises(trainspeed.UsageError, match=r"^study throughput: the commands this study runs cannot rebuild "
                                                    r"workload 'model' \(model= is a lambda\)"):
        trainspeed.study("throughput", workload=unportable, out=tmp_path / "unportable", preset="smoke")
    assert not (tmp_path / "unportable").exists()


INTERACTIVE_SESSION = """
import functools, sys, torch, trainspeed
def model():
    return torch.nn.Linear(4, 3)
def loss(outputs, batch):
    return torch.nn.functional.cross_entropy(outputs, batch["y"])
workload = trainspeed.workload_from(model=model, loss=loss, optimizer=functools.partial(torch.optim.SGD, lr=0.1),
                                    batch={"x": torch.randn(8, 4), "y": torch.randint(0, 3, (8,))})
try:
    trainspeed.train(workload=workload, nproc=2, synthetic_data=True, steps=2, out=sys.argv[1] + "/two")
except trainspeed.UsageError as error:
    print(f"refused: {error}")
run = trainspeed.train(workload=workload, synthetic_data=True, steps=2, out=sys.argv[1] + "/one", no_progress=True,
                       noise_scale="off", batch_size_per_device=4, num_workers=0)
print(f"run: step {run.summary.last_step} on {run.summary.world_size} rank")
"""


@pytest.mark.e2e
def test_pieces_of_an_interactive_session_say_so_in_one_line_and_train_in_its_own_process(tmp_path):
    """Pieces defined where no file holds them (`python -c`, as a notebook's cells) cannot be rebuilt
    by ranks of their own: the call says so before starting any, and one rank trains in the process."""
    result = run_child(python_argv("-c", INTERACTIVE_SESSION, str(tmp_path)), timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    refused, trained = [line for line in result.stdout.splitlines() if line.startswith(("refused: ", "run: "))]
    assert refused == ("refused: train: the 2 rank processes of this run cannot rebuild workload 'model' (model= "
                       "(model) is defined in a notebook cell or an interactive session; loss= (loss) is defined in a "
                       "notebook cell or an interactive session): run it in this process (train: nproc=1), or define "
                       "its pieces at the top level of a script or module and give those")
    assert trained == "run: step 2 on 1 rank" and not (tmp_path / "two").exists()


def test_the_cli_stays_a_thin_layer_of_exit_codes(capsys):
    assert main(["bench", "--batch-sizes", "0"]) == 2
    assert capsys.readouterr().err.startswith("trainspeed: error: ")


@pytest.mark.e2e
def test_the_example_benches_a_sequential_on_two_backends_trains_it_on_two_ranks_and_plans_it(tmp_path):
    """examples/python_api.py, a few steps of each call: one bench call measures eager and compiled at
    two batch sizes, with counted FLOPs and no module path given; the same workload trains on two
    ranks (each runs the script's definitions alone to rebuild it); the script writes nothing beside
    its results."""
    result = run_child(python_argv(str(EXAMPLES / "python_api.py")), env=trainspeed_env(TRAINSPEED_EXAMPLE_QUICK="1"),
                       cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (out,) = [path for path in tmp_path.iterdir()]
    assert out.name.startswith("python_api-")
    rows = read_rows(out / "bench.jsonl")
    assert sorted((row.target, row.batch_size, row.status, row.mfu_flops_source) for row in rows) == [
        (target, batch, "ok", "counted") for target in ("cpu:compile:fp32", "cpu:eager:fp32") for batch in (64, 256)]
    # 2 x (16x64 + 64x4) multiply-adds forward; backward the weights' gradients of both layers and the
    # input gradient of the second
    assert {row.flops_per_sample for row in rows} == {2560 + 2560 + 512}
    assert rows[0].command.startswith("trainspeed bench --workload 'python:{")
    summary = read_run(out / "run").summary
    assert (summary.workload, summary.world_size, summary.last_step) == ("model", 2, 8)
    assert PlanRow.KIND in {record["kind"] for record, _ in read_records(out / "plan.jsonl")}
    assert "ported" in result.stdout


def test_the_notebook_is_the_example_script_exported(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    from export_notebook import notebook_text

    notebook = EXAMPLES / "python_api.ipynb"
    assert notebook.read_text() == notebook_text(EXAMPLES / "python_api.py"), \
        "export it again: python examples/export_notebook.py examples/python_api.py"


def test_rows_show_as_a_table_in_a_notebook_where_pandas_is(monkeypatch):
    rows = trainspeed.Rows(read_rows(RESULTS / "bench_cpu_mahjong_tiny.jsonl"))
    html = rows._repr_html_()
    assert html.startswith("<div>") and "<table" in html and "batch_size" in html
    monkeypatch.setitem(sys.modules, "pandas", None)  # as where pandas is not installed: the list's own repr
    assert rows._repr_html_() is None


def test_a_plans_checks_draw_the_figure_plot_draws_of_them():
    from trainspeed.kinds import read_inputs

    rows = trainspeed.Rows(read.row for reads in read_inputs([RESULTS / "plan_charlm.jsonl"]).rows.values() for read in reads)
    assert len(rows.of(PlanCheckRow)) == 3 and isinstance(rows.figure(), matplotlib.figure.Figure)


def test_a_keyword_given_none_takes_its_flags_default():
    args = args_of("bench", batch_sizes=None, windows=2)
    assert args.command_line == "trainspeed bench --windows 2"
    assert args.batch_sizes == build_parser().parse_args(["bench"]).batch_sizes
    with pytest.raises(trainspeed.UsageError, match="^trainspeed bench has no commands below it$"):
        command_parser("bench", study="throughput")


def test_a_plan_whose_check_runs_cannot_rebuild_its_workload_is_one_line(tmp_path):
    unportable = trainspeed.workload_from(model=lambda: mlp(), loss=loss, batch={"x": torch.randn(8, 4), "y": torch.zeros(8).long()},
                                          optimizer=functools.partial(torch.optim.SGD, lr=0.1))
    with pytest.raises(trainspeed.UsageError, match=r"^plan: the check runs cannot rebuild workload 'model' \(model= is "
                                                    r"a lambda\)"):
        trainspeed.plan(inputs=[RESULTS / "bench_cpu_mahjong_tiny.jsonl"], workload=unportable, check="best",
                        out=tmp_path / "plan.jsonl")
    assert not (tmp_path / "plan.jsonl").exists()


def test_runs_that_logged_no_metrics_rows_have_no_figure(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "summary.json").write_bytes((RESULTS / "charlm_cpu" / "summary.json").read_bytes())
    run = read_run(tmp_path / "run")
    with pytest.raises(trainspeed.UsageError, match=r"^the runs logged no metrics rows to draw \(log_every= sets how "
                                                    r"often they do\)$"):
        trainspeed.Rows([run.summary], runs=[run]).figure()


RANKS_SCRIPT = """
import functools, os, shutil, sys
import torch
from torch import nn
import trainspeed

OUT = sys.argv[1]
if os.path.exists(OUT):
    shutil.rmtree(OUT)
with open(OUT + ".top-level-runs", "a") as runs:
    runs.write("ran\\n")
WEIGHTS = torch.ones(3)

def model():
    return nn.Linear(4, 3)

def loss(outputs, batch):
    return nn.functional.cross_entropy(outputs, batch["y"])

def weighted_loss(outputs, batch):
    return nn.functional.cross_entropy(outputs, batch["y"], weight=WEIGHTS)

batch = {"x": torch.randn(8, 4), "y": torch.randint(0, 3, (8,))}
sgd = functools.partial(torch.optim.SGD, lr=0.1)
run = trainspeed.train(workload=trainspeed.workload_from(model=model, loss=loss, optimizer=sgd, batch=batch), nproc=2,
                       synthetic_data=True, steps=2, batch_size_per_device=4, num_workers=0, noise_scale="off",
                       no_progress=True, out=OUT)
print(f"run: step {run.summary.last_step} on {run.summary.world_size} ranks")
weighted = trainspeed.workload_from(model=model, loss=weighted_loss, optimizer=sgd, batch=batch)
try:
    trainspeed.train(workload=weighted, nproc=2, synthetic_data=True, out=OUT + "-weighted")
except trainspeed.UsageError as error:
    print(f"refused: {error}")
"""


@pytest.mark.e2e
def test_ranks_rebuild_a_script_s_pieces_without_running_what_the_script_does(tmp_path):
    """A script that removes its run folder at its top, unguarded, and defines its pieces below:
    the ranks run only its definitions (a rank that ran the script would remove the run it is in),
    and a piece that needs a value only running the script computes is refused before anything is made."""
    script = tmp_path / "my_training.py"
    script.write_text(RANKS_SCRIPT)
    out = tmp_path / "run"
    result = run_child(python_argv(str(script), str(out)), cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert (tmp_path / "run.top-level-runs").read_text() == "ran\n"  # once: in the script's own process
    assert {"train_config.json", ".lock", "summary.json", "metrics.jsonl"} <= {path.name for path in out.iterdir()}
    summary = read_run(out).summary
    assert (summary.world_size, summary.last_step) == (2, 2)
    (refused,) = [line for line in result.stdout.splitlines() if line.startswith("refused: ")]
    assert refused.startswith("refused: train: the 2 rank processes of this run cannot rebuild workload 'model' "
                              "(loss= (weighted_loss) needs WEIGHTS, set by line 12 of my_training.py "
                              "(`WEIGHTS = torch.ones(3)`), a statement other processes do not run")
    assert not (tmp_path / "run-weighted").exists()


def small_workload():
    return trainspeed.workload_from(model=mlp, loss=loss, optimizer=functools.partial(torch.optim.SGD, lr=0.1),
                                    batch={"x": torch.randn(8, 4), "y": torch.randint(0, 3, (8,))})


def small_bench(workload, out: Path, **values) -> trainspeed.Rows:
    """One short window at batch 4, against a given peak (the CPU's own, measured, is a probe of 1.5 s
    that none of these tests reads; the example's bench measures it)."""
    return trainspeed.bench(workload=workload, targets=["cpu:eager:fp32"], batch_sizes=[4], windows=1, warmup_steps=0,
                            min_window_s=0.01, max_steps_per_window=2, peak_tflops=1.0, out=out, no_plot=True,
                            no_progress=True, **values)


def small_train(workload, out: Path, **values) -> trainspeed.Rows:
    return trainspeed.train(workload=workload, synthetic_data=True, steps=2, batch_size_per_device=4, num_workers=0,
                            noise_scale="off", no_progress=True, out=out, **values)


def in_threads(count: int, call) -> list:
    """What `call(index)` returned (or raised) in each of `count` threads started together."""
    start = threading.Barrier(count)
    outcomes: list = [None] * count

    def run(index: int) -> None:
        start.wait()
        try:
            outcomes[index] = call(index)
        except BaseException as error:  # noqa: BLE001 - the test reports it
            outcomes[index] = error

    threads = [threading.Thread(target=run, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def test_train_from_another_thread_than_the_main_one_trains_there(tmp_path):
    """Python takes signal handlers only from the main thread: a run started from another installs
    none (the stop signals stay its program's) and trains as from the main one."""
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    (run,) = in_threads(1, lambda index: small_train(small_workload(), tmp_path / "run"))
    assert isinstance(run, trainspeed.Rows), run
    assert run.summary.last_step == 2 and (tmp_path / "run" / "summary.json").is_file()
    assert {sig: signal.getsignal(sig) for sig in handlers} == handlers


def test_bench_from_four_threads_into_one_folder_writes_every_file(tmp_path):
    """Four benches at once into one folder each write their own file. (Their checks that the folder
    is writable overlap only now and then here; tests/test_atomic.py overlaps many.)"""
    workload = small_workload()
    outcomes = in_threads(4, lambda index: small_bench(workload, tmp_path / f"bench-{index}.jsonl"))
    assert all(isinstance(rows, trainspeed.Rows) for rows in outcomes), outcomes
    assert [[row.status for row in rows] for rows in outcomes] == [["ok"]] * 4
    assert sorted(path.name for path in tmp_path.glob("*.jsonl")) == [f"bench-{index}.jsonl" for index in range(4)]


@pytest.mark.parametrize("command, values, said", [
    ("bench", {"out": {"a": 1}}, "bench: out= is a dict; give a path (text or a pathlib.Path)"),
    ("bench", {"out": 7}, "bench: out= is an int; give a path (text or a pathlib.Path)"),
    ("bench", {"batch_sizes": [4, None]}, "bench: batch_sizes= is a list holding a NoneType; give text, a number or "
                                          "a path, or a list of them"),
    ("bench", {"windows": [1, 2]}, "bench: windows= is a list; give text, a number or a path"),
    ("bench", {"workload": object()}, "bench: workload= is an object; give a workload of trainspeed.workload_from "
                                      "or a workload's name"),
    ("report", {"results": [RESULTS / "bench_cpu_mahjong_tiny.jsonl", {"a": 1}]},
     "report: results= is a list holding a dict; give a path (text or a pathlib.Path), or a list of them"),
], ids=["dict-for-a-path", "number-for-a-path", "none-in-a-list", "list-for-one-number", "no-workload",
        "dict-in-paths"])
def test_a_value_of_a_type_its_flag_cannot_take_is_one_line_and_writes_nothing(tmp_path, monkeypatch, command, values,
                                                                                said):
    monkeypatch.chdir(tmp_path)
    small = {"workload": small_workload(), "targets": ["cpu:eager:fp32"], "batch_sizes": [4], "windows": 1,
             "warmup_steps": 0, "min_window_s": 0.01, "max_steps_per_window": 2, "no_plot": True}
    with pytest.raises(TypeError) as raised:
        getattr(trainspeed, command)(**{**(small if command == "bench" else {}), **values})
    assert isinstance(raised.value, trainspeed.UsageError) and str(raised.value) == said
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(TypeError, match=r"^study: the study's name is a dict; give one of throughput, "):
        trainspeed.study({"a": 1})


@pytest.fixture
def two_torch_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_threads_given_to_a_command_are_its_own(tmp_path, two_torch_threads):
    """`threads=` sets torch's thread count for the command; the caller's count is as it was after it."""
    workload = small_workload()
    assert [row.status for row in small_bench(workload, tmp_path / "bench.jsonl", threads=1)] == ["ok"]
    assert torch.get_num_threads() == 2
    assert small_train(workload, tmp_path / "run", threads=1).summary.last_step == 2
    assert torch.get_num_threads() == 2
