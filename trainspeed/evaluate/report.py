"""The evaluations' part of the report: self-play strength (duplicate games against an opponent),
agreement with the teacher per kind of decision, and the null test of the evaluation's interval;
and the strength figure written on its own (`trainspeed eval mahjong`, `trainspeed plot`)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from trainspeed.errors import UsageError
from trainspeed.evaluate import figures as eval_figures
from trainspeed.evaluate.rows import MahjongAgreementRow, MahjongEvalRow, NullTestRow
from trainspeed.report.figures import caption_machines, figure_block, save_figure
from trainspeed.report.inputs import Read, ReportInputs
from trainspeed.report.page import Section, Table, interval, number, percent, text
from trainspeed.report.part import PlotRequest, ReportPart, RowKind
from trainspeed.report.provenance import provenance
from trainspeed.stats import within_cluster_correlation


def eval_section(rows: Sequence[Read[MahjongEvalRow]]) -> Section:
    section = Section(
        "selfplay", "Self-play strength",
        "Trained policies in duplicate games against three copies of an opponent: the mean rank (1 best, 4 "
        "worst; 2.5 is even) with its 95% confidence interval, and the share of games at each rank.",
    )
    section.figures.append(figure_block("fig-selfplay", "Mean rank with 95% interval, and rank shares, per evaluation",
                                        eval_figures.eval_figure([read.row for read in rows]), list(rows)))
    curves = eval_figures.strength_curves([read.row for read in rows])
    if curves:
        drawn = [read for read in rows if eval_figures.curve_key(read.row) in curves]
        section.figures.append(figure_block(
            "fig-selfplay-curve", "Mean rank against samples trained on: checkpoints of one run, the same deals each",
            eval_figures.strength_curve_figure(curves), drawn))
    table_rows = []
    for read in rows:
        row = read.row
        table_rows.append([
            text(row.policy), text(row.policy_size), number(row.policy_step, "{:d}"), text(row.opponent),
            number(row.games, "{:d}"), number(row.deals, "{:d}"), number(row.eval_seed, "{:d}"), text(row.target),
            number(row.temperature, "{:g}"), number(row.mean_rank, "{:.3f}"), text(interval(row.mean_rank_ci95, "{:.3f}")),
            number(row.mean_score_delta, "{:+,.0f}"), text(interval(row.mean_score_delta_ci95, "{:+,.0f}")),
            text(" / ".join(f"{share:.0%}" for share in row.rank_distribution)),
            number(row.within_deal_correlation if row.within_deal_correlation is not None
                   else within_cluster_correlation(row.deal_ranks), "{:+.2f}"),
            number(row.games_per_s, "{:,.2f}"), number(row.decisions_per_s, "{:,.0f}"),
        ])
    section.tables.append(Table(
        "table-selfplay", "Every evaluation (within-deal correlation: of the policy's ranks in a deal's four games)",
        [("policy", False), ("size", False), ("step", True), ("opponent", False), ("games", True), ("deals", True),
         ("eval seed", True), ("target", False), ("temperature", True), ("mean rank", True), ("95% interval", False),
         ("score delta", True), ("95% interval", False), ("ranks 1/2/3/4", False),
         ("within-deal correlation", True), ("games/s", True), ("decisions/s", True)],
        table_rows))
    return section


def agreement_section(rows: Sequence[Read[MahjongAgreementRow]]) -> Section:
    section = Section(
        "agreement", "Agreement with the teacher",
        "How often a trained Mahjong policy picks the action its teacher (the rule-based agent that played the "
        "data) picked, per kind of decision, on held-out games; and what its wrong discards cost: the same shanten "
        "and acceptance (a tie-break), lower acceptance, or a higher shanten (a real error).",
    )
    section.figures.append(figure_block("fig-agreement", "Agreement per kind of decision",
                                        eval_figures.agreement_figure([read.row for read in rows]), list(rows)))
    kinds = list(eval_figures.AGREEMENT_KINDS)
    errors = ["equal", "lower acceptance", "higher shanten", "not a discard"]
    section.tables.append(Table(
        "table-agreement", "Every agreement row (samples of each kind in brackets)",
        [("policy", False), ("step", True), ("data", False), ("split", False), ("decisions", True),
         *[(kind.replace("_", " "), True) for kind in kinds], *[(f"wrong: {error}", True) for error in errors]],
        [[text(r.row.policy), number(r.row.policy_step, "{:d}"), text(r.row.data), text(r.row.split),
          number(r.row.samples, "{:,d}"),
          *[percent(r.row.agreement.get(kind), "{:.2f}%") for kind in kinds],
          *[number(r.row.discard_errors.get(error), "{:,d}") for error in errors]] for r in rows],
        provenance(rows)))
    return section


def null_test_section(rows: Sequence[Read[NullTestRow]]) -> Section:
    section = Section(
        "null-test", "Does the evaluation's interval hold?",
        "A policy against three copies of itself with sampled moves is an even match (mean rank 2.5 in "
        "expectation); over many evaluation seeds about 95% of the 95% intervals should contain 2.5.",
    )
    section.tables.append(Table(
        "table-null-test", "Null tests",
        [("policy", False), ("step", True), ("temperature", True), ("games per seed", True), ("seeds", True),
         ("intervals containing 2.5", True), ("coverage", True), ("95% interval of the coverage", False),
         ("mean ranks", False)],
        [[text(r.row.policy), number(r.row.policy_step, "{:d}"), number(r.row.temperature, "{:g}"),
          number(r.row.games_per_seed, "{:d}"), number(len(r.row.eval_seeds), "{:d}"), number(r.row.covered, "{:d}"),
          percent(r.row.coverage, "{:.0f}%"), text(interval(r.row.coverage_ci95, "{:.2f}")),
          text(f"{min(r.row.mean_ranks):.3f} .. {max(r.row.mean_ranks):.3f}")] for r in rows],
        provenance(rows)))
    return section


def sections(inputs: ReportInputs, baselines: Sequence[str]) -> list[Section]:
    built = []
    if inputs.of(MahjongEvalRow):
        built.append(eval_section(inputs.of(MahjongEvalRow)))
    if inputs.of(MahjongAgreementRow):
        built.append(agreement_section(inputs.of(MahjongAgreementRow)))
    if inputs.of(NullTestRow):
        built.append(null_test_section(inputs.of(NullTestRow)))
    return built


def plot_mahjong_eval(rows: Sequence[MahjongEvalRow], out_stem: Path, title: str | None = None) -> list[Path]:
    """Write OUT_STEM.png and OUT_STEM.svg; returns the paths written."""
    if not rows:
        raise UsageError("no mahjong-eval rows to plot")
    figure = eval_figures.eval_figure(rows)
    figure.suptitle(title or "Duplicate 1-vs-3 Mahjong evaluation")
    caption_machines(figure, list(rows))
    return save_figure(figure, out_stem)


def plot(inputs: ReportInputs, request: PlotRequest) -> list[Path]:
    if request.baseline or request.run_id:
        raise UsageError(f"{request.results} holds eval mahjong rows: --baseline and --run-id are for bench rows")
    return plot_mahjong_eval([read.row for read in inputs.of(MahjongEvalRow)], request.stem)


PART = ReportPart(
    name="evaluate", kinds=(RowKind(MahjongEvalRow), RowKind(MahjongAgreementRow), RowKind(NullTestRow)),
    sections=sections,
    counts=lambda inputs: [("evaluation rows", len(inputs.of(MahjongEvalRow))),
                           ("agreement rows", len(inputs.of(MahjongAgreementRow))),
                           ("null tests", len(inputs.of(NullTestRow)))],
    plot=plot, plot_first=1)
