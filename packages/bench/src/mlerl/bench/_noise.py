"""How well a task's public leaderboard tells programs apart: a paired bootstrap of its rows.

Training rewards and every selection read the public part only (``_split``), so the size of
that part bounds what RL, best-of-N and AIDE can tell apart. ``public_noise`` resamples the
public answer rows with replacement (the same draws for every submission) and regrades each
submission on every draw with the task's own grader. From the draws:

- a submission's public score has a bootstrap standard deviation (``score_sd``);
- two submissions' public difference has a *paired* standard error (``pair_se``: the SD over
  draws of the difference), smaller than either score's SD when the programs err on the same
  rows;
- a pair is *resolved* when ``|difference| > 2 * pair_se``; ``resolved_share`` is the share of
  pairs resolved, ``order_kept`` the share of resolved pairs whose order the private part
  confirms.

A task whose public part cannot tell its reference solutions apart (a low ``resolved_share``)
rewards noise; resize its test split.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from mlerl.bench._split import _POSITIONAL, split_answers
from mlerl.bench._task import TaskSpec


@dataclass(frozen=True)
class NoiseReport:
    task_id: str
    public_rows: int
    private_rows: int
    draws: int
    scores: dict[str, tuple[float, float, float]]
    """name -> (public score, private score, bootstrap SD of the public score)."""
    pairs: list[tuple[str, str, float, float, float]] = field(default_factory=list)
    """(a, b, public a - b, paired bootstrap SE of that difference, private a - b)."""

    @property
    def median_score_sd(self) -> float:
        sds = [sd for _, _, sd in self.scores.values() if math.isfinite(sd)]
        return statistics.median(sds) if sds else math.nan

    @property
    def median_pair_se(self) -> float:
        ses = [se for *_, se, _ in self.pairs if math.isfinite(se)]
        return statistics.median(ses) if ses else math.nan

    @property
    def resolved_share(self) -> float:
        """Share of pairs whose public difference exceeds twice its paired SE."""
        return resolved_share(self.pairs)

    @property
    def order_kept(self) -> float:
        """Among resolved pairs, the share whose private difference has the same sign."""
        hits = [(d > 0) == (p > 0) for _, _, d, se, p in self.pairs if abs(d) > 2 * se and p != 0]
        return sum(hits) / len(hits) if hits else math.nan

    def summary(self) -> dict[str, object]:
        return {
            "task": self.task_id,
            "public_rows": self.public_rows,
            "private_rows": self.private_rows,
            "submissions": len(self.scores),
            "draws": self.draws,
            "median_score_sd": _r(self.median_score_sd),
            "median_pair_se": _r(self.median_pair_se),
            "resolved_share": _r(self.resolved_share),
            "order_kept": _r(self.order_kept),
        }


def _r(x: float) -> float | None:
    return None if not math.isfinite(x) else round(x, 5)


def resolved_share(pairs: list[tuple[str, str, float, float, float]]) -> float:
    """Share of (a, b, diff, se, ...) pairs with ``|diff| > 2 * se`` (NaN for no pairs)."""
    if not pairs:
        return math.nan
    return sum(abs(d) > 2 * se for _, _, d, se, *_ in pairs) / len(pairs)


def paired_se(a: np.ndarray, b: np.ndarray) -> float:
    """SD of the draw-wise difference of two submissions' bootstrap scores (NaN draws dropped)."""
    d = np.asarray(a, float) - np.asarray(b, float)
    d = d[np.isfinite(d)]
    return float(d.std(ddof=1)) if len(d) > 1 else math.nan


def _aligned(task: TaskSpec, submission: pd.DataFrame, answers: pd.DataFrame) -> pd.DataFrame:
    """The submission's rows in the answers' order (by id, or as is for positional graders)."""
    if task.grader in _POSITIONAL:
        return submission.reset_index(drop=True)
    return submission.set_index(task.id_column).loc[answers[task.id_column]].reset_index()


def _score(task: TaskSpec, sub: pd.DataFrame, ans: pd.DataFrame, rows: np.ndarray) -> float:
    """Grade the rows ``rows`` (repeats allowed) as an answer set of their own: ids are renamed
    0..n-1 in both frames so the graders' id alignment sees unique ids."""
    from mlerl.bench._grade import score_frame

    s, a = sub.iloc[rows].reset_index(drop=True), ans.iloc[rows].reset_index(drop=True)
    s[task.id_column] = a[task.id_column] = np.arange(len(rows))
    try:
        return score_frame(task, s, a)
    except ValueError:  # a draw that cannot grade (one class only in an AUC draw): left out
        return math.nan


def public_noise(
    task: TaskSpec,
    submissions: dict[str, pd.DataFrame],
    answers: pd.DataFrame,
    draws: int = 200,
    seed: int = 0,
) -> NoiseReport:
    """Paired bootstrap of the public part for valid ``submissions`` (name -> frame)."""
    if draws < 2:
        raise ValueError(f"draws must be >= 2, got {draws}")
    parts = split_answers(task, answers)
    rng = np.random.default_rng(seed)
    pub = parts.public
    samples = [pub[rng.integers(len(pub), size=len(pub))] for _ in range(draws)]
    aligned = {n: _aligned(task, s, answers) for n, s in submissions.items()}
    boot: dict[str, np.ndarray] = {}
    scores: dict[str, tuple[float, float, float]] = {}
    for name, sub in aligned.items():
        boot[name] = np.array([_score(task, sub, answers, rows) for rows in samples])
        finite = boot[name][np.isfinite(boot[name])]
        scores[name] = (
            _score(task, sub, answers, parts.public),
            _score(task, sub, answers, parts.private),
            float(finite.std(ddof=1)) if len(finite) > 1 else math.nan,
        )
    names = list(aligned)
    pairs = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            pairs.append(
                (
                    a,
                    b,
                    scores[a][0] - scores[b][0],
                    paired_se(boot[a], boot[b]),
                    scores[a][1] - scores[b][1],
                )
            )
    return NoiseReport(task.id, len(pub), len(parts.private), draws, scores, pairs)


def reference_noise(task: TaskSpec, draws: int = 200, seed: int = 0) -> NoiseReport:
    """`public_noise` of the task's reference solutions (``mlerl-bench calibrate``'s family:
    constant, linear, boosting, MLP, k-NN at varied capacity) on a prepared task; duplicate
    submissions (the same predictions) count once."""
    import warnings

    from threadpoolctl import threadpool_limits

    from mlerl.bench._grade import load_answers, score_frame
    from mlerl.bench._reference import load_public, solutions

    train, test = load_public(task)
    answers = load_answers(task)
    subs: dict[str, pd.DataFrame] = {}
    seen: set[str] = set()
    for name, fn in solutions(task):
        with warnings.catch_warnings(), threadpool_limits(1):
            warnings.simplefilter("ignore")
            try:
                sub = fn(train, test)
                score_frame(task, sub, answers)
            except Exception:  # noqa: BLE001 - a reference that cannot fit this task is skipped
                continue
        key = pd.util.hash_pandas_object(sub, index=False).sum()
        if str(key) not in seen:
            seen.add(str(key))
            subs[name] = sub
    return public_noise(task, subs, answers, draws, seed)
