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
