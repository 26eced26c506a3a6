"""PPO, KL, entropy and value losses against hand-derived numbers."""

import math

import pytest
import torch

from mlerl.learner import ppo_policy_loss, value_loss
from mlerl.learner._config import KLEstimator, LossAgg
from mlerl.learner._losses import aggregate, entropy_from_logits, kl_penalty

# Two samples; row 0 has 2 response tokens (third position is padding), row 1 has 3.
# old log-probs are 0, so the ratio r = exp(logp).
R = torch.tensor([[1.1, 1.5, 1.0], [0.5, 0.5, 1.5]])
A = torch.tensor([[1.0, 1.0, 0.0], [1.0, -1.0, -1.0]])
MASK = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
# Per-token pg = max(-A r, -A clip(r, 0.8, 1.2)):
#   r=1.1, A=+1: max(-1.1, -1.1) = -1.1   (inside the clip range)
#   r=1.5, A=+1: max(-1.5, -1.2) = -1.2   (clipped: no incentive beyond 1 + eps)
#   r=0.5, A=+1: max(-0.5, -0.8) = -0.5   (pessimistic side: unclipped)
#   r=0.5, A=-1: max(+0.5, +0.8) = +0.8   (clipped)
#   r=1.5, A=-1: max(+1.5, +1.2) = +1.5   (pessimistic side: unclipped)
PG = [[-1.1, -1.2], [-0.5, 0.8, 1.5]]


def _loss(**kw):
    logp = torch.log(R).requires_grad_(True)
    loss, m = ppo_policy_loss(logp, torch.zeros_like(R), A, MASK, **kw)
    return logp, loss, m


def test_token_mean_mixes_clipped_and_unclipped_tokens():
    logp, loss, m = _loss()
    # (-1.1 - 1.2 - 0.5 + 0.8 + 1.5) / 5 tokens = -0.5 / 5 = -0.1
    assert loss.item() == pytest.approx(-0.1, abs=1e-6)
    # |r - 1| > 0.2 for 1.5, 0.5, 0.5, 1.5: 4 of 5 tokens
    assert m["clipfrac"] == pytest.approx(0.8)
    loss.backward()
    # d/dlogp of -A r = -A r where unclipped, 0 where the clipped branch is active; / 5 tokens
    expected = torch.tensor([[-1.1, 0.0, 0.0], [-0.5, 0.0, 1.5]]) / 5
    assert torch.allclose(logp.grad, expected, atol=1e-6)


def test_seq_mean_weighs_each_sample_equally():
    _, loss, _ = _loss(agg=LossAgg.seq_mean)
    # row 0: (-1.1 - 1.2) / 2 = -1.15; row 1: (-0.5 + 0.8 + 1.5) / 3 = 0.6; mean = -0.275
    assert loss.item() == pytest.approx(-0.275, abs=1e-6)


def test_per_sample_weights_multiply_the_pg_term():
    _, loss, _ = _loss(weights=torch.tensor([2.0, 0.5]))
    # (2 * (-2.3) + 0.5 * 1.8) / 5 = (-4.6 + 0.9) / 5 = -0.74
    assert loss.item() == pytest.approx(-0.74, abs=1e-6)


def test_explicit_norm_replaces_the_token_count():
    _, loss, _ = _loss(norm=10.0)
    assert loss.item() == pytest.approx(-0.5 / 10, abs=1e-6)


def test_dual_clip_bounds_negative_advantage_loss():
    logp = torch.log(torch.tensor([[5.0]]))
    a, mask = torch.tensor([[-1.0]]), torch.ones(1, 1)
    plain, _ = ppo_policy_loss(logp, torch.zeros(1, 1), a, mask)
    dual, _ = ppo_policy_loss(logp, torch.zeros(1, 1), a, mask, dual_clip=3.0)
    # max(-A r, -A clip(r)) = max(5, 1.2) = 5; dual clip: min(5, -A * 3) = 3
    assert plain.item() == pytest.approx(5.0, rel=1e-6)
    assert dual.item() == pytest.approx(3.0, rel=1e-6)


