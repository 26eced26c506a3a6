"""Kaggle progression positions, threshold extraction and ranking on synthetic leaderboards."""

import math

import pandas as pd
import pytest

from mlerl.bench import rank_score
from mlerl.bench._medals import medal_positions, thresholds_from_leaderboard, thresholds_from_scores


@pytest.mark.parametrize(
    ("n", "want"),
    [
        (1, (1, 1, 1)),
        (27, (2, 5, 10)),  # int(2.7)=2, int(5.4)=5, int(10.8)=10
        (99, (9, 19, 39)),
        (100, (10, 20, 40)),
        (249, (10, 49, 99)),
        (250, (10, 50, 100)),  # 10 + int(0.5) = 10
        (999, (11, 50, 100)),  # 10 + int(1.998) = 11
        (1000, (12, 50, 100)),  # 10 + int(2.0) = 12, int(50.0), int(100.0)
        (4321, (18, 216, 432)),  # 10 + int(8.642), int(216.05), int(432.1)
    ],
)
def test_medal_positions(n, want):
    assert medal_positions(n) == want


def test_thresholds_and_ranking_on_a_synthetic_leaderboard(tmp_path):
    # 20 teams scoring 0.95, 0.94, ..., 0.76 (higher is better): gold position int(2)=2 -> 0.94,
    # silver int(4)=4 -> 0.92, bronze int(8)=8 -> 0.88, median of the 20 = (0.86+0.85)/2 = 0.855
    scores = [round(0.95 - 0.01 * i, 2) for i in range(20)]
    path = tmp_path / "leaderboard.csv"
    pd.DataFrame({"teamName": [f"t{i}" for i in range(20)], "score": scores}).to_csv(
        path, index=False
    )
    g, s, b, med, lower = thresholds_from_leaderboard(path)
    assert (g, s, b, med, lower) == pytest.approx((0.94, 0.92, 0.88, 0.855, False))
    assert rank_score(0.94, g, s, b, med, lower).gold_medal  # equal to the threshold counts
    r = rank_score(0.93, g, s, b, med, lower)
    assert (r.gold_medal, r.silver_medal, r.bronze_medal, r.above_median) == (
        False,
        True,
        False,
        True,
    )
    r = rank_score(0.855, g, s, b, med, lower)
    assert not r.any_medal and not r.above_median  # above_median is strict
    assert not rank_score(None, g, s, b, med, lower).above_median
    assert not rank_score(math.nan, g, s, b, med, lower).any_medal


def test_lower_is_better_direction_and_tiers():
    # log-loss board, best first: 0.1 < ... -> lower is better
    g, s, b, med, lower = thresholds_from_scores([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0])
    assert lower and (g, s, b) == (0.1, 0.2, 0.4)  # positions 1, 2, 4
    r = rank_score(0.15, g, s, b, med, lower)
    assert (r.gold_medal, r.silver_medal, r.bronze_medal) == (False, True, False)
    assert rank_score(0.05, g, s, b, med, lower).gold_medal
    with pytest.raises(ValueError):
        thresholds_from_scores([])
