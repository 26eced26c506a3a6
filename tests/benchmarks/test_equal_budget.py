"""benchmarks/experiments/equal_budget.py: RL's best so far (public selects, private reports), the budget, the
baselines' rows and the summary, on hand-made run dirs (no training, no policy)."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks" / "experiments"))
eb = importlib.import_module("equal_budget")
TASK = "rmsle-task"


def _s(t, score=None, private=None, valid=True, task=TASK):
    return {
        "task_id": task,
        "t": t,
        "valid": valid and score is not None,
        "score": score,
        "private_score": private,
    }


def test_rl_curve_selects_on_public_and_reports_private_in_finishing_order():
    samples = [
        _s(3.0, 0.05, 0.06),  # finishes third
        _s(1.0, None, valid=False),  # first: nothing valid yet
        _s(2.0, 0.07, 0.04),  # second: first valid
        _s(4.0, 0.06, 0.01),  # public worse than 0.05: not chosen despite its private 0.01
        _s(5.0, 0.01, 0.09, task="other"),  # another task: ignored
    ]
    curve = eb.rl_curve(samples, TASK, lower=True)
    assert curve["best_public"] == [None, 0.07, 0.05, 0.05]
    assert curve["best_private"] == [None, 0.04, 0.06, 0.06]
    assert curve["t"] == [1.0, 2.0, 3.0, 4.0]
    higher = eb.rl_curve(samples, TASK, lower=False)  # higher is better: 0.07 stays the best
    assert higher["best_private"] == [None, 0.04, 0.04, 0.04]


def test_a_sample_without_a_private_score_reports_its_public_one():
    curve = eb.rl_curve([_s(1.0, 0.05, None)], TASK, lower=True)
    assert curve["best_private"] == [0.05]


def test_rl_final_takes_the_closing_best_only_when_its_public_score_is_better():
    curve = {"best_public": [0.05], "best_private": [0.06], "t": [1.0]}
    assert eb.rl_final(curve, {"best_public": 0.04, "best_score": 0.07}, lower=True) == (0.07, 0.04)
    assert eb.rl_final(curve, {"best_public": 0.05, "best_score": 0.01}, lower=True) == (
        0.06,
        0.05,
    )  # a tie keeps training's
    assert eb.rl_final(curve, {"best_public": None, "best_score": None}, lower=True) == (0.06, 0.05)
    assert eb.rl_final(
        {"best_public": [None], "best_private": [None], "t": [1.0]},
        {"best_public": 0.2, "best_score": 0.3},
        lower=False,
    ) == (0.3, 0.2)


def test_the_budget_counts_the_tasks_training_samples_and_the_closing_k():
    samples = [_s(1.0), _s(2.0, valid=False), _s(3.0, task="other")]
    assert eb.budget(samples, TASK, 16) == 18


def _run(tmp_path: Path, seed: int, samples, closing_public, closing_private, k=2) -> Path:
    d = tmp_path / f"seed{seed}"
    d.mkdir()
    (d / "samples.jsonl").write_text("\n".join(json.dumps(s) for s in samples) + "\n")
    task = {
        "k": k,
        "best_public": closing_public,
        "best_score": closing_private,
        "lower_is_better": True,
    }
    (d / "report.json").write_text(
        json.dumps(
            {
                "seed": seed,
                "k": k,
                "initial": {"model": "/m"},
                "trained": {"per_seed": [{"tasks": {TASK: task}}]},
            }
        )
    )
    return d


def _eval(best, public, curve, elapsed):
    return {
        "per_seed": [
            {
                "tasks": {
                    TASK: {
                        "k": len(curve),
                        "best_score": best,
                        "best_public": public,
                        "best_vs_executions": curve,
                        "elapsed_s": elapsed,
                        "valid_frac": 0.5,
                    }
                }
            }
        ]
    }


def test_seed_rows_and_summary(tmp_path):
    d0 = _run(tmp_path, 0, [_s(1.0, 0.05, 0.06), _s(2.0, valid=False)], 0.06, 0.02)
    d1 = _run(tmp_path, 1, [_s(1.0, 0.04, 0.04), _s(9.0, 0.03, 0.05)], 0.02, 0.03)
    rows = eb.seed_rows(
        d0,
        _eval(0.07, 0.05, [None, 0.08, 0.07, 0.07], [1, 2, 3, 4]),
        _eval(0.05, 0.05, [0.09, 0.05, 0.05, 0.05], [1, 2, 3, 5]),
    )
    rows += eb.seed_rows(d1, _eval(0.03, 0.03, [0.03] * 4, [1, 2, 3, 4]), None)
    r0, r1 = rows
    # seed 0: training best 0.05 public / 0.06 private; the closing 0.06 public is worse: RL = 0.06
    assert (r0["rl_private"], r0["rl_public"], r0["budget_executions"]) == (0.06, 0.05, 4)
    assert r0["rl_curve"] == [0.06, 0.06, 0.06, 0.06]  # padded to N with the final result
    assert (r0["aide_private"], r0["aide_wall_s"], r0["initial_bon_private"]) == (0.07, 4, 0.05)
    # seed 1: the closing best (0.02 public) beats training's 0.03: RL = its private 0.03
    assert (r1["rl_private"], r1["rl_public"], r1["rl_wall_s"]) == (0.03, 0.02, 9.0)
    assert r1["initial_bon_private"] is None and r1["initial_bon_curve"] is None
    s = eb.summarise(rows)
    assert s["seeds"] == [0, 1] and s["direction"] == "lower_is_better"
    assert s["rl_private_mean"] == pytest.approx(0.045) and s["rl_private_se"] == pytest.approx(
        0.015
    )
    assert s["aide_private_mean"] == pytest.approx(0.05)
    assert (
        s["initial_bon_private_mean"] == pytest.approx(0.05) and s["initial_bon_private_se"] is None
    )
    # RL 0.06 vs AIDE 0.07 (lower is better: RL at least as good), 0.03 vs 0.03 (a tie counts)
    assert s["rl_at_least_aide_seeds"] == 2 and s["rl_at_least_aide_in_mean"] is True
    # RL 0.06 vs best-of-N 0.05: worse in the only seed that has it
    assert s["rl_at_least_initial_bon_seeds"] == 0 and s["initial_bon_paired_seeds"] == 1
    # paired: seed 0 only (0.06 vs 0.05), not RL's mean over both seeds (0.045) against 0.05
    assert s["rl_at_least_initial_bon_in_mean"] is False and s["aide_paired_seeds"] == 2


def test_main_aggregates_without_launching_and_writes_results(tmp_path):
    (tmp_path / "runs").mkdir()
    d = _run(tmp_path / "runs", 3, [_s(1.0, 0.05, 0.06)], None, None, k=1)
    (d / "equal_budget_aide.json").write_text(json.dumps(_eval(0.07, 0.05, [0.07, 0.07], [1, 2])))
    out = tmp_path / "out"
    assert (
        eb.main(
            [
                "--runs-dir",
                str(tmp_path / "runs"),
                "--seeds",
                "2",
                "--first-seed",
                "3",
                "--no-launch",
                "--out",
                str(out),
                "--name",
                "eb",
                "--chosen-on",
                "0,1,2",
            ]
        )
        == 0
    )
    result = json.loads((out / "eb.json").read_text())
    assert (
        result["summary"]["rl_private_mean"] == 0.06
        and result["summary"]["aide_private_mean"] == 0.07
    )
    assert result["selection"]["held_out"] is True and (out / "eb.png").is_file()


def test_main_refuses_an_empty_runs_dir(tmp_path, capsys):
    with pytest.raises(SystemExit):
        eb.main(["--runs-dir", str(tmp_path), "--no-launch", "--out", str(tmp_path)])
    assert "no finished runs" in capsys.readouterr().err


def test_an_unknown_baseline_is_refused_before_anything_runs(tmp_path, capsys):
    (tmp_path / "runs").mkdir()
    _run(tmp_path / "runs", 0, [_s(1.0, 0.05, 0.06)], None, None, k=1)
    with pytest.raises(SystemExit):
        eb.main(
            [
                "--runs-dir",
                str(tmp_path / "runs"),
                "--seeds",
                "1",
                "--methods",
                "mcts",
                "--out",
                str(tmp_path),
            ]
        )
    assert "unknown baseline 'mcts'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("method", "flags"),
    [("initial_bon", []), ("scratch_bon", ["--scratch-only"]), ("aide", ["--aide"])],
)
def test_each_baseline_launches_mlerl_eval_with_its_flag(tmp_path, monkeypatch, method, flags):
    seen = []
    monkeypatch.setattr(eb.subprocess, "run", lambda cmd, **kw: seen.append(cmd))
    eb.launch(tmp_path, "/policy", method, 4, 257)
    (cmd,) = seen
    assert cmd[1:] == [
        "eval", "--model", "/policy", "--run", str(tmp_path), "--k", "257", "--seeds", "1",
        "--first-seed", "4", "--out", str(tmp_path / f"equal_budget_{method}.json"), *flags,
    ]  # fmt: skip
