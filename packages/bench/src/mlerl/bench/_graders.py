"""Graders: ``grade(submission, answers, id_column, targets) -> float`` on DataFrames.

Each reproduces the checks of the MLE-bench grader it is named after and raises
:class:`InvalidSubmission` (or any other exception: the caller treats every exception as
"invalid") when a submission cannot be scored. Messages name columns and counts only, never
answer values. Graders are pure: no I/O, no rounding (rounding to 5 places is the caller's).
The stand-in tasks reuse the same graders with their own columns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from mlerl.bench import _metrics as m

Grader = Callable[[pd.DataFrame, pd.DataFrame, str, Sequence[str]], float]


class InvalidSubmission(ValueError):
    """The submission breaks the task's contract (wrong columns, ids, values...)."""


def _need(cond: bool, message: str) -> None:
    if not cond:
        raise InvalidSubmission(message)


def _aligned(sub: pd.DataFrame, ans: pd.DataFrame, id_col: str, cols: Sequence[str]) -> tuple:
    """Sort both frames by id and require identical id sequences (MLE-bench's alignment)."""
    for col in (id_col, *cols):
        _need(col in sub.columns, f"submission is missing column {col!r}")
    _need(len(sub) == len(ans), f"submission has {len(sub)} rows, expected {len(ans)}")
    s = sub.sort_values(id_col, kind="mergesort").reset_index(drop=True)
    a = ans.sort_values(id_col, kind="mergesort").reset_index(drop=True)
    _need(
        bool((s[id_col].to_numpy() == a[id_col].to_numpy()).all()),
        f"submission {id_col!r} values do not match the test set's ids",
    )
    return s, a


def grade_auc(sub: pd.DataFrame, ans: pd.DataFrame, id_col: str, targets: Sequence[str]) -> float:
    """ROC AUC of one probability column (insults, pizza, tps-may): values numeric in [0, 1]."""
    (target,) = targets
    for col in (id_col, target):
        _need(col in sub.columns, f"submission is missing column {col!r}")
    _need(len(sub) == len(ans), f"submission has {len(sub)} rows, expected {len(ans)}")
    try:
        pd.to_numeric(sub[target])
    except (ValueError, TypeError):
        raise InvalidSubmission(f"column {target!r} must be numeric") from None
    _need(
        not (sub[target].min() < 0 or sub[target].max() > 1),
        f"column {target!r} must hold probabilities in [0, 1]",
    )
    s, a = _aligned(sub, ans, id_col, [target])
    return m.roc_auc(a[target].to_numpy(), s[target].to_numpy())


def grade_accuracy(
    sub: pd.DataFrame, ans: pd.DataFrame, id_col: str, targets: Sequence[str]
) -> float:
    """Accuracy of one label column (tps-dec-2021); NaN, infinity or fractional labels are
    invalid (scikit-learn's target-type checks), whole-number floats are their class."""
    (target,) = targets
    s, a = _aligned(sub, ans, id_col, [target])
    return m.accuracy(a[target].to_numpy(), s[target].to_numpy())


def grade_qwk(sub: pd.DataFrame, ans: pd.DataFrame, id_col: str, targets: Sequence[str]) -> float:
    """Quadratic weighted kappa (essay-scoring-2): predictions must be class labels (2.5 or a
    regression output is invalid, 3.0 is 3); every distinct value is its own label."""
    (target,) = targets
    _need(len(sub) > 0, "submission is empty")
    s, a = _aligned(sub, ans, id_col, [target])
    return m.quadratic_weighted_kappa(s[target].to_numpy(), a[target].to_numpy())


def grade_pearson(
    sub: pd.DataFrame, ans: pd.DataFrame, id_col: str, targets: Sequence[str]
) -> float:
    """Pearson r (us-patent); a constant prediction scores NaN, which is a valid score."""
    (target,) = targets
    s, a = _aligned(sub, ans, id_col, [target])
    return m.pearson(a[target].to_numpy(), s[target].to_numpy())


def _texts(col: pd.Series) -> list[str]:
    """``fillna("").astype(str)`` without pandas' float-column fill warning."""
    obj = col.astype(object)
    return obj.where(obj.notna(), "").astype(str).tolist()


def grade_jaccard(
    sub: pd.DataFrame, ans: pd.DataFrame, id_col: str, targets: Sequence[str]
) -> float:
    """Mean word Jaccard (tweet-sentiment-extraction); a missing text counts as ""."""
    (target,) = targets
    s, a = _aligned(sub, ans, id_col, [target])
    preds, truth = _texts(s[target]), _texts(a[target])
    try:
        return m.mean_word_jaccard(preds, truth)
    except ZeroDivisionError:
        raise InvalidSubmission(
            "an empty prediction for an empty answer cannot be scored"
        ) from None


def _classes(ans: pd.DataFrame, id_col: str, targets: Sequence[str] = ()) -> list[str]:
    """The class columns: the task's targets, or every answers column but the id (leaf)."""
    return list(targets) if targets else [c for c in ans.columns if c != id_col]


