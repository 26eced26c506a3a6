"""Seeded reference solutions and the pseudo-leaderboards of the stand-in tasks.

A stand-in task has no human leaderboard, so ``calibrate`` runs a family of reference
solutions (constant, linear, gradient boosting, MLP, k-NN, with varied regularisation, budget
and training fraction; lexicon span extractors for the Jaccard task) on each prepared task,
grades their submissions with the task's own grader, and writes the valid scores, best first,
to ``leaderboard.csv`` beside ``task.yaml``; the thresholds follow from Kaggle's progression
rules exactly as for a real competition. Every solution sees only ``prepared/public``.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from mlerl.bench._grade import load_answers, score_frame
from mlerl.bench._task import TaskSpec

Features = tuple[object, object]  # (X_train, X_test): dense arrays or sparse matrices
TEXT_COLUMN = {"standin-essays-qwk": "full_text", "standin-insults-auc": "Comment"}


def load_public(task: TaskSpec) -> tuple[pd.DataFrame, pd.DataFrame]:
    return pd.read_csv(task.public_dir / "train.csv"), pd.read_csv(task.public_dir / "test.csv")


def _images(task: TaskSpec, ids: pd.Series) -> np.ndarray:
    from PIL import Image

    return np.stack(
        [
            np.asarray(Image.open(task.public_dir / "images" / f"{i}.png"), dtype=float).ravel()
            / 255
            for i in ids
        ]
    )


def features(task: TaskSpec, train: pd.DataFrame, test: pd.DataFrame, dense: bool) -> Features:
    """Numeric columns (tabular), pixels (image) or TF-IDF / text statistics (text)."""
    base = task.id.removesuffix("-tiny")
    if task.modality == "image":
        return _images(task, train[task.id_column]), _images(task, test[task.id_column])
    if task.modality == "text":
        col = TEXT_COLUMN[base]
        if dense:

            def stats(s: pd.Series) -> np.ndarray:
                words = s.str.split()
                return np.column_stack(
                    [
                        words.str.len(),
                        s.str.len(),
                        words.apply(lambda w: len(set(w)) / max(1, len(w))),
                        s.str.count(","),
                    ]
                )

            return stats(train[col]), stats(test[col])
        from sklearn.feature_extraction.text import TfidfVectorizer

        vec = TfidfVectorizer(ngram_range=(1, 2), min_df=2, max_features=5000, sublinear_tf=True)
        return vec.fit_transform(train[col]), vec.transform(test[col])
    drop = {task.id_column, *task.target_columns, "class", "target"}
    cols = [c for c in test.columns if c not in drop]
    return train[cols].to_numpy(float), test[cols].to_numpy(float)


def _label(task: TaskSpec, train: pd.DataFrame) -> np.ndarray:
    if task.grader == "auc_columns":
        return train[list(task.target_columns)].to_numpy().argmax(axis=1)
    if task.grader in ("log_loss_exact",):
        return train["class"].to_numpy()
    return train[task.target_columns[0]].to_numpy()


Estimator = Any
"""A scikit-learn estimator (fit / predict / predict_proba); scikit-learn ships no types."""


def _models(kind: str) -> Iterator[tuple[str, Callable[[], Estimator], bool]]:
    """(name, factory, needs_dense) for a problem kind: "clf" or "reg"."""
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor
    from sklearn.neural_network import MLPClassifier, MLPRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MaxAbsScaler

    clf = kind == "clf"
    scaled = functools.partial(make_pipeline, MaxAbsScaler())

    def linear(c: float) -> Estimator:
        return scaled(LogisticRegression(C=c, max_iter=300)) if clf else scaled(Ridge(alpha=1 / c))

    def gbm(it: int) -> Estimator:
        cls = HistGradientBoostingClassifier if clf else HistGradientBoostingRegressor
        return cls(max_iter=it, random_state=0)

    def mlp(it: int) -> Estimator:
        cls = MLPClassifier if clf else MLPRegressor
        return scaled(cls((32,), max_iter=it, random_state=0))

    def knn(k: int) -> Estimator:
        return scaled(KNeighborsClassifier(k) if clf else KNeighborsRegressor(k))

    for c in (0.001, 0.01, 0.1, 1.0, 10.0):
        yield f"linear-C{c}", functools.partial(linear, c), False
    for it in (5, 20, 100):
        yield f"gbm-{it}", functools.partial(gbm, it), True
    for it in (3, 30, 200):
        yield f"mlp-{it}", functools.partial(mlp, it), False
    for k in (1, 15):
        yield f"knn-{k}", functools.partial(knn, k), False


REGRESSION = ("pearson", "rmsle_positional")


def _submission(
    task: TaskSpec, test: pd.DataFrame, model: Estimator, x_test: object, classes: np.ndarray
) -> pd.DataFrame:
    sub = test[[task.id_column]].copy()
    g = task.grader
    if g == "auc":
        sub[task.target_columns[0]] = model.predict_proba(x_test)[:, 1]
    elif g in ("accuracy", "qwk", "pearson"):
        sub[task.target_columns[0]] = model.predict(x_test)
    elif g == "log_loss_exact":
        proba = model.predict_proba(x_test)
        for j, c in enumerate(classes):
            sub[c] = proba[:, j]
        for c in task.target_columns:
            if c not in sub:
                sub[c] = 0.0
        sub[list(task.target_columns)] = sub[list(task.target_columns)].div(
            sub[list(task.target_columns)].sum(axis=1), axis=0
        )
    elif g == "auc_columns":
        proba = model.predict_proba(x_test)
        for j, c in enumerate(task.target_columns):
            sub[c] = proba[:, list(classes).index(j)] if j in classes else 0.0
    return sub


def _fit_predict(
    task: TaskSpec,
    train: pd.DataFrame,
    test: pd.DataFrame,
    factory: Callable[[], Estimator],
    dense: bool,
    frac: float,
) -> pd.DataFrame:
    part = train.sample(frac=frac, random_state=0) if frac < 1 else train
    x_tr, x_te = features(task, part, test, dense=dense)
    if task.grader == "rmsle_positional":
        sub = test[[task.id_column]].copy()
        for col in task.target_columns:
            model = factory()
            model.fit(x_tr, np.log1p(part[col].to_numpy()))
            sub[col] = np.clip(np.expm1(model.predict(x_te)), 0, None)
        return sub
    y = _label(task, part)
    model = factory()
    model.fit(x_tr, y)
    return _submission(task, test, model, x_te, getattr(model, "classes_", np.array([])))


def _constant(task: TaskSpec, train: pd.DataFrame, test: pd.DataFrame) -> pd.DataFrame:
    sub = pd.read_csv(task.sample_submission_path)
    if task.grader in ("accuracy", "qwk"):
        sub[task.target_columns[0]] = pd.Series(_label(task, train)).mode()[0]
    if task.grader == "log_loss_exact":
        prior = pd.Series(_label(task, train)).value_counts(normalize=True)
        for c in task.target_columns:
            sub[c] = prior.get(c, 0.0)
    return sub


def _lexicon_span(
    train: pd.DataFrame, test: pd.DataFrame, frac: float, alpha: float, contiguous: bool = True
) -> pd.DataFrame:
    """Neutral: the whole tweet; else the shortest span covering words whose smoothed in-span
    ratio inside / (total + ``alpha``) (per sentiment, counted on a ``frac`` of train) exceeds
    1/2 (or, when not ``contiguous``, only those words). Larger ``alpha`` drops rare words."""
    part = train.sample(frac=frac, random_state=0) if frac < 1 else train
    inside: dict[tuple[str, str], int] = {}
    total: dict[tuple[str, str], int] = {}
    for text, span, sent in zip(
        part["text"], part["selected_text"].fillna(""), part["sentiment"], strict=True
    ):
        span_words = set(str(span).lower().split())
        for w in str(text).lower().split():
            total[(sent, w)] = total.get((sent, w), 0) + 1
            inside[(sent, w)] = inside.get((sent, w), 0) + (w in span_words)
    out = []
    for text, sent in zip(test["text"], test["sentiment"], strict=True):
        words = str(text).split()
        if sent == "neutral":
            out.append(text)
            continue
        hits = [
            i
            for i, w in enumerate(words)
            if inside.get((sent, w.lower()), 0) / (total.get((sent, w.lower()), 0) + alpha + 1e-9)
            > 0.5
        ]
        if not hits:
            out.append(text)
        else:
            out.append(
                " ".join(words[hits[0] : hits[-1] + 1] if contiguous else [words[i] for i in hits])
            )
    return test[["textID"]].assign(selected_text=out)


def _first_words(train: pd.DataFrame, test: pd.DataFrame, *, k: int) -> pd.DataFrame:
    return test[["textID"]].assign(selected_text=test["text"].str.split().str[:k].str.join(" "))


def solutions(
    task: TaskSpec,
) -> Iterator[tuple[str, Callable[[pd.DataFrame, pd.DataFrame], pd.DataFrame]]]:
    """Every reference solution for ``task``: (name, fn(train, test) -> submission)."""
    yield "constant", lambda tr, te: _constant(task, tr, te)
    if task.grader == "jaccard":
        yield "full-text", lambda tr, te: te[["textID"]].assign(selected_text=te["text"])
        for k in (1, 3):
            yield f"first-{k}-words", functools.partial(_first_words, k=k)
        for frac in (0.01, 0.03, 0.1, 0.3, 1.0):
            for alpha in (0, 2, 10):
                for contiguous in (True, False):
                    yield (
                        f"lexicon-f{frac}-a{alpha}-{'span' if contiguous else 'words'}",
                        functools.partial(
                            _lexicon_span, frac=frac, alpha=alpha, contiguous=contiguous
                        ),
                    )
        return
    kind = "reg" if task.grader in REGRESSION else "clf"
    for frac in (0.2, 1.0):
        for name, factory, needs_dense in _models(kind):
            if task.modality == "text" and needs_dense and frac < 1:
                continue
            yield (
                f"{name}-frac{frac}",
                functools.partial(
                    _fit_predict, task, factory=factory, dense=needs_dense, frac=frac
                ),
            )


def score_solutions(task: TaskSpec) -> list[tuple[str, float | None]]:
    """(name, score or None if invalid) for every reference solution on a prepared task."""
    train, test = load_public(task)
    answers = load_answers(task)
    results: list[tuple[str, float | None]] = []
    for name, fn in solutions(task):
        with warnings.catch_warnings(), threadpool_limits(1):
            warnings.simplefilter("ignore")
            try:
                results.append((name, score_frame(task, fn(train, test), answers)))
            except Exception:  # noqa: BLE001 - an invalid reference submission is left off the board
                results.append((name, None))
    return results


def leaderboard(task: TaskSpec, results: list[tuple[str, float | None]]) -> pd.DataFrame:
    """Valid, non-NaN scores sorted best first (the direction of the task)."""
    rows = [(n, s) for n, s in results if s is not None and not np.isnan(s)]
    board = pd.DataFrame(rows, columns=["solution", "score"])
    return board.sort_values("score", ascending=task.lower_is_better, kind="mergesort").reset_index(
        drop=True
    )


def calibrate(
    work_dir: Path, only: list[str] | None = None, resume: bool = False
) -> dict[str, dict]:
    """Prepare every stand-in under ``work_dir``, score the references, rewrite the task dirs.

    Each task's ``leaderboard.csv`` and ``task.yaml`` are written as soon as it is done; with
    ``resume`` a task whose ``leaderboard.csv`` already exists is not re-run.
    """
    from threadpoolctl import threadpool_limits

    from mlerl.bench._prepare import prepare
    from mlerl.bench._standins import BUILDERS
    from mlerl.bench._task import BUILTIN_TASKS_DIR, Registry
    from mlerl.bench._taskdefs import write_standin_dirs

    thresholds = {}
    for task_id in [t for b in BUILDERS for t in (b, f"{b}-tiny")]:
        if only and task_id not in only:
            continue
        board_path = BUILTIN_TASKS_DIR / task_id / "leaderboard.csv"
        if not (resume and board_path.is_file()):
            write_standin_dirs({}, only=[task_id])
            task = prepare(task_id, work_dir, force=True)
            with threadpool_limits(1):  # oversubscribed OpenMP/BLAS is far slower on a busy box
                board = leaderboard(
                    task, score_solutions(Registry.load(data_dir=work_dir).get(task_id))
                )
            board.to_csv(board_path, index=False)
        board = pd.read_csv(board_path)
        thresholds[task_id] = _thresholds_entry(board)
        write_standin_dirs(thresholds, only=[task_id])
        print(
            f"{task_id}: {len(board)} solutions, best {board['score'].iloc[0]}, "
            f"{thresholds[task_id]}",
            flush=True,
        )
    return thresholds


def _thresholds_entry(board: pd.DataFrame) -> dict:
    from mlerl.bench._medals import thresholds_from_scores

    g, s, b, med, _ = thresholds_from_scores(board["score"].tolist())
    return {
        "gold": g,
        "silver": s,
        "bronze": b,
        "median": med,
        "source": f"pseudo-leaderboard of {len(board)} seeded reference solutions "
        "(leaderboard.csv; mlerl-bench calibrate), Kaggle progression rules",
    }
