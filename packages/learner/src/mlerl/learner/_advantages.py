"""Advantage estimators as pure functions: GAE with a critic; GRPO, RLOO and entropic group
baselines.

Each sample is one action (the whole response) with one terminal reward on its last response
token: a bandit per prompt. :func:`terminal_rewards` places it; :func:`gae` runs the usual
backward recursion over response tokens, so with gamma = lambda = 1 it gives A_t = R - V_t and
returns G_t = R. Group baselines give one advantage per sample, broadcast over its tokens.

Guarantees: padding positions (mask 0) get advantage 0; a group of one sample gets advantage 0
under every group estimator (no baseline can be formed from it, so it carries no signal rather
than a fake one). The entropic estimator aims at a group's maximum rather than its mean
(:func:`entropic_weights`). Optional strata (valid submission or not) rank the strata against
each other and the samples within each stratum at its own scale. :func:`gains_over_parents`
turns a revision's reward into its gain over its parent before any baseline.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from mlerl.learner._config import AdvantageEstimator

Tensor = torch.Tensor


def terminal_rewards(rewards: Tensor, mask: Tensor) -> Tensor:
    """(B,) rewards -> (B, T) token rewards with R_i on sample i's last response token (mask's last
    1)."""
    token_rewards = torch.zeros(mask.shape, dtype=torch.float32, device=mask.device)
    positions = torch.arange(1, mask.shape[-1] + 1, device=mask.device, dtype=torch.float32)
    last = (mask.float() * positions).argmax(-1)  # (B,) index of the last 1 in each row
    rows = torch.nonzero(mask.sum(-1) > 0).squeeze(-1)
    token_rewards[rows, last[rows]] = rewards.to(mask.device)[rows].float()
    return token_rewards


@torch.no_grad()
def gae(
    token_rewards: Tensor, values: Tensor, mask: Tensor, gamma: float = 1.0, lam: float = 1.0
) -> tuple[Tensor, Tensor]:
    """Generalised advantage estimation over right-padded response tokens.

    delta_t = r_t + gamma V_{t+1} m_{t+1} - V_t;  A_t = delta_t + gamma lam m_{t+1} A_{t+1};
    returns G_t = A_t + V_t. Returns (advantages, returns), both (B, T), zero on padding.
    """
    mask = mask.float()
    B, T = token_rewards.shape
    advantages = torch.zeros(B, T, dtype=torch.float32, device=values.device)
    last = torch.zeros(B, dtype=torch.float32, device=values.device)
    for t in reversed(range(T)):
        next_mask = mask[:, t + 1] if t + 1 < T else torch.zeros_like(last)
        next_value = values[:, t + 1].float() if t + 1 < T else torch.zeros_like(last)
        delta = token_rewards[:, t] + gamma * next_value * next_mask - values[:, t].float()
        last = delta + gamma * lam * next_mask * last
        advantages[:, t] = last
    advantages = advantages * mask
    returns = (advantages + values.float()) * mask
    return advantages, returns


def _positions(keys: Sequence[object]) -> list[list[int]]:
    """The positions of each distinct key, in order of first appearance."""
    out: dict[object, list[int]] = {}
    for i, key in enumerate(keys):
        out.setdefault(key, []).append(i)
    return list(out.values())


def kl_to_uniform(beta: float, r: Tensor) -> float:
    """KL(q || uniform) in nats of q_i = softmax(beta * r)_i over the group's n samples."""
    log_q = torch.log_softmax(beta * r.double(), dim=0)
    return float((log_q.exp() * (log_q + math.log(r.numel()))).sum())


def entropic_beta(r: Tensor, kl_budget: float, beta_max: float = 1e6, iters: int = 60) -> float:
    """The largest beta >= 0 with KL(softmax(beta * r) || uniform) <= ``kl_budget`` (bisection;
    the KL grows with beta). ``beta_max`` when even that stays within the budget: a group whose
    KL can never exceed it (ln n <= budget, e.g. two samples under ln 2), where the weights
    tend to all-on-the-best."""
    if kl_to_uniform(beta_max, r) <= kl_budget:
        return beta_max
    lo, hi = 0.0, 1.0
    while kl_to_uniform(hi, r) <= kl_budget:
        lo, hi = hi, hi * 2.0
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if kl_to_uniform(mid, r) <= kl_budget else (lo, mid)
    return lo


def entropic_weights(r: Tensor, kl_budget: float) -> Tensor:
    """The entropic objective's advantages for one group: w_i - 1 with w_i = n * q_i, q the
    group's rewards tilted by exp(beta * r) (weights of mean one), beta the largest whose tilt
    stays within ``kl_budget`` nats of uniform (:func:`entropic_beta`).

    The gradient of log E[exp(beta R)] (TTT-Discover's objective) is E[w(a) grad log pi(a)]:
    as beta grows the weight moves onto the group's best sample, so the update aims at the
    maximum, where a mean baseline aims at the mean. The advantages sum to zero; the best
    sample's is at most n - 1, every other's at least -1. Equal rewards give zeros. (The public
    TTT-Discover code divides each weight by the mean of the *other* samples' weights, which
    gives the advantages a positive mean; here they are centred.)"""
    n = r.numel()
    if n < 2 or float(r.max() - r.min()) == 0.0:
        return torch.zeros_like(r)
    beta = entropic_beta(r, kl_budget)
    q = torch.softmax(beta * r.double(), dim=0)
    return (n * q - 1.0).to(r.dtype)


