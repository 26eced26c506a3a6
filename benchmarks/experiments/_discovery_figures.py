"""The discovery study's figures, pure functions of records, metrics and per-seed results: one
run's best of its first N executions, the decision probe's shares, how often a run wrote the best
known configuration, validity and KL by quarter, and the paired differences between arms and
baselines (``discovery.py`` computes them per run, ``discovery_pool.py`` pools them over results
files)."""

from __future__ import annotations

import json
import math
from typing import Any

from _common import mean_se
from embedded_rl import _better

from mlerl.learner import answer_decisions

BASELINES = ("scratch_bon", "initial_bon", "aide")
ISSUE_NAMES = {"scratch_bon": "bon_scratch", "initial_bon": "bon_mix", "aide": "aide"}
"""Each baseline's name in a results row (``bon_scratch_private``, ...): the names the study's
results file was asked for."""
BEST_DECISIONS = {
    "standin-materials-rmsle": (
        "LOG_TARGET=True",
        "MODEL=lightgbm",
        "PRODUCTS[]=lattice_vector_1_ang*lattice_vector_2_ang",
    ),
    "standin-insults-auc": ("ANALYZER=char_wb", "NGRAMS=(2, 5)", "MODEL=logistic"),
}
"""Per base task, the probe keys of the best known configuration's decisions
(``mlerl.embedded._settings.HELD_OUT`` states the region; these are its named decisions)."""


# ---- pure: one run's figures --------------------------------------------------------------
def best_of_first(records: list[dict[str, Any]], n: int, lower: bool) -> dict[str, Any]:
    """The best of the first ``n`` records (chosen on public, shown on private) and the best so
    far after each of them."""
    best: dict[str, Any] | None = None
    curve: list[float | None] = []
    for r in records[:n]:
        public = r.get("score") if r.get("valid") else None
        finite = public is not None and math.isfinite(public)
        if finite and (best is None or _better(public, best["score"], lower)):
            best = r
        curve.append(None if best is None else best.get("private_score", best["score"]))
    return {
        "private": None if best is None else best.get("private_score", best["score"]),
        "public": None if best is None else best["score"],
        "step": None if best is None else best.get("step"),
        "kind": None if best is None else best.get("kind"),
        "curve": curve,
        "executions": min(n, len(records)),
    }


def probe_keys(task: str) -> tuple[str, ...]:
    return BEST_DECISIONS.get(task.removesuffix("-tiny"), ())


def probe_summary(metrics: list[dict[str, Any]], task: str) -> dict[str, Any]:
    """The best decisions' shares at each probe (step -> key -> share), first and last, from the
    ``probe`` stream's ``<task>/<key>`` rows (or learner rows with ``probe/<task>/<key>``, as
    runs logged them before the probe had its own stream)."""
    series: dict[int, dict[str, float]] = {}
    for m in sorted(metrics, key=lambda m: m["step"]):
        for prefix in (f"{task}/", f"probe/{task}/"):
            if f"{prefix}parsed" in m:
                series[int(m["step"])] = {
                    k: float(m.get(f"{prefix}{k}", 0.0)) for k in probe_keys(task)
                }
    steps = sorted(series)
    return {
        "series": series,
        "first": series[steps[0]] if steps else None,
        "last": series[steps[-1]] if steps else None,
        "first_step": steps[0] if steps else None,
        "last_step": steps[-1] if steps else None,
    }