def _log_loss_aligned(
    sub: pd.DataFrame, ans: pd.DataFrame, id_col: str, classes: list[str]
) -> float:
    missing = [c for c in classes if c not in sub.columns]
    _need(not missing, f"submission is missing {len(missing)} class column(s), e.g. {missing[:3]}")
    s, a = _aligned(sub[[id_col, *classes]], ans[[id_col, *classes]], id_col, classes)
    return m.multiclass_log_loss(a[classes].to_numpy(dtype=float), s[classes].to_numpy(dtype=float))


def _probabilities_in_range(frame: pd.DataFrame) -> None:
    _need(bool(((frame >= 0) & (frame <= 1)).all().all()), "probabilities must lie in [0, 1]")


def grade_log_loss_exact(
    sub: pd.DataFrame, ans: pd.DataFrame, id_col: str, targets: Sequence[str]
) -> float:
    """Log loss with the exact column set and rows that sum to 1 by ``np.isclose(sum, 1,
    atol=1e-6)`` (whose default rtol=1e-5 makes the tolerance 1.1e-5) (leaf, stand-ins)."""
    classes = _classes(ans, id_col, targets)
    _need(
        set(sub.columns) == {id_col, *classes},
        f"submission columns must be exactly {id_col!r} plus the {len(classes)} class columns",
    )
    _need(len(sub) == len(ans), f"submission has {len(sub)} rows, expected {len(ans)}")
    _need(
        bool(np.all(np.isclose(sub[classes].sum(axis=1), 1, atol=1e-6))),
        "each row's probabilities must sum to 1",
    )
    _probabilities_in_range(sub[classes])
    return _log_loss_aligned(sub, ans, id_col, classes)


def grade_log_loss_shape(
    sub: pd.DataFrame, ans: pd.DataFrame, id_col: str, targets: Sequence[str]
) -> float:
    """Spooky's checks: shape (n, classes + 1); the columns after the first sum to 1 by
    ``np.isclose(sum, 1, atol=1e-6)`` (tolerance 1.1e-5) and lie in [0, 1]."""
    classes = _classes(ans, id_col, targets)
    _need(
        sub.shape == (len(ans), len(classes) + 1),
        f"submission shape {sub.shape} must be ({len(ans)}, {len(classes) + 1})",
    )
    probs = sub.iloc[:, 1:]
    _need(
        bool(np.all(np.isclose(probs.sum(axis=1), 1, atol=1e-6))),
        "each row's probabilities must sum to 1",
    )
    _probabilities_in_range(probs)
    return _log_loss_aligned(sub, ans, id_col, classes)


def grade_log_loss_round6(
    sub: pd.DataFrame, ans: pd.DataFrame, id_col: str, targets: Sequence[str]
) -> float:
    """lmsys' checks: class columns present, values in [0, 1], row sums rounded to 6 places == 1."""
    classes = _classes(ans, id_col, targets)
    missing = [c for c in (id_col, *classes) if c not in sub.columns]
    _need(not missing, f"submission is missing columns {missing}")
    _need(len(sub) == len(ans), f"submission has {len(sub)} rows, expected {len(ans)}")
    _probabilities_in_range(sub[classes])
    _need(
        bool(sub[classes].sum(axis=1).round(6).eq(1).all()),
        "each row's probabilities must sum to 1",
    )
    return _log_loss_aligned(sub, ans, id_col, classes)


def grade_rmsle_positional(
    sub: pd.DataFrame, ans: pd.DataFrame, id_col: str, targets: Sequence[str]
) -> float:
    """Mean column-wise RMSLE comparing rows BY POSITION, ids ignored (nomad2018)."""
    for col in targets:
        _need(col in sub.columns, f"submission is missing column {col!r}")
    _need(len(sub) == len(ans), f"submission has {len(sub)} rows, expected {len(ans)}")
    pred = sub[list(targets)].to_numpy(dtype=float)
    _need(bool(np.all(pred >= 0)), "predictions must be non-negative numbers")
    return m.columnwise_rmsle(ans[list(targets)].to_numpy(dtype=float), pred)


def grade_auc_columns(
    sub: pd.DataFrame, ans: pd.DataFrame, id_col: str, targets: Sequence[str]
) -> float:
    """Mean column-wise ROC AUC with the exact column set (plant-pathology-2020)."""
    _need(len(sub) == len(ans), f"submission has {len(sub)} rows, expected {len(ans)}")
    _need(
        set(sub.columns) == {id_col, *targets},
        f"submission columns must be exactly {[id_col, *targets]}",
    )
    s, a = _aligned(sub, ans, id_col, targets)
    return float(np.mean([m.roc_auc(a[c].to_numpy(), s[c].to_numpy()) for c in targets]))


GRADERS: dict[str, Grader] = {
    "auc": grade_auc,
    "accuracy": grade_accuracy,
    "qwk": grade_qwk,
    "pearson": grade_pearson,
    "jaccard": grade_jaccard,
    "log_loss_exact": grade_log_loss_exact,
    "log_loss_shape": grade_log_loss_shape,
    "log_loss_round6": grade_log_loss_round6,
    "rmsle_positional": grade_rmsle_positional,
    "auc_columns": grade_auc_columns,
}
