"""Public and private leaderboards: a deterministic per-task split of the answers, and the
reference points of the normalised reward.

Kaggle shows a public leaderboard during a competition and ranks on a private one. Here each
task's answer rows are split once, deterministically, into a public part (what training rewards
and every selection read) and a private part (what reports show). The program still sees the
whole ``test.csv`` and writes one submission; :func:`part_scores` grades the rows of each part
as an answer set of its own, with the task's own grader, so metrics that need the whole set
(AUC, QWK, Jaccard, column-wise AUC) are computed per part exactly as on a smaller test set.

Split rule (:func:`public_mask`):

- the seed is the first 8 bytes of ``sha256(task id)``: the same rows on every machine, run and
  process, independent of the fraction's other users;
- classification metrics are stratified by the label (``auc``, ``accuracy``, ``qwk``: the target
  value; ``auc_columns``: the tuple of target values; log loss: the argmax class), so each part
  keeps the class balance; regression and text metrics draw one stratum;
- rows that share a key (the id column; a comment text on detecting-insults can repeat) go to
  the same part, so a submission that matches the full answers matches each part's too: graders
  align rows by sorting on the key, and a key split across parts would leave a part with more
  submission rows than answers. The unit drawn is the key: a key takes the stratum of its first
  row; graders that compare positions draw rows;
- in a stratum of ``n`` keys, ``round(fraction * n)`` go public, held within ``[1, n - 1]`` when
  ``n >= 2`` so both parts see every label that occurs twice. With unique keys this draws the
  same rows as a plain per-row split.

A split that cannot grade (a part empty, or an AUC column with one class in a part: tiny answer
sets) falls back to grading both parts on all answers, and says why in ``split``. A public
fraction of 1 means no split: both scores are the full-answer score (the paper's behaviour).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mlerl.bench._task import TaskSpec

_STRATIFY_TARGET = {"auc", "accuracy", "qwk"}
_STRATIFY_ARGMAX = {"log_loss_exact", "log_loss_shape", "log_loss_round6"}
_BOTH_CLASSES = {"auc", "auc_columns"}
_POSITIONAL = {"rmsle_positional"}

METRIC_BEST: dict[str, float] = {
    "auc": 1.0,
    "auc_columns": 1.0,
    "accuracy": 1.0,
    "qwk": 1.0,
    "pearson": 1.0,
    "jaccard": 1.0,
    "log_loss_exact": 0.0,
    "log_loss_shape": 0.0,
    "log_loss_round6": 0.0,
    "rmsle_positional": 0.0,
}
"""The best value each grader's metric can take (its optimum), keyed by grader name."""
METRIC_CHANCE: dict[str, float] = {
    "auc": 0.5,
    "auc_columns": 0.5,
    "qwk": 0.0,
    "pearson": 0.0,
    "jaccard": 0.0,
}
"""A trivial prediction's score where the metric alone fixes it (the baseline's fallback)."""


def _seed(task_id: str) -> int:
    return int.from_bytes(hashlib.sha256(task_id.encode("utf-8")).digest()[:8], "little")


def _strata(
    grader: str, answers: pd.DataFrame, id_col: str, targets: tuple[str, ...]
) -> np.ndarray:
    if grader in _STRATIFY_TARGET:
        return answers[targets[0]].astype(str).to_numpy()
    if grader == "auc_columns":
        return answers[list(targets)].astype(str).agg("|".join, axis=1).to_numpy()
    if grader in _STRATIFY_ARGMAX:
        classes = list(targets) or [c for c in answers.columns if c != id_col]
        return np.asarray(answers[classes].to_numpy(dtype=float).argmax(axis=1))
    return np.zeros(len(answers), dtype=int)


def _key_groups(grader: str, answers: pd.DataFrame, id_col: str) -> np.ndarray:
    """Group number of each row: rows sharing a key share a group (numbered by first
    occurrence); graders that compare positions make each row its own group."""
    if grader in _POSITIONAL or id_col not in answers.columns:
        return np.arange(len(answers))
    return pd.factorize(answers[id_col].astype(str), sort=False)[0]


