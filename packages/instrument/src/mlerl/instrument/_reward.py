"""The reward: a pure function of (markers reached, execution status, grade, direction).

Paper reward (section 3.2, :attr:`RewardKind.PAPER`), with ``n`` = number of distinct known
markers reached (0..7) and ``s`` = the grader's score:

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

from mlerl.protocol import ExecStatus, check

from mlerl.instrument._markers import MARKERS


class RewardKind(str, enum.Enum):
    PAPER = "paper"
    """-10 + 0.1 per marker on failure, the grader's score on success."""
    MLAGENT = "mlagent"
    """0 / 0.5 / sigmoid-normalised score (ML-Agent, arXiv 2505.23723)."""


@dataclass
class RewardConfig:
    kind: RewardKind = RewardKind.PAPER
    """Which reward: ``paper`` (default) or ``mlagent``."""
    failure: float = -10.0
    """Paper: base reward of a run that fails or produces no valid submission."""
    per_marker: float = 0.1
    """Paper: added to ``failure`` per distinct marker reached (partial credit)."""
    markers_on_success: bool = False
    """Paper: also add ``per_marker * n`` to a graded run (the paper does not)."""
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
        for name in ("failure", "per_marker", "mlagent_error", "mlagent_invalid",
                     "mlagent_scale", "mlagent_init", "mlagent_best"):  # fmt: skip
            check(math.isfinite(getattr(self, name)), name, "must be finite")
        check(self.per_marker >= 0, "per_marker", "must be >= 0")
        check(self.mlagent_scale > 0, "mlagent_scale", "must be > 0")
        check(self.mlagent_best != self.mlagent_init, "mlagent_best", "must differ from mlagent_init")


@dataclass(frozen=True)
class Reference:
    """A task's reference scores for the ML-Agent reward (e.g. median and gold thresholds)."""

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
    graded = status is ExecStatus.OK and valid and math.isfinite(score)  # type: ignore[arg-type]
    case = (
        "graded" if graded
        else "no_program" if status is ExecStatus.NOT_RUN
        else "invalid_submission" if status is ExecStatus.OK
        else "failed"
    )  # fmt: skip
    signed = (-score if lower_is_better else score) if graded else 0.0  # type: ignore[operator]
    if cfg.kind is RewardKind.MLAGENT:
        return _mlagent(cfg, case, signed, n, lower_is_better, reference)
    if graded:
        bonus = cfg.per_marker * n if cfg.markers_on_success else 0.0
        parts = {"score": signed, "markers": bonus, "n_markers": n}
        return RewardResult(signed + bonus, case, parts)
    bonus = cfg.per_marker * n
    return RewardResult(cfg.failure + bonus, case, {"base": cfg.failure, "markers": bonus, "n_markers": n})


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
