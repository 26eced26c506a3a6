"""Absurd but valid submissions, graded by the real graders, are rewarded above every failure.

The best a failed run can get is -10 + 0.1 * 7 = -9.3 (every marker reached). Each case below
is the worst valid prediction its metric family allows; the default (normalised) reward of its
public score must still beat -9.3, while a hostile non-finite submission stays a failure.
"""

import numpy as np
import pandas as pd
import pytest

from mlerl.bench import reference_scores
from mlerl.instrument import MARKERS, Reference, compute_reward
from mlerl.protocol import ExecStatus

BEST_FAILURE = -10.0 + 0.1 * len(MARKERS)
N = 40
IDS = [f"id{i:03d}" for i in range(N)]
BINARY = np.resize([0, 1], N)


def _nomad():
    ans = pd.DataFrame(
        {
            "id": range(1, N + 1),
            "formation_energy_ev_natom": np.linspace(0.05, 0.4, N),
            "bandgap_energy_ev": np.linspace(0.5, 5, N),
        }
    )
    sample = ans.assign(formation_energy_ev_natom=0.1779, bandgap_energy_ev=1.8892)
    return ans, sample, ans.assign(formation_energy_ev_natom=1e6, bandgap_energy_ev=1e6)


def _spooky():
    labels = np.resize(["EAP", "HPL", "MWS"], N)
    ans = pd.DataFrame({"id": IDS, **{c: (labels == c).astype(int) for c in ("EAP", "HPL", "MWS")}})
    sample = ans.assign(EAP=1 / 3, HPL=1 / 3, MWS=1 / 3)
    wrong = np.roll(
        labels, 1
    )  # full confidence in a wrong class: log loss ~ 34.5 (clipped at 1e-15)
    return ans, sample, ans.assign(**{c: (wrong == c).astype(float) for c in ("EAP", "HPL", "MWS")})


def _insults():
    ans = pd.DataFrame({"Comment": IDS, "Insult": BINARY})
    return ans, ans.assign(Insult=0.5), ans.assign(Insult=1.0 - BINARY)  # inverse ranking: AUC 0


def _dec():
    ans = pd.DataFrame({"Id": range(N), "Cover_Type": np.resize([1, 2, 3], N)})
    return ans, ans.assign(Cover_Type=2), ans.assign(Cover_Type=7)  # every label wrong: accuracy 0


def _essay():
    ans = pd.DataFrame({"essay_id": IDS, "score": np.resize([1, 2, 3, 4, 5, 6], N)})
    return ans, ans.assign(score=3), ans.assign(score=7 - ans.score)  # reversed: QWK -1


def _patent():
    ans = pd.DataFrame({"id": IDS, "score": np.linspace(0, 1, N)})
    return ans, ans.assign(score=0.5), ans.assign(score=-1e6 * ans.score)  # Pearson -1


def _tweet():
    ans = pd.DataFrame({"textID": IDS, "selected_text": [f"word{i}" for i in range(N)]})
    return ans, ans, ans.assign(selected_text="zzz")  # no word in common: Jaccard 0


CASES = {
    "nomad2018-predict-transparent-conductors": _nomad,
    "spooky-author-identification": _spooky,
    "detecting-insults-in-social-commentary": _insults,
    "tabular-playground-series-dec-2021": _dec,
    "learning-agency-lab-automated-essay-scoring-2": _essay,
    "us-patent-phrase-to-phrase-matching": _patent,
    "tweet-sentiment-extraction": _tweet,
}


def _reward(task, report, markers=()):
    ref = Reference(*reference_scores(task, report.baseline_score))
    return compute_reward(
        list(markers),
        ExecStatus.OK,
        report.public_score,
        report.valid_submission,
        task.lower_is_better,
        reference=ref if report.valid_submission else None,
    )


@pytest.mark.parametrize("task_id", sorted(CASES))
def test_absurd_valid_submission_beats_every_failure(grading, registry, task_id):
    ans, sample, absurd = CASES[task_id]()
    grading.answers(task_id, ans)
    task = registry.get(task_id)
    sample.to_csv(task.sample_submission_path, index=False)
    report = grading.grade(task_id, absurd)
    assert report.valid_submission, report.error
    result = _reward(task, report)
    assert result.case == "graded"
    assert BEST_FAILURE < result.reward <= 1.0, (report.public_score, result.reward)
    assert result.reward <= 0.0  # no better than the task's trivial baseline


def test_rmsle_61_is_rewarded_above_a_crash(grading, registry):
    """The issue's case: RMSLE ~61 got -61 under the raw reward, six times below a crash."""
    task_id = "nomad2018-predict-transparent-conductors"
    ans, sample, _ = _nomad()
    grading.answers(task_id, ans)
    task = registry.get(task_id)
    sample.to_csv(task.sample_submission_path, index=False)
    huge = ans.assign(formation_energy_ev_natom=np.exp(61.2), bandgap_energy_ev=np.exp(61.5))
    report = grading.grade(task_id, huge)
    assert report.public_score > 60
    assert -1.0 < _reward(task, report).reward < 0.0


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_predictions_stay_failures(grading, registry, bad):
    task_id = "detecting-insults-in-social-commentary"
    ans, _, _ = _insults()
    grading.answers(task_id, ans)
    report = grading.grade(task_id, ans.assign(Insult=bad))
    assert not report.valid_submission
    result = _reward(registry.get(task_id), report, MARKERS)
    assert result.case == "invalid_submission" and result.reward == pytest.approx(BEST_FAILURE)
