"""Offline stand-in tasks built from data inside PyPI wheels or from our seeded generators.

Each builder is a pure function of (rows, seed): it returns the train / test / answers /
sample-submission frames (and images for image tasks). ``rows`` None means the full set; the
``-tiny`` variants pass at most 500 rows in total. Test labels go only to ``answers``; ids are
shuffled integers or random hex strings so that neither order nor id reveals a label.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import pandas as pd
from sklearn import datasets
from sklearn.model_selection import train_test_split

from mlerl.bench import _synthetic as syn

SEED = 0
TINY_ROWS = 400
"""Rows of a ``-tiny`` variant (train + test) unless `TINY_SIZES` says otherwise."""
TEST_SIZE = 0.25
TINY_SIZES: dict[str, tuple[int, float]] = {
    "standin-materials-rmsle": (1200, 0.5),
    "standin-insults-auc": (1200, 0.5),
    "standin-cancer-auc": (569, 0.5),  # all rows of the set
    "standin-diabetes-pearson": (442, 0.5),  # all rows of the set
    "standin-digits-colauc": (720, 0.5),  # all images of digits 0-3
}
"""(rows, test share) of the ``-tiny`` variants whose public part (half the test rows) could
not tell their programs apart at 400 rows and a quarter held out: measured with
`mlerl.bench._noise` (``benchmarks/experiments/standin_noise.py``,
docs/experiments/embedded-testbed.md)."""


DATA_VERSION: dict[str, int] = {
    "standin-materials-rmsle": 3,
    "standin-insults-auc": 3,
    "standin-cancer-auc": 2,
    "standin-diabetes-pearson": 2,
    "standin-digits-colauc": 2,
}
"""Bumped when a stand-in's data or sizes change: task.yaml records it (``extra``) and a
prepared dir built from another version is rebuilt (``TaskSpec.is_prepared``)."""


def tiny_size(base: str) -> tuple[int, float]:
    """(rows, test share) of ``base``'s ``-tiny`` variant."""
    return TINY_SIZES.get(base, (TINY_ROWS, TEST_SIZE))


@dataclass
class Built:
    train: pd.DataFrame
    test: pd.DataFrame
    answers: pd.DataFrame
    sample: pd.DataFrame
    images: dict[str, np.ndarray] = field(default_factory=dict)
    """File name under images/ -> uint8 (H, W) array."""


def _subsample(frame: pd.DataFrame, rows: int | None, seed: int, strat: str | None) -> pd.DataFrame:
    if rows is None or rows >= len(frame):
        return frame.reset_index(drop=True)
    keep, _ = train_test_split(
        frame, train_size=rows, random_state=seed, stratify=frame[strat] if strat else None
    )
    return keep.reset_index(drop=True)


def _split(
    frame: pd.DataFrame, seed: int, strat: str | None, test_size: float = TEST_SIZE
) -> tuple:
    tr, te = train_test_split(
        frame, test_size=test_size, random_state=seed, stratify=frame[strat] if strat else None
    )
    return tr.reset_index(drop=True), te.reset_index(drop=True)


def _shuffled_ids(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed + 7).permutation(n) + 10_000


def _sk_frame(loader: Callable, target: str) -> pd.DataFrame:
    bunch = loader()
    cols = [str(c).replace(" ", "_").replace("(", "").replace(")", "") for c in bunch.feature_names]
    frame = pd.DataFrame(bunch.data, columns=cols)
    frame[target] = bunch.target
    return frame


def cancer_auc(rows: int | None, seed: int = SEED, test_size: float = TEST_SIZE) -> Built:
    frame = _subsample(_sk_frame(datasets.load_breast_cancer, "target"), rows, seed, "target")
    frame.insert(0, "id", _shuffled_ids(len(frame), seed))
    tr, te = _split(frame, seed, "target", test_size)
    return Built(tr, te.drop(columns="target"), te[["id", "target"]], te[["id"]].assign(target=0.5))


def diabetes_pearson(rows: int | None, seed: int = SEED, test_size: float = TEST_SIZE) -> Built:
    frame = _subsample(_sk_frame(datasets.load_diabetes, "target"), rows, seed, None)
    frame.insert(0, "id", _shuffled_ids(len(frame), seed))
    tr, te = _split(frame, seed, None, test_size)
    return Built(
        tr,
        te.drop(columns="target"),
        te[["id", "target"]],
        te[["id"]].assign(target=float(tr["target"].mean().round(3))),
    )


WINE_CLASSES = ["class_0", "class_1", "class_2"]


def wine_logloss(rows: int | None, seed: int = SEED, test_size: float = TEST_SIZE) -> Built:
    frame = _sk_frame(datasets.load_wine, "label")
    frame = _subsample(frame, rows, seed, "label")
    frame.insert(0, "id", _shuffled_ids(len(frame), seed))
    frame["class"] = [WINE_CLASSES[i] for i in frame.pop("label")]
    tr, te = _split(frame, seed, "class", test_size)
    answers = te[["id"]].copy()
    for c in WINE_CLASSES:
        answers[c] = (te["class"] == c).astype(int)
    sample = te[["id"]].copy()
    for c in WINE_CLASSES:
        sample[c] = 1 / 3
    return Built(tr, te.drop(columns="class"), answers, sample)


