"""Model families the corpus draws from: import line, constructor, plan phrase, cost class.

Each family samples its hyperparameters from a small grid; `budget` (0 = cheap ... 2 = slow)
picks the grid's cheap or expensive end, so generated programs differ in execution time in a
way that correlates with their quality (more trees, more epochs), which is what the
duration-aware gradient needs to see.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Model:
    family: str
    imports: tuple[str, ...]
    ctor: str
    """Constructor expression, e.g. ``RandomForestClassifier(n_estimators=300)``."""
    phrase: str
    """Plan text, e.g. ``a random forest with 300 trees``."""
    scaled: bool
    """Wrapped in a StandardScaler pipeline."""


# family -> modalities / problems where it makes sense
FAMILIES = {
    "logistic": ("clf",),
    "ridge": ("reg",),
    "linear": ("reg",),
    "random_forest": ("clf", "reg"),
    "extra_trees": ("clf", "reg"),
    "hist_gb": ("clf", "reg"),
    "lightgbm": ("clf", "reg"),
    "grad_boost": ("clf", "reg"),
    "knn": ("clf", "reg"),
    "naive_bayes": ("clf",),
    "mlp": ("clf", "reg"),
    "svm": ("clf", "reg"),
    "sgd": ("clf", "reg"),
}
TEXT_FAMILIES = ("logistic", "naive_bayes", "sgd", "ridge", "lightgbm")
SCALE_FAMILIES = ("logistic", "knn", "mlp", "svm", "sgd", "ridge")


def families_for(problem: str, modality: str) -> list[str]:
    kind = "reg" if problem == "regression" else "clf"
    names = [f for f, kinds in FAMILIES.items() if kind in kinds]
    if modality == "text":
        names = [f for f in names if f in TEXT_FAMILIES]
    return names


def _pick(rng: random.Random, grid: list, budget: int):
    """Cheap end of the grid for budget 0, expensive end for budget 2."""
    third = max(1, len(grid) // 3)
    lo = {0: 0, 1: third, 2: len(grid) - third}[budget]
    return grid[rng.randrange(lo, min(len(grid), lo + third + 1))]


def make_model(
    family: str,
    problem: str,
    modality: str,
    rng: random.Random,
    budget: int,
    seed: int,
    proba: bool,
) -> Model:
    """Sample hyperparameters for `family`; `proba`: the model must have predict_proba."""
    reg = problem == "regression"
    suffix = "Regressor" if reg else "Classifier"
    sk = "sklearn.ensemble"
    if family == "logistic":
        c = rng.choice([0.1, 0.3, 1.0, 3.0, 10.0])
        it = _pick(rng, [100, 200, 300, 500, 1000, 2000], budget)
        return Model(
            family,
            ("from sklearn.linear_model import LogisticRegression",),
            f"LogisticRegression(C={c}, max_iter={it})",
            f"a logistic regression (C={c})",
            modality != "text",
        )
    if family == "ridge":
        a = rng.choice([0.1, 1.0, 3.0, 10.0])
        return Model(
            family,
            ("from sklearn.linear_model import Ridge",),
            f"Ridge(alpha={a})",
            f"ridge regression (alpha={a})",
            modality != "text" and rng.random() < 0.5,
        )
    if family == "linear":
        return Model(
            family,
            ("from sklearn.linear_model import LinearRegression",),
            "LinearRegression()",
            "ordinary least-squares linear regression",
            False,
        )
    if family in ("random_forest", "extra_trees"):
        n = _pick(rng, [30, 50, 100, 150, 200, 300, 400, 600], budget)
        depth = rng.choice([None, 6, 8, 12, 16])
        name = ("RandomForest" if family == "random_forest" else "ExtraTrees") + suffix
        words = "random forest" if family == "random_forest" else "extra-trees ensemble"
        jobs = rng.choice(["", ", n_jobs=-1", ", n_jobs=1"])
        ctor = f"{name}(n_estimators={n}, max_depth={depth}, random_state={seed}{jobs})"
        tail = f" (max depth {depth})" if depth else ""
        return Model(
            family, (f"from {sk} import {name}",), ctor, f"a {words} with {n} trees{tail}", False
        )
    if family == "hist_gb":
        n = _pick(rng, [30, 50, 100, 150, 200, 300], budget)
        lr = rng.choice([0.03, 0.05, 0.1, 0.2])
        name = "HistGradientBoosting" + suffix
        return Model(
            family,
            (f"from {sk} import {name}",),
            f"{name}(max_iter={n}, learning_rate={lr}, random_state={seed})",
            f"histogram gradient boosting with {n} iterations (learning rate {lr})",
            False,
        )
    if family == "lightgbm":
        n = _pick(rng, [50, 100, 200, 300, 400, 600], budget)
        lr, leaves = rng.choice([0.02, 0.05, 0.1]), rng.choice([7, 15, 31, 63])
        ctor = (
            f"lgb.LGBM{suffix}(n_estimators={n}, learning_rate={lr}, num_leaves={leaves}, "
            f"random_state={seed}, verbose=-1)"
        )
        return Model(
            family,
            ("import lightgbm as lgb",),
            ctor,
            f"a LightGBM model with {n} boosting rounds and {leaves} leaves",
            False,
        )
    if family == "grad_boost":
        n = _pick(rng, [30, 50, 100, 150, 200], budget)
        name = "GradientBoosting" + suffix
        depth = rng.choice([2, 3, 4])
        return Model(
            family,
            (f"from {sk} import {name}",),
            f"{name}(n_estimators={n}, max_depth={depth}, random_state={seed})",
            f"gradient boosting with {n} trees of depth {depth}",
            False,
        )
    if family == "knn":
        k = rng.choice([3, 5, 7, 11, 15, 25])
        w = rng.choice(["uniform", "distance"])
        name = "KNeighbors" + suffix
        return Model(
            family,
            (f"from sklearn.neighbors import {name}",),
            f'{name}(n_neighbors={k}, weights="{w}")',
            f"k-nearest neighbours with k={k}",
            True,
        )
    if family == "naive_bayes":
        if modality == "text":
            a = rng.choice([0.1, 0.3, 1.0])
            return Model(
                family,
                ("from sklearn.naive_bayes import MultinomialNB",),
                f"MultinomialNB(alpha={a})",
                f"multinomial naive Bayes (alpha={a})",
                False,
            )
        return Model(
            family,
            ("from sklearn.naive_bayes import GaussianNB",),
            "GaussianNB()",
            "Gaussian naive Bayes",
            False,
        )
    if family == "mlp":
        h = rng.choice([32, 64, 128, 256])
        layers = rng.choice([f"({h},)", f"({h}, {h // 2})"])
        it = _pick(rng, [100, 150, 200, 300, 500], budget)
        name = "MLP" + suffix
        early = rng.choice(["", ", early_stopping=True"])
        return Model(
            family,
            (f"from sklearn.neural_network import {name}",),
            f"{name}(hidden_layer_sizes={layers}, max_iter={it}, random_state={seed}{early})",
            f"a multi-layer perceptron with hidden layers {layers} for up to {it} epochs",
            True,
        )
    if family == "svm":
        c = rng.choice([0.3, 1.0, 3.0, 10.0])
        if reg:
            return Model(
                family,
                ("from sklearn.svm import SVR",),
                f"SVR(C={c})",
                f"a support vector regressor (RBF kernel, C={c})",
                True,
            )
        extra = ", probability=True" if proba else ""
        return Model(
            family,
            ("from sklearn.svm import SVC",),
            f"SVC(C={c}{extra}, random_state={seed})",
            f"an RBF support vector machine (C={c})",
            True,
        )
    if family == "sgd":
        it = _pick(rng, [200, 500, 1000, 2000], budget)
        if reg:
            return Model(
                family,
                ("from sklearn.linear_model import SGDRegressor",),
                f"SGDRegressor(max_iter={it}, random_state={seed})",
                "a linear model trained with stochastic gradient descent",
                True,
            )
        return Model(
            family,
            ("from sklearn.linear_model import SGDClassifier",),
            f'SGDClassifier(loss="log_loss", max_iter={it}, random_state={seed})',
            "a logistic model trained with stochastic gradient descent",
            modality != "text",
        )
    raise ValueError(f"unknown model family {family!r}")
