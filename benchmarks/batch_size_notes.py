"""The learning-rate and power bullets of docs/results/batch_size_study.md, from the study's rows.

    python benchmarks/batch_size_notes.py docs/results/batch_size_study.jsonl

The study prints its power plan and its table of strengths and comparisons (`trainspeed study
batch-size`); this prints what the page says beside them, from the same rows: which learning-rate
factor each batch chose and whether it lies on an edge of the sweep (so the best rate may lie
outside it), and the power plan as the rows recorded it and as `plan_power` computes it from the
rows' settings today, beside the minimum detectable differences the comparisons measured.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainspeed.evaluate.power import plan_power  # noqa: E402
from trainspeed.rows import read_records  # noqa: E402

WIDTH = 100
"""The pages' line width: the bullets print as the page holds them."""


def bullet(text: str) -> str:
    return textwrap.fill(text, width=WIDTH, initial_indent="- ", subsequent_indent="  ", break_on_hyphens=False)


def short(value: float) -> str:
    """A learning rate as the page writes it: 2e-3, 2.83e-3."""
    mantissa, exponent = f"{value:.2e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def listed(items: list[str], last: str = "and") -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + f" {last} " + items[-1]


def seeds_text(seeds: list[int]) -> str:
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"seeds {seeds[0]}-{seeds[-1]}"
    return ("seed " if len(seeds) == 1 else "seeds ") + listed([str(s) for s in seeds])


def study_rows(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """The settings row, the per-batch rows (by batch) and the comparison rows of one study."""
    records = [record for record, _ in read_records(path) if isinstance(record, dict)]
    config, = [r for r in records if r.get("kind") == "batch-size-config"]
    batches = sorted((r for r in records if r.get("kind") == "batch-size-batch" and r["study_id"] == config["study_id"]),
                     key=lambda r: r["global_batch"])
    comparisons = [r for r in records if r.get("kind") == "batch-size-comparison" and r["study_id"] == config["study_id"]]
    return config, batches, comparisons


def learning_rate(config: dict[str, Any], batches: list[dict[str, Any]]) -> str:
    settings = config["settings"]
    factors = sorted(settings["lr_factors"])
    edges: dict[str, list[int]] = {"upper": [], "lower": []}
    for row in batches:
        if len(factors) > 1 and row["best_lr_factor"] == factors[-1]:
            edges["upper"].append(row["global_batch"])
        elif len(factors) > 1 and row["best_lr_factor"] == factors[0]:
            edges["lower"].append(row["global_batch"])
    on_edge = len(edges["upper"]) + len(edges["lower"])
    text = (f"Learning rate: {short(settings['base_lr'])} at batch {settings['reference_batch']}, scaled by the square "
            f"root of the batch, times {listed([f'{f:g}' for f in factors], 'or')}, tuned on seed "
            f"{settings['tuning_seed']} by final validation loss. The best factors were "
            + listed([f"{row['best_lr_factor']:g} (batch {row['global_batch']}, peak {short(row['peak_lr'])})"
                      for row in batches]) + ". ")
    if on_edge == 0:
        text += "Every batch chose a factor inside the sweep."
    else:
        parts = []
        for edge, side in (("upper", "above"), ("lower", "below")):
            chosen = edges[edge]
            if chosen:
                whose = "their" if len(chosen) > 1 else "its"
                parts.append(f"{listed([str(b) for b in chosen])} its {edge} edge, so {whose} best LR may lie {side} it")
        lead = "Every batch" if on_edge == len(batches) else f"{on_edge} of the {len(batches)} batches"
        text += f"{lead} chose an edge of the sweep: " + "; ".join(parts) + "."
    others = [seed for seed in settings["seeds"] if seed != settings["tuning_seed"]]
    if others:
        text += f" Then {seeds_text(others)} at the best LR; seed {settings['tuning_seed']}'s run is reused."
    return bullet(text)


def power(config: dict[str, Any], comparisons: list[dict[str, Any]]) -> str:
    recorded = config["power"]
    plan = plan_power(recorded["seeds"], recorded["deals"], games_per_deal=recorded["games_per_deal"],
                      game_rank_sd=recorded["game_rank_sd"], within_deal_correlation=recorded["within_deal_correlation"],
                      seed_sd=recorded["seed_sd"])
    games = recorded["deals"] * recorded["games_per_deal"]
    assumed = (f"assuming a game's rank sd of {plan.game_rank_sd:g}, a within-deal correlation of "
               f"{plan.within_deal_correlation:g} and a seed sd of {plan.seed_sd:g}")
    measured = [row["minimum_detectable_difference"] for row in comparisons]
    span = f"{min(measured):.2f}-{max(measured):.2f}"
    printed = recorded["minimum_detectable_difference"]
    if round(printed, 3) == round(plan.minimum_detectable_difference, 3):
        text = (f"**Power plan, printed first:** {plan.seeds} seeds x {games} games per policy could detect "
                f"{plan.minimum_detectable_difference:.3f} ranks, {assumed}. The comparisons' own minimum detectable "
                f"differences, from their bootstraps, were {span}.")
    else:
        text = (f"**Power plan, printed first:** the study printed that {plan.seeds} seeds x {games} games per policy "
                f"could detect {printed:.3f} ranks, {assumed}. That plan divided the deal-to-deal variance by seeds x "
                f"deals ({plan.seeds * plan.deals}), as if each seed had played deals of its own. Every seed plays the "
                f"same {plan.deals} deals, so that variance divides by the {plan.deals} deals alone: with the same "
                f"assumptions the plan could detect {plan.minimum_detectable_difference:.3f} ranks (`plan_power`, "
                f"which a rerun prints), {plan.minimum_detectable_difference / printed:.1f} times the printed "
                f"difference. The comparisons' own minimum detectable differences, from their bootstraps, were {span}: "
                "less than the corrected plan, since the bootstrap credits the deal luck both arms share, which the "
                "plan does not.")
    return bullet(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", type=Path)
    args = parser.parse_args(argv)
    config, batches, comparisons = study_rows(args.rows)
    print(learning_rate(config, batches))
    print(power(config, comparisons))
    return 0


if __name__ == "__main__":
    sys.exit(main())
