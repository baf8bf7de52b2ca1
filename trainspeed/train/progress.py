"""The progress bar with ETA, on rank 0 only (N bars interleaved on one terminal help nobody); a
notebook's own bar where a rank runs in a notebook's kernel (`tqdm.auto`)."""

from __future__ import annotations

import sys

from tqdm.auto import tqdm


class ProgressBar:
    def __init__(self, total_steps: int, first_step: int, enabled: bool, unit: str = "step") -> None:
        """In `unit`s: steps, or samples for a run whose steps are not known in advance."""
        self._bar = (
            tqdm(total=total_steps, initial=first_step, unit=unit, dynamic_ncols=True, file=sys.stderr)
            if enabled
            else None
        )

    def advance(self, count: int = 1) -> None:
        if self._bar is not None:
            self._bar.update(count)

    def show(self, *, loss: float, samples_per_s: float) -> None:
        if self._bar is not None:
            self._bar.set_postfix(loss=f"{loss:.4f}", samples_per_s=f"{samples_per_s:,.0f}", refresh=False)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
