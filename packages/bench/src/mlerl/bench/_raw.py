"""Preparing the paper's 12 Kaggle tasks from a user-supplied raw directory (MLE-bench's splits).

Input: the unzipped Kaggle competition files. Output: ``public/`` (train, test without labels,
sample submission) and ``private/`` (answers), named as MLE-bench names them so the graders and
an existing mlebench install agree. Split rules: ``train_test_split(train, test_size=0.1,
random_state=0)`` except detecting-insults (Kaggle's labelled test set), random-acts-of-pizza
(test_size = len(test) / (len(train) + len(test))) and tps-may-2022 (test_size=100_000, ids
renumbered). Public pizza data loses ``giver_username_if_known`` (it leaks the label).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from mlerl.bench._task import TaskError, TaskSpec


def _read(raw: Path, name: str) -> pd.DataFrame:
    path = raw / name
    if not path.is_file():
        raise TaskError(f"raw file {path} is missing")
    return pd.read_json(path) if name.endswith(".json") else pd.read_csv(path)


def _split(frame: pd.DataFrame, test_size: float | int = 0.1) -> tuple[pd.DataFrame, pd.DataFrame]:
    tr, te = train_test_split(frame, test_size=test_size, random_state=0)
    return tr.reset_index(drop=True), te.reset_index(drop=True)


Out = tuple[dict[str, pd.DataFrame], dict[str, pd.DataFrame]]  # public files, private files


def _simple(task: TaskSpec, raw: Path, sample_value: Callable[[pd.DataFrame], dict]) -> Out:
    """Split train.csv; test drops the targets; answers = id + targets."""
    tr, te = _split(_read(raw, "train.csv"))
    cols = [task.id_column, *task.target_columns]
    sample = te[[task.id_column]].assign(**sample_value(tr))
    return (
        {
            "train.csv": tr,
            "test.csv": te.drop(columns=list(task.target_columns)),
            task.files["sample_submission"]: sample,
        },
        {task.files["answers"]: te[cols]},
    )


def _one_hot(task: TaskSpec, raw: Path, label: str, drop: list[str] | None = None) -> Out:
    """Split train.csv with a label column; answers one-hot over all classes (sorted)."""
    full = _read(raw, "train.csv")
    classes = sorted(full[label].astype(str).unique())
    tr, te = _split(full)
    answers = te[[task.id_column]].copy()
    sample = te[[task.id_column]].copy()
    for c in classes:
        answers[c] = (te[label].astype(str) == c).astype(int)
        sample[c] = 1.0 / len(classes)
    test = te.drop(columns=[label, *(drop or [])])
    return (
        {"train.csv": tr, "test.csv": test, task.files["sample_submission"]: sample},
        {task.files["answers"]: answers},
    )


def _insults(task: TaskSpec, raw: Path) -> Out:
    train = _read(raw, "train.csv")
    labelled = _read(raw, "test_with_solutions.csv")
    answers = labelled[["Insult", "Date", "Comment"]]
    test = labelled[["Date", "Comment"]]
    return (
        {
            "train.csv": train[["Insult", "Date", "Comment"]],
            "test.csv": test,
            "sample_submission_null.csv": test.assign(Insult=0)[["Insult", "Date", "Comment"]],
        },
        {"test.csv": answers},
    )


def _pizza(task: TaskSpec, raw: Path) -> Out:
    train, test_raw = _read(raw, "train.json"), _read(raw, "test.json")
    tr, te = _split(train, test_size=len(test_raw) / (len(train) + len(test_raw)))
    keep = [c for c in test_raw.columns if c != "giver_username_if_known"]
    answers = te[["request_id", "requester_received_pizza"]].astype(
        {"requester_received_pizza": int}
    )
    return (
        {
            "train.json": tr,
            "test.json": te[keep],
            "sampleSubmission.csv": te[["request_id"]].assign(requester_received_pizza=0),
        },
        {"test.csv": answers},
    )


def _tps_may(task: TaskSpec, raw: Path) -> Out:
    full = _read(raw, "train.csv")
    tr, te = _split(full, test_size=min(100_000, len(full) // 2))
    tr["id"] = np.arange(len(tr))
    te["id"] = np.arange(len(tr), len(tr) + len(te))
    return (
        {
            "train.csv": tr,
            "test.csv": te.drop(columns="target"),
            "sample_submission.csv": te[["id"]].assign(target=0.5),
        },
        {"test.csv": te[["id", "target"]]},
    )


def _tweets(task: TaskSpec, raw: Path) -> Out:
    tr, te = _split(_read(raw, "train.csv"))
    return (
        {
            "train.csv": tr,
            "test.csv": te.drop(columns="selected_text"),
            "sample_submission.csv": te[["textID"]].assign(selected_text=""),
        },
        {"test.csv": te[["textID", "selected_text", "text", "sentiment"]]},
    )


def _lmsys(task: TaskSpec, raw: Path) -> Out:
    tr, te = _split(_read(raw, "train.csv"))
    winners = list(task.target_columns)
    hidden = [c for c in ("model_a", "model_b", *winners) if c in te.columns]
    return (
        {
            "train.csv": tr,
            "test.csv": te.drop(columns=hidden),
            "sample_submission.csv": te[["id"]].assign(**dict.fromkeys(winners, 1 / 3)),
        },
        {"answers.csv": te[["id", *winners]]},
    )


PREPARERS: dict[str, Callable[[TaskSpec, Path], Out]] = {
    "detecting-insults-in-social-commentary": _insults,
    "learning-agency-lab-automated-essay-scoring-2": lambda t, r: _simple(
        t, r, lambda tr: {"score": 1}
    ),
    "random-acts-of-pizza": _pizza,
    "tweet-sentiment-extraction": _tweets,
    "tabular-playground-series-may-2022": _tps_may,
    "tabular-playground-series-dec-2021": lambda t, r: _simple(t, r, lambda tr: {"Cover_Type": 2}),
    "us-patent-phrase-to-phrase-matching": lambda t, r: _simple(t, r, lambda tr: {"score": 0.0}),
    "plant-pathology-2020-fgvc7": lambda t, r: _simple(
        t, r, lambda tr: dict.fromkeys(t.target_columns, 0.25)
    ),
    "leaf-classification": lambda t, r: _one_hot(t, r, "species"),
    "nomad2018-predict-transparent-conductors": lambda t, r: _simple(
        t, r, lambda tr: {"formation_energy_ev_natom": 0.1779, "bandgap_energy_ev": 1.8892}
    ),
    "spooky-author-identification": lambda t, r: _one_hot(t, r, "author"),
    "lmsys-chatbot-arena": _lmsys,
}


def prepare_raw(task: TaskSpec, raw: Path, public: Path, private: Path) -> None:
    """Write ``public`` and ``private`` for a real task from Kaggle's raw files in ``raw``."""
    if task.id not in PREPARERS:
        raise TaskError(f"no raw preparer for {task.id}")
    public_files, private_files = PREPARERS[task.id](task, raw)
    public.mkdir(parents=True, exist_ok=True)
    private.mkdir(parents=True, exist_ok=True)
    private.chmod(0o700)  # answers: unreadable by the sandbox uid even if a path leaked
    for name, frame in public_files.items():
        if name.endswith(".json"):
            frame.to_json(public / name, orient="records")
        else:
            frame.to_csv(public / name, index=False)
    for name, frame in private_files.items():
        frame.to_csv(private / name, index=False)
    if (raw / "images").is_dir():
        shutil.copytree(raw / "images", public / "images")
