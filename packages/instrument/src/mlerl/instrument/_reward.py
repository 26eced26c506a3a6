"""The reward: a pure function of (markers reached, execution status, grade, direction).

It is the only place a reward is computed; :func:`reward_range` is its documented range, from
which the learner's door takes its bounds. ``s`` below is the score the reward reads: the
public leaderboard's (see mlerl.bench), or all answers' with ``tasks.public_fraction=1``.

Normalised reward (the default, :attr:`RewardKind.NORMALIZED`): failures as in the paper
(``failure + per_marker * n``, in [-10, -9.3]); a valid submission gets

    p = (s' - b') / (B' - b')        r = min(p, 1) if p >= 0 else p / (1 - p)

where primes flip the sign when lower is better, ``b`` is the task's baseline (its sample
submission's public score, else the metric's chance score) and ``B`` the metric's best value
(1 for AUC, accuracy, QWK, Pearson, Jaccard; 0 for log loss and RMSLE), both given as
``reference``. So r = 0 at the baseline, 1 at a perfect score, and an arbitrarily bad valid
score tends to -1 (reached only by floating-point rounding, for absurd scores): every valid
submission is rewarded in [-1, 1], above the best failure, and r is increasing in the score. (+
``per_marker * n`` with
``markers_on_success``.) The config refuses constants that would break "valid > failure".

Paper reward (section 3.2, :attr:`RewardKind.PAPER`, the raw signed score), with ``n`` = number
of distinct known markers reached (0..7):

============================================  ==========================================
case                                          reward (defaults)
============================================  ==========================================
INFRA_ERROR                                   ``None``: no reward; retry or drop upstream
OK and a valid submission                     ``s``, or ``-s`` when lower is better
                                              (+ ``per_marker * n`` if ``markers_on_success``)
OK but the submission is missing or invalid   ``failure + per_marker * n``  (-10 + 0.1 n)
  (or the grader's score is not finite)
PROGRAM_ERROR, TIMEOUT, OOM, OUTPUT_LIMIT     ``failure + per_marker * n``  (-10 + 0.1 n)
NOT_RUN (no program)                          ``failure``  (-10; no marker can be reached)
============================================  ==========================================

Only an ``OK`` run is graded: a submission written before a crash or a timeout earns no score
(the paper grades programs that "run without error"); the markers it reached still count.

ML-Agent-style reward (:attr:`RewardKind.MLAGENT`, ML-Agent eq. 6 adapted to one step): every
failure status and NOT_RUN -> ``mlagent_error`` (0); OK with a missing/invalid submission ->
``mlagent_invalid`` (0.5, ML-Agent's "corner case"); valid -> ``sigmoid(alpha * (s' - init'))``
with ``alpha = mlagent_scale / (best' - init')`` where primes are sign-flipped when lower is
better, ``init``/``best`` the task's reference scores (``reference=`` or the config defaults).
Markers do not enter it. INFRA_ERROR -> None as above.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from mlerl.instrument._markers import MARKERS
from mlerl.protocol import ExecStatus, check


class RewardKind(str, enum.Enum):
    NORMALIZED = "normalized"
    """-10 + 0.1 per marker on failure, the score normalised into [-1, 1] on success (default)."""
    PAPER = "paper"
    """-10 + 0.1 per marker on failure, the grader's raw signed score on success (unbounded)."""
    MLAGENT = "mlagent"
    """0 / 0.5 / sigmoid-normalised score (ML-Agent, arXiv 2505.23723)."""
    # Aliases, so a config may say `instrument.reward.kind=paper` under every OmegaConf:
    # OmegaConf 2.3 looks an enum up by member name only (2.4 also by value).
    normalized = "normalized"
    paper = "paper"
    mlagent = "mlagent"


