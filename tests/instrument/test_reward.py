"""The reward table, case by case, with hand-derived numbers."""

from __future__ import annotations

import math

import pytest

from mlerl.instrument import MARKERS, Reference, RewardConfig, RewardKind, compute_reward
from mlerl.protocol import ConfigError, ExecStatus

THREE = MARKERS[:3]
PAPER = RewardConfig(kind=RewardKind.PAPER)


@pytest.mark.parametrize(
    ("status", "markers", "expected", "case"),
    [
        (ExecStatus.PROGRAM_ERROR, [], -10.0, "failed"),  # -10 + 0.1*0
        (ExecStatus.PROGRAM_ERROR, THREE, -9.7, "failed"),  # -10 + 0.1*3
        (ExecStatus.TIMEOUT, THREE, -9.7, "failed"),  # markers before a timeout count
        (ExecStatus.OOM, MARKERS, -9.3, "failed"),  # -10 + 0.1*7
        (ExecStatus.OUTPUT_LIMIT, MARKERS[:1], -9.9, "failed"),
        (ExecStatus.NOT_RUN, [], -10.0, "no_program"),
    ],
)
def test_paper_failures(status, markers, expected, case) -> None:
    r = compute_reward(markers, status, None, False, False)
    assert r.reward == pytest.approx(expected)
    assert r.case == case


def test_duplicate_markers_count_once() -> None:
    r = compute_reward(
        ["loaded data"] * 5 + ["imported packages"], ExecStatus.TIMEOUT, None, False, False
    )
    assert r.reward == pytest.approx(-9.8)  # -10 + 0.1*2
    assert r.parts["n_markers"] == 2


def test_ok_but_invalid_submission_gets_partial_credit() -> None:
    r = compute_reward(MARKERS[:6], ExecStatus.OK, None, False, False)
    assert r.reward == pytest.approx(-9.4)  # -10 + 0.1*6
    assert r.case == "invalid_submission"


def test_valid_submission_gets_the_score_sign_flipped_when_lower_is_better() -> None:
    assert compute_reward(MARKERS, ExecStatus.OK, 0.83, True, False, PAPER).reward == 0.83
    r = compute_reward(MARKERS, ExecStatus.OK, 0.25, True, True, PAPER)
    assert r.reward == -0.25 and r.case == "graded"


def test_a_crash_after_writing_a_valid_submission_is_not_graded() -> None:
    r = compute_reward(MARKERS, ExecStatus.PROGRAM_ERROR, 0.9, True, False)
    assert r.reward == pytest.approx(-9.3)


def test_non_finite_score_counts_as_invalid() -> None:
    r = compute_reward(THREE, ExecStatus.OK, math.nan, True, False)
    assert r.case == "invalid_submission" and r.reward == pytest.approx(-9.7)


def test_infra_error_gives_no_reward() -> None:
    r = compute_reward(MARKERS, ExecStatus.INFRA_ERROR, 0.9, True, False)
    assert r.reward is None and r.case == "infra_error"


def test_configurable_constants() -> None:
    cfg = RewardConfig(
        kind=RewardKind.PAPER, failure=-1.0, per_marker=0.05, markers_on_success=True
    )
    assert compute_reward(
        THREE, ExecStatus.TIMEOUT, None, False, False, cfg
    ).reward == pytest.approx(-0.85)
    # graded: 0.5 + 0.05*3
    assert compute_reward(THREE, ExecStatus.OK, 0.5, True, False, cfg).reward == pytest.approx(0.65)


def test_mlagent_reward() -> None:
    cfg = RewardConfig(kind=RewardKind.MLAGENT, mlagent_scale=2.0)
    assert compute_reward(MARKERS, ExecStatus.PROGRAM_ERROR, None, False, False, cfg).reward == 0.0
    assert compute_reward([], ExecStatus.OK, None, False, False, cfg).reward == 0.5
    # alpha = 2 / (1 - 0) = 2; x = 2 * (0.5 - 0) = 1; sigmoid(1) = 0.7310585786
    r = compute_reward([], ExecStatus.OK, 0.5, True, False, cfg)
    assert r.reward == pytest.approx(0.7310585786)
    # lower is better, init 1.0, best 0.2 -> init' = -1, best' = -0.2, s' = -0.6
    # alpha = 2 / 0.8 = 2.5; x = 2.5 * (-0.6 + 1) = 1.0 -> sigmoid(1)
    r = compute_reward([], ExecStatus.OK, 0.6, True, True, cfg, reference=Reference(1.0, 0.2))
    assert r.reward == pytest.approx(0.7310585786)
    # a score below the baseline: x = 2 * (-0.5) = -1 -> sigmoid(-1) = 0.2689414214
    r = compute_reward([], ExecStatus.OK, -0.5, True, False, cfg)
    assert r.reward == pytest.approx(0.2689414214)
    assert compute_reward([], ExecStatus.INFRA_ERROR, None, False, False, cfg).reward is None


