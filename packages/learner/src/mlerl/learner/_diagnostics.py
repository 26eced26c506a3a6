"""Per-update diagnostics split by prompt kind and task: what the update trained on, and where
its policy gradient came from.

Pure functions but :func:`gather_rows` (a collective). :func:`per_sample_stats` turns the update's
per-token tensors into one row of
scalars per sample; :func:`gather_rows` collects every rank's rows (each rank holds only its
share of the batch); :func:`split_metrics` groups rows (all / kind / task) into flat metric
names ``split/<group>/<metric>`` that go to metrics.jsonl and W&B with the rest.

Definitions (per sample i, masked over its response tokens t):

- ``entropy``: mean of -log mu(y_t), the sampled tokens' negative log-probs under the
  behaviour policy: an unbiased estimate of its per-token entropy (no extra forward pass).
- ``kl``: mean k3 estimate r - 1 - log r with r = pi_ref(y_t) / mu(y_t): KL(mu || pi_ref) per
  token, mu the behaviour policy (nan when there is no reference model).
- ``value_err``: mean of V_t - G_t (the critic's bias; nan without a critic); ``value_abs_err``
  its mean absolute value.
- ``adv``: mean advantage over the sample's tokens (after whitening, what the loss uses);
  ``adv_abs`` the mean of its absolute value. A group's ``zero_adv_share`` is the share of its
  samples with ``adv_abs`` < 1e-6: samples that carry no policy gradient (under a
  group baseline an IMPROVE prompt revised once is a group of one, advantage 0).
- ``pg_mass``: sum_t |A_t| w_i / n_i with n_i = 1 (token_mean) or the sample's token count
  (seq_mean): the total weight the loss puts on the sample's grad log-probs. A group's
  ``pg_share`` is its part of the batch's total mass; ``all/pg_share_failed`` is the part of
  samples without a valid submission.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

Tensor = torch.Tensor

ZERO_ADV = 1e-6
"""Below this mean |advantage| a sample counts as carrying no policy gradient."""

_STATUSES = ("ok", "program_error", "timeout", "oom", "output_limit", "not_run")


def _masked_row_mean(x: Tensor, mask: Tensor) -> Tensor:
    m = mask.to(torch.float64)
    return (x.to(torch.float64) * m).sum(-1) / m.sum(-1).clamp(min=1.0)


def pg_mass(advantages: Tensor, mask: Tensor, weights: Tensor, seq_mean: bool) -> Tensor:
    """(B, T) advantages, mask, (B,) duration weights -> (B,) sum_t |A_t| w_i (/ n_i if
    seq_mean)."""
    m = mask.to(torch.float64)
    mass = (advantages.to(torch.float64).abs() * m).sum(-1) * weights.to(torch.float64)
    if seq_mean:
        mass = mass / m.sum(-1).clamp(min=1.0)
    return mass


def per_sample_stats(
    mask: Tensor,
    behaviour_logprobs: Tensor,
    advantages: Tensor,
    weights: Tensor,
    *,
    seq_mean: bool,
    ref_logprobs: Tensor | None = None,
    values: Tensor | None = None,
    returns: Tensor | None = None,
) -> dict[str, list[float]]:
    """Per-sample scalars (lists of length B) from the update's (B, T) tensors."""
    nan = [math.nan] * mask.shape[0]
    out = {
        "tokens": mask.to(torch.float64).sum(-1).tolist(),
        "entropy": _masked_row_mean(-behaviour_logprobs, mask).tolist(),
        "adv": _masked_row_mean(advantages, mask).tolist(),
        "adv_abs": _masked_row_mean(advantages.abs(), mask).tolist(),
        "pg_mass": pg_mass(advantages, mask, weights, seq_mean).tolist(),
        "kl": nan,
        "value_err": nan,
        "value_abs_err": nan,
    }
    if ref_logprobs is not None:
        log_r = (ref_logprobs - behaviour_logprobs).to(torch.float64)
        out["kl"] = _masked_row_mean(torch.exp(log_r) - 1.0 - log_r, mask).tolist()
    if values is not None and returns is not None:
        err = values.to(torch.float64) - returns.to(torch.float64)
        out["value_err"] = _masked_row_mean(err, mask).tolist()
        out["value_abs_err"] = _masked_row_mean(err.abs(), mask).tolist()
    return out


