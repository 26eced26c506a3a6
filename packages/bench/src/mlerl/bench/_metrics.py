"""Pure metric functions (numpy in, float out) shared by every grader.

Each function matches the scikit-learn / scipy function MLE-bench calls, and raises
``ValueError`` where that function raises (so a grader turns it into "invalid"). No pandas, no
I/O: the column checks live in :mod:`mlerl.bench._graders`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike


def _as_1d(x: object, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional")
    return arr


def _finite_float(x: object, name: str) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinity")
    return arr


def average_ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks with ties sharing their mean rank (scipy's ``rankdata(method="average")``)."""
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    first = np.r_[True, xs[1:] != xs[:-1]]  # True where a new run of equal values starts
    starts = np.flatnonzero(first)
    ends = np.r_[starts[1:], len(x)]
    mean_rank = (starts + ends - 1) / 2 + 1  # mean of 1-based positions start+1 .. end
    ranks = np.empty(len(x))
    ranks[order] = mean_rank[np.cumsum(first) - 1]
    return ranks


def roc_auc(y_true: ArrayLike, y_score: ArrayLike) -> float:
    """Area under the ROC curve (Mann-Whitney U with mid-ranks for ties).

    AUC = (sum of positive ranks - P(P+1)/2) / (P N), equal to sklearn's ``roc_auc_score``.
    Raises when ``y_true`` holds one class only or a value outside {0, 1}, or scores are not
    finite.
    """
    t = _as_1d(y_true, "y_true").astype(np.float64)
    s = _finite_float(_as_1d(y_score, "y_score"), "y_score")
    if len(t) != len(s):
        raise ValueError("y_true and y_score differ in length")
    if not np.all((t == 0) | (t == 1)):
        raise ValueError("y_true must be binary 0/1")
    n_pos = int(t.sum())
    n_neg = len(t) - n_pos
    if n_pos == 0 or n_neg == 0:
        raise ValueError("only one class present in y_true; AUC is undefined")
    ranks = average_ranks(s)
    return float((ranks[t == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def columnwise_roc_auc(y_true: np.ndarray, y_score: np.ndarray) -> float:
    """Mean over columns of :func:`roc_auc` (plant-pathology's metric). Inputs (n, k)."""
    t, s = np.asarray(y_true), np.asarray(y_score)
    if t.ndim != 2 or t.shape != s.shape:
        raise ValueError("y_true and y_score must be 2-D arrays of the same shape")
    return float(np.mean([roc_auc(t[:, j], s[:, j]) for j in range(t.shape[1])]))


def label_type(y: np.ndarray, name: str) -> str:
    """scikit-learn's ``type_of_target`` for a 1-D label array (as in the pinned 1.5.1).

    "unknown" for an object array whose first value is not a string (e.g. NaN in a text
    column); for floats, "continuous" when any value differs from its cast to int (raising
    first if a value is NaN or infinite); else "binary" (at most two distinct values) or
    "multiclass". Mixed strings and numbers raise ``TypeError`` (they cannot be sorted).
    """
    if len(y) == 0:
        return "unknown"
    if y.dtype == object and not isinstance(y[0], str):
        return "unknown"
    if y.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            fractional = bool(np.any(y != y.astype(np.int64)))
        if fractional:
            if not np.all(np.isfinite(y)):
                raise ValueError(f"{name} contains NaN or infinity")
            return "continuous"
    return "binary" if len(np.unique(y)) <= 2 else "multiclass"


def check_class_targets(y_true: np.ndarray, y_pred: np.ndarray) -> str:
    """scikit-learn's ``_check_targets`` for 1-D labels: "binary" or "multiclass", else raise.

    Raises ``ValueError`` for a mix of kinds (e.g. continuous predictions against integer
    classes: 2.5 or a regression output), for unsupported kinds (continuous, unknown), and for
    binary labels of incomparable types (strings against numbers).
    """
    kinds = {label_type(y_true, "y_true"), label_type(y_pred, "y_pred")}
    if kinds == {"binary", "multiclass"}:
        kinds = {"multiclass"}
    if len(kinds) > 1:
        raise ValueError(
            f"classification metrics cannot handle a mix of {' and '.join(sorted(kinds))} targets"
        )
    kind = kinds.pop()
    if kind not in ("binary", "multiclass"):
        raise ValueError(f"{kind} targets are not supported by classification metrics")
    if kind == "binary":
        try:
            union = np.union1d(y_true, y_pred)
        except TypeError:
            raise ValueError("labels in y_true and y_pred are of different types") from None
        if len(union) > 2:
            kind = "multiclass"
    return kind


def accuracy(y_true: Sequence[object], y_pred: Sequence[object]) -> float:
    """Fraction of exact matches (sklearn ``accuracy_score`` as pinned: 1.5.1).

    Labels go through :func:`check_class_targets` first, so NaN, infinity or a fractional
    value among integer classes raises; whole-number floats (3.0) are the classes they equal;
    strings against integer classes score 0 when there are more than two labels.
    """
    t, p = _as_1d(y_true, "y_true"), _as_1d(y_pred, "y_pred")
    if len(t) != len(p) or len(t) == 0:
        raise ValueError("y_true and y_pred must be non-empty and of equal length")
    check_class_targets(t, p)
    return float(np.mean(t == p))


def quadratic_weighted_kappa(y1: Sequence[object], y2: Sequence[object]) -> float:
    """Cohen's kappa with quadratic weights, as sklearn's ``cohen_kappa_score``.

    Both inputs must be class labels (:func:`check_class_targets`): non-integer floats (2.5, a
    regression output), NaN or infinity raise, as scikit-learn rejects a mix of continuous and
    multiclass targets; whole-number floats (3.0) are valid. Labels are the sorted union of
    distinct values of both inputs, and weights use the label *index*.
    kappa = 1 - sum(W O) / sum(W E) with W_ij = (i - j)^2, O the confusion matrix, E the outer
    product of the marginals / n.
    """
    a, b = _as_1d(y1, "y1"), _as_1d(y2, "y2")
    if len(a) != len(b) or len(a) == 0:
        raise ValueError("inputs must be non-empty and of equal length")
    check_class_targets(a, b)
    numeric = [np.issubdtype(x.dtype, np.number) or x.dtype == bool for x in (a, b)]
    if numeric[0] != numeric[1]:
        raise ValueError("mix of numeric and non-numeric labels")
    if numeric[0] and not (
        np.all(np.isfinite(a.astype(float))) and np.all(np.isfinite(b.astype(float)))
    ):
        raise ValueError("labels contain NaN or infinity")
    labels, inverse = np.unique(np.concatenate([a, b]), return_inverse=True)
    k, n = len(labels), len(a)
    ia, ib = inverse[:n], inverse[n:]
    observed = np.zeros((k, k))
    np.add.at(observed, (ia, ib), 1.0)
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0)) / n
    idx = np.arange(k)
    weights = (idx[:, None] - idx[None, :]) ** 2
    with np.errstate(invalid="ignore", divide="ignore"):
        return float(1.0 - (weights * observed).sum() / (weights * expected).sum())


def pearson(y_true: Sequence[float], y_pred: Sequence[float]) -> float:
    """Pearson correlation (scipy ``pearsonr(...)[0]``).

    NaN (a valid score, as in scipy) when either input is constant or holds NaN / infinity.
    """
    t = _as_1d(y_true, "y_true").astype(np.float64)
    p = _as_1d(y_pred, "y_pred").astype(np.float64)
    if len(t) != len(p) or len(t) < 2:
        raise ValueError("inputs must have equal length >= 2")
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(p))):
        return float("nan")
    if np.all(t == t[0]) or np.all(p == p[0]):  # as scipy: exactly constant input -> NaN
        return float("nan")
    dt, dp = t - t.mean(), p - p.mean()
    denom = math.sqrt(float((dt * dt).sum()) * float((dp * dp).sum()))
    if denom == 0.0:
        return float("nan")
    return float(np.clip((dt * dp).sum() / denom, -1.0, 1.0))


