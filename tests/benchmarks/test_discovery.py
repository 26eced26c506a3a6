"""benchmarks/experiments/discovery.py: equal executions, the probe's summary and the paired
differences, on hand-made records (no training, no policy)."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks" / "experiments"))
dv = importlib.import_module("discovery")
fig = importlib.import_module("_discovery_figures")


def _r(score=None, private=None, step=0, kind="scratch"):
    return {"valid": score is not None, "score": score, "private_score": private, "step": step,
            "kind": kind}  # fmt: skip


def test_the_best_of_the_first_n_executions_only():
    records = [_r(), _r(0.06, 0.07, 1), _r(0.05, 0.09, 2, "improve"), _r(0.01, 0.01, 3)]
    got = fig.best_of_first(records, 3, lower=True)  # the fourth is past the budget
    assert (got["private"], got["public"], got["step"], got["kind"]) == (0.09, 0.05, 2, "improve")
    assert got["curve"] == [None, 0.07, 0.09] and got["executions"] == 3
    assert fig.best_of_first(records, 10, lower=False)["public"] == 0.06
    assert fig.best_of_first([_r()], 5, lower=True)["private"] is None


def test_probe_summary_reads_the_best_decisions_first_and_last():
    task = "standin-materials-rmsle-tiny"
    keys = fig.probe_keys(task)
    assert keys[0] == "LOG_TARGET=True" and len(keys) == 3
    metrics = [
        {"stream": "probe", "step": 3, f"{task}/parsed": 1.0, f"{task}/LOG_TARGET=True": 0.75},
        {"step": 0, f"probe/{task}/parsed": 1.0, f"probe/{task}/MODEL=lightgbm": 0.25},  # old
        {"step": 1, "loss/policy": 0.0},
    ]
    got = fig.probe_summary(metrics, task)
    assert got["first_step"] == 0 and got["last_step"] == 3
    assert got["first"] == {keys[0]: 0.0, keys[1]: 0.25, keys[2]: 0.0}
    assert got["last"][keys[0]] == 0.75
    assert fig.probe_keys("unknown-task") == ()


def test_paired_differences_are_positive_when_the_arm_is_better():
    # RMSLE: arm 0.05, 0.06, None against 0.07, 0.05, 0.04 -> differences +0.02, -0.01 (seed 3
    # has no result for the arm): mean +0.005, s.e. 0.015
    got = fig.paired([0.05, 0.06, None], [0.07, 0.05, 0.04], lower=True)
    assert got["n"] == 2 and got["better_in"] == 1 and not got["beyond_2se"]
    assert got["mean"] == pytest.approx(0.005) and got["se"] == pytest.approx(0.015)
    auc = fig.paired([0.9, 0.8, 0.85], [0.8, 0.7, 0.8], lower=False)
    assert auc["mean"] == pytest.approx(0.25 / 3) and auc["beyond_2se"]


def test_step_size_logp_gain_is_the_mean_change_of_log_probability():
    ss = importlib.import_module("step_size")
    # per-response mean log-probs before (-1.0, -2.0) and after (-1.5, -2.1): -0.3
    assert ss.logp_gain([-1.0, -2.0], [-1.5, -2.1]) == pytest.approx(-0.3)
    assert set(ss.DEFAULT_VARIANTS["epochs100_mb8"]) == {"ppo_epochs", "minibatches"}


def test_a_baseline_added_later_reads_the_rl_runs_from_the_earlier_results(tmp_path):
    """The RL runs are gone: their figures come back from the earlier results file, the new
    baseline's from its file, and the rows pair them; what was read back is listed."""
    task = "standin-materials-rmsle-tiny"
    arm = {"private": 0.08, "public": 0.079, "curve": [0.1, 0.08], "probe": {}}
    earlier = {
        "task": task, "direction": "lower", "executions": 2, "commit": "abc", "command": "old",
        "arms": {"default": {"3": arm, "4": {**arm, "private": 0.06}}},
        "baselines": {"aide": {"3": {"private": 0.07, "curve": [0.09, 0.07]}, "4": None}},
    }  # fmt: skip
    out = tmp_path / "results"
    out.mkdir()
    (out / "study.json").write_text(json.dumps(earlier))
    for seed, best in ((3, 0.075), (4, 0.07)):
        d = tmp_path / "runs" / "baselines" / f"seed{seed}"
        d.mkdir(parents=True)
        summary = {"best_score": best, "best_public": best, "best_vs_executions": [best, best]}
        (d / "initial_bon.json").write_text(
            json.dumps({"per_seed": [{"tasks": {task: {**summary, "valid_frac": 0.5}}}]})
        )
    argv = ["--runs-dir", str(tmp_path / "runs"), "--seeds", "3,4", "--arm", "default=",
            "--baselines", "initial_bon,aide", "--no-launch", "--out", str(out), "--name", "study"]  # fmt: skip
    assert dv.main(argv) == 0
    result = json.loads((out / "study.json").read_text())
    assert [(r["rl_private"], r["bon_mix_private"], r["aide_private"]) for r in result["rows"]] == [
        (0.08, 0.075, 0.07),
        (0.06, 0.07, None),
    ]
    assert result["kept"] == ["arms/default/seed3", "arms/default/seed4", "baselines/aide/seed3"]
    assert result["earlier_commands"] == [{"commit": "abc", "command": "old"}]
    pair = result["paired"]["default - initial_bon"]  # lower is better: +0.01 - 0.005 over 2
    assert pair["n"] == 2 and pair["better_in"] == 1 and pair["mean"] == pytest.approx(0.0025)