def public_mask(
    task_id: str,
    grader: str,
    answers: pd.DataFrame,
    id_col: str,
    targets: tuple[str, ...],
    fraction: float,
) -> np.ndarray:
    """Boolean mask over the answer rows (file order): True for the public part."""
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"public fraction must lie in (0, 1], got {fraction}")
    n = len(answers)
    if fraction == 1.0:
        return np.ones(n, dtype=bool)
    rng = np.random.default_rng(_seed(task_id))
    groups = _key_groups(grader, answers, id_col)
    first_rows = np.unique(groups, return_index=True)[1]
    strata = _strata(grader, answers, id_col, targets)[first_rows]
    public_groups = np.zeros(len(first_rows), dtype=bool)
    for value in sorted(set(strata.tolist()), key=str):
        keys = rng.permutation(np.flatnonzero(strata == value))
        k = round(fraction * len(keys))
        if len(keys) >= 2:
            k = min(max(k, 1), len(keys) - 1)
        public_groups[keys[:k]] = True
    return public_groups[groups]


def _infeasible(
    grader: str, answers: pd.DataFrame, targets: tuple[str, ...], mask: np.ndarray
) -> str:
    """Why a part cannot be graded as its own answer set, or ''."""
    for name, part in (("public", mask), ("private", ~mask)):
        if not part.any():
            return f"the {name} part is empty"
        if grader in _BOTH_CLASSES:
            for col in targets:
                if answers.loc[part, col].nunique() < 2:
                    return f"the {name} part holds one class of {col!r}"
    return ""


@dataclass(frozen=True)
class Parts:
    """The answer rows of each part (positions in the answers file) and how they were drawn."""

    public: np.ndarray
    private: np.ndarray
    split: str
    """``"public F"``, ``"full"`` (fraction 1) or ``"full: <why the split could not grade>"``."""


def split_answers(task: TaskSpec, answers: pd.DataFrame) -> Parts:
    """The task's public and private parts (see the module docstring)."""
    fraction = task.public_fraction
    mask = public_mask(task.id, task.grader, answers, task.id_column, task.target_columns, fraction)
    everything = np.arange(len(answers))
    if fraction == 1.0:
        return Parts(everything, everything, "full")
    why = _infeasible(task.grader, answers, task.target_columns, mask)
    if why:
        return Parts(everything, everything, f"full: {why}")
    return Parts(np.flatnonzero(mask), np.flatnonzero(~mask), f"public {fraction:g}")


def part_frames(
    task: TaskSpec, submission: pd.DataFrame, answers: pd.DataFrame, rows: np.ndarray
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(submission rows, answer rows) of one part; the submission must already be valid on all
    answers. Rows are matched by id, or by position for the graders that compare positions."""
    ans = answers.iloc[rows].reset_index(drop=True)
    if task.grader in _POSITIONAL:
        return submission.iloc[rows].reset_index(drop=True), ans
    keep = submission[task.id_column].isin(set(ans[task.id_column].tolist()))
    return submission[keep.to_numpy()].reset_index(drop=True), ans


def reference_scores(task: TaskSpec, baseline: float | None) -> tuple[float, float]:
    """(baseline, best) for the normalised reward, both finite and distinct.

    ``best`` is the metric's optimum (:data:`METRIC_BEST`). ``baseline`` is the sample
    submission's public score when it is finite and worse than ``best``; else the metric's
    chance score (:data:`METRIC_CHANCE`); else one metric unit worse than ``best``.
    """
    best = METRIC_BEST.get(task.grader, 0.0 if task.lower_is_better else 1.0)
    sign = -1.0 if task.lower_is_better else 1.0
    for candidate in (baseline, METRIC_CHANCE.get(task.grader)):
        if candidate is not None and math.isfinite(candidate) and sign * (best - candidate) > 0:
            return float(candidate), best
    return best - sign, best


__all__ = [
    "Parts",
    "split_answers",
    "public_mask",
    "part_frames",
    "reference_scores",
    "METRIC_BEST",
    "METRIC_CHANCE",
]
