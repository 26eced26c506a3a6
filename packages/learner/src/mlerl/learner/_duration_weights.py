"""Duration-aware per-sample weights (paper section 3.1, equation 3) and their diagnostics.

Why: with a fixed pool of executors, an action that takes dt seconds completes at a rate
proportional to pi(a|s) / dt, so in any batch of completed samples fast actions are
over-represented by 1/dt. Weighting each sample's policy-gradient term by dt cancels the
1/dt, leaving each action's expected contribution proportional to pi(a|s) * A(s, a).

Every function is pure (the ``running`` normaliser's state is passed in and returned). Weights
multiply the policy-gradient term only (not the value, KL or entropy terms).

Variants and why they exist:

- ``paper``: w = dt / mean_batch(dt). Unbiased for the frequency effect, but one very long
  execution can take most of the batch's gradient (low effective sample size).
- ``clipped``: paper weights capped at ``clip`` (in units of the batch mean), renormalised to
  mean 1: bounds any one sample's share at the price of under-correcting extreme durations.
- ``log``: w = log1p(dt / mean dt), renormalised: partial correction, much lower variance.
- ``running``: w = dt / EMA(dt over past batches). The per-batch mean makes weights depend on
  the batch's mix: as the policy shifts to slow actions the batch mean grows and every
  weight shrinks, so the step size drifts with the mix. A running scale keeps dt's meaning
  stable across batches, which is what the frequency argument needs.

What dt is: the time the action held its slot, ``Sample.dt_s`` = generation + execution,
both measured (the actor times its ``engine.generate`` call, the sandbox the program; monotonic
clocks, so never negative and never clamped on the way). The paper's dt is the execution time
alone; a sample that ran nothing (dt = 0: no code block, ``NOT_RUN``) then gets weight 0 and
its penalty vanishes from the gradient (bit-identical whether its reward is -10 or +10), and a
crash after 0.5 s keeps ~1/1000 of an average sample's say. But every action also spends time
being generated before its slot frees, so the paper's own frequency argument gives a rate
proportional to pi(a|s) / (generation + execution), and that sum is the weight that cancels
it. Samples from journals that predate ``generation_s`` have generation 0 (the paper's dt).
:func:`slot_durations` applies ``floor`` (the one clamp): dt is raised to at least that many
seconds (default 0: none).
"""

from __future__ import annotations

import torch

from mlerl.learner._config import DurationWeighting

Tensor = torch.Tensor


def slot_durations(durations: Tensor, floor: float = 0.0) -> Tensor:
    """The dt that weights use: max(dt seconds, ``floor``), (B,) -> (B,)."""
    return durations.float().clamp(min=floor)


def duration_weights(
    durations: Tensor,
    mode: DurationWeighting,
    *,
    floor: float = 0.0,
    clip: float = 5.0,
    running_mean: float | None = None,
) -> Tensor:
    """Per-sample weights (B,) for the samples' dt (B,) in seconds (``Sample.dt_s``).

    dt = :func:`slot_durations` (durations, floor). If every dt is 0 the weights are all 1:
    there is no time to correct for.
    """
    d = slot_durations(durations, floor)
    if mode is DurationWeighting.none or d.numel() == 0:
        return torch.ones_like(d)
    mean = float(d.mean())
    if mean <= 0.0:
        return torch.ones_like(d)
    if mode is DurationWeighting.paper:
        return d / mean
    if mode is DurationWeighting.clipped:
        w = (d / mean).clamp(max=clip)
        return w / w.mean()
    if mode is DurationWeighting.log:
        w = torch.log1p(d / mean)
        return w / w.mean()
    if mode is DurationWeighting.running:
        scale = running_mean if running_mean is not None and running_mean > 0 else mean
        return d / scale
    raise ValueError(f"duration_weighting: unknown mode {mode!r}")


def update_running_mean(
    previous: float | None, durations: Tensor, decay: float, floor: float = 0.0
) -> float | None:
    """EMA of the batch-mean dt (:func:`slot_durations`): decay * previous + (1 - decay) *
    mean(batch).

    The first batch initialises it to its own mean. Call after computing this batch's weights,
    so a batch is weighted by the scale seen *before* it (no self-normalisation).
    """
    if durations.numel() == 0:
        return previous
    batch_mean = float(slot_durations(durations, floor).mean())
    if previous is None:
        return batch_mean
    return decay * previous + (1.0 - decay) * batch_mean


def weight_stats(
    weights: Tensor, durations: Tensor, advantages: Tensor | None = None
) -> dict[str, float]:
    """Diagnostics of a batch's weights.

    - ``ess_frac``: Kish effective sample size (sum w)^2 / sum w^2, divided by B (1 = uniform).
    - ``grad_mass_slow``: share of sum_i w_i |A_i| from samples slower than the batch median
      (``grad_mass_fast`` = the rest). With |A| omitted, |A_i| = 1.
    - ``w_max``: the largest weight.
    """
    w = weights.float()
    n = w.numel()
    if n == 0:
        return {"ess_frac": 0.0, "grad_mass_slow": 0.0, "grad_mass_fast": 0.0, "w_max": 0.0}
    ess = float(w.sum() ** 2 / (w**2).sum().clamp(min=1e-30))
    mass = w * (advantages.float().abs() if advantages is not None else torch.ones_like(w))
    slow = durations.float() > durations.float().median()
    total = float(mass.sum())
    slow_share = float(mass[slow].sum()) / total if total > 0 else 0.0
    return {
        "ess_frac": ess / n,
        "grad_mass_slow": slow_share,
        "grad_mass_fast": (1.0 - slow_share) if total > 0 else 0.0,
        "w_max": float(w.max()),
    }
