"""The normalised reward (the default) and the reward's documented range, by hand."""

from __future__ import annotations

import math

import pytest

from mlerl.instrument import (
    MARKERS,
    Reference,
    RewardConfig,
    RewardKind,
    compute_reward,
    normalised_score,
    reward_range,
)
from mlerl.protocol import ConfigError, ExecStatus

BEST_FAILURE = -10.0 + 0.1 * len(MARKERS)  # -9.3


@pytest.mark.parametrize(
    ("score", "lower", "baseline", "best", "expected"),
    [
        (0.75, False, 0.5, 1.0, 0.5),  # AUC: p = (0.75 - 0.5) / (1 - 0.5) = 0.5
        (1.0, False, 0.5, 1.0, 1.0),  # perfect
        (0.5, False, 0.5, 1.0, 0.0),  # the baseline itself
        (0.25, False, 0.5, 1.0, -1 / 3),  # p = -0.5 -> -0.5 / 1.5
        (0.0, False, 0.5, 1.0, -0.5),  # p = -1 -> -1 / 2
        # nomad RMSLE, sample 0.21174, best 0: s' = -0.1, b' = -0.21174, B' = 0
        # p = (-0.1 + 0.21174) / 0.21174 = 0.527723
        (0.1, True, 0.21174, 0.0, 0.11174 / 0.21174),
        # the RMSLE 60.99: p = (0.21174 - 60.99) / 0.21174 = -287.044; r = p / (1 - p)
        (60.99, True, 0.21174, 0.0, -287.0439218 / 288.0439218),
        # lmsys log loss, uniform 1.09861 baseline: 0.54930 is half way -> p = 0.5
        (0.549305, True, 1.09861, 0.0, 0.5),
    ],
)
def test_normalised_score_by_hand(score, lower, baseline, best, expected) -> None:
    assert normalised_score(score, lower, baseline, best) == pytest.approx(expected, rel=1e-6)


def test_normalised_score_is_bounded_and_monotone() -> None:
    scores = (0.0, 0.05, 0.2, 1.0, 10.0, 1e6, 1e300, 1.7e308)  # 1.7e308 / 0.21174 overflows p
    values = [normalised_score(s, True, 0.21174, 0.0) for s in scores]
    assert values == sorted(values, reverse=True)
    assert values[0] == 1.0 and all(-1.0 <= v <= 1.0 for v in values)
    assert values[-1] == -1.0  # p = -inf: the limit, not NaN
    assert values[5] > -1.0  # 1e6: p = -4.72e6, r = -0.9999998
    # a score past the optimum (an answers set the reference did not foresee) is held at 1
    assert normalised_score(-0.5, True, 0.21174, 0.0) == 1.0


def test_normalised_score_refuses_bad_references() -> None:
    with pytest.raises(ValueError, match="better than baseline"):
        normalised_score(0.3, False, 1.0, 1.0)
    with pytest.raises(ValueError, match="better than baseline"):
        normalised_score(0.3, True, 0.0, 0.2)  # lower is better: best 0.2 is worse than 0
    with pytest.raises(ValueError, match="finite"):
        normalised_score(math.inf, False, 0.5, 1.0)


def test_default_reward_is_normalised_and_failures_unchanged() -> None:
    ref = Reference(init=0.21174, best=0.0)
    r = compute_reward(MARKERS, ExecStatus.OK, 60.99, True, True, reference=ref)
    assert r.case == "graded" and r.reward == pytest.approx(-287.0439218 / 288.0439218)
    assert r.parts["score"] == -60.99 and r.parts["normalised"] == r.reward
    assert r.reward > BEST_FAILURE
    assert compute_reward(
        MARKERS, ExecStatus.PROGRAM_ERROR, None, False, True, reference=ref
    ).reward == pytest.approx(BEST_FAILURE)
    # with markers on success: 0.5 + 0.1 * 3
    cfg = RewardConfig(markers_on_success=True)
    r = compute_reward(
        MARKERS[:3], ExecStatus.OK, 0.75, True, False, cfg, reference=Reference(0.5, 1.0)
    )
    assert r.reward == pytest.approx(0.8)


def test_reward_range() -> None:
    assert reward_range() == (-10.0, 1.0)
    assert reward_range(RewardConfig(markers_on_success=True)) == (-10.0, pytest.approx(1.7))
    assert reward_range(RewardConfig(kind=RewardKind.PAPER)) == (-math.inf, math.inf)
    assert reward_range(RewardConfig(kind=RewardKind.MLAGENT)) == (0.0, 1.0)
    assert reward_range(RewardConfig(failure=-3.0, per_marker=0.2)) == (-3.0, 1.0)


def test_constants_that_let_a_failure_beat_a_valid_submission_are_refused() -> None:
    # -2 + 0.2 * 7 = -0.6 > -1: a failure could outscore a poor valid submission
    with pytest.raises(ConfigError, match="failure"):
        RewardConfig(failure=-2.0, per_marker=0.2)
    RewardConfig(
        kind=RewardKind.PAPER, failure=-2.0, per_marker=0.2
    )  # the paper makes no such promise
