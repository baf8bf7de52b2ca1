"""The settings of `trainspeed eval mahjong`, light to import (the command line reads its flag
defaults here before anything heavy loads)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from trainspeed.errors import UsageError
from trainspeed.flags import PROCESSES, THREADS, ranged, ranged_as

OPPONENT_NAMES = ("rule-based", "random")
"""Built-in opponents (`trainspeed.workloads.mahjong.duplicate.BUILTIN_OPPONENTS` builds them)."""
GAMES_PER_DEAL = 4
PROGRESS_SUFFIX = ".progress"


@dataclass(frozen=True)
class MahjongEvalConfig:
    """The settings of one evaluation (the command's flags read their defaults here)."""

    policy: str | None = None
    """Run directory of the evaluated policy (its latest checkpoint)."""
    policy_step: int | None = None
    """Evaluate the policy's checkpoint of this step instead of its latest."""
    opponent: str = "rule-based"
    """rule-based, random, or the run directory of another Mahjong policy."""
    games: int = 400
    """Games in all: four per deal, so a multiple of 4."""
    seed: int = 0
    """Chooses the deals: deal d has engine seed deal_seed(seed, d)."""
    target: str = "cpu:eager:fp32"
    temperature: float = ranged(0.0, 0, 1e6)
    """0: the legal action with the largest logit; above 0: sample softmax(logits / temperature)."""
    batch_games: int = ranged(64, 1, 65536)
    """Games played at once per worker; their pending decisions share one forward pass."""
    workers: int = ranged_as(1, PROCESSES)
    """Processes that play deals side by side, each with its own copy of the networks; the deals
    are split between them, so results are the same for any number of workers."""
    threads: int | None = ranged_as(1, THREADS)
    """torch intra-op threads per worker (None leaves torch's default)."""
    out: str = "results/mahjong_eval.jsonl"
    progress: bool = True

    @property
    def deals(self) -> int:
        return self.games // GAMES_PER_DEAL

    @property
    def opponent_is_builtin(self) -> bool:
        return self.opponent in OPPONENT_NAMES

    @property
    def progress_path(self) -> Path:
        return Path(self.out + PROGRESS_SUFFIX)

    def validate(self) -> "MahjongEvalConfig":
        """UsageError naming the flag; checks nothing on disk or on a device."""
        if self.policy is None:
            raise UsageError("eval mahjong: give --policy RUN_DIR")
        if self.games < GAMES_PER_DEAL or self.games % GAMES_PER_DEAL:
            raise UsageError(f"eval mahjong: --games {self.games} must be a positive multiple of 4 "
                             "(each deal is played four times, the policy once in each seat)")
        if not self.temperature >= 0.0:
            raise UsageError(f"eval mahjong: --temperature must be >= 0, got {self.temperature}")
        if self.batch_games < 1:
            raise UsageError(f"eval mahjong: --batch-games must be >= 1, got {self.batch_games}")
        if self.workers < 1:
            raise UsageError(f"eval mahjong: --workers must be >= 1, got {self.workers}")
        if self.threads is not None and self.threads < 1:
            raise UsageError(f"eval mahjong: --threads must be >= 1, got {self.threads}")
        if not self.opponent_is_builtin and not Path(self.opponent).is_dir():
            raise UsageError(f"eval mahjong: --opponent {self.opponent!r}: choose "
                             f"{', '.join(OPPONENT_NAMES)} or the run directory of a Mahjong policy")
        return self


@dataclass(frozen=True)
class MahjongAgreementConfig:
    """The settings of `trainspeed eval mahjong-agreement` (its flags read their defaults here)."""

    policy: str | None = None
    """Run directory of the policy (its latest checkpoint)."""
    policy_step: int | None = None
    """The policy's checkpoint of this step instead of its latest."""
    data: str | None = None
    """A Mahjong shard folder; its validation split (held-out games) is read."""
    split: str = "val"
    target: str = "cpu:eager:fp32"
    batch_size: int = ranged(1024, 1, 2**20)
    threads: int | None = ranged_as(1, THREADS)
    out: str = "results/mahjong_agreement.jsonl"

    def validate(self) -> "MahjongAgreementConfig":
        if self.policy is None:
            raise UsageError("eval mahjong-agreement: give --policy RUN_DIR")
        if self.data is None:
            raise UsageError("eval mahjong-agreement: give --data DIR (a Mahjong shard folder)")
        if self.split not in ("train", "val"):
            raise UsageError(f"eval mahjong-agreement: --split {self.split!r}: choose train or val")
        if self.batch_size < 1:
            raise UsageError(f"eval mahjong-agreement: --batch-size must be >= 1, got {self.batch_size}")
        if self.threads is not None and self.threads < 1:
            raise UsageError(f"eval mahjong-agreement: --threads must be >= 1, got {self.threads}")
        return self
