"""Medal thresholds and flags with Kaggle's progression rules, as MLE-bench ranks a score.

Positions are 1-based on a leaderboard sorted best first; the direction is "lower is better"
when the first score is below the last. Medal tiers are exclusive, a medal needs a score at
least as good as the threshold, ``above_median`` is strict, and a missing (None) or NaN score
earns no flag.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Ranking:
    gold_medal: bool
    silver_medal: bool
    bronze_medal: bool
    above_median: bool

    @property
    def any_medal(self) -> bool:
        return self.gold_medal or self.silver_medal or self.bronze_medal


def medal_positions(num_teams: int) -> tuple[int, int, int]:
    """(gold, silver, bronze) 1-based leaderboard positions for ``num_teams`` teams."""
    n = num_teams
    if n < 1:
        raise ValueError("a leaderboard needs at least one team")
    if n < 100:
        return max(1, int(n * 0.1)), max(1, int(n * 0.2)), max(1, int(n * 0.4))
    if n < 250:
        return 10, max(1, int(n * 0.2)), max(1, int(n * 0.4))
    if n < 1000:
        return 10 + int(n * 0.002), 50, 100
    return 10 + int(n * 0.002), max(1, int(n * 0.05)), max(1, int(n * 0.1))


def thresholds_from_scores(scores: Sequence[float]) -> tuple[float, float, float, float, bool]:
    """(gold, silver, bronze, median, lower_is_better) from leaderboard scores, best first."""
    s = pd.Series(np.asarray(scores, dtype=float))
    if s.empty:
        raise ValueError("empty leaderboard")
    lower = bool(s.iloc[0] < s.iloc[-1])
    g, sv, b = medal_positions(len(s))
    return (
        float(s.iloc[g - 1]),
        float(s.iloc[sv - 1]),
        float(s.iloc[b - 1]),
        float(s.median()),
        lower,
    )


def thresholds_from_leaderboard(path: str | Path) -> tuple[float, float, float, float, bool]:
    """Read a Kaggle/MLE-bench leaderboard CSV (a ``score`` column, best first)."""
    frame = pd.read_csv(path)
    if "score" not in frame.columns:
        raise ValueError(f"{path}: leaderboard needs a 'score' column")
    return thresholds_from_scores(frame["score"].tolist())


def rank_score(
    score: float | None,
    gold: float,
    silver: float,
    bronze: float,
    median: float,
    lower_is_better: bool,
) -> Ranking:
    """Medal flags for ``score`` (None or NaN: all False)."""
    if score is None or (isinstance(score, float) and math.isnan(score)):
        return Ranking(False, False, False, False)

    def at_least(thr: float) -> bool:
        return score <= thr if lower_is_better else score >= thr

    gold_m = at_least(gold)
    silver_m = not gold_m and at_least(silver)
    bronze_m = not gold_m and not silver_m and at_least(bronze)
    above = score < median if lower_is_better else score > median
    return Ranking(gold_m, silver_m, bronze_m, above)