def _digit_images(
    frame_ids: list[str], images: np.ndarray, noise: float = 0.0, seed: int = SEED
) -> dict[str, np.ndarray]:
    """uint8 PNG pixels (digits pixels are 0..16); ``noise`` adds seeded Gaussian pixel noise
    and a random one-pixel shift per image, to keep the task from saturating."""
    rng = np.random.default_rng(seed + 17)
    images = images.astype(float)
    if noise:
        shifts = rng.integers(-1, 2, size=(len(images), 2))
        images = np.stack(
            [np.roll(img, tuple(s), axis=(0, 1)) for img, s in zip(images, shifts, strict=True)]
        )
        images = images + rng.normal(0, noise, images.shape)
    scaled = np.clip(images * 16, 0, 255).astype(np.uint8)
    return {f"{i}.png": img for i, img in zip(frame_ids, scaled, strict=True)}


def digits_accuracy(rows: int | None, seed: int = SEED, test_size: float = TEST_SIZE) -> Built:
    bunch = datasets.load_digits()
    frame = pd.DataFrame({"row": np.arange(len(bunch.target)), "label": bunch.target})
    frame = _subsample(frame, rows, seed, "label")
    rng = np.random.default_rng(seed + 11)
    frame.insert(0, "id", [f"img_{h:06x}" for h in rng.choice(16**6, len(frame), replace=False)])
    images = _digit_images(frame["id"].tolist(), bunch.images[frame["row"].to_numpy()])
    frame = frame.drop(columns="row")
    tr, te = _split(frame, seed, "label", test_size)
    return Built(tr, te[["id"]], te[["id", "label"]], te[["id"]].assign(label=0), images)


DIGIT_COLUMNS = ["zero", "one", "two", "three"]


def digits_colauc(rows: int | None, seed: int = SEED, test_size: float = TEST_SIZE) -> Built:
    bunch = datasets.load_digits(n_class=4)
    frame = pd.DataFrame({"row": np.arange(len(bunch.target)), "label": bunch.target})
    frame = _subsample(frame, rows, seed, "label")
    rng = np.random.default_rng(seed + 13)
    frame.insert(
        0, "image_id", [f"Img_{h:05d}" for h in rng.choice(10**5, len(frame), replace=False)]
    )
    images = _digit_images(
        frame["image_id"].tolist(), bunch.images[frame["row"].to_numpy()], noise=6.0, seed=seed
    )
    for k, c in enumerate(DIGIT_COLUMNS):
        frame[c] = (frame["label"] == k).astype(int)
    tr, te = _split(frame.drop(columns="row"), seed, "label", test_size)
    sample = te[["image_id"]].copy()
    for c in DIGIT_COLUMNS:
        sample[c] = 0.25
    return Built(
        tr.drop(columns="label"), te[["image_id"]], te[["image_id", *DIGIT_COLUMNS]], sample, images
    )


def essays_qwk(rows: int | None, seed: int = SEED, test_size: float = TEST_SIZE) -> Built:
    frame = syn.essays(rows or 3000, seed)
    tr, te = _split(frame, seed, "score", test_size)
    return Built(
        tr,
        te[["essay_id", "full_text"]],
        te[["essay_id", "score"]],
        te[["essay_id"]].assign(score=3),
    )


def tweets_jaccard(rows: int | None, seed: int = SEED, test_size: float = TEST_SIZE) -> Built:
    frame = syn.tweets(rows or 4000, seed)
    tr, te = _split(frame, seed, "sentiment", test_size)
    return Built(
        tr,
        te[["textID", "text", "sentiment"]],
        te[["textID", "selected_text"]],
        te[["textID"]].assign(selected_text=te["text"]),
    )


def insults_auc(rows: int | None, seed: int = SEED, test_size: float = TEST_SIZE) -> Built:
    frame = syn.insults(rows or 3000, seed)
    tr, te = _split(frame, seed, "Insult", test_size)
    return Built(tr, te[["id", "Comment"]], te[["id", "Insult"]], te[["id"]].assign(Insult=0.5))


MATERIAL_TARGETS = ["formation_energy_ev_natom", "bandgap_energy_ev"]


def materials_rmsle(
    rows: int | None, seed: int = SEED, test_size: float = TEST_SIZE, **generator: float
) -> Built:
    """``generator``: `_synthetic.materials`'s options (a task.yaml's ``extra.generator``)."""
    frame = syn.materials(rows or 3000, seed, **generator)
    tr, te = _split(frame, seed, None, test_size)
    te = te.sort_values("id").reset_index(drop=True)  # positional grading: keep a stable order
    sample = te[["id"]].assign(formation_energy_ev_natom=0.1779, bandgap_energy_ev=1.8892)
    return Built(tr, te.drop(columns=MATERIAL_TARGETS), te[["id", *MATERIAL_TARGETS]], sample)


BUILDERS: dict[str, Callable[..., Built]] = {
    "standin-cancer-auc": cancer_auc,
    "standin-digits-accuracy": digits_accuracy,
    "standin-essays-qwk": essays_qwk,
    "standin-diabetes-pearson": diabetes_pearson,
    "standin-tweets-jaccard": tweets_jaccard,
    "standin-wine-logloss": wine_logloss,
    "standin-materials-rmsle": materials_rmsle,
    "standin-digits-colauc": digits_colauc,
    "standin-insults-auc": insults_auc,
}


def builder_for(task_id: str) -> tuple[Callable[[int | None, int], Built], int | None] | None:
    """(builder, rows) for a stand-in id or its ``-tiny`` variant; None for other ids. The
    builder takes (rows, seed) and holds out the variant's test share."""
    if task_id in BUILDERS:
        return BUILDERS[task_id], None
    base = task_id.removesuffix("-tiny")
    if task_id.endswith("-tiny") and base in BUILDERS:
        rows, test_size = tiny_size(base)
        return partial(BUILDERS[base], test_size=test_size), rows
    return None