def word_jaccard(a: str, b: str) -> float:
    """Jaccard of lower-cased whitespace word sets; both empty divides by zero (raises)."""
    sa, sb = set(a.lower().split()), set(b.lower().split())
    inter = len(sa & sb)
    return inter / (len(sa) + len(sb) - inter)


def mean_word_jaccard(preds: Sequence[str], answers: Sequence[str]) -> float:
    """Mean of :func:`word_jaccard` over aligned pairs (tweet-sentiment-extraction)."""
    if len(preds) != len(answers) or len(preds) == 0:
        raise ValueError("inputs must be non-empty and of equal length")
    return float(np.mean([word_jaccard(p, a) for p, a in zip(preds, answers, strict=True)]))


def multiclass_log_loss(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Mean cross-entropy of one-hot ``y_true`` (n, k) against probabilities ``y_pred`` (n, k).

    As sklearn's ``log_loss`` in the pinned 1.5.1: values must lie in [0, 1]; rows are NOT
    renormalised (scikit-learn <= 1.4 divided each row by its sum; 1.5 and later, 1.9 checked,
    only warn when rows do not sum to one): each probability is clipped to [eps, 1 - eps] with
    eps the float64 machine epsilon. Graders check the row sums first, with the task's own
    tolerance.
    """
    t = _finite_float(y_true, "y_true")
    p = _finite_float(y_pred, "y_pred")
    if t.ndim != 2 or t.shape != p.shape or t.shape[0] == 0:
        raise ValueError("y_true and y_pred must be non-empty 2-D arrays of the same shape")
    if p.min() < 0 or p.max() > 1:
        raise ValueError("probabilities must lie in [0, 1]")
    eps = np.finfo(np.float64).eps
    p = np.clip(p, eps, 1 - eps)
    return float(-(t * np.log(p)).sum(axis=1).mean())


def rmsle(y_true: ArrayLike, y_pred: ArrayLike) -> float:
    """Root mean squared log error sqrt(mean((log1p(p) - log1p(t))^2)); negatives raise."""
    t = _finite_float(_as_1d(y_true, "y_true"), "y_true")
    p = _finite_float(_as_1d(y_pred, "y_pred"), "y_pred")
    if len(t) != len(p) or len(t) == 0:
        raise ValueError("inputs must be non-empty and of equal length")
    if t.min() < 0 or p.min() < 0:
        raise ValueError("RMSLE cannot be used when targets or predictions are negative")
    return float(np.sqrt(np.mean((np.log1p(p) - np.log1p(t)) ** 2)))


def columnwise_rmsle(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Mean over columns of :func:`rmsle` (nomad2018's metric). Inputs (n, k)."""
    t, p = np.asarray(y_true), np.asarray(y_pred)
    if t.ndim != 2 or t.shape != p.shape:
        raise ValueError("inputs must be 2-D arrays of the same shape")
    return float(np.mean([rmsle(t[:, j], p[:, j]) for j in range(t.shape[1])]))


def rmse(y_true: Sequence[float], y_pred: Sequence[float]) -> float:
    """Root mean squared error (used by reference solutions, not by any of the 12 graders)."""
    t = _finite_float(_as_1d(y_true, "y_true"), "y_true")
    p = _finite_float(_as_1d(y_pred, "y_pred"), "y_pred")
    return float(np.sqrt(np.mean((t - p) ** 2)))
