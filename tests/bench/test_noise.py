"""The public part's bootstrap (`mlerl.bench._noise`): hand-derived figures and behaviour."""

import math
import warnings

import numpy as np
import pandas as pd
import pytest

from mlerl.bench import Registry, prepare
from mlerl.bench._grade import load_answers
from mlerl.bench._noise import paired_se, public_noise, resolved_share
from mlerl.bench._reference import load_public


def test_paired_se_and_resolved_share_by_hand():
    # differences 1, 3, 1, 3: mean 2, sample SD sqrt(4/3)
    assert paired_se(
        np.array([2.0, 4.0, 2.0, 4.0]), np.array([1.0, 1.0, 1.0, 1.0])
    ) == pytest.approx(math.sqrt(4 / 3))
    assert paired_se(np.array([1.0, np.nan, 2.0]), np.array([0.0, 0.0, 0.0])) == pytest.approx(
        math.sqrt(0.5)
    )
    pairs = [("a", "b", 0.3, 0.1, 0.0), ("a", "c", 0.1, 0.1, 0.0), ("b", "c", -0.25, 0.1, 0.0)]
    assert resolved_share(pairs) == pytest.approx(2 / 3)  # 0.3 > 0.2 and 0.25 > 0.2; 0.1 is not
    assert math.isnan(resolved_share([]))


@pytest.fixture(scope="module")
def materials(tmp_path_factory):
    data = tmp_path_factory.mktemp("noise")
    prepare("standin-materials-rmsle-tiny", data)
    task = Registry.load(data_dir=data).get("standin-materials-rmsle-tiny")
    train, test = load_public(task)
    return task, train, test, load_answers(task)


def test_identical_submissions_have_no_paired_noise_and_differ_from_a_constant(materials):
    task, train, test, answers = materials
    sample = pd.read_csv(task.sample_submission_path)
    truth = answers.copy()
    report = public_noise(
        task, {"truth": truth, "copy": truth.copy(), "sample": sample}, answers, draws=50
    )
    assert report.public_rows + report.private_rows == len(answers)
    (_, _, d_copy, se_copy, _), (_, _, d_sample, se_sample, p_sample), _ = report.pairs
    assert d_copy == 0 and se_copy == 0  # the same predictions on every draw
    assert report.scores["truth"][0] == 0 and report.scores["truth"][2] == 0
    assert d_sample < -2 * se_sample and p_sample < 0  # truth beats the constant, on both parts
    assert report.order_kept == 1.0


def _ridge(train, test, onehot: bool, log: bool) -> pd.DataFrame:
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    targets = ["formation_energy_ev_natom", "bandgap_energy_ev"]

    def feats(df):
        x = df.drop(columns=["id", *[t for t in targets if t in df]])
        return pd.get_dummies(x, columns=["spacegroup"], dtype=float) if onehot else x

    sub = test[["id"]].copy()
    for col in targets:
        y = np.log1p(train[col]) if log else train[col]
        pred = make_pipeline(StandardScaler(), Ridge()).fit(feats(train), y).predict(feats(test))
        sub[col] = np.clip(np.expm1(pred) if log else pred, 0, None)
    return sub


def test_the_default_task_rewards_its_decisions_beyond_public_noise(materials):
    """The default stand-in is built so that encoding the spacegroup as a category and
    modelling log1p of the targets each improve a linear model by more than twice the paired
    bootstrap SE of its public part, and the private part agrees."""
    task, train, test, answers = materials
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        subs = {
            "plain": _ridge(train, test, False, False),
            "onehot": _ridge(train, test, True, False),
            "log": _ridge(train, test, False, True),
        }
    report = public_noise(task, subs, answers, draws=100)
    for a, b, diff, se, private in report.pairs[:2]:  # plain vs onehot, plain vs log
        assert diff > 2 * se and private > 0, (a, b, diff, se, private)
