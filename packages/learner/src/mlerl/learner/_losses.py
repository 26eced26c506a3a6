"""PPO losses as pure tensor functions (paper section 3.1 and appendix B.1; CleanRL naming).

Shapes: ``(B, T)`` per-token tensors over response tokens, right-padded; ``mask`` is 1 on real
response tokens. Per-sample tensors are ``(B,)``.

Guarantees:

- Every loss is reduced by :func:`aggregate` with an explicit normaliser ``norm``. Passing the
  *whole minibatch's* token (or sequence) count when a micro-batch is evaluated makes the sum of
  micro-batch losses equal the minibatch loss exactly, so accumulated gradients equal the
  full-batch gradient.
- The duration-aware rule enters only as ``weights`` (one per sample) multiplying the
  policy-gradient term; nothing here branches on how the weights were made.
- Metrics are detached Python floats (masked means over the tokens given).
"""

from __future__ import annotations

import torch

from mlerl.learner._config import KLEstimator, LossAgg

Tensor = torch.Tensor


def aggregate(x: Tensor, mask: Tensor, agg: LossAgg, norm: float | None = None) -> Tensor:
    """Reduce per-token ``x`` (B, T) to a scalar.

    token_mean: sum(x * mask) / norm, norm defaulting to mask.sum() (tokens in the batch).
    seq_mean: sum_i [sum_t x_it m_it / sum_t m_it] / norm, norm defaulting to B (sequences).
    """
    mask = mask.to(x.dtype)
    if agg is LossAgg.token_mean:
        total = (x * mask).sum()
        return total / (norm if norm is not None else mask.sum().clamp(min=1.0))
    per_seq = (x * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)  # (B,)
    return per_seq.sum() / (norm if norm is not None else max(x.shape[0], 1))


def _masked_mean(x: Tensor, mask: Tensor) -> float:
    mask = mask.to(x.dtype)
    return float((x.detach() * mask).sum() / mask.sum().clamp(min=1.0))


def ppo_policy_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    weights: Tensor | None = None,
    *,
    clip_ratio: float = 0.2,
    dual_clip: float | None = None,
    is_weights: Tensor | None = None,
    agg: LossAgg = LossAgg.token_mean,
    norm: float | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """Token-level clipped PPO surrogate, weighted per sample.

    pg_t = max(-A_t r_t, -A_t clip(r_t, 1 - eps, 1 + eps)), r_t = exp(logp_t - old_logp_t);
    with ``dual_clip`` c, tokens with A_t < 0 take min(pg_t, -c A_t). The per-token loss is
    multiplied by ``is_weights`` (B, T) (decoupled PPO's truncated behaviour weight, no grad)
    and by ``weights`` (B,) (duration weights), then aggregated. Minimising it ascends
    E[w * dt-weighted clipped surrogate], i.e. equation 3 of the paper under PPO clipping.
    """
    logratio = logprobs - old_logprobs  # (B, T)
    ratio = torch.exp(logratio)
    pg_losses1 = -advantages * ratio
    pg_losses2 = -advantages * torch.clamp(ratio, 1.0 - clip_ratio, 1.0 + clip_ratio)
    pg_losses = torch.max(pg_losses1, pg_losses2)
    if dual_clip is not None:
        pg_losses = torch.where(
            advantages < 0, torch.min(pg_losses, -advantages * dual_clip), pg_losses
        )
    if is_weights is not None:
        pg_losses = pg_losses * is_weights.detach()
    if weights is not None:
        pg_losses = pg_losses * weights.detach()[:, None]
    loss = aggregate(pg_losses, mask, agg, norm)
    with torch.no_grad():
        clipped = ((ratio - 1.0).abs() > clip_ratio).to(logprobs.dtype)
        metrics = {
            "clipfrac": _masked_mean(clipped, mask),
            "approx_kl": _masked_mean((ratio - 1.0) - logratio, mask),
            "ratio_mean": _masked_mean(ratio, mask),
            "ratio_max": float((ratio.detach() * mask).max()) if mask.any() else 1.0,
        }
    return loss, metrics


def kl_penalty(
    logprobs: Tensor, ref_logprobs: Tensor, estimator: KLEstimator = KLEstimator.k3
) -> Tensor:
    """Per-token k3 = r - 1 - log r, r = pi_ref / pi, at tokens sampled from pi.

    Its value is an unbiased, non-negative estimate of KL(pi || pi_ref). Differentiated as a
    loss term its gradient is (1 - r) grad log pi, whose expectation under pi is
    -sum_y pi_ref(y) grad log pi(y) = grad KL(pi_ref || pi) (docs/learner.md derives it).
    """
    if estimator is not KLEstimator.k3:
        raise ValueError(f"kl_estimator: unknown estimator {estimator!r}")
    log_r = ref_logprobs - logprobs
    return torch.exp(log_r) - 1.0 - log_r


def entropy_from_logits(logits: Tensor) -> Tensor:
    """Entropy of the categorical distribution at each position: (..., V) -> (...)."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(-1)


def value_loss(
    values: Tensor,
    old_values: Tensor,
    returns: Tensor,
    mask: Tensor,
    *,
    clip: float = 0.5,
    agg: LossAgg = LossAgg.token_mean,
    norm: float | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """Clipped value loss: 0.5 * max((V - G)^2, (V_old + clip(V - V_old, -c, c) - G)^2)."""
    v_clipped = old_values + torch.clamp(values - old_values, -clip, clip)
    vf_losses = torch.max((values - returns) ** 2, (v_clipped - returns) ** 2)
    loss = 0.5 * aggregate(vf_losses, mask, agg, norm)
    with torch.no_grad():
        metrics = {
            "vf_clipfrac": _masked_mean(
                ((values - old_values).abs() > clip).to(values.dtype), mask
            ),
            "value_mean": _masked_mean(values, mask),
        }
    return loss, metrics
