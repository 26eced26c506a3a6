"""RUN_DIR/best/<task>/: the run's best solution per task, chosen on the public score."""

import json

import msgspec

from mlerl.learner import read_best
from mlerl.learner._best import BestSolutions, task_dirname
from mlerl.learner._samples import SampleLog
from mlerl.protocol import ExecStatus, PromptKind


def _valid(make_sample, seq, public, private, *, lower=True, submission=b"id,y\n1,2\n", **kw):
    signed = -public if lower else public
    return msgspec.structs.replace(
        make_sample(seq=seq, task_id=kw.pop("task_id", "materials")),
        valid_submission=True,
        score=public,
        private_score=private,
        reward=0.5,
        reward_parts={"score": signed, "normalised": 0.5},
        plan=f"plan {seq}",
        code=f"print({seq})",
        output_tail=f"out {seq}",
        submission=submission,
        **kw,
    )


def test_the_best_public_score_is_kept_whole_and_replaced_only_when_beaten(tmp_path, make_sample):
    log = SampleLog(tmp_path, method="m", seed=0)
    failed = msgspec.structs.replace(
        make_sample(seq=0, task_id="materials", status=ExecStatus.PROGRAM_ERROR), reward=-9.8
    )
    first = _valid(make_sample, 1, 0.060, 0.070)
    # lower is better: 0.055 public beats 0.060 even though its private score is worse
    better = _valid(make_sample, 2, 0.055, 0.080, prompt_kind=PromptKind.IMPROVE, parent_id="a0:1")
    tie = _valid(make_sample, 3, 0.055, 0.050)  # equal public: the first one stays
    worse = _valid(make_sample, 4, 0.070, 0.040)
    for step, s in enumerate((failed, first, better, tie, worse)):
        log.add(s, step)
        log.flush()
    log.close()
    best = read_best(tmp_path)["materials"]
    assert best["sample_id"] == "a0:2" and best["kind"] == "improve" and best["parent_id"] == "a0:1"
    assert (best["public_score"], best["private_score"], best["step"]) == (0.055, 0.080, 2)
    assert best["executions"] == 3  # the failure counts as an execution
    d = tmp_path / "best" / "materials"
    assert (d / "program.py").read_text() == "print(2)"
    assert (d / "plan.md").read_text() == "plan 2"
    assert (d / "output.txt").read_text() == "out 2"
    assert (d / "submission.csv").read_bytes() == b"id,y\n1,2\n"
    assert sorted(p.name for p in (tmp_path / "best").iterdir()) == ["materials"]  # no leftovers


def test_higher_is_better_tasks_and_a_missing_submission_are_said(tmp_path, make_sample):
    keeper = BestSolutions(tmp_path)
    auc = _valid(make_sample, 1, 0.80, 0.79, lower=False, task_id="insults", submission=None)
    assert keeper.offer(auc, {"step": 0, "t": 1.0})
    assert not keeper.offer(
        _valid(make_sample, 2, 0.70, 0.9, lower=False, task_id="insults"), {"step": 1}
    )
    info = read_best(tmp_path)["insults"]
    assert info["public_score"] == 0.80 and info["submission"] is None
    assert "not sent" in info["submission_note"]
    assert not (tmp_path / "best" / "insults" / "submission.csv").exists()
    # infra errors are not executions of the program and never a best
    infra = msgspec.structs.replace(
        make_sample(seq=3, task_id="insults", status=ExecStatus.INFRA_ERROR)
    )
    assert not keeper.offer(infra, {}) and keeper.executions["insults"] == 2


def test_a_resumed_run_keeps_its_best_and_counts_on(tmp_path, make_sample):
    log = SampleLog(tmp_path, method="m", seed=0)
    log.add(_valid(make_sample, 1, 0.060, 0.070), 0)
    log.add(_valid(make_sample, 2, 0.065, 0.070), 0)
    log.flush()
    log.close()
    # a crash between the two renames of a later best left the old directory aside
    d = tmp_path / "best"
    (d / "materials").rename(d / ".materials.old")
    (d / ".materials.tmp").mkdir()
    resumed = SampleLog(tmp_path, method="m", seed=0)
    assert resumed.best.best == {"materials": -0.060}
    assert resumed.best.executions == {"materials": 2}
    assert sorted(p.name for p in d.iterdir()) == ["materials"]
    resumed.add(_valid(make_sample, 3, 0.062, 0.01), 1)  # not better on public
    resumed.add(_valid(make_sample, 4, 0.050, 0.06), 1)
    resumed.flush()
    info = json.loads((d / "materials" / "solution.json").read_text())
    assert info["sample_id"] == "a0:4" and info["executions"] == 4


def test_task_ids_become_safe_directory_names():
    assert task_dirname("standin-materials-rmsle-tiny") == "standin-materials-rmsle-tiny"
    assert task_dirname("../etc/passwd") == "_etc_passwd"
    assert task_dirname("") == "_"