def test_is_weights_scale_tokens():
    logp = torch.zeros(1, 2)
    loss, _ = ppo_policy_loss(
        logp, logp, torch.ones(1, 2), torch.ones(1, 2), is_weights=torch.tensor([[2.0, 0.5]])
    )
    # r = 1: pg = -1 per token, times [2, 0.5]: (-2 - 0.5) / 2 = -1.25
    assert loss.item() == pytest.approx(-1.25)


def test_kl_estimators():
    logp, ref = torch.tensor([-1.0, -2.0]), torch.tensor([-2.0, -1.0])
    # k3 = exp(ref - logp) - (ref - logp) - 1: [e^-1 + 1 - 1, e^1 - 1 - 1] = [0.36788, 0.71828]
    assert kl_penalty(logp, ref, KLEstimator.k3).tolist() == pytest.approx(
        [math.exp(-1), math.e - 2], rel=1e-5
    )
    assert kl_penalty(logp, logp, KLEstimator.k3).abs().max().item() == 0.0
    assert [e.value for e in KLEstimator] == ["k3"]  # k1 removed: zero expected gradient as a loss


def test_k3_gradient_by_hand():
    # d k3 / d logp = d/dx [exp(ref - x) - (ref - x) - 1] = 1 - exp(ref - x) = 1 - r.
    # logp = -1, ref = -2: r = e^-1, gradient 1 - e^-1 = 0.63212.
    logp = torch.tensor([-1.0], requires_grad=True)
    kl_penalty(logp, torch.tensor([-2.0])).sum().backward()
    assert logp.grad.item() == pytest.approx(1 - math.exp(-1), rel=1e-6)


def test_k3_expected_gradient_is_that_of_reverse_kl():
    # The claim in docs/learner.md, checked exactly on a 3-way categorical: summing the k3 loss
    # gradient over tokens y weighted by pi(y) (the expectation under sampling from pi) gives
    # grad KL(pi_ref || pi), not grad KL(pi || pi_ref).
    theta = torch.tensor([0.3, -0.5, 1.1], requires_grad=True)
    ref = torch.log_softmax(torch.tensor([1.0, 0.0, -1.0]), -1)
    logp = torch.log_softmax(theta, -1)
    pi = logp.exp().detach()
    (expected_grad,) = torch.autograd.grad((pi * kl_penalty(logp, ref)).sum(), theta)
    (reverse,) = torch.autograd.grad(
        (ref.exp() * (ref - torch.log_softmax(theta, -1))).sum(), theta
    )
    (forward,) = torch.autograd.grad(
        (torch.softmax(theta, -1) * (torch.log_softmax(theta, -1) - ref)).sum(), theta
    )
    assert torch.allclose(expected_grad, reverse, atol=1e-6)
    assert (expected_grad - forward).abs().max() > 1e-2  # the two directions differ here
    # k1 = log pi - log pi_ref as a loss term: E_pi[grad log pi] = 0 whatever pi and pi_ref are.
    (k1_grad,) = torch.autograd.grad((pi * (torch.log_softmax(theta, -1) - ref)).sum(), theta)
    assert k1_grad.abs().max() < 1e-6


def test_entropy_of_uniform_and_peaked():
    logits = torch.tensor([[0.0, 0.0, 0.0, 0.0], [100.0, 0.0, 0.0, 0.0]])
    # uniform over 4: log 4; a near-one-hot distribution: ~0
    assert entropy_from_logits(logits).tolist() == pytest.approx([math.log(4), 0.0], abs=1e-6)


