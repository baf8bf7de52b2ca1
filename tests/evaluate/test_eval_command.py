"""`trainspeed eval mahjong` as a user runs it: the row, the figure, bad input, resuming."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from child_commands import untrusted_modules_imported, write_untrusted_modules

from trainspeed.cli import main
from trainspeed.errors import UsageError
from trainspeed.evaluate.config import MahjongEvalConfig
from trainspeed.evaluate.mahjong import run_mahjong_eval
from trainspeed.evaluate.rows import MahjongEvalRow

ROW_FIELDS = (
    "kind", "timestamp", "policy", "policy_size", "policy_step", "opponent", "games", "deals", "eval_seed", "target",
    "temperature", "mean_rank", "mean_rank_ci95", "mean_score_delta", "mean_score_delta_ci95", "rank_distribution",
    "games_per_s", "decisions_per_s", "engine_s", "network_s", "threads", "torch_version", "command",
)


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.e2e
def test_a_policy_against_three_copies_of_itself_ranks_exactly_2_5(capsys, tiny_run, tmp_path):
    out = tmp_path / "eval.jsonl"
    code, printed, err = run_cli(capsys, "eval", "mahjong", "--policy", str(tiny_run), "--opponent", str(tiny_run),
                                 "--games", "8", "--out", str(out), "--no-progress")
    assert code == 0, err
    (row,) = rows(out)
    assert set(ROW_FIELDS) <= set(row)
    assert row["kind"] == "mahjong-eval" and row["policy_size"] == "tiny" and row["policy_step"] == 6
    assert row["games"] == 8 and row["deals"] == 2 and row["games_played"] == 8
    assert row["eval_seed"] == 0 and row["policy_seed"] == 0 and row["opponent_seed"] == 0
    assert row["within_deal_correlation"] == pytest.approx(-1 / 3)  # each deal's four games: ranks 1, 2, 3 and 4
    assert row["mean_rank"] == 2.5 and row["mean_rank_ci95"] == [2.5, 2.5]
    assert row["rank_distribution"] == [0.25] * 4
    assert row["mean_score_delta"] == 0.0
    assert all(sorted(ranks) == [1, 2, 3, 4] for ranks in row["deal_ranks"])
    assert row["command"].startswith("trainspeed eval mahjong --policy ")
    assert row["games_per_s"] > 0 and row["decisions_per_s"] > 0 and row["network_s"] > 0 and row["engine_s"] > 0
    assert "mean rank 2.500 [2.500, 2.500]" in printed
    assert out.with_suffix(".png").read_bytes()[:4] == b"\x89PNG" and "mean rank" in out.with_suffix(".svg").read_text()
    assert not Path(str(out) + ".progress").exists()


@pytest.mark.parametrize("argv, fragment", [
    (["--games", "10"], "--games 10 must be a positive multiple of 4"),
    (["--games", "0"], "--games 0 must be a positive multiple of 4"),
    (["--opponent", "chess"], "--opponent 'chess': choose rule-based, random or the run directory"),
    (["--temperature", "-1"], "argument --temperature: '-1' must be at least 0"),
    (["--batch-games", "0"], "argument --batch-games: '0' must be at least 1"),
    (["--target", "gpu:eager:fp32"], "unknown device 'gpu'"),
])
@pytest.mark.e2e
def test_bad_flags_are_one_line_and_exit_code_2(capsys, tiny_run, tmp_path, argv, fragment):
    out = tmp_path / "eval.jsonl"
    code, _, err = run_cli(capsys, "eval", "mahjong", "--policy", str(tiny_run), "--out", str(out), "--no-progress", *argv)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("trainspeed: error: ") and fragment in lines[0], err
    assert not out.exists() and not Path(str(out) + ".progress").exists()


@pytest.mark.e2e
def test_bad_run_directories_are_one_line_and_exit_code_2(capsys, tiny_run, foreign_run, tmp_path):
    empty = tmp_path / "empty-run"
    empty.mkdir()
    out = tmp_path / "eval.jsonl"
    cases = [
        (["--policy", str(empty)], "holds no checkpoint"),
        (["--policy", str(tmp_path / "missing")], "no such run directory"),
        (["--policy", str(foreign_run)], "its checkpoint is a 'stylegan3' run, not 'mahjong'"),
        (["--policy", str(tiny_run), "--opponent", str(foreign_run)], "--opponent"),
        (["--policy", str(tiny_run), "--opponent", str(empty)], "--opponent"),
    ]
    for argv, fragment in cases:
        code, _, err = run_cli(capsys, "eval", "mahjong", "--out", str(out), "--no-progress", *argv)
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and lines[0].startswith("trainspeed: error: ") and fragment in lines[0], err
    assert not out.exists()


class Stop(Exception):
    pass


def _stop_after(deals: int):
    seen = []

    def on_deal(result) -> None:
        seen.append(result)
        if len(seen) == deals:
            raise Stop

    return on_deal


def _against_random(run: Path, out: Path) -> MahjongEvalConfig:
    """The evaluation the resume tests continue: 8 games (2 deals) against random agents, into `out`."""
    return MahjongEvalConfig(policy=str(run), opponent="random", games=8, seed=4, batch_games=8, progress=False,
                             out=str(out))


@pytest.fixture(scope="module")
def unfinished_progress(tiny_run, tmp_path_factory) -> str:
    """The progress file `_against_random` leaves when it stops after its first deal (as a crash there
    would): played once for the tests that continue it or refuse to; each writes it beside an out of its own."""
    config = _against_random(tiny_run, tmp_path_factory.mktemp("unfinished") / "eval.jsonl")
    with pytest.raises(Stop):
        run_mahjong_eval(config, "first try", on_deal=_stop_after(1))
    assert not Path(config.out).exists()
    return Path(config.out + ".progress").read_text()


def _unfinished(run: Path, out: Path, progress: str) -> MahjongEvalConfig:
    """`_against_random` into `out`, beside the progress file of its unfinished first try."""
    config = _against_random(run, out)
    Path(config.out + ".progress").write_text(progress)
    return config


@pytest.mark.e2e
def test_an_interrupted_evaluation_resumes_without_replaying_finished_deals(tiny_run, unfinished_progress, tmp_path):
    whole = run_mahjong_eval(_against_random(tiny_run, tmp_path / "whole.jsonl"), "whole")

    config = _unfinished(tiny_run, tmp_path / "cut.jsonl", unfinished_progress)
    progress = Path(config.out + ".progress")
    lines = progress.read_text().splitlines()
    assert json.loads(lines[0])["kind"] == "settings" and len(lines) == 2
    with open(progress, "a") as handle:  # a crash in the middle of an append leaves a cut line
        handle.write('{"kind": "deal", "deal": 1, "se')

    resumed = run_mahjong_eval(config, "second try")
    assert resumed.games_played == 4
    assert resumed.deal_ranks == whole.deal_ranks and resumed.deal_score_deltas == whole.deal_score_deltas
    assert resumed.mean_rank == whole.mean_rank and resumed.mean_rank_ci95 == whole.mean_rank_ci95
    assert resumed.eval_id == json.loads(lines[0])["eval_id"]
    assert not progress.exists() and len(rows(Path(config.out))) == 1


def _worker_games(run: Path) -> dict:
    """The games both worker tests play."""
    return dict(policy=str(run), opponent="rule-based", games=12, seed=6, batch_games=2, progress=False)


@pytest.fixture(scope="module")
def split_over_workers(untrained_run, tmp_path_factory) -> tuple[Path, MahjongEvalRow]:
    """12 games (3 deals) against rule-based agents over two worker processes, started from a working
    folder that holds untrusted modules: the one evaluation with workers that the worker tests read
    (each worker process is a start of torch); the folder and the result."""
    folder = write_untrusted_modules(tmp_path_factory.mktemp("workers") / "untrusted")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)  # spawn starts each worker in it, as `python -c ...`
        config = MahjongEvalConfig(out="eval.jsonl", workers=2, **_worker_games(untrained_run))
        return folder, run_mahjong_eval(config, "two")


@pytest.mark.e2e
def test_worker_processes_play_the_same_games_as_one_process(untrained_run, split_over_workers, tmp_path):
    alone = run_mahjong_eval(MahjongEvalConfig(out=str(tmp_path / "one.jsonl"), **_worker_games(untrained_run)), "one")
    _, split = split_over_workers
    assert split.workers == 2 and split.games_played == 12
    assert split.deal_ranks == alone.deal_ranks and split.deal_score_deltas == alone.deal_score_deltas
    assert split.decisions == alone.decisions and split.forward_calls >= alone.forward_calls


@pytest.mark.e2e
def test_worker_processes_import_nothing_from_the_working_folder(split_over_workers):
    folder, split = split_over_workers
    assert split.games_played == 12
    assert untrusted_modules_imported(folder) == []
    assert len(rows(folder / "eval.jsonl")) == 1  # a relative path still means the working folder


@pytest.mark.e2e
def test_other_settings_do_not_continue_an_unfinished_evaluation(capsys, tiny_run, unfinished_progress, tmp_path):
    config = _unfinished(tiny_run, tmp_path / "e.jsonl", unfinished_progress)
    code, _, err = run_cli(capsys, "eval", "mahjong", "--policy", str(tiny_run), "--opponent", "random", "--seed", "4",
                           "--games", "12", "--out", config.out, "--no-progress")
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "holds an unfinished evaluation with other settings (games 8 -> 12)" in lines[0]
    with pytest.raises(UsageError, match="other settings"):
        run_mahjong_eval(MahjongEvalConfig(**{**config.__dict__, "seed": 1}), "other seed")


def test_the_light_config_names_what_the_games_build():
    from trainspeed.evaluate.config import GAMES_PER_DEAL, OPPONENT_NAMES
    from trainspeed.workloads.mahjong.duplicate import BUILTIN_OPPONENTS, ROTATIONS

    assert OPPONENT_NAMES == tuple(BUILTIN_OPPONENTS) and GAMES_PER_DEAL == ROTATIONS


@pytest.mark.parametrize(("config", "message"), [
    (MahjongEvalConfig(), "eval mahjong: give --policy RUN_DIR"),
    (MahjongEvalConfig(policy="run", temperature=float("nan")), "eval mahjong: --temperature must be >= 0, got nan"),
    (MahjongEvalConfig(policy="run", batch_games=0), "eval mahjong: --batch-games must be >= 1, got 0"),
    (MahjongEvalConfig(policy="run", workers=0), "eval mahjong: --workers must be >= 1, got 0"),
    (MahjongEvalConfig(policy="run", threads=0), "eval mahjong: --threads must be >= 1, got 0"),
], ids=["no-policy", "nan-temperature", "no-batch-games", "no-workers", "no-threads"])
def test_an_eval_config_made_in_python_is_checked_as_the_flags_are(config, message):
    """The CLI's parser refuses these values first; `run_mahjong_eval` takes a config built in Python."""
    with pytest.raises(UsageError) as refused:
        config.validate()
    assert str(refused.value) == message


@pytest.mark.parametrize(("settings", "message"), [
    ({}, "eval mahjong-agreement: give --policy RUN_DIR"),
    ({"policy": "run"}, "eval mahjong-agreement: give --data DIR (a Mahjong shard folder)"),
    ({"policy": "run", "data": "shards", "batch_size": 0}, "eval mahjong-agreement: --batch-size must be >= 1, got 0"),
    ({"policy": "run", "data": "shards", "threads": 0}, "eval mahjong-agreement: --threads must be >= 1, got 0"),
], ids=["no-policy", "no-data", "no-batch-size", "no-threads"])
def test_an_agreement_config_made_in_python_is_checked_as_the_flags_are(settings, message):
    from trainspeed.evaluate.config import MahjongAgreementConfig

    with pytest.raises(UsageError) as refused:
        MahjongAgreementConfig(**settings).validate()
    assert str(refused.value) == message
