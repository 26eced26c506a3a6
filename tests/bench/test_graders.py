"""The 12 graders: sample-submission oracles on small synthetic answers, and invalid cases."""

import math

import numpy as np
import pandas as pd
import pytest

INSULTS = "detecting-insults-in-social-commentary"
ESSAY = "learning-agency-lab-automated-essay-scoring-2"
PIZZA = "random-acts-of-pizza"
TWEET = "tweet-sentiment-extraction"
MAY = "tabular-playground-series-may-2022"
DEC = "tabular-playground-series-dec-2021"
PATENT = "us-patent-phrase-to-phrase-matching"
PLANT = "plant-pathology-2020-fgvc7"
LEAF = "leaf-classification"
NOMAD = "nomad2018-predict-transparent-conductors"
SPOOKY = "spooky-author-identification"
LMSYS = "lmsys-chatbot-arena"
PLANT_COLS = ["healthy", "multiple_diseases", "rust", "scab"]


def one_hot(ids, labels, classes, id_col="id"):
    frame = pd.DataFrame({id_col: ids})
    for c in classes:
        frame[c] = [int(lab == c) for lab in labels]
    return frame


def test_lmsys_uniform_is_log3(grading):
    ids = np.arange(30)
    grading.answers(
        LMSYS,
        one_hot(
            ids,
            np.resize(["winner_model_a", "winner_model_b", "winner_tie"], 30),
            ["winner_model_a", "winner_model_b", "winner_tie"],
        ),
    )
    sub = pd.DataFrame(
        {"id": ids, "winner_model_a": 1 / 3, "winner_model_b": 1 / 3, "winner_tie": 1 / 3}
    )
    # every row: -ln(1/3) = 1.0986123 -> 1.09861
    assert grading.grade(LMSYS, sub).score == 1.09861
    bad = sub.assign(winner_tie=0.5)  # rows sum to 1.1667: round(6) != 1
    assert grading.grade(LMSYS, bad).valid_submission is False
    assert grading.grade(LMSYS, sub.drop(columns="winner_tie")).valid_submission is False
    assert grading.grade(LMSYS, sub.iloc[:-1]).valid_submission is False


def test_leaf_uniform_99_classes(grading):
    classes = [f"Species_{i:02d}" for i in range(99)]
    ids = np.arange(1, 199)
    grading.answers(LEAF, one_hot(ids, np.resize(classes, len(ids)), classes))
    sub = pd.DataFrame({"id": ids, **{c: 1 / 99 for c in classes}})
    # -ln(1/99) = ln 99 = 4.5951199 -> 4.59512
    assert grading.grade(LEAF, sub).score == 4.59512
    assert grading.grade(LEAF, sub.assign(extra=0)).valid_submission is False  # exact column set
    assert (
        grading.grade(LEAF, sub.assign(Species_00=2 / 99)).valid_submission is False
    )  # sum 1.0101


def test_spooky_priors_oracle(grading):
    # Kaggle's sample priors p = (EAP .403493, HPL .287808, MWS .308698). With 21 EAP, 22 HPL and
    # 2 MWS answers: -(21 ln .403493 + 22 ln .287808 + 2 ln .308698) / 45
    # = (21 * 0.907576 + 22 * 1.245483 + 2 * 1.175441) / 45 = 1.0846769 -> 1.08468
    labels = ["EAP"] * 21 + ["HPL"] * 22 + ["MWS"] * 2
    ids = [f"id{i:05d}" for i in range(45)]
    grading.answers(SPOOKY, one_hot(ids, labels, ["EAP", "HPL", "MWS"]))
    sub = pd.DataFrame({"id": ids, "EAP": 0.403493, "HPL": 0.287808, "MWS": 0.308698})
    assert grading.grade(SPOOKY, sub).score == 1.08468
    assert grading.grade(SPOOKY, sub.assign(x=1)).valid_submission is False  # shape
    assert grading.grade(SPOOKY, sub.assign(EAP=0.5)).valid_submission is False  # sums


def test_auc_tasks_constant_is_half_and_checks(grading):
    for task, id_col, target in (
        (PIZZA, "request_id", "requester_received_pizza"),
        (MAY, "id", "target"),
        (INSULTS, "Comment", "Insult"),
    ):
        ids = [f"t3_{i}" for i in range(20)] if task != MAY else list(range(20))
        grading.answers(task, pd.DataFrame({id_col: ids, target: [0, 1] * 10}))
        sub = pd.DataFrame({id_col: ids, target: 0.5})
        assert grading.grade(task, sub).score == 0.5  # all ties: AUC 1/2
        assert grading.grade(task, sub.assign(**{target: 1.5})).valid_submission is False
        assert grading.grade(task, sub.assign(**{target: "yes"})).valid_submission is False
        assert grading.grade(task, sub.iloc[:-1]).valid_submission is False
        shifted = sub.assign(**{id_col: [*ids[:-1], "other" if task != MAY else 999]})
        assert grading.grade(task, shifted).valid_submission is False
        perfect = pd.DataFrame({id_col: ids[::-1], target: [1, 0] * 10})  # ids in any order
        assert grading.grade(task, perfect).score == 1.0


