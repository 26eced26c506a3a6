"""Public and private leaderboards: the deterministic split and the two scores a grade returns."""

import dataclasses

import numpy as np
import pandas as pd
import pytest

from mlerl.bench import grade_submission
from mlerl.bench._metrics import columnwise_rmsle, roc_auc
from mlerl.bench._split import _seed, public_mask, reference_scores, split_answers
from mlerl.bench._task import TaskError

INSULTS = "detecting-insults-in-social-commentary"
NOMAD = "nomad2018-predict-transparent-conductors"
DEC = "tabular-playground-series-dec-2021"


def _labels(n_pos: int, n_neg: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "Comment": [f"c{i:03d}" for i in range(n_pos + n_neg)],
            "Insult": [1] * n_pos + [0] * n_neg,
        }
    )


def test_mask_is_deterministic_per_task_and_stratified():
    ans = _labels(40, 60)
    a = public_mask(INSULTS, "auc", ans, "Comment", ("Insult",), 0.5)
    b = public_mask(INSULTS, "auc", ans.copy(), "Comment", ("Insult",), 0.5)
    other = public_mask("another-task", "auc", ans, "Comment", ("Insult",), 0.5)
    assert (a == b).all() and not (a == other).all()
    # each label stratum split in half: 20 of 40 positives and 30 of 60 negatives are public
    assert a[:40].sum() == 20 and a[40:].sum() == 30
    # 0.3 of the 40 positives = 12, of the 60 negatives = 18
    c = public_mask(INSULTS, "auc", ans, "Comment", ("Insult",), 0.3)
    assert c[:40].sum() == 12 and c[40:].sum() == 18
    assert public_mask(INSULTS, "auc", ans, "Comment", ("Insult",), 1.0).all()


def test_parts_are_disjoint_and_cover_every_row(registry):
    task = registry.get(DEC)
    ans = pd.DataFrame({"Id": range(50), "Cover_Type": np.resize([1, 2, 3], 50)})
    parts = split_answers(task, ans)
    assert set(parts.public).isdisjoint(parts.private)
    assert sorted([*parts.public, *parts.private]) == list(range(50))
    assert parts.split == "public 0.5"
    # every class is in both parts
    assert set(ans.Cover_Type[parts.public]) == set(ans.Cover_Type[parts.private]) == {1, 2, 3}


def test_grade_returns_both_scores_and_the_full_score(grading, registry, tmp_path):
    ans = _labels(10, 10)
    grading.answers(INSULTS, ans)
    scores = np.linspace(0.05, 0.95, 20)[::-1].copy()
    scores[[0, 15]] = scores[[15, 0]]  # a few mistakes, so the parts differ
    sub = pd.DataFrame({"Comment": ans.Comment, "Insult": scores})
    report = grading.grade(INSULTS, sub)
    task = registry.get(INSULTS)
    parts = split_answers(task, ans)
    y, s = ans.Insult.to_numpy(), sub.Insult.to_numpy()
    assert report.score == round(roc_auc(y, s), 5)  # MLE-bench's score: all answers
    assert report.public_score == round(roc_auc(y[parts.public], s[parts.public]), 5)
    assert report.private_score == round(roc_auc(y[parts.private], s[parts.private]), 5)
    assert report.split == "public 0.5"
    # a shuffled submission aligns by id in each part
    shuffled = sub.sample(frac=1.0, random_state=1)
    again = grading.grade(INSULTS, shuffled)
    assert (again.public_score, again.private_score) == (report.public_score, report.private_score)
    full = grade_submission(
        dataclasses.replace(task, public_fraction=1.0), tmp_path / f"sub-{INSULTS}.csv"
    )
    assert full.public_score == full.private_score == full.score and full.split == "full"
    assert set(report.to_json()) >= {"public_score", "private_score", "baseline_score", "split"}


def test_positional_grader_splits_by_position(grading, registry):
    n = 12
    ans = pd.DataFrame(
        {
            "id": range(1, n + 1),
            "formation_energy_ev_natom": np.linspace(0.1, 0.3, n),
            "bandgap_energy_ev": np.linspace(1, 4, n),
        }
    )
    grading.answers(NOMAD, ans)
    sub = ans.assign(formation_energy_ev_natom=0.2, bandgap_energy_ev=2.0)
    report = grading.grade(NOMAD, sub)
    parts = split_answers(registry.get(NOMAD), ans)
    cols = ["formation_energy_ev_natom", "bandgap_energy_ev"]
    want = columnwise_rmsle(ans[cols].to_numpy()[parts.public], sub[cols].to_numpy()[parts.public])
    assert report.public_score == round(want, 5) and len(parts.public) == 6


