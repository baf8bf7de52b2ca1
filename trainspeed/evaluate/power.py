"""How small a difference in mean rank between two arms of policies a planned comparison would
detect: the power plan of an evaluation over seeds and duplicate deals (`plan_power`). The
statistics themselves (clustered means, the crossed bootstrap over seeds and deals, t quantiles)
are `trainspeed.stats`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from trainspeed.stats import DETECTABLE


@dataclass(frozen=True)
class PowerPlan:
    """The smallest difference in mean rank between two arms that a planned comparison would detect."""

    seeds: int
    deals: int
    games_per_deal: int
    game_rank_sd: float
    within_deal_correlation: float
    seed_sd: float
    """Spread of a policy's true strength between training seeds of one arm."""
    standard_error: float
    """Of the difference of the two arms' mean ranks."""
    minimum_detectable_difference: float


def plan_power(seeds: int, deals: int, *, games_per_deal: int = 4, game_rank_sd: float = 1.12,
               within_deal_correlation: float = 0.2, seed_sd: float = 0.03) -> PowerPlan:
    """Each arm: `seeds` policies, every one of them on the same `deals` (a crossed design).

    Seed s's mean rank on deal d is  y[s, d] = mu + S[s] + D[d] + E[s, d]:  S the seed's true
    strength (sd `seed_sd`), D the deal's luck that every seed meets, E what is left of that seed's
    games on that deal. D + E is one policy's mean over the deal's games, whose variance is

        v_deal = game_rank_sd^2 x (1 + (games_per_deal - 1) x within_deal_correlation) / games_per_deal.

    The arm's mean over the seeds x deals table has variance
    seed_sd^2 / seeds + Var(D) / deals + Var(E) / (seeds x deals): a deal shared by all seeds is one
    draw of its luck, however many seeds play it, so only E shrinks with the seeds. The plan does not
    know how v_deal splits into Var(D) and Var(E) and takes all of it as shared (the split that
    gives the largest variance):

        arm variance = seed_sd^2 / seeds + v_deal / deals.

    The difference of two arms has twice that (taking no credit for the deals both arms share, whose
    common luck would cancel, so the plan errs on the safe side); its standard error is the square
    root of that, and the minimum detectable difference `DETECTABLE` standard errors."""
    deal_variance = game_rank_sd ** 2 * (1 + (games_per_deal - 1) * within_deal_correlation) / games_per_deal
    arm_variance = seed_sd ** 2 / seeds + deal_variance / deals
    error = math.sqrt(2 * arm_variance)
    return PowerPlan(seeds=seeds, deals=deals, games_per_deal=games_per_deal, game_rank_sd=game_rank_sd,
                     within_deal_correlation=within_deal_correlation, seed_sd=seed_sd, standard_error=error,
                     minimum_detectable_difference=DETECTABLE * error)