def test_best_at_a_smaller_budget_reads_each_curve():
    arms = {3: {"curve": [None, 0.09, 0.07]}, 4: {"curve": [0.1, 0.08]}, 5: None}
    assert fig.best_at(arms, [3, 4, 5], 1) == [None, 0.1, None]  # seed 3: nothing valid yet
    assert fig.best_at(arms, [3, 4, 5], 3) == [0.07, None, None]  # seed 4 ran only 2


def test_pairs_at_smaller_budgets_come_from_the_same_curves(tmp_path):
    """``--at 1``: the arm against the baseline after one execution, beside the pair at the
    study's budget; a budget past the study's executions is refused."""
    task = "standin-materials-rmsle-tiny"
    out = tmp_path / "results"
    out.mkdir()
    earlier = {
        "task": task, "direction": "lower", "executions": 2,
        "arms": {"default": {"3": {"private": 0.08, "curve": [0.1, 0.08], "probe": {}},
                             "4": {"private": 0.06, "curve": [0.09, 0.06], "probe": {}}}},
        "baselines": {"aide": {"3": {"private": 0.07, "curve": [0.075, 0.07]},
                               "4": {"private": 0.07, "curve": [0.07, 0.07]}}},
    }  # fmt: skip
    (out / "study.json").write_text(json.dumps(earlier))
    argv = ["--runs-dir", str(tmp_path / "runs"), "--seeds", "3,4", "--arm", "default=",
            "--baselines", "aide", "--no-launch", "--out", str(out), "--name", "study"]  # fmt: skip
    assert dv.main([*argv, "--at", "1"]) == 0
    result = json.loads((out / "study.json").read_text())
    # at 2 (the budget): 0.07 - 0.08 = -0.01 and 0.07 - 0.06 = +0.01 -> mean 0, better in 1
    at2 = result["paired"]["default - aide"]
    assert at2["mean"] == pytest.approx(0.0) and at2["better_in"] == 1
    # at 1: 0.075 - 0.1 = -0.025 and 0.07 - 0.09 = -0.02 -> mean -0.0225, s.e. 0.0025
    at1 = result["paired_at"]["1"]["default - aide"]
    assert at1["mean"] == pytest.approx(-0.0225) and at1["se"] == pytest.approx(0.0025)
    assert at1["better_in"] == 0 and at1["n"] == 2
    for bad in ("3", "0"):
        with pytest.raises(SystemExit):
            dv.main([*argv, "--at", bad])


def test_another_task_joins_the_results_rows_probe_and_paired():
    result = {"task": "a", "rows": [{"task": "a", "seed": 3}], "probe": {"a": {"default": {}}}}
    first = {"first": {"K=1": 0.1}, "last": {"K=1": 0.5}}
    other = {
        "task": "b", "executions": 240, "direction": "higher", "commit": "c", "command": "cmd",
        "rows": [{"task": "b", "seed": 3}, {"task": "b", "seed": 4}],
        "probe": {"default": {"3": first}},  # written before the probe was keyed by task
        "paired": {"default - aide": {"mean": 0.01}},
    }  # fmt: skip
    dv.join_task(result, other, "b.json")
    assert [(r["task"], r["seed"]) for r in result["rows"]] == [("a", 3), ("b", 3), ("b", 4)]
    assert result["probe"]["b"] == {"default": {"3": first}}
    assert result["other_tasks"]["b"]["paired"] == {"default - aide": {"mean": 0.01}}
    assert result["other_tasks"]["b"]["source"] == "b.json"
    with pytest.raises(ValueError, match="already in these results"):
        dv.join_task(result, {**other, "probe": {"b": {}}}, "again.json")