def combination(
    records: list[dict[str, Any]], keys: tuple[str, ...], lower: bool
) -> dict[str, Any]:
    """How often the executions ``records`` ran a program making every decision in ``keys`` (the
    best known configuration's, :func:`probe_keys`): in all, valid, per kind (``scratch`` /
    ``improve``) and per quarter of the records, the first execution (0-based) that made it and
    the best private score among the valid ones. Empty when ``keys`` is."""
    if not keys:
        return {}
    want = set(keys)
    q = max(len(records) // 4, 1)
    hits = [
        (i, r)
        for i, r in enumerate(records)
        if want <= (answer_decisions(f"```\n{r.get('code') or ''}\n```") or set())
    ]
    valid = [r for _, r in hits if r.get("valid")]
    privates = [float(r["private_score"]) for r in valid if r.get("private_score") is not None]
    by_kind: dict[str, int] = {}
    for _, r in hits:
        by_kind[str(r.get("kind"))] = by_kind.get(str(r.get("kind")), 0) + 1
    return {
        "executions": len(hits),
        "valid": len(valid),
        "by_kind": by_kind,
        "by_quarter": [sum(min(i // q, 3) == k for i, _ in hits) for k in range(4)],
        "first": hits[0][0] if hits else None,
        "best_private": (min(privates) if lower else max(privates)) if privates else None,
    }


def quarter_stats(metrics: list[dict[str, Any]], records: list[dict[str, Any]]) -> dict[str, Any]:
    """Valid fraction of the first and last quarter of the records; mean KL (``loss/kl``) and
    clip fraction of the last quarter of updates: where a larger step breaks validity."""
    q = max(len(records) // 4, 1)
    updates = [m for m in metrics if "loss/policy" in m]
    last = updates[len(updates) - max(len(updates) // 4, 1) :] if updates else []

    def mean(key: str) -> float | None:
        xs = [float(m[key]) for m in last if key in m and math.isfinite(float(m[key]))]
        return sum(xs) / len(xs) if xs else None

    def valid(rs: list[dict[str, Any]]) -> float | None:
        return sum(bool(r.get("valid")) for r in rs) / len(rs) if rs else None

    return {
        "valid_first_quarter": valid(records[:q]),
        "valid_last_quarter": valid(records[-q:]),
        "kl_last_quarter": mean("loss/kl"),
        "clip_frac_last_quarter": mean("policy/clipfrac"),
    }


def differences(a: list[float | None], b: list[float | None], lower: bool) -> list[float]:
    """a - b per seed where both have a result, signed so that positive means ``a`` is better."""
    return [
        (y - x) if lower else (x - y)
        for x, y in zip(a, b, strict=True)
        if x is not None and y is not None
    ]


def paired(a: list[float | None], b: list[float | None], lower: bool) -> dict[str, Any]:
    """Mean ± s.e. of :func:`differences` over the seeds where both have a result, positive
    when ``a`` is better; and in how many seeds ``a`` is strictly better."""
    diffs = differences(a, b, lower)
    stats = mean_se(diffs)
    mean, se = stats["mean"], stats["se"]
    return {
        "n": len(diffs),
        "mean": mean,
        "se": se,
        "better_in": sum(d > 0 for d in diffs),
        "beyond_2se": bool(mean is not None and se is not None and se > 0 and mean > 2 * se),
    }


def best_at(by_seed: dict[Any, Any], seeds: list[int], m: int) -> list[float | None]:
    """Each seed's best private score after its first ``m`` executions (its best-so-far curve);
    None where it has no valid solution yet or ran fewer than ``m``."""
    curves = [((by_seed.get(s) or {}).get("curve") or []) for s in seeds]
    return [c[m - 1] if len(c) >= m else None for c in curves]


def unlike_starts(arms: dict[str, dict[Any, Any]]) -> list[str]:
    """The seeds whose arms did not start from the same policy: their first probes (the initial
    policy's seeded answers, before any update, the same on every arm of one build) differ.
    Builds of one configuration on another machine differ, so an arm run there against another
    read back from the results file would be paired across two policies."""
    seeds: dict[Any, set[str]] = {}
    for by_seed in arms.values():
        for s, v in by_seed.items():
            probe = (v or {}).get("probe") or {}
            if probe.get("first_step") == 0 and probe.get("first") is not None:
                seeds.setdefault(str(s), set()).add(json.dumps(probe["first"], sort_keys=True))
    return sorted((s for s, firsts in seeds.items() if len(firsts) > 1), key=int)


def issue_row(
    task: str,
    seed: int,
    direction: str,
    executions: int,
    arm: str,
    rl: float | None,
    baselines: dict[str, float | None],
) -> dict[str, Any]:
    """One results row: a task and seed, the arm's best private score (``rl_private``) and each
    baseline's (``bon_scratch_private``, ``bon_mix_private``, ``aide_private``; another name
    keeps its own)."""
    return {
        "task": task,
        "seed": seed,
        "direction": direction,
        "executions": executions,
        "arm": arm,
        "rl_private": rl,
        **{f"{ISSUE_NAMES.get(b, b)}_private": v for b, v in baselines.items()},
    }