@dataclass
class RewardConfig:
    kind: RewardKind = RewardKind.NORMALIZED
    """Which reward: ``normalized`` (default; valid in [-1, 1]), ``paper`` (the paper's raw
    signed score, unbounded) or ``mlagent``."""
    failure: float = -10.0
    """Normalized and paper: base reward of a run that fails or produces no valid submission."""
    per_marker: float = 0.1
    """Normalized and paper: added to ``failure`` per distinct marker reached (partial credit)."""
    markers_on_success: bool = False
    """Normalized and paper: also add ``per_marker * n`` to a graded run (the paper does not)."""
    mlagent_error: float = 0.0
    """ML-Agent: reward of a failed run or no program."""
    mlagent_invalid: float = 0.5
    """ML-Agent: reward of an OK run whose submission is missing or invalid."""
    mlagent_scale: float = 100.0
    """ML-Agent: numerator of alpha = scale / (best - init); 100 as in ML-Agent (steep)."""
    mlagent_init: float = 0.0
    """ML-Agent: reference score of a baseline solution when the caller gives none."""
    mlagent_best: float = 1.0
    """ML-Agent: reference score of the best known solution when the caller gives none."""

    def __post_init__(self) -> None:
        self.kind = RewardKind(self.kind)
        for name in (
            "failure",
            "per_marker",
            "mlagent_error",
            "mlagent_invalid",
            "mlagent_scale",
            "mlagent_init",
            "mlagent_best",
        ):
            check(math.isfinite(getattr(self, name)), name, "must be finite")
        check(self.per_marker >= 0, "per_marker", "must be >= 0")
        check(self.mlagent_scale > 0, "mlagent_scale", "must be > 0")
        check(
            self.mlagent_best != self.mlagent_init, "mlagent_best", "must differ from mlagent_init"
        )
        if self.kind is RewardKind.NORMALIZED:
            best_failure = self.failure + self.per_marker * len(MARKERS)
            check(
                best_failure < -1.0,
                "failure",
                f"failure + per_marker * {len(MARKERS)} = {best_failure:g} must stay below -1, the "
                "lowest normalised reward of a valid submission",
            )


@dataclass(frozen=True)
class Reference:
    """A task's reference scores: the normalised reward's baseline (``init``) and the metric's
    best value; for the ML-Agent reward e.g. median and gold thresholds."""

    init: float
    best: float


@dataclass(frozen=True)
class RewardResult:
    reward: float | None
    """None only for INFRA_ERROR: the sample gets no reward at all."""
    case: str
    """``infra_error``, ``no_program``, ``failed``, ``invalid_submission`` or ``graded``."""
    parts: dict[str, float] = field(default_factory=dict)
    """The terms that add up to ``reward`` (``base``, ``markers``, ``score``) and ``n_markers``."""


def _count(markers: Iterable[str]) -> int:
    found = set()
    for m in markers:
        if m not in MARKERS:
            raise ValueError(f"unknown marker {m!r}; known: {MARKERS}")
        found.add(m)
    return len(found)


def compute_reward(
    markers: Iterable[str],
    status: ExecStatus,
    score: float | None,
    valid: bool,
    lower_is_better: bool,
    config: RewardConfig | None = None,
    *,
    reference: Reference | None = None,
) -> RewardResult:
    """The reward of one executed sample; see the module docstring for every case.

    ``score`` is the grader's score (ignored unless ``status`` is OK and ``valid``); ``valid``
    says the submission exists and passed validation. Raises ValueError for an unknown marker
    or ``valid`` with no score (a caller bug, never a program's fault).
    """
    cfg = config or RewardConfig()
    status = ExecStatus(status)
    n = _count(markers)
    if status is ExecStatus.INFRA_ERROR:
        return RewardResult(None, "infra_error", {"n_markers": n})
    if valid and status is ExecStatus.OK and score is None:
        raise ValueError("valid submission without a score")
    ok = status is ExecStatus.OK and valid and score is not None and math.isfinite(score)
    graded_score = score if ok else None
    graded = graded_score is not None
    case = (
        "graded"
        if graded
        else "no_program"
        if status is ExecStatus.NOT_RUN
        else "invalid_submission"
        if status is ExecStatus.OK
        else "failed"
    )
    signed = 0.0 if graded_score is None else (-graded_score if lower_is_better else graded_score)
    if cfg.kind is RewardKind.MLAGENT:
        return _mlagent(cfg, case, signed, n, lower_is_better, reference)
    if graded_score is not None:
        bonus = cfg.per_marker * n if cfg.markers_on_success else 0.0
        value = signed
        if cfg.kind is RewardKind.NORMALIZED:
            if reference is None:
                raise ValueError("the normalized reward needs the task's reference scores")
            value = normalised_score(graded_score, lower_is_better, reference.init, reference.best)
        parts = {"score": signed, "markers": bonus, "n_markers": n}
        if cfg.kind is RewardKind.NORMALIZED:
            parts["normalised"] = value
        return RewardResult(value + bonus, case, parts)
    bonus = cfg.per_marker * n
    return RewardResult(
        cfg.failure + bonus, case, {"base": cfg.failure, "markers": bonus, "n_markers": n}
    )