def test_insults_allows_date_column(grading):
    comments = [f'"comment {i}"' for i in range(6)]
    grading.answers(
        INSULTS, pd.DataFrame({"Insult": [0, 1] * 3, "Date": "2012", "Comment": comments})
    )
    sub = pd.DataFrame({"Insult": [0.1, 0.9] * 3, "Date": "x", "Comment": comments})
    assert grading.grade(INSULTS, sub).score == 1.0


def test_patent_constant_pearson_is_nan_and_valid(grading):
    ids = [f"p{i}" for i in range(10)]
    grading.answers(PATENT, pd.DataFrame({"id": ids, "score": np.linspace(0, 1, 10)}))
    rep = grading.grade(PATENT, pd.DataFrame({"id": ids, "score": 0.25}))
    assert rep.valid_submission is True and math.isnan(rep.score)
    assert rep.any_medal is False and rep.above_median is False
    assert grading.grade(PATENT, pd.DataFrame({"id": ids, "value": 0.25})).valid_submission is False


def test_nomad_sample_oracle_and_positional(grading):
    # formation answers equal the sample's 0.1779 (RMSLE 0); bandgap answers y satisfy
    # ln(1 + y) - ln(1 + 1.8892) = 0.42348, so the mean is (0 + 0.42348) / 2 = 0.21174.
    y = 2.8892 * math.exp(0.42348) - 1
    grading.answers(
        NOMAD,
        pd.DataFrame(
            {"id": [1, 2, 3], "formation_energy_ev_natom": 0.1779, "bandgap_energy_ev": y}
        ),
    )
    sub = pd.DataFrame(
        {"id": [1, 2, 3], "formation_energy_ev_natom": 0.1779, "bandgap_energy_ev": 1.8892}
    )
    assert grading.grade(NOMAD, sub).score == 0.21174
    # ids are ignored: rows compare by position
    assert grading.grade(NOMAD, sub.assign(id=[9, 8, 7])).score == 0.21174
    assert grading.grade(NOMAD, sub.assign(bandgap_energy_ev=-0.1)).valid_submission is False
    assert grading.grade(NOMAD, sub.iloc[:2]).valid_submission is False


def test_tps_dec_all_twos(grading):
    # 153 of 271 answers are class 2: accuracy 153 / 271 = 0.564576 -> 0.56458
    labels = [2] * 153 + [1] * 100 + [3] * 18
    grading.answers(DEC, pd.DataFrame({"Id": np.arange(271), "Cover_Type": labels}))
    sub = pd.DataFrame({"Id": np.arange(271)[::-1], "Cover_Type": 2})
    assert grading.grade(DEC, sub).score == 0.56458
    assert grading.grade(DEC, sub.rename(columns={"Id": "id"})).valid_submission is False


def test_essay_constant_is_zero_and_float_labels(grading):
    ids = [f"e{i}" for i in range(12)]
    scores = [1, 2, 3, 4, 5, 6] * 2
    grading.answers(ESSAY, pd.DataFrame({"essay_id": ids, "score": scores}))
    # a constant prediction gives O = E (kappa 0)
    assert grading.grade(ESSAY, pd.DataFrame({"essay_id": ids, "score": 3})).score == 0.0
    assert grading.grade(ESSAY, pd.DataFrame({"essay_id": ids, "score": scores})).score == 1.0
    halves = pd.DataFrame({"essay_id": ids, "score": [s + 0.5 for s in scores]})
    assert grading.grade(ESSAY, halves).valid_submission is False  # continuous vs classes
    whole = pd.DataFrame({"essay_id": ids, "score": [float(s) for s in scores]})
    assert grading.grade(ESSAY, whole).score == 1.0  # 3.0 is the class 3
    assert (
        grading.grade(ESSAY, pd.DataFrame({"essay_id": ids[:3], "score": 1})).valid_submission
        is False
    )


def test_tweet_jaccard_and_empty_division(grading):
    grading.answers(
        TWEET, pd.DataFrame({"textID": ["a", "b"], "selected_text": ["so happy", "bad"]})
    )
    sub = pd.DataFrame({"textID": ["b", "a"], "selected_text": ["bad day", "SO happy"]})
    # a: 1.0, b: |{bad}| / |{bad, day}| = 0.5 -> mean 0.75
    assert grading.grade(TWEET, sub).score == 0.75
    # NaN prediction counts as "": Jaccard 0 against a non-empty answer
    assert grading.grade(TWEET, "textID,selected_text\na,\nb,bad\n").score == 0.5
    grading.answers(TWEET, pd.DataFrame({"textID": ["a", "b"], "selected_text": ["", "bad"]}))
    assert grading.grade(TWEET, "textID,selected_text\na,\nb,bad\n").valid_submission is False


def test_plant_constant_and_exact_columns(grading):
    ids = [f"Test_{i}" for i in range(8)]
    labels = np.resize(PLANT_COLS, 8)
    grading.answers(PLANT, one_hot(ids, labels, PLANT_COLS, id_col="image_id"))
    sub = pd.DataFrame({"image_id": ids, **{c: 0.25 for c in PLANT_COLS}})
    assert grading.grade(PLANT, sub).score == 0.5
    assert grading.grade(PLANT, sub.assign(extra=1)).valid_submission is False
    assert grading.grade(PLANT, sub.drop(columns="scab")).valid_submission is False
