"""The natural-language plan (3-5 sentences) that precedes each program's code block."""

from __future__ import annotations

import random

_WHY = {
    "logistic": "A linear model is a fast and strong baseline.",
    "ridge": "A regularised linear model is a fast and strong baseline.",
    "linear": "A linear model is the simplest reasonable baseline.",
    "random_forest": "Tree ensembles handle unscaled features and interactions well.",
    "extra_trees": "Randomised trees reduce variance on small data sets.",
    "hist_gb": "Gradient boosting is usually the strongest choice on tabular data.",
    "lightgbm": "Boosted trees are usually the strongest choice on tabular data.",
    "grad_boost": "Boosting many shallow trees usually beats a single model.",
    "knn": "Nearby examples tend to share the same target here.",
    "naive_bayes": "Naive Bayes is very fast and works well as a first model.",
    "mlp": "A small neural network can capture non-linear structure.",
    "svm": "Kernel methods work well on small, dense feature sets.",
    "sgd": "Stochastic gradient descent scales well to many sparse features.",
}


_SPAN_WHY = {
    "full_text": "Copying the whole text is a strong baseline for word Jaccard.",
    "last_words": "Sentiment is often expressed at the end of a text.",
    "word_scores": "Words that training spans keep often are likely to be selected again.",
    "sentiment_word_scores": "Which words are kept depends on the sentiment.",
}
_WHY.update(_SPAN_WHY)


def _features(view, c, rng: random.Random) -> str:
    if view.problem == "span":
        ctx = f" and its `{view.context_column}`" if view.context_column else ""
        return (
            f"I will extract spans from the `{view.text_column}` column{ctx}, working on "
            "whitespace-separated words."
        )
    if view.modality == "text":
        p = c.params
        kind = {
            "tfidf_char": "character 2-4-gram TF-IDF features",
            "count": f"word 1-{p['ngram']}-gram counts",
            "tfidf_word": f"TF-IDF word 1-{p['ngram']}-grams",
        }[c.features]
        return (
            f"I will represent the `{view.text_column}` column with {kind} "
            f"(at most {p['max_features']} features)."
        )
    if view.modality == "image":
        resize = (
            f"resize it to {c.params['size']}x{c.params['size']}, "
            if c.features == "resize"
            else ""
        )
        extra = ", adding the row and column means" if c.features == "projections" else ""
        return (
            f"I will read every image from ./input/images as grayscale, {resize}scale the pixels "
            f"to [0, 1] and flatten them into a feature vector{extra}."
        )
    base = rng.choice(
        [
            "I will load train.csv and test.csv from ./input and use every column except the id "
            "and the target as features",
            "The data is tabular, so I will read the CSV files with pandas and keep all feature "
            "columns",
            f"I will read the training data, take `{view.label_column}` as the target and the "
            "remaining columns as features",
        ]
    )
    if c.features == "numeric":
        base += ", keeping only numeric columns"
    if c.features == "rowstats":
        base += ", plus the row mean and standard deviation as two extra features"
    if c.fill:
        base += ", filling missing values with " + (
            "zero" if c.fill == "zero" else "the column medians"
        )
    return base + "."


def _model(c, rng: random.Random) -> str:
    if c.model.family in _SPAN_WHY:
        return f"As the prediction I will use {c.model.phrase}."
    scaled = " on standardised features" if c.model.scaled else ""
    return rng.choice(
        [
            f"Then I will fit {c.model.phrase}{scaled}.",
            f"As the model I will use {c.model.phrase}{scaled}.",
            f"I will train {c.model.phrase}{scaled}.",
        ]
    )


def _validation(view, c, rng: random.Random) -> str:
    if view.problem == "span":
        return "I will report the mean Jaccard score on the training set." if c.train_score else ""
    name = {
        "binary": "ROC AUC",
        "proba": "log loss",
        "label": view.metric,
        "regression": view.metric,
    }[view.problem]
    if c.validation == "holdout":
        refit = " and then refit on all the training data" if c.refit else ""
        return f"I will measure the {name} on a 20% hold-out split{refit}."
    if c.validation == "cv":
        folds = 3 if c.budget == 0 else 5
        return f"I will estimate the performance with {folds}-fold cross-validation."
    return rng.choice(["", "To keep it fast I will train directly on the full training set."])


def _submission(view, c) -> str:
    col = view.target_columns[0] if view.target_columns else view.label_column
    if len(view.target_columns) > 1 and view.problem in ("binary", "regression"):
        return (
            f"I will fit one model per target column ({', '.join(view.target_columns)}) and write "
            "their test predictions to ./submission.csv."
        )
    if view.problem == "binary":
        return (
            f"Finally I will predict the probability of `{col}` for each test row and write "
            f"./submission.csv with the `{view.id_column}` and `{col}` columns."
        )
    if view.problem == "proba":
        clip = ", clipped and renormalised," if c.clip else ""
        return (
            f"Finally I will predict the class probabilities ({', '.join(view.target_columns)})"
            f"{clip} for the test rows and write them to ./submission.csv."
        )
    if view.problem == "span":
        return f"Finally I will write the predicted `{col}` of each test row to ./submission.csv."
    if view.problem == "label":
        return f"Finally I will predict the `{col}` of each test row and save ./submission.csv."
    return f"Finally I will predict `{col}` for the test set and save ./submission.csv."


def plan_text(view, c, rng: random.Random) -> str:
    """3-5 sentences: features, model, (validation), submission, (why)."""
    sentences = [
        _features(view, c, rng),
        _model(c, rng),
        _validation(view, c, rng),
        _submission(view, c),
    ]
    if rng.random() < 0.5:
        sentences.insert(2, _WHY[c.model.family])
    return " ".join(s for s in sentences if s)