def test_bad_inputs_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="unknown marker"):
        compute_reward(["loaded"], ExecStatus.OK, None, False, False)
    with pytest.raises(ValueError, match="without a score"):
        compute_reward([], ExecStatus.OK, None, True, False)
    with pytest.raises(ValueError, match="reference"):
        compute_reward([], ExecStatus.OK, 0.5, True, False)  # the normalised default needs one
    with pytest.raises(ValueError):
        compute_reward([], "exploded", None, False, False)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="per_marker"):
        RewardConfig(per_marker=-0.1)
    with pytest.raises(ConfigError, match="failure"):
        RewardConfig(failure=math.inf)
    with pytest.raises(ConfigError, match="mlagent_best"):
        RewardConfig(mlagent_best=0.0, mlagent_init=0.0)


# Mutation survivors (benchmarks/tools/mutation.py): edges the tests above left open.


def test_config_bounds_at_their_edges() -> None:
    RewardConfig(per_marker=0.0)  # no partial credit is allowed
    RewardConfig(mlagent_scale=1e-9)
    for scale in (0.0, -0.5, -2.0):
        with pytest.raises(ConfigError, match="mlagent_scale"):
            RewardConfig(mlagent_scale=scale)


@pytest.mark.parametrize(
    "name",
    [
        "failure",
        "per_marker",
        "mlagent_error",
        "mlagent_invalid",
        "mlagent_scale",
        "mlagent_init",
        "mlagent_best",
    ],
)
def test_every_constant_must_be_finite(name) -> None:
    with pytest.raises(ConfigError, match=name):
        RewardConfig(**{name: math.nan})


def test_only_an_ok_run_with_a_valid_scored_submission_is_graded() -> None:
    # no program, yet a "valid" finite score: still no_program's failure, not graded
    r = compute_reward([], ExecStatus.NOT_RUN, 0.9, True, False, PAPER)
    assert (r.reward, r.case) == (-10.0, "no_program")
    # a timeout after writing a valid submission that was never scored: a failure, not an error
    r = compute_reward(THREE, ExecStatus.TIMEOUT, None, True, False, PAPER)
    assert (r.reward, r.case) == (pytest.approx(-9.7), "failed")


def test_mlagent_failure_cases_take_their_own_constants() -> None:
    cfg = RewardConfig(kind=RewardKind.MLAGENT, mlagent_error=-0.25, mlagent_invalid=0.3)
    assert compute_reward(MARKERS, ExecStatus.NOT_RUN, None, False, False, cfg).reward == -0.25
    assert compute_reward(MARKERS, ExecStatus.OOM, None, False, False, cfg).reward == -0.25
    r = compute_reward(MARKERS, ExecStatus.OK, None, False, False, cfg)
    assert (r.reward, r.case) == (0.3, "invalid_submission")


def test_mlagent_default_scale_is_100() -> None:
    # alpha = 100 / (1 - 0); x = 100 * 0.01 = 1 -> sigmoid(1)
    r = compute_reward([], ExecStatus.OK, 0.01, True, False, RewardConfig(kind=RewardKind.MLAGENT))
    assert r.reward == pytest.approx(0.7310585786)


def test_mlagent_range_includes_the_sigmoids_zero() -> None:
    from mlerl.instrument import reward_range

    cfg = RewardConfig(kind=RewardKind.MLAGENT, mlagent_error=0.2, mlagent_invalid=0.4)
    assert reward_range(cfg) == (0.0, 1.0)  # a valid but awful score tends to 0


def test_the_failure_constants_bind_only_the_normalized_reward() -> None:
    RewardConfig(kind=RewardKind.MLAGENT, failure=-2.0, per_marker=0.2)  # unused there


