"""Render one solution program (plan + code) for a task from sampled design choices.

A program is a list of top-level chunks, each followed by the progress markers that the
paper's instrumentation prompt (C.3) would insert after it. `Program.code` joins the chunks;
`Program.instrumented` also emits `print("<marker>")` lines, so an instrumentation example
is exact by construction and removing those lines gives back `code` byte for byte.
A program with `mistake` set carries one realistic bug (see `MISTAKES`); `error` then holds
the terminal output it produces when the bug crashes the program (empty when it runs).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Any

from mlerl.embedded._families import Model, families_for, make_model
from mlerl.embedded._plans import plan_text
from mlerl.embedded._render import (
    features_chunk,
    fit_chunks,
    imports_chunk,
    multi_chunk,
    predict_chunk,
    write_chunk,
)
from mlerl.embedded._span import SPAN_FAMILIES, make_span_model, span_chunks, span_params
from mlerl.embedded._tasks import TaskView

MISTAKES = ("missing_import", "wrong_path", "wrong_column", "typo", "no_proba", "index")
_NAMES = (
    dict(
        train="train", test="test", X="X", y="y", Xt="X_test", model="model", sub="sub", pred="pred"
    ),
    dict(
        train="train_df",
        test="test_df",
        X="X_train",
        y="y_train",
        Xt="X_test",
        model="clf",
        sub="submission",
        pred="preds",
    ),
    dict(
        train="df_train",
        test="df_test",
        X="features",
        y="labels",
        Xt="test_features",
        model="estimator",
        sub="out",
        pred="p",
    ),
    dict(train="tr", test="te", X="Xtr", y="ytr", Xt="Xte", model="m", sub="sub_df", pred="yhat"),
)
_SCORING = {"binary": "roc_auc", "proba": "neg_log_loss", "label": "accuracy", "regression": "r2"}


@dataclass
class Choices:
    """Every design decision of one program; rendering is a pure function of these."""

    names: int
    path_style: int
    constants: bool
    features: str
    fill: str
    model: Model
    validation: str
    refit: bool
    train_score: bool
    write_style: int
    clip: bool
    seed: int
    budget: int
    params: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Program:
    task_id: str
    plan: str
    chunks: tuple[tuple[str, tuple[str, ...]], ...]
    family: str
    choices: Choices | Any
    """The design choices it was rendered from: `Choices`, or `_settings.Settings` for a
    settings-block program (not named here: `_settings` builds its programs with this class)."""
    mistake: str | None = None
    error: str = ""

    @property
    def correct(self) -> bool:
        return self.mistake is None

    @property
    def code(self) -> str:
        return "\n".join(chunk for chunk, _ in self.chunks) + "\n"

    @property
    def instrumented(self) -> str:
        lines = []
        for chunk, markers in self.chunks:
            lines.append(chunk)
            lines.extend(f'print("{m}")' for m in markers)
        return "\n".join(lines) + "\n"


def multi_target(view: TaskView) -> bool:
    return len(view.target_columns) > 1 and view.problem in ("binary", "regression")


def sample_choices(view: TaskView, rng: random.Random, styles: bool = True) -> Choices:
    """Draw the design of one program for `view`.

    `styles=False` fixes the coding style (variable names, path spelling, constants, how the
    CSV is written) and varies only what changes the score or the run time: model family and
    hyperparameters, features, validation, budget, seed."""
    budget = rng.choice([0, 0, 1, 1, 2])
    seed = rng.choice([0, 1, 7, 42, 2024])
    choices = _draw(view, rng, budget, seed)
    if not styles:
        choices = replace(choices, names=0, path_style=1, constants=False, write_style=0)
    return choices


def _draw(view: TaskView, rng: random.Random, budget: int, seed: int) -> Choices:
    if view.problem == "span":
        params = span_params(rng)
        model = make_span_model(rng.choice(SPAN_FAMILIES), rng, params)
        return Choices(
            names=rng.randrange(len(_NAMES)),
            path_style=rng.randrange(4),
            constants=rng.random() < 0.6,
            features="words",
            fill="",
            model=model,
            validation="none",
            refit=False,
            train_score=rng.random() < 0.4,
            write_style=rng.randrange(3),
            clip=False,
            seed=seed,
            budget=budget,
            params=params,
        )
    proba = view.problem in ("binary", "proba")
    family = rng.choice(families_for(view.problem, view.modality))
    model = make_model(family, view.problem, view.modality, rng, budget, seed, proba)
    if model.scaled and rng.random() < 0.15:
        model = replace(model, scaled=False)
    if view.modality == "text":
        features = rng.choice(["tfidf_word", "tfidf_word", "tfidf_char", "count"])
        params = {
            "ngram": rng.choice([1, 2, 2, 3]),
            "max_features": rng.choice([5000, 20000, 50000]),
        }
    elif view.modality == "image":
        features = rng.choice(["pixels", "pixels", "resize", "projections"])
        params = {"size": rng.choice([8, 12, 16])}
    else:
        features, params = rng.choice(["drop", "list", "list", "numeric", "rowstats"]), {}
    validation = "none" if multi_target(view) else rng.choice(["none", "holdout", "holdout", "cv"])
    return Choices(
        names=rng.randrange(len(_NAMES)),
        path_style=rng.randrange(4),
        constants=rng.random() < 0.6,
        features=features,
        fill=rng.choice(["", "", "zero", "median"]) if view.modality == "tabular" else "",
        model=model,
        validation=validation,
        refit=rng.random() < 0.6,
        train_score=not multi_target(view) and rng.random() < 0.3,
        write_style=rng.randrange(3),
        clip=rng.random() < 0.5,
        seed=seed,
        budget=budget,
        params=params,
    )


class _Ctx:
    """Names and literal spellings used while rendering one program."""

    def __init__(self, view: TaskView, c: Choices) -> None:
        self.view, self.c, self.n = view, c, _NAMES[c.names]
        q = lambda s: f'"{s}"'  # noqa: E731 - a one-line local helper reads best as a lambda
        self.ID = "ID_COL" if c.constants else q(view.id_column)
        self.LABEL = "TARGET" if c.constants else q(view.label_column)
        self.TEXT = "TEXT_COL" if c.constants else q(view.text_column or "text")
        cols = ", ".join(q(t) for t in view.target_columns)
        self.TARGETS = "TARGETS" if c.constants else f"[{cols}]"

    def path(self, name: str) -> str:
        return {
            0: f'"input/{name}"',
            1: f'"./input/{name}"',
            2: f'os.path.join(DATA_DIR, "{name}")',
            3: f'INPUT / "{name}"',
        }[self.c.path_style]


def render(view: TaskView, c: Choices) -> list[tuple[str, tuple[str, ...]]]:
    """The chunks of the correct program for choices `c`."""
    x = _Ctx(view, c)
    n = x.n
    body: list[tuple[str, tuple[str, ...]]] = []
    consts = _constants(x)
    if consts:
        body.append((consts, ()))
    load = (
        f"{n['train']} = pd.read_csv({x.path('train.csv')})\n"
        f"{n['test']} = pd.read_csv({x.path('test.csv')})"
    )
    body.append((load, ("loaded data",)))
    if view.problem == "span":
        body.extend(span_chunks(x))
    else:
        body.append((features_chunk(x), ()))
    if view.problem == "span":
        pass
    elif multi_target(view):
        body.append((multi_chunk(x), ("defined model", "trained model", "predicted test labels")))
    else:
        body.extend(fit_chunks(x))
        body.append((predict_chunk(x), ("predicted test labels",)))
    body.append((write_chunk(x), ()))
    text = "\n".join(chunk for chunk, _ in body)
    return [(imports_chunk(x, text), ("imported packages",)), *body]


def _constants(x: _Ctx) -> str:
    lines = []
    if x.c.path_style == 2:
        lines.append('DATA_DIR = "input"')
    if x.c.path_style == 3:
        lines.append('INPUT = Path("input")')
    if x.c.constants:
        v = x.view
        lines.append(f'ID_COL = "{v.id_column}"')
        lines.append(f'TARGET = "{v.label_column}"')
        if v.text_column and v.modality == "text":
            lines.append(f'TEXT_COL = "{v.text_column}"')
        if len(v.target_columns) > 1 or v.problem == "proba":
            lines.append("TARGETS = [" + ", ".join(f'"{t}"' for t in v.target_columns) + "]")
    return "\n".join(lines)


def generate_program(
    view: TaskView, rng: random.Random, choices: Choices | None = None, styles: bool = True
) -> Program:
    """A correct program for `view`; `styles` as in `sample_choices` (used only when `choices`
    is None). `_mistakes.with_mistake` turns one into a buggy one."""
    c = choices if choices is not None else sample_choices(view, rng, styles)
    chunks = render(view, c)
    plan = plan_text(view, c, random.Random(f"{view.id}:{c.seed}:{c.names}:{c.model.ctor}"))
    return Program(view.id, plan, tuple(chunks), c.model.family, c)