def normalised_score(score: float, lower_is_better: bool, baseline: float, best: float) -> float:
    """The score mapped into [-1, 1]: 0 at ``baseline``, 1 at ``best``, -> -1 as it worsens.

    With primes for sign-flipped values when lower is better, p = (s' - b') / (B' - b'); the
    result is min(p, 1) for p >= 0 and p / (1 - p) for p < 0 (increasing, continuous, slope 1
    at p = 0; strictly increasing below 1 but for floating-point rounding near -1). Raises
    ValueError unless all three are finite and ``best`` is better
    than ``baseline``.
    """
    if not all(math.isfinite(x) for x in (score, baseline, best)):
        raise ValueError("score, baseline and best must be finite")
    sign = -1.0 if lower_is_better else 1.0
    span = sign * (best - baseline)
    if span <= 0:
        raise ValueError(f"best {best} must be better than baseline {baseline}")
    p = sign * (score - baseline) / span  # may overflow to -inf for an absurd score: still -1
    return min(p, 1.0) if p >= 0 else -1.0 / (1.0 + 1.0 / -p)  # = p / (1 - p)


def reward_range(config: RewardConfig | None = None) -> tuple[float, float]:
    """[lowest, highest] reward :func:`compute_reward` can return under ``config`` (None aside).

    Normalized: [failure, max(1 + markers bonus, failure + per_marker * 7)] = [-10, 1] by
    default. Paper: the raw score is unbounded, so (-inf, inf): any finite reward. ML-Agent:
    the hull of its three constants and the sigmoid's [0, 1].
    """
    cfg = config or RewardConfig()
    top_failure = cfg.failure + cfg.per_marker * len(MARKERS)
    if cfg.kind is RewardKind.NORMALIZED:
        bonus = cfg.per_marker * len(MARKERS) if cfg.markers_on_success else 0.0
        return cfg.failure, max(1.0 + bonus, top_failure)
    if cfg.kind is RewardKind.PAPER:
        return -math.inf, math.inf
    values = (cfg.mlagent_error, cfg.mlagent_invalid, 0.0, 1.0)
    return min(values), max(values)


def _mlagent(
    cfg: RewardConfig, case: str, signed: float, n: int, lower: bool, ref: Reference | None
) -> RewardResult:
    if case != "graded":
        base = cfg.mlagent_invalid if case == "invalid_submission" else cfg.mlagent_error
        return RewardResult(base, case, {"base": base, "n_markers": n})
    init, best = (ref.init, ref.best) if ref else (cfg.mlagent_init, cfg.mlagent_best)
    if lower:
        init, best = -init, -best
    if best == init or not (math.isfinite(init) and math.isfinite(best)):
        raise ValueError("reference scores must be finite and differ")
    x = cfg.mlagent_scale / (best - init) * (signed - init)
    reward = 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))
    return RewardResult(reward, case, {"score": signed, "normalised": x, "n_markers": n})
