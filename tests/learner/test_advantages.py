"""GAE and group baselines against hand-derived numbers."""

import pytest
import torch

from mlerl.learner import gae, group_advantages
from mlerl.learner._advantages import terminal_rewards
from mlerl.learner._config import AdvantageEstimator


def test_terminal_reward_on_last_response_token():
    mask = torch.tensor([[0.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    tr = terminal_rewards(torch.tensor([2.0, -1.0]), mask)
    assert tr.tolist() == [[0.0, 0.0, 2.0, 0.0], [0.0, 0.0, 0.0, -1.0]]


def test_gae_gamma_lambda_one_is_reward_minus_value():
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    values = torch.tensor([[0.5, 1.0, 1.5, 9.0]])
    tr = terminal_rewards(torch.tensor([2.0]), mask)
    adv, ret = gae(tr, values, mask, 1.0, 1.0)
    # gamma = lambda = 1 telescopes: A_t = sum_k delta_k = R - V_t = [1.5, 1.0, 0.5]; G_t = R = 2
    assert adv[0].tolist() == pytest.approx([1.5, 1.0, 0.5, 0.0])
    assert ret[0].tolist() == pytest.approx([2.0, 2.0, 2.0, 0.0])


def test_gae_general_gamma_lambda():
    mask = torch.tensor([[1.0, 1.0]])
    values = torch.tensor([[1.0, 2.0]])
    tr = torch.tensor([[0.0, 1.0]])
    adv, ret = gae(tr, values, mask, gamma=0.9, lam=0.5)
    # t=1 (last): delta = 1 - 2 = -1, A_1 = -1
    # t=0: delta = 0 + 0.9 * 2 - 1 = 0.8; A_0 = 0.8 + 0.9 * 0.5 * (-1) = 0.35
    assert adv[0].tolist() == pytest.approx([0.35, -1.0])
    assert ret[0].tolist() == pytest.approx([1.35, 1.0])


def test_grpo_and_rloo():
    r = torch.tensor([1.0, 2.0, 3.0, 10.0])
    groups = ["a", "a", "a", "b"]
    # group a: mean 2 -> [-1, 0, 1]; group b has one sample -> 0 (no baseline)
    assert group_advantages(r, groups, AdvantageEstimator.grpo).tolist() == pytest.approx(
        [-1, 0, 1, 0]
    )
    # population std of [1, 2, 3] = sqrt(2/3) = 0.816497 -> +-1/0.816497 = +-1.224745
    std = group_advantages(r, groups, AdvantageEstimator.grpo, std_normalise=True)
    assert std.tolist() == pytest.approx([-1.224745, 0, 1.224745, 0], abs=1e-5)
    # a floor below the std changes nothing; above it, divide by the floor: +-1 / 2 = +-0.5
    floor = group_advantages(r, groups, AdvantageEstimator.grpo, std_normalise=True, std_floor=0.5)
    assert floor.tolist() == pytest.approx([-1.224745, 0, 1.224745, 0], abs=1e-5)
    floor = group_advantages(r, groups, AdvantageEstimator.grpo, std_normalise=True, std_floor=2.0)
    assert floor.tolist() == pytest.approx([-0.5, 0, 0.5, 0], abs=1e-5)
    # near-identical rewards (std 5e-5): +-1 without a floor, +-0.005 with a floor of 0.01
    near = torch.tensor([0.04002, 0.04012])
    plain = group_advantages(near, [0, 0], AdvantageEstimator.grpo, std_normalise=True)
    assert plain.abs().tolist() == pytest.approx([5e-5 / (5e-5 + 1e-6)] * 2, rel=1e-2)  # eps 1e-6
    floored = group_advantages(
        near, [0, 0], AdvantageEstimator.grpo, std_normalise=True, std_floor=0.01
    )
    assert floored.abs().tolist() == pytest.approx([0.005, 0.005], rel=1e-3)
    # RLOO: R_i - mean of the others: 1 - 2.5 = -1.5, 2 - 2 = 0, 3 - 1.5 = 1.5
    assert group_advantages(r, groups, AdvantageEstimator.rloo).tolist() == pytest.approx(
        [-1.5, 0, 1.5, 0]
    )


def test_group_advantages_rejects_gae():
    with pytest.raises(ValueError, match="critic"):
        group_advantages(torch.ones(2), [0, 0], AdvantageEstimator.gae)


# Mutation survivors (benchmarks/tools/mutation.py): edges the tests above left open.


def test_terminal_reward_skips_empty_rows_and_places_a_single_token_reward():
    mask = torch.tensor([[0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    tr = terminal_rewards(torch.tensor([5.0, 2.0, -1.0]), mask)
    # no response token: no reward anywhere (not on position 0); one token: the reward is on it
    assert tr.tolist() == [[0.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, -1.0]]


def test_gae_stops_at_the_last_response_token_whatever_the_padding_value():
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    values = torch.tensor([[1.0, 2.0, 5.0]])  # 5.0 on padding must not leak into delta_1
    tr = torch.tensor([[0.0, 1.0, 0.0]])
    adv, ret = gae(tr, values, mask, gamma=0.9, lam=0.5)
    # t=1 (last real token): next mask 0, delta = 1 - 2 = -1, A_1 = -1
    # t=0: delta = 0 + 0.9 * 2 - 1 = 0.8; A_0 = 0.8 + 0.9 * 0.5 * (-1) = 0.35; padding 0
    assert adv[0].tolist() == pytest.approx([0.35, -1.0, 0.0])
    assert ret[0].tolist() == pytest.approx([1.35, 1.0, 0.0])


def test_gae_over_a_long_response():
    # 300 tokens (beyond CPython's small-int cache: `t + 1 is not T` would index past the end)
    T = 300
    mask = torch.ones(1, T)
    adv, ret = gae(terminal_rewards(torch.tensor([2.0]), mask), torch.zeros(1, T), mask)
    # gamma = lambda = 1, V = 0: every A_t = G_t = R = 2
    assert adv.tolist() == [[2.0] * T] and ret.tolist() == [[2.0] * T]


def test_advantages_carry_no_gradient():
    from mlerl.learner._advantages import whiten

    values = torch.tensor([[1.0, 2.0]], requires_grad=True)
    adv, ret = gae(torch.tensor([[0.0, 1.0]]), values, torch.ones(1, 2))
    assert not adv.requires_grad and not ret.requires_grad
    rewards = torch.tensor([1.0, 2.0], requires_grad=True)
    assert not group_advantages(rewards, [0, 0], AdvantageEstimator.grpo).requires_grad
    assert not whiten(
        torch.tensor([[1.0, 3.0]], requires_grad=True), torch.ones(1, 2)
    ).requires_grad


def test_gae_reads_every_next_value():
    # 4 real tokens, gamma = lambda = 1: A_t = R - V_t = 10 - [1, 2, 3, 4]; G_t = R
    mask = torch.ones(1, 4)
    adv, ret = gae(
        terminal_rewards(torch.tensor([10.0]), mask), torch.tensor([[1.0, 2.0, 3.0, 4.0]]), mask
    )
    assert adv[0].tolist() == pytest.approx([9.0, 8.0, 7.0, 6.0]) and ret[
        0
    ].tolist() == pytest.approx([10.0] * 4)


def test_group_advantage_options_are_keyword_only():
    with pytest.raises(TypeError):
        group_advantages(torch.ones(2), [0, 0], AdvantageEstimator.grpo, True)  # type: ignore[misc]


def test_group_baselines_of_a_pair_after_a_singleton():
    # the singleton group comes first: it is skipped, the pair after it is still computed
    r, groups = torch.tensor([10.0, 1.0, 3.0]), ["solo", "pair", "pair"]
    assert group_advantages(r, groups, AdvantageEstimator.grpo).tolist() == pytest.approx(
        [0.0, -1.0, 1.0]
    )
    # RLOO of a pair: R_i - the other one = [1 - 3, 3 - 1] (n / (n - 1) = 2, an even n)
    assert group_advantages(r, groups, AdvantageEstimator.rloo).tolist() == pytest.approx(
        [0.0, -2.0, 2.0]
    )


def test_terminal_reward_of_a_first_token_before_two_pads():
    tr = terminal_rewards(torch.tensor([4.0]), torch.tensor([[1.0, 0.0, 0.0]]))
    assert tr.tolist() == [[4.0, 0.0, 0.0]]


def test_validity_strata_compare_working_programs_at_their_own_scale():
    # One failure (-9.8) and three valid programs. Between strata, a 1-vs-3 split of a GRPO
    # group is -sqrt(3) for the one and +1/sqrt(3) for the three; within the valid stratum,
    # (-0.02, 0, +0.02) over its population std 0.02*sqrt(2/3) is -sqrt(1.5), 0, +sqrt(1.5);
    # the failure's stratum of one adds 0.
    rewards = torch.tensor([-9.8, 0.75, 0.77, 0.79])
    got = group_advantages(
        rewards,
        ["g"] * 4,
        AdvantageEstimator.grpo,
        std_normalise=True,
        std_floor=0.01,
        strata=[False, True, True, True],
    )
    s3, s15 = 3**0.5, 1.5**0.5
    want = torch.tensor([-s3, 1 / s3 - s15, 1 / s3, 1 / s3 + s15])
    torch.testing.assert_close(got, want, atol=1e-4, rtol=0)
    # unstratified, the same group's valid programs differ by 0.02 / 4.577 = 0.0044 apiece
    flat = group_advantages(
        rewards, ["g"] * 4, AdvantageEstimator.grpo, std_normalise=True, std_floor=0.01
    )
    assert float(flat[3] - flat[2]) == pytest.approx(0.02 / 4.5770, abs=1e-4)


def test_strata_leave_a_single_stratum_group_unchanged_and_apply_to_rloo():
    rewards = torch.tensor([0.0, 1.0, 3.0, 5.0, 2.0, 4.0])
    groups = ["a", "a", "a", "a", "b", "b"]
    one = group_advantages(
        rewards[4:], groups[4:], AdvantageEstimator.grpo, std_normalise=True, strata=[1, 1]
    )
    torch.testing.assert_close(one, torch.tensor([-1.0, 1.0]), atol=1e-5, rtol=0)
    # RLOO in group a, strata {0, 1} and {3, 5}: stratum means 0.5 and 4 around 2.25 give
    # 4/3 * -1.75 = -7/3 and +7/3 between; within, 2 * (r - mean): -1, +1 and -2, +2
    got = group_advantages(rewards, groups, AdvantageEstimator.rloo, strata=[0, 0, 1, 1, 0, 0])
    want = torch.tensor([-10 / 3, -4 / 3, 1 / 3, 13 / 3, -2.0, 2.0])
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


def test_strata_must_name_every_sample():
    with pytest.raises(ValueError, match="3 strata for 2 samples"):
        group_advantages(
            torch.zeros(2), ["g", "g"], AdvantageEstimator.grpo, strata=[True, True, False]
        )


def test_a_revision_is_compared_on_its_gain_over_its_parent():
    # Three revisions of one task (one group): parents 0.80, 0.70, 0.80 -> children 0.82, 0.74,
    # -10 (failed); a scratch sample without a parent keeps its reward.
    from mlerl.learner._advantages import gains_over_parents

    rewards = torch.tensor([0.82, 0.74, -10.0, 0.5])
    gains = gains_over_parents(rewards, [0.80, 0.70, 0.80, None])
    torch.testing.assert_close(gains, torch.tensor([0.02, 0.04, -10.8, 0.5]), atol=1e-6, rtol=0)
    # With validity strata, GRPO with std: within the valid stratum the child that gained more
    # (+0.04 against +0.02) comes first, though its own reward (0.74) is the lower one:
    # centred gains -0.01, +0.01 over their population std 0.01 give -1, +1. Between strata,
    # a 2-vs-1 split gives +1/sqrt 2 to each valid one and -sqrt 2 to the failure.
    got, raw = (
        group_advantages(
            r[:3],
            ["g"] * 3,
            AdvantageEstimator.grpo,
            std_normalise=True,
            std_floor=0.001,
            strata=[True, True, False],
        )
        for r in (gains, rewards)
    )
    r2 = 2**0.5
    # (float32 gains and the eps of the std division: 1e-3)
    torch.testing.assert_close(got, torch.tensor([1 / r2 - 1, 1 / r2 + 1, -r2]), atol=1e-3, rtol=0)
    # on the rewards themselves the order of the two valid children is the other way round
    assert float(raw[0]) > float(raw[1])
    with pytest.raises(ValueError, match="2 parent rewards for 4 samples"):
        gains_over_parents(rewards, [0.8, None])


def test_entropic_weights_aim_at_the_best_sample_within_the_kl_budget():
    import math

    from mlerl.learner._advantages import entropic_beta, kl_to_uniform

    # Rewards (0, 0, 1). A tilt of exp(beta r) with beta = ln 2 gives q = (1/4, 1/4, 1/2):
    # KL(q || uniform of 3) = 2 * 1/4 * ln(3/4) + 1/2 * ln(3/2) = 1/2 * ln(9/8). With that
    # budget the advantages are 3 q - 1 = (-1/4, -1/4, +1/2): they sum to zero and the best
    # sample gets all the positive weight.
    budget = 0.5 * math.log(9 / 8)
    r = torch.tensor([0.0, 0.0, 1.0])
    assert kl_to_uniform(math.log(2), r) == pytest.approx(budget, abs=1e-12)
    assert entropic_beta(r, budget) == pytest.approx(math.log(2), rel=1e-9)
    got = group_advantages(r, ["g"] * 3, AdvantageEstimator.entropic, kl_budget=budget)
    torch.testing.assert_close(got, torch.tensor([-0.25, -0.25, 0.5]), atol=1e-6, rtol=0)
    # the rewards' scale does not matter: beta shrinks by the same factor (ln 2 / 10)
    scaled = group_advantages(10 * r, ["g"] * 3, AdvantageEstimator.entropic, kl_budget=budget)
    torch.testing.assert_close(scaled, got, atol=1e-6, rtol=0)
    assert entropic_beta(10 * r, budget) == pytest.approx(math.log(2) / 10, rel=1e-9)
    # std normalisation does not apply to it
    normed = group_advantages(
        r, ["g"] * 3, AdvantageEstimator.entropic, kl_budget=budget, std_normalise=True
    )
    torch.testing.assert_close(normed, got, atol=1e-6, rtol=0)


def test_entropic_edge_groups():
    import math

    ent = AdvantageEstimator.entropic
    # two samples under ln 2: the KL can never exceed the budget, so all the weight goes to the
    # better one: 2 * (0, 1) - 1
    pair = group_advantages(torch.tensor([0.3, 0.1]), [0, 0], ent, kl_budget=math.log(2))
    torch.testing.assert_close(pair, torch.tensor([1.0, -1.0]), atol=1e-6, rtol=0)
    # a group of one and a group of ties carry no signal
    got = group_advantages(torch.tensor([5.0, 0.2, 0.2, 0.2]), ["a", "b", "b", "b"], ent)
    assert got.tolist() == [0.0, 0.0, 0.0, 0.0]


def test_entropic_composes_with_validity_strata_and_parent_gains():
    import math

    from mlerl.learner._advantages import gains_over_parents

    # One failure (-10) and three valid programs (0, 0, 1), budget ln 4 (the most a group of 4
    # can take): between strata the tilt puts all weight on the three valid (stratum mean 1/3
    # against -10): 4 * (0, 1/3, 1/3, 1/3) - 1 = (-1, 1/3, 1/3, 1/3); within the valid stratum
    # (budget ln 4 > ln 3) all of it on the best: 3 * (0, 0, 1) - 1 = (-1, -1, 2).
    got = group_advantages(
        torch.tensor([-10.0, 0.0, 0.0, 1.0]),
        ["g"] * 4,
        AdvantageEstimator.entropic,
        kl_budget=math.log(4),
        strata=[False, True, True, True],
    )
    want = torch.tensor([-1.0, 1 / 3 - 1, 1 / 3 - 1, 1 / 3 + 2])
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    # on gains over parents: children 0.82 (parent 0.80) and 0.74 (parent 0.70): the larger
    # gain (+0.04) is the group's best
    gains = gains_over_parents(torch.tensor([0.82, 0.74]), [0.80, 0.70])
    pair = group_advantages(gains, [0, 0], AdvantageEstimator.entropic)
    torch.testing.assert_close(pair, torch.tensor([-1.0, 1.0]), atol=1e-6, rtol=0)


def test_entropic_kl_budget_is_checked():
    from mlerl.learner import LearnerConfig
    from mlerl.protocol import ConfigError

    for bad in (0.0, -1.0, float("inf")):
        with pytest.raises(ConfigError, match="entropic_kl"):
            LearnerConfig(advantage="entropic", critic="none", entropic_kl=bad)