def _mean(xs: Sequence[float]) -> float:
    xs = [x for x in xs if not math.isnan(x)]
    return sum(xs) / len(xs) if xs else math.nan


def _std(xs: Sequence[float]) -> float:
    xs = [x for x in xs if not math.isnan(x)]
    if not xs:
        return math.nan
    mu = sum(xs) / len(xs)
    return math.sqrt(sum((x - mu) ** 2 for x in xs) / len(xs))


def _group(rows: list[dict[str, Any]], total_mass: float) -> dict[str, float]:
    n = len(rows)
    scores = [
        r["score"]
        for r in rows
        if r["valid"] and r["score"] is not None and not math.isnan(r["score"])
    ]
    given = [r.get("private_score") for r in rows if r["valid"]]
    private: list[float] = [p for p in given if p is not None and not math.isnan(p)]
    out = {
        "n": float(n),
        "valid_frac": sum(bool(r["valid"]) for r in rows) / n,
        "reward_mean": _mean([r["reward"] for r in rows]),
        "score_mean": _mean(scores) if scores else math.nan,
        "score_max": max(scores) if scores else math.nan,
        "score_min": min(scores) if scores else math.nan,
        "private_score_mean": _mean(private) if private else math.nan,
        "exec_s_mean": _mean([r["exec_s"] for r in rows]),
        "tokens_mean": _mean([r.get("tokens", math.nan) for r in rows]),
        "entropy": _mean([r.get("entropy", math.nan) for r in rows]),
        "kl": _mean([r.get("kl", math.nan) for r in rows]),
        "value_err": _mean([r.get("value_err", math.nan) for r in rows]),
        "value_abs_err": _mean([r.get("value_abs_err", math.nan) for r in rows]),
        "adv_mean": _mean([r.get("adv", math.nan) for r in rows]),
        "adv_std": _std([r.get("adv", math.nan) for r in rows]),
        "zero_adv_share": _mean([float(r["adv_abs"] < ZERO_ADV) for r in rows if "adv_abs" in r]),
        "pg_share": sum(r.get("pg_mass", 0.0) for r in rows) / total_mass
        if total_mass > 0
        else math.nan,
    }
    for status in _STATUSES:
        out[f"status/{status}"] = sum(r["status"] == status for r in rows) / n
    return out


def gather_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every rank's rows, in rank order (this rank's own when not distributed): each rank holds
    only its share of the batch, and a group's mean or share is a whole-batch quantity."""
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return rows
    gathered: list[list[dict[str, Any]] | None] = [None] * torch.distributed.get_world_size()
    torch.distributed.all_gather_object(gathered, rows)
    return [row for part in gathered for row in (part or [])]


def split_metrics(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Rows (keys: kind, task, valid, reward, score (public), status, exec_s, and optionally
    private_score and the :func:`per_sample_stats` fields) -> ``split/<group>/<metric>``, groups
    ``all``,
    ``kind/<scratch|improve>`` and ``task/<task_id>``. NaN metrics (e.g. the score mean of a
    group with no valid sample) are left out, so a logged value is always a measured one."""
    if not rows:
        return {}
    total = sum(r.get("pg_mass", 0.0) for r in rows)
    groups: dict[str, list[dict[str, Any]]] = {"all": rows}
    for r in rows:
        groups.setdefault(f"kind/{r['kind']}", []).append(r)
        groups.setdefault(f"task/{r['task']}", []).append(r)
    out: dict[str, float] = {}
    for name, members in groups.items():
        for k, v in _group(members, total).items():
            if not math.isnan(v):
                out[f"split/{name}/{k}"] = v
    failed = [r for r in rows if not r["valid"]]
    if total > 0:
        out["split/all/pg_share_failed"] = sum(r.get("pg_mass", 0.0) for r in failed) / total
    return out