def test_launch_trains_only_the_named_arms_and_rejects_an_unknown_one(tmp_path, monkeypatch):
    """A new arm beside one read back from the earlier results: only the new arm's runs are
    launched (the first arm's runs are gone, not to be trained again)."""
    launched: list[Path] = []
    monkeypatch.setattr(dv, "run_jobs", lambda jobs, _: launched.extend(d for _, _, d in jobs))
    out = tmp_path / "results"
    out.mkdir()
    arm = {"private": 0.08, "public": 0.079, "curve": [0.1, 0.08], "probe": {}}
    earlier = {"task": "standin-materials-rmsle-tiny", "direction": "lower", "executions": 2,
               "arms": {"default": {"3": arm}}, "baselines": {}}  # fmt: skip
    (out / "study.json").write_text(json.dumps(earlier))
    argv = ["--runs-dir", str(tmp_path / "runs"), "--seeds", "3", "--arm", "default=",
            "--arm", "new=learner.lr=1e-3", "--out", str(out), "--name", "study"]  # fmt: skip
    assert dv.main([*argv, "--launch", "new"]) == 0
    assert launched == [tmp_path / "runs" / "new" / "seed3"]
    result = json.loads((out / "study.json").read_text())
    assert result["arms"]["default"]["3"]["private"] == 0.08 and result["arms"]["new"]["3"] is None
    with pytest.raises(SystemExit):
        dv.main([*argv, "--launch", "nwe"])


def test_arms_that_started_from_different_policies_are_named():
    """The first probe is the initial policy's seeded answers: equal on every arm of one build.
    Seed 4's arms differ (one read back from a run on another build); seed 3's agree; seed 5
    has one arm only, and a probe that did not start at update 0 says nothing."""
    same, other = {"K=1": 0.375, "K=2": 0.0625}, {"K=1": 0.375, "K=2": 0.15625}

    def arm(first, step=0):
        return {"probe": {"first": first, "first_step": step}}

    arms = {
        "default": {"3": arm(same), "4": arm(same), "5": arm(same)},
        "new": {3: arm(same), 4: arm(other), 5: None},
        "late": {3: arm(other, step=5)},
    }
    assert fig.unlike_starts(arms) == ["4"]
    assert fig.unlike_starts({"default": arms["default"]}) == []
    real = json.loads((REPO / "benchmarks/results/discovery_entstrata_heldout.json").read_text())
    assert fig.unlike_starts(real["arms"]) == []  # the default read back, the new arm run later


def test_the_best_known_combination_is_counted_by_kind_and_quarter():
    def program(log, model, products):
        return f"LOG_TARGET = {log}\nMODEL = {model!r}\nPRODUCTS = {products!r}\nX = load()\n"

    basal = ["lattice_vector_1_ang*lattice_vector_2_ang"]
    best = program(True, "lightgbm", basal)
    records = [
        {**_r(0.08, 0.09), "code": program(True, "lightgbm", [])},  # no product: not counted
        {**_r(0.07, 0.06, kind="improve"), "code": best},
        {**_r(), "code": best},  # made it, did not run
        {**_r(0.05, 0.07), "code": program(False, "lightgbm", basal)},
        {**_r(), "code": "MODEL = ("},  # does not parse
        {**_r(0.06, 0.05), "code": best},
        {**_r(0.06, 0.08), "code": best},
        {**_r(0.06, 0.07)},  # no code at all
    ]
    keys = fig.probe_keys("standin-materials-rmsle-tiny")
    got = fig.combination(records, keys, lower=True)
    # 8 records, quarters of 2: hits at 1 (q0), 2 (q1), 5 and 6 (q2, q3)
    assert got["executions"] == 4 and got["valid"] == 3 and got["first"] == 1
    assert got["by_kind"] == {"improve": 1, "scratch": 3}
    assert got["by_quarter"] == [1, 1, 1, 1]
    assert got["best_private"] == 0.05
    assert fig.combination(records, keys, lower=False)["best_private"] == 0.08
    assert fig.combination(records, (), lower=True) == {}
    assert fig.combination(records[:1], keys, lower=True)["first"] is None
