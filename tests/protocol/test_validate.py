"""check_sample: what the learner refuses at its door, each reason naming the field."""

from __future__ import annotations

import math

import pytest

from mlerl.protocol import SampleLimits, check_sample

from .conftest import make_sample

LIMITS = SampleLimits(vocab_size=10, reward_min=-20.0, reward_max=5.0, max_duration_s=600.0)


def test_a_sound_sample_passes():
    assert check_sample(make_sample(), LIMITS) is None


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        (dict(behaviour_logprobs=[-0.5, math.nan]), "behaviour_logprobs"),
        (dict(behaviour_logprobs=[-math.inf, -0.5]), "behaviour_logprobs"),
        (dict(behaviour_logprobs=[-0.5, math.inf]), "behaviour_logprobs"),
        (dict(behaviour_logprobs=[-0.5, 0.5]), "behaviour_logprobs"),  # probability e^0.5 > 1
        (
            dict(behaviour_logprobs=[-0.5, -1e30]),
            "behaviour_logprobs",
        ),  # a sentinel, not a log-prob
        (dict(response_ids=[4, 10]), "response_ids"),  # 10 == vocab_size: one past the last row
        (dict(prompt_ids=[1, 2, 99]), "prompt_ids"),
        (dict(prompt_ids=[-1, 2, 3]), "prompt_ids"),
        (dict(reward=1e6), "reward"),
        (dict(reward=-20.5), "reward"),
        (dict(duration_s=601.0), "duration_s"),
        (dict(generation_s=601.0), "generation_s"),
        (dict(t_graded=math.inf), "t_graded"),
        (dict(top_p=0.9), "top_p"),  # truncated sampling: not the distribution the learner scores
        (dict(top_k=50), "top_p"),
    ],
)
def test_poisons_are_refused_naming_the_field(overrides, field):
    reason = check_sample(make_sample(**overrides), LIMITS)
    assert reason is not None and reason.split(":")[0] == field


def test_bounds_are_inclusive():
    edge = make_sample(
        prompt_ids=[0, 9],
        response_ids=[9, 0],
        behaviour_logprobs=[0.0, -1000.0],
        reward=5.0,
        duration_s=600.0,
    )
    assert check_sample(edge, LIMITS) is None
    assert check_sample(make_sample(reward=-20.0, duration_s=0.0), LIMITS) is None


def test_rounding_just_above_zero_is_tolerated():
    assert check_sample(make_sample(behaviour_logprobs=[-0.5, 5e-5]), LIMITS) is None
    assert check_sample(make_sample(behaviour_logprobs=[-0.5, 2e-4]), LIMITS) is not None


def test_without_a_vocabulary_only_negative_ids_are_refused():
    open_vocab = SampleLimits()
    assert check_sample(make_sample(response_ids=[4, 10**6]), open_vocab) is None
    assert (
        check_sample(make_sample(response_ids=[4, -3]), open_vocab)
        == "response_ids: token id -3 is negative"
    )


def test_untruncated_sampling_at_any_temperature_passes():
    for top_k in (-1, 0):
        assert check_sample(make_sample(temperature=0.3, top_p=1.0, top_k=top_k), LIMITS) is None


@pytest.mark.parametrize("temperature", [0.0, -1.0, math.nan, math.inf])
def test_a_sample_needs_a_positive_finite_temperature(temperature):
    from mlerl.protocol import ProtocolError

    with pytest.raises(ProtocolError, match="temperature"):
        make_sample(temperature=temperature)


# Mutation survivors (benchmarks/tools/mutation.py): the edges the tests above left open.


def test_default_limits_and_the_log_prob_floor():
    # the reward bounds default to open: the learner passes the reward function's range
    assert SampleLimits() == SampleLimits(
        vocab_size=None, reward_min=-math.inf, reward_max=math.inf, max_duration_s=86400.0
    )
    open_vocab = SampleLimits()
    assert check_sample(make_sample(reward=1e6, duration_s=86400.0), open_vocab) is None
    assert check_sample(make_sample(duration_s=86401.0), open_vocab).startswith("duration_s:")
    bounded = SampleLimits(reward_min=-10.0, reward_max=1.0)  # the normalised reward's range
    assert (
        check_sample(make_sample(reward=1.0), bounded) is None
        and check_sample(make_sample(reward=-10.0), bounded) is None
    )
    assert check_sample(make_sample(reward=1.5), bounded).startswith("reward:")
    assert check_sample(make_sample(reward=-10.5), bounded).startswith("reward:")
    # just below -1000 is refused, whatever else the sample holds
    assert check_sample(make_sample(behaviour_logprobs=[-0.5, -1000.001]), LIMITS) == (
        "behaviour_logprobs: -1000.001 is below -1000.0"
    )


def test_reasons_name_the_offending_value():
    assert (
        check_sample(make_sample(behaviour_logprobs=[-0.5, math.nan]), LIMITS)
        == "behaviour_logprobs: nan is not finite"
    )
    assert (
        check_sample(make_sample(behaviour_logprobs=[-0.5, 0.5]), LIMITS)
        == "behaviour_logprobs: 0.5 > 0 is not a log-probability"
    )
    assert check_sample(make_sample(response_ids=[12, 10]), LIMITS) == (
        "response_ids: token id 12 is outside the vocabulary (size 10)"
    )
    assert check_sample(make_sample(reward=6.0), LIMITS) == "reward: 6.0 is outside [-20.0, 5.0]"


def test_empty_token_lists_and_missing_timestamps_pass():
    empty = make_sample(response_ids=[], behaviour_logprobs=[])
    assert check_sample(empty, LIMITS) is None
    assert check_sample(make_sample(prompt_ids=[]), LIMITS) is None
    untimed = make_sample(t_exec_started=None, t_exec_finished=None, t_graded=None)
    assert check_sample(untimed, LIMITS) is None
    for name in ("t_sampled", "t_exec_started", "t_exec_finished"):
        reason = check_sample(make_sample(**{name: math.nan}), LIMITS)
        assert reason == f"{name}: nan is not finite", reason


def test_each_truncation_alone_is_refused():
    assert check_sample(make_sample(top_p=0.999, top_k=-1), LIMITS).startswith("top_p:")
    assert check_sample(make_sample(top_p=1.0, top_k=1), LIMITS).startswith("top_p:")


def test_the_rounding_slack_itself_is_accepted():
    assert check_sample(make_sample(behaviour_logprobs=[-0.5, 1e-4]), LIMITS) is None


def test_limits_are_frozen():
    import dataclasses

    with pytest.raises(dataclasses.FrozenInstanceError):
        LIMITS.reward_max = 1e9  # type: ignore[misc]


@pytest.mark.parametrize("top_p", [math.nan, 1.5, 1.0000001, math.inf, 0.0, -0.5])
def test_a_top_p_that_is_no_probability_is_refused_as_such(top_p):
    # NaN < 1 is False: before this check a NaN top_p passed as untruncated sampling (a mutation
    # survivor, top_p < 1 -> top_p != 1, showed no test told the two apart); so did 1.5
    assert (
        check_sample(make_sample(top_p=top_p), LIMITS)
        == f"top_p: {top_p} is not a probability in (0, 1]"
    )


def test_top_p_just_below_one_is_truncation_not_an_invalid_probability():
    reason = check_sample(make_sample(top_p=0.5), LIMITS)
    assert reason.startswith("top_p: sampled with top_p=0.5, top_k=-1;"), reason
    assert check_sample(make_sample(top_p=1.0), LIMITS) is None