def _baseline(
    r: Tensor,
    estimator: AdvantageEstimator,
    std_normalise: bool,
    std_floor: float,
    eps: float,
    kl_budget: float = math.log(2),
) -> Tensor:
    """One group's advantages without strata (see :func:`group_advantages`); a group of one gets
    0."""
    n = r.numel()
    if n < 2:
        return torch.zeros_like(r)
    if estimator is AdvantageEstimator.entropic:
        return entropic_weights(r, kl_budget)
    centred = r - r.mean()
    if estimator is AdvantageEstimator.rloo:
        return centred * n / (n - 1)
    if std_normalise:
        return centred / (max(float(r.std(unbiased=False)), std_floor) + eps)
    return centred


def gains_over_parents(rewards: Tensor, parent_rewards: Sequence[float | None]) -> Tensor:
    """(B,) rewards with each parent's reward subtracted where one is given (an IMPROVE sample's
    gain over the solution it revised); the others unchanged."""
    if len(parent_rewards) != rewards.numel():
        raise ValueError(
            f"advantage: {len(parent_rewards)} parent rewards for {rewards.numel()} samples"
        )
    parents = torch.tensor([0.0 if p is None else p for p in parent_rewards], dtype=rewards.dtype)
    return rewards - parents


@torch.no_grad()
def group_advantages(
    rewards: Tensor,
    group_ids: Sequence[object],
    estimator: AdvantageEstimator,
    *,
    std_normalise: bool = False,
    std_floor: float = 0.0,
    eps: float = 1e-6,
    strata: Sequence[object] | None = None,
    kl_budget: float = math.log(2),
) -> Tensor:
    """Per-sample advantages (B,) from rewards (B,) and a group key per sample.

    GRPO: A_i = R_i - mean_g(R), divided by (max(std_g(R), ``std_floor``) + eps) if
    ``std_normalise`` (population std). The floor, in reward units, keeps a group whose rewards
    differ only by noise (near-identical programs) from getting unit-size advantages.
    RLOO: A_i = R_i - (sum_g R - R_i) / (n_g - 1) = n_g / (n_g - 1) * (R_i - mean_g R).
    Entropic: A_i = n_g q_i - 1, q = softmax(beta_g R) over the group, beta_g the largest with
    KL(q || uniform) <= ``kl_budget`` (:func:`entropic_weights`; ``std_normalise`` does not
    apply: the advantages do not depend on the rewards' scale).

    ``strata`` (a key per sample, e.g. whether it made a valid submission) splits each group's
    advantage in two: A_i = B(m_s(i)) + W_s(R_i). B is the estimator applied to the group with
    each reward replaced by its stratum's mean m_s (so the strata are ranked against each other
    as before); W is the estimator applied within the stratum alone (0 for a stratum of one).
    Without it, one failure at -10 sets a GRPO group's std near 4.6 and the valid programs'
    differences of a few hundredths of reward come out ~100 times smaller than in a group
    without failures; with it, the valid programs are compared among themselves at the scale
    they have. A group whose samples share one stratum gets exactly the unstratified advantage.
    """
    if estimator is AdvantageEstimator.gae:
        raise ValueError("advantage: 'gae' needs a critic; call gae() instead")
    if strata is not None and len(strata) != len(group_ids):
        raise ValueError(f"advantage: {len(strata)} strata for {len(group_ids)} samples")
    rewards = rewards.float()
    out = torch.zeros_like(rewards)
    for idx in _positions(group_ids):
        r = rewards[idx]
        if strata is None:
            out[idx] = _baseline(r, estimator, std_normalise, std_floor, eps, kl_budget)
            continue
        by_stratum = _positions([strata[i] for i in idx])
        means = torch.empty_like(r)
        within = torch.empty_like(r)
        for members in by_stratum:
            rs = r[members]
            means[members] = rs.mean()
            within[members] = _baseline(rs, estimator, std_normalise, std_floor, eps, kl_budget)
        if len(by_stratum) == 1:
            # exactly the unstratified advantage: the between term of equal means is 0 only up
            # to rounding, and with a std floor of 0 that rounding would be divided by eps
            out[idx] = within
        else:
            out[idx] = (
                _baseline(means, estimator, std_normalise, std_floor, eps, kl_budget) + within
            )
    return out


@torch.no_grad()
def whiten(
    advantages: Tensor,
    mask: Tensor,
    eps: float = 1e-8,
    all_reduce: Callable[[Tensor], Tensor] | None = None,
) -> Tensor:
    """(A - mean) / std over masked tokens (population variance); padding stays 0.

    ``all_reduce`` (a sum over ranks, e.g. torch.distributed's) makes the mean and variance
    those of every rank's tokens together, so N ranks whiten exactly like one process holding
    the whole batch. Two passes: the count and sum are reduced first, then the sum of squared
    deviations from the global mean (more accurate than reducing sum and sum of squares).
    """
    reduce = all_reduce if all_reduce is not None else (lambda t: t)
    m = mask.to(torch.float64)
    a = advantages.to(torch.float64)
    count_sum = reduce(torch.stack([m.sum(), (a * m).sum()]))
    n = count_sum[0].clamp(min=1.0)
    mean = count_sum[1] / n
    var = reduce((((a - mean) * m) ** 2).sum().reshape(1))[0] / n
    return ((a - mean) * torch.rsqrt(var + eps) * m).to(advantages.dtype)