def test_value_loss_clipped_and_unclipped():
    values = torch.tensor([[1.0, 0.2]], requires_grad=True)
    old, ret, mask = torch.tensor([[0.0, 0.0]]), torch.tensor([[2.0, 1.0]]), torch.ones(1, 2)
    loss, m = value_loss(values, old, ret, mask, clip=0.5)
    # token 0: V moved 1.0 > 0.5 from V_old: clipped V = 0.5; max((1-2)^2, (0.5-2)^2) = 2.25
    # token 1: |0.2| < 0.5, both branches (0.2-1)^2 = 0.64
    # 0.5 * (2.25 + 0.64) / 2 = 0.7225
    assert loss.item() == pytest.approx(0.7225, abs=1e-6)
    assert m["vf_clipfrac"] == pytest.approx(0.5)
    loss.backward()
    # token 0's loss is the clipped branch (constant in V): zero gradient; token 1: 0.5*2*(0.2-1)/2 = -0.4
    assert values.grad[0].tolist() == pytest.approx([0.0, -0.4], abs=1e-6)


def test_aggregate_ignores_padding():
    x = torch.tensor([[1.0, 3.0, 100.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    assert aggregate(x, mask, LossAgg.token_mean).item() == 2.0
    assert aggregate(x, mask, LossAgg.seq_mean).item() == 2.0


# Mutation survivors (benchmarks/tools/mutation.py): edges the tests above left open.


def test_policy_metrics_by_hand_and_padding_left_out():
    logp = torch.log(R.clone())
    logp[0, 2] = math.log(9.0)  # padding: a huge ratio there must count in no metric
    _, m = ppo_policy_loss(logp, torch.zeros_like(R), A, MASK)
    rs = [1.1, 1.5, 0.5, 0.5, 1.5]
    assert m["ratio_mean"] == pytest.approx(5.1 / 5)  # (1.1 + 1.5 + 0.5 + 0.5 + 1.5) / 5
    assert m["ratio_max"] == pytest.approx(1.5)
    # approx_kl = mean of (r - 1) - log r over the 5 tokens
    assert m["approx_kl"] == pytest.approx(sum((r - 1) - math.log(r) for r in rs) / 5, rel=1e-5)
    assert m["approx_kl"] == pytest.approx(0.116011, rel=1e-4)
    assert m["clipfrac"] == pytest.approx(0.8)


def test_a_ratio_exactly_at_the_clip_bound_is_not_clipped():
    # r = 1.5 and 0.5 are exact in float32: |r - 1| = 0.5 = clip_ratio, not beyond it
    logp = torch.log(torch.tensor([[1.5, 0.5]]))
    _, m = ppo_policy_loss(
        logp, torch.zeros(1, 2), torch.ones(1, 2), torch.ones(1, 2), clip_ratio=0.5
    )
    assert m["clipfrac"] == 0.0
    values, old = torch.tensor([[0.5, -0.5]]), torch.zeros(1, 2)
    _, vm = value_loss(values, old, torch.zeros(1, 2), torch.ones(1, 2), clip=0.5)
    assert vm["vf_clipfrac"] == 0.0


def test_no_response_token_gives_zero_loss_and_neutral_metrics():
    logp = torch.log(torch.tensor([[2.0, 3.0]]))
    mask = torch.zeros(1, 2)
    for agg in LossAgg:
        loss, m = ppo_policy_loss(logp, torch.zeros(1, 2), torch.ones(1, 2), mask, agg=agg)
        assert loss.item() == 0.0, agg  # no 0 / 0
        assert m == {"clipfrac": 0.0, "approx_kl": 0.0, "ratio_mean": 0.0, "ratio_max": 1.0}
    vloss, vm = value_loss(torch.ones(1, 2), torch.zeros(1, 2), torch.zeros(1, 2), mask)
    assert vloss.item() == 0.0 and vm == {"vf_clipfrac": 0.0, "value_mean": 0.0}


def test_seq_mean_of_one_sample_and_of_an_empty_row():
    x = torch.tensor([[1.0, 3.0]])
    # one sequence: its token mean, divided by 1 sequence
    assert aggregate(x, torch.ones(1, 2), LossAgg.seq_mean).item() == 2.0
    # an empty row adds 0 (no 0 / 0) and still counts as a sequence: (2 + 0) / 2
    x2 = torch.tensor([[1.0, 3.0], [5.0, 7.0]])
    mask2 = torch.tensor([[1.0, 1.0], [0.0, 0.0]])
    assert aggregate(x2, mask2, LossAgg.seq_mean).item() == 1.0
    # with an explicit norm: the sum of per-sequence means over it
    assert aggregate(x2, torch.ones(2, 2), LossAgg.seq_mean, norm=4.0).item() == (2.0 + 6.0) / 4
    # token_mean over a single token is that token
    assert (
        aggregate(
            torch.tensor([[4.0, 100.0]]), torch.tensor([[1.0, 0.0]]), LossAgg.token_mean
        ).item()
        == 4.0
    )


def test_dual_clip_leaves_positive_advantages_alone():
    logp = torch.log(torch.tensor([[5.0, 5.0]]))
    a, mask = torch.tensor([[1.0, -1.0]]), torch.ones(1, 2)
    dual, _ = ppo_policy_loss(logp, torch.zeros(1, 2), a, mask, dual_clip=3.0)
    # A = +1: max(-5, -1.2) = -1.2 (untouched by the dual clip); A = -1: min(5, 3) = 3
    assert dual.item() == pytest.approx((-1.2 + 3.0) / 2, rel=1e-6)


def test_value_metrics_and_padding():
    values = torch.tensor([[1.0, 3.0, 50.0]])
    old, ret = torch.tensor([[0.0, 2.9, 0.0]]), torch.tensor([[1.0, 3.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    loss, m = value_loss(values, old, ret, mask, clip=0.5)
    # token 0 moved 1.0 > 0.5 (clipped branch: 0.5 - 1 -> 0.25, unclipped 0): max 0.25;
    # token 1 moved 0.1: both 0; padding (moved 50) counts nowhere
    assert loss.item() == pytest.approx(0.5 * 0.25 / 2)
    assert m == pytest.approx({"vf_clipfrac": 0.5, "value_mean": 2.0})


def test_an_unknown_kl_estimator_is_refused():
    with pytest.raises(ValueError, match="kl_estimator"):
        kl_penalty(torch.zeros(1), torch.zeros(1), "k1")  # type: ignore[arg-type]


def test_dual_clip_leaves_small_positive_advantages_alone_too():
    logp = torch.log(torch.tensor([[5.0]]))
    dual, _ = ppo_policy_loss(
        logp, torch.zeros(1, 1), torch.tensor([[0.5]]), torch.ones(1, 1), dual_clip=3.0
    )
    # A = 0.5: max(-0.5 * 5, -0.5 * 1.2) = -0.6; the dual clip (A < 0 only) leaves it
    assert dual.item() == pytest.approx(-0.6, rel=1e-6)


def test_vf_clipfrac_counts_the_values_that_moved_beyond_the_clip():
    values, old = torch.tensor([[1.0, -2.0, 0.1]]), torch.zeros(1, 3)
    _, m = value_loss(values, old, torch.zeros(1, 3), torch.ones(1, 3), clip=0.5)
    assert m["vf_clipfrac"] == pytest.approx(2 / 3)  # |1.0| and |-2.0| > 0.5; 0.1 is not


def test_one_token_rows_and_metrics_are_not_halved():
    x, mask = torch.tensor([[4.0, 100.0], [1.0, 3.0]]), torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    assert aggregate(x, mask, LossAgg.seq_mean).item() == 3.0  # (4 / 1 + 4 / 2) / 2
    _, m = ppo_policy_loss(
        torch.log(torch.tensor([[2.0]])), torch.zeros(1, 1), torch.ones(1, 1), torch.ones(1, 1)
    )
    assert m["ratio_mean"] == pytest.approx(2.0) and m["clipfrac"] == 1.0


def test_value_loss_takes_the_larger_branch_either_way():
    values = torch.tensor([[1.0, -1.0]], requires_grad=True)
    old, ret = torch.zeros(1, 2), torch.tensor([[-2.0, -3.0]])
    loss, _ = value_loss(values, old, ret, torch.ones(1, 2), clip=0.5)
    # token 0 moved up to 1 (clipped 0.5): max((1 + 2)^2, (0.5 + 2)^2) = 9, the unclipped one;
    # token 1 moved down to -1 (clipped -0.5): max((-1 + 3)^2, (-0.5 + 3)^2) = 6.25, the clipped one
    assert loss.item() == pytest.approx(0.5 * (9.0 + 6.25) / 2)
    loss.backward()
    # token 0: 0.5 * 2 * (1 + 2) / 2 = 1.5; token 1's loss is constant in V
    assert values.grad[0].tolist() == pytest.approx([1.5, 0.0])


def test_the_ratio_is_new_over_old_probability():
    # pi = 0.6, pi_old = 0.5: r = 1.2 (inside the clip), pg = -A r = -1.2 with A = 1
    loss, m = ppo_policy_loss(
        torch.log(torch.tensor([[0.6]])),
        torch.log(torch.tensor([[0.5]])),
        torch.ones(1, 1),
        torch.ones(1, 1),
    )
    assert loss.item() == pytest.approx(-1.2, rel=1e-5) and m["ratio_mean"] == pytest.approx(
        1.2, rel=1e-5
    )


def test_entropy_sums_over_the_vocabulary_of_a_batch_of_sequences():
    logits = torch.zeros(1, 2, 4)  # (B, T, V): uniform over 4 at both positions
    out = entropy_from_logits(logits)
    assert out.shape == (1, 2) and out.flatten().tolist() == pytest.approx([math.log(4)] * 2)


# Mutation survivors of _losses.py (benchmarks/tools/mutation.py, the complete run; docs/experiments/test-quality.md)


def test_importance_weights_multiply_the_token_losses():
    # ratio 1 (logp = old), A = 1: pg_t = -1; weights (2, 1) -> (-2, -1), token mean -1.5
    # (dividing instead would give (-0.5, -1), mean -0.75)
    lp = torch.zeros(1, 2)
    loss, _ = ppo_policy_loss(
        lp, lp, torch.ones(1, 2), torch.ones(1, 2), is_weights=torch.tensor([[2.0, 1.0]])
    )
    assert loss.item() == pytest.approx(-1.5)


def test_ratio_max_is_over_the_masked_tokens():
    # ratios 0.5 (kept) and 0.25 (masked): the max over kept tokens is 0.5
    old = torch.zeros(1, 2)
    logp = torch.log(torch.tensor([[0.5, 0.25]]))
    _, m = ppo_policy_loss(logp, old, torch.ones(1, 2), torch.tensor([[1.0, 0.0]]))
    assert m["ratio_max"] == pytest.approx(0.5)


def test_entropy_is_over_the_vocabulary_of_each_position():
    # (B, T, V) = (1, 2, 3): uniform at t=0 (ln 3), peaked at t=1
    logits = torch.tensor([[[0.0, 0.0, 0.0], [4.0, 0.0, 0.0]]])
    p = torch.softmax(torch.tensor([4.0, 0.0, 0.0]), -1)
    peaked = float(-(p * p.log()).sum())
    assert entropy_from_logits(logits).shape == (1, 2)
    assert entropy_from_logits(logits)[0].tolist() == pytest.approx([math.log(3), peaked])


def test_seq_mean_of_an_empty_batch_is_zero_not_nan():
    assert aggregate(torch.zeros(0, 3), torch.zeros(0, 3), LossAgg.seq_mean).item() == 0.0


def test_value_loss_clips_at_half_a_unit_by_default_and_takes_its_options_by_keyword():
    # V 1, V_old 0, G 1: the clipped value is 0.5, (0.5 - 1)^2 = 0.25 beats (1 - 1)^2 = 0; half of it
    one, zero = torch.ones(1, 1), torch.zeros(1, 1)
    loss, m = value_loss(one, zero, one, one)
    assert loss.item() == pytest.approx(0.125) and m["vf_clipfrac"] == 1.0
    with pytest.raises(TypeError):
        value_loss(one, zero, one, one, 0.5)