def test_tiny_answer_set_falls_back_to_all_answers(grading):
    ans = _labels(1, 3)  # one positive: no part of a split can hold both classes
    grading.answers(INSULTS, ans)
    report = grading.grade(
        INSULTS, pd.DataFrame({"Comment": ans.Comment, "Insult": [0.9, 0.1, 0.2, 0.3]})
    )
    assert report.split.startswith("full: ") and "one class" in report.split
    assert report.public_score == report.private_score == report.score == 1.0


def test_invalid_submission_has_no_part_scores(grading):
    grading.answers(INSULTS, _labels(5, 5))
    report = grading.grade(INSULTS, pd.DataFrame({"Comment": ["x"], "Insult": [0.5]}))
    assert (
        not report.valid_submission and report.public_score is None and report.private_score is None
    )


def test_bad_fraction_is_refused(registry):
    with pytest.raises(TaskError, match="public_fraction"):
        dataclasses.replace(registry.get(INSULTS), public_fraction=0.0)


def test_reference_scores(registry):
    insults, nomad = registry.get(INSULTS), registry.get(NOMAD)
    assert reference_scores(insults, 0.5) == (0.5, 1.0)
    assert reference_scores(insults, float("nan")) == (0.5, 1.0)  # chance AUC
    assert reference_scores(nomad, 0.21174) == (0.21174, 0.0)
    # no usable baseline and no chance value: one unit worse than the optimum 0
    assert reference_scores(nomad, None) == (1.0, 0.0)
    assert reference_scores(registry.get(DEC), 1.0) == (0.0, 1.0)  # a perfect sample: unit below


def _per_row_mask(task_id: str, strata: np.ndarray, fraction: float) -> np.ndarray:
    """The split drawn row by row (what public_mask must equal when every key is unique)."""
    rng = np.random.default_rng(_seed(task_id))
    mask = np.zeros(len(strata), dtype=bool)
    for value in sorted(set(strata.tolist()), key=str):
        rows = rng.permutation(np.flatnonzero(strata == value))
        k = min(max(round(fraction * len(rows)), 1), len(rows) - 1)
        mask[rows[:k]] = True
    return mask


def test_unique_keys_draw_the_same_rows_as_a_per_row_split():
    ans = _labels(37, 63).sample(frac=1.0, random_state=3).reset_index(drop=True)
    for fraction in (0.3, 0.5):
        want = _per_row_mask(INSULTS, ans.Insult.astype(str).to_numpy(), fraction)
        assert (public_mask(INSULTS, "auc", ans, "Comment", ("Insult",), fraction) == want).all()


def _repeated_comments() -> pd.DataFrame:
    # 30 rows over 19 distinct comments: "c00".."c05" appear 2-4 times, some with both labels,
    # as the real task's comment texts can ("You are an idiot" is in its answers more than once)
    keys = [f"c{i:02d}" for i in range(19)] + [
        "c00",
        "c00",
        "c01",
        "c02",
        "c03",
        "c03",
        "c03",
        "c04",
        "c05",
        "c05",
        "c01",
    ]
    labels = [i % 2 for i in range(19)] + [1, 0, 1, 0, 1, 1, 0, 0, 1, 0, 1]
    return pd.DataFrame({"Comment": keys, "Insult": labels})


def test_rows_sharing_a_key_go_to_the_same_part(registry):
    ans = _repeated_comments()
    parts = split_answers(registry.get(INSULTS), ans)
    public_keys, private_keys = set(ans.Comment[parts.public]), set(ans.Comment[parts.private])
    assert public_keys.isdisjoint(private_keys)
    assert sorted([*parts.public, *parts.private]) == list(range(len(ans)))
    assert parts.split == "public 0.5"


def test_repeated_keys_grade_on_each_part_as_on_the_full_answers(grading, registry):
    """detecting-insults keys rows by comment text: a submission MLE-bench scores on the full
    answers (sorted by key, repeated keys paired in file order) is scored on each part too."""
    ans = _repeated_comments()
    grading.answers(INSULTS, ans)
    scores = np.linspace(0.9, 0.1, len(ans))
    sub = pd.DataFrame({"Comment": ans.Comment, "Insult": scores})
    report = grading.grade(INSULTS, sub)
    assert report.valid_submission, report.error
    parts = split_answers(registry.get(INSULTS), ans)
    y = ans.Insult.to_numpy()
    assert report.score == round(roc_auc(y, scores), 5)
    assert report.public_score == round(roc_auc(y[parts.public], scores[parts.public]), 5)
    assert report.private_score == round(roc_auc(y[parts.private], scores[parts.private]), 5)