def test_the_reference_is_keyword_only() -> None:
    with pytest.raises(TypeError):
        compute_reward([], ExecStatus.OK, 0.5, True, False, None, Reference(0.0, 1.0))  # type: ignore[misc]


def test_mlagent_sigmoid_of_absurd_scores_does_not_overflow() -> None:
    cfg = RewardConfig(kind=RewardKind.MLAGENT)  # scale 100, init 0, best 1
    # x = 100 * 10 = 1000: exp(1000) would overflow; the sigmoid is 1.0 and 0.0 at the two ends
    assert compute_reward([], ExecStatus.OK, 10.0, True, False, cfg).reward == 1.0
    assert compute_reward([], ExecStatus.OK, -10.0, True, False, cfg).reward == 0.0


def test_paper_parts_hold_no_normalised_score() -> None:
    r = compute_reward(THREE, ExecStatus.OK, 0.83, True, False, PAPER)
    assert r.parts == {"score": 0.83, "markers": 0.0, "n_markers": 3}


def test_no_program_with_a_valid_flag_but_no_score_is_a_failure_not_an_error() -> None:
    r = compute_reward([], ExecStatus.NOT_RUN, None, True, False, PAPER)
    assert (r.reward, r.case) == (-10.0, "no_program")


def test_mlagent_reference_scores_must_be_finite_and_differ() -> None:
    cfg = RewardConfig(kind=RewardKind.MLAGENT)
    for ref in (Reference(0.5, 0.5), Reference(0.0, math.inf), Reference(-math.inf, 1.0)):
        for lower in (False, True):  # (negated when lower is better: new float objects)
            with pytest.raises(ValueError, match="finite and differ"):
                compute_reward([], ExecStatus.OK, 0.7, True, lower, cfg, reference=ref)


def test_mlagent_config_references_must_differ_in_value_not_identity() -> None:
    with pytest.raises(ConfigError, match="mlagent_best"):
        RewardConfig(mlagent_best=float("0.5"), mlagent_init=0.5)
    RewardConfig(mlagent_best=0.1, mlagent_init=0.5)  # a lower-is-better pair: best below init


def test_references_and_results_are_frozen() -> None:
    import dataclasses

    with pytest.raises(dataclasses.FrozenInstanceError):
        Reference(0.0, 1.0).best = 2.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        compute_reward([], ExecStatus.OOM, None, False, False, PAPER).reward = 1.0  # type: ignore[misc]


def test_a_best_failure_of_exactly_minus_one_is_refused() -> None:
    # -1.875 + 0.125 * 7 = -1.0 exactly: a failure would tie the lowest valid reward, not stay below
    with pytest.raises(ConfigError, match="failure"):
        RewardConfig(failure=-1.875, per_marker=0.125)
    RewardConfig(failure=-1.875, per_marker=0.0625)  # -1.4375: below


@pytest.mark.parametrize("kind", [RewardKind.NORMALIZED, RewardKind.PAPER])
def test_without_partial_credit_every_failure_is_minus_ten_and_a_valid_run_is_unchanged(
    kind,
) -> None:
    # `instrument.reward.per_marker=0`: the paper's ablation "without instrumentation" (Figure 9,
    # benchmarks/experiments/paper_miniature.py's no_partial_credit arm): -10 + 0 * n whatever was printed
    cfg = RewardConfig(kind=kind, per_marker=0.0)
    ref = Reference(init=0.5, best=1.0)
    for status, markers in (
        (ExecStatus.PROGRAM_ERROR, MARKERS),
        (ExecStatus.TIMEOUT, THREE),
        (ExecStatus.OK, MARKERS),
        (ExecStatus.NOT_RUN, []),
    ):
        r = compute_reward(markers, status, None, False, False, cfg, reference=ref)
        assert r.reward == -10.0 and r.parts.get("markers", 0.0) == 0.0
    # a valid submission scores as with partial credit: normalised (0.75 - 0.5) / (1 - 0.5) = 0.5, raw 0.75
    graded = compute_reward(MARKERS, ExecStatus.OK, 0.75, True, False, cfg, reference=ref)
    assert graded.reward == pytest.approx(0.5 if kind is RewardKind.NORMALIZED else 0.75)
