"""benchmarks/experiments/duration_ablation.py: aggregation of hand-made run dirs, and its argument errors.

No training is launched: the run dirs (config.yaml, samples.jsonl, metrics.jsonl, report.json,
started_at, .hydra/config.yaml) are written here for 2 methods x 2 seeds, with numbers whose
means are easy to check by hand. With two seeds the standard error of a mean is |a - b| / 2.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "experiments" / "duration_ablation.py"
AUC, LOSS = "standin-cancer-auc-tiny", "standin-wine-logloss-tiny"
UPDATES = 2  # second half = policy versions >= 1

# (policy_version, status, duration_s, reward, valid) per run
SAMPLES = {
    ("none", 0): [
        (0, "ok", 2.0, 0.5, True),
        (0, "not_run", 0.0, -10.0, False),
        (1, "ok", 1.0, 0.6, True),
        (1, "ok", 1.0, 0.4, True),
        (2, "ok", 1.0, 0.8, True),
    ],
    ("none", 1): [
        (0, "ok", 4.0, 0.7, True),
        (0, "program_error", 2.0, -1.0, False),
        (1, "ok", 3.0, 0.5, True),
    ],
    ("paper", 0): [
        (0, "ok", 2.0, 0.5, True),
        (1, "ok", 4.0, 0.9, True),
        (1, "ok", 6.0, 0.7, True),
        (2, "ok", 6.0, 1.0, True),
    ],
    ("paper", 1): [
        (0, "not_run", 0.0, -10.0, False),
        (1, "ok", 5.0, 0.8, True),
        (2, "ok", 7.0, 0.9, True),
        (2, "timeout", 9.0, -1.0, False),
    ],
}
# trained policy per task: (best, mean); the initial policy gets (0.5, 0.4) and (1.0, 1.2)
TRAINED = {
    ("none", 0): {AUC: (0.80, 0.70), LOSS: (0.5, 0.6)},
    ("none", 1): {AUC: (0.90, 0.80), LOSS: (0.7, 0.8)},
    ("paper", 0): {AUC: (0.95, 0.90), LOSS: (0.4, 0.5)},
    ("paper", 1): {AUC: (0.97, 0.92), LOSS: (0.6, None)},
}
TRAIN_S = {("none", 0): 30.0, ("none", 1): 50.0, ("paper", 0): 40.0, ("paper", 1): 44.0}
JOB_S = {("none", 0): 100.0, ("none", 1): 120.0, ("paper", 0): 110.0, ("paper", 1): 130.0}


def _task(best, mean, lower):
    return {
        "k": 2,
        "best_score": best,
        "mean_score": mean,
        "valid_frac": 1.0 if mean is not None else 0.5,
        "lower_is_better": lower,
    }


def _write_run(root: Path, method: str, seed: int) -> Path:
    run = root / f"learner.duration_weighting={method},seed={seed}"
    (run / ".hydra").mkdir(parents=True)
    (run / "config.yaml").write_text(
        f"seed: {seed}\neval_samples: 2\nlearner:\n  duration_weighting: {method}\n"
        f"  max_updates: {UPDATES}\n"
    )
    (run / "samples.jsonl").write_text(
        "".join(
            json.dumps(
                {
                    "method": f"duration={method}",
                    "seed": seed,
                    "step": v,
                    "task_id": AUC,
                    "score": reward if valid else None,  # a valid sample's reward is its AUC
                    "valid": valid,
                    "duration_s": dur,
                    "reward": reward,
                    "policy_version": v,
                    "status": status,
                    "kind": "scratch",
                    "t": 1.0,
                    "sample_id": f"actor-0:{i}",
                }
            )
            + "\n"
            for i, (v, status, dur, reward, valid) in enumerate(SAMPLES[method, seed])
        )
    )
    t0 = 1000.0
    (run / "started_at").write_text(repr(t0))
    rows = [
        {
            "time": t0 + 5,
            "stream": "learner",
            "step": 1,
            "batch/duration_mean": 1.0 + seed,
            "batch/reward_mean": -1.0,
            "batch/valid_frac": 0.5,
        },
        {"time": t0 + 7, "stream": "actor/actor-0", "step": 9, "x": 1.0},  # not the learner's
        {
            "time": t0 + TRAIN_S[method, seed],
            "stream": "learner",
            "step": 2,
            "batch/duration_mean": 3.0,
            "batch/reward_mean": 0.0,
            "batch/valid_frac": 1.0,
        },
    ]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    trained = {t: _task(b, m, t == LOSS) for t, (b, m) in TRAINED[method, seed].items()}
    initial = {AUC: _task(0.5, 0.4, False), LOSS: _task(1.0, 1.2, True)}
    report = {
        "k": 2,
        "seed": seed,
        "initial": {"per_seed": [{"seed": seed, "tasks": initial}]},
        "trained": {"per_seed": [{"seed": seed, "tasks": trained}]},
    }
    (run / "report.json").write_text(json.dumps(report))
    (run / ".hydra" / "config.yaml").write_text(
        f"seed: {seed}\n"
    )  # Hydra writes it when the job starts
    os.utime(run / ".hydra" / "config.yaml", (900.0, 900.0))
    os.utime(run / "report.json", (900.0 + JOB_S[method, seed],) * 2)
    return run


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120, cwd=REPO
    )


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    for method, seed in SAMPLES:
        _write_run(root, method, seed)
    return root


def _ms(x):  # (mean, se, n)
    return x["mean"], x["se"], x["n"]


def test_aggregates_hand_made_runs(runs_dir: Path, tmp_path: Path):
    out = tmp_path / "out"
    proc = _run("--no-launch", "--runs-dir", str(runs_dir), "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((out / "duration_ablation.json").read_text())
    assert (out / "duration_ablation.png").stat().st_size > 1000
    assert result["launch"] is None and result["config"]["updates_in_runs"] == [UPDATES]
    assert len(result["runs"]) == 4
    approx = lambda v: pytest.approx(v, rel=1e-12, abs=1e-12)  # noqa: E731

    # one run: none, seed 0
    run = next(r for r in result["runs"] if (r["method"], r["seed"]) == ("none", 0))
    v0 = run["per_version"][
        "0"
    ]  # one program ran for 2 s; the other wrote none (counts 0 in duration_s)
    assert (v0["n"], v0["n_ran"], v0["duration_ran_s"], v0["duration_s"], v0["valid_frac"]) == (
        2,
        1,
        2.0,
        1.0,
        0.5,
    )
    assert v0["reward"] == approx((0.5 - 10.0) / 2)
    assert run["windows"]["all"]["duration_ran_s"] == approx((2 + 1 + 1 + 1) / 4)
    assert run["windows"]["all"]["reward"] == approx((0.5 - 10 + 0.6 + 0.4 + 0.8) / 5)
    assert run["windows"]["second_half"]["n"] == 3
    assert set(run["per_update"]) == {"1", "2"}  # the actor stream is not the learner's
    assert run["per_update"]["1"]["duration_s"] == 1.0
    assert run["wall"] == {"train_s": approx(30.0), "job_s": approx(100.0)}

    none, paper = result["methods"]["none"], result["methods"]["paper"]
    assert none["seeds"] == paper["seeds"] == [0, 1]
    # per version, mean +- s.e. over seeds; version 2 of `none` exists in seed 0 only
    pv = none["per_version"]
    assert _ms(pv["0"]["duration_ran_s"]) == (approx(2.5), approx(0.5), 2)  # seeds: 2.0, 3.0
    assert _ms(pv["0"]["duration_s"]) == (approx(2.0), approx(1.0), 2)  # seeds: 1.0, 3.0
    assert _ms(pv["0"]["reward"]) == (approx(-2.45), approx(2.3), 2)  # seeds: -4.75, -0.15
    assert _ms(pv["1"]["duration_ran_s"]) == (approx(2.0), approx(1.0), 2)  # seeds: 1.0, 3.0
    assert _ms(pv["2"]["duration_ran_s"]) == (1.0, None, 1)
    assert _ms(paper["per_version"]["0"]["duration_ran_s"]) == (
        2.0,
        None,
        1,
    )  # seed 1 ran nothing at v0
    assert _ms(none["per_update"]["1"]["duration_s"]) == (approx(1.5), approx(0.5), 2)

    # second half (versions >= 1): execution time seeds none 1.0, 3.0; paper 16/3, 7.0
    sh = none["windows"]["second_half"], paper["windows"]["second_half"]
    assert _ms(sh[0]["duration_ran_s"]) == (approx(2.0), approx(1.0), 2)
    assert _ms(sh[1]["duration_ran_s"]) == (approx(37 / 6), approx(5 / 6), 2)
    assert _ms(sh[0]["reward"]) == (approx(0.55), approx(0.05), 2)  # seeds: 0.6, 0.5
    assert _ms(sh[1]["reward"]) == (approx(0.55), approx(1.9 / 6), 2)  # seeds: 2.6/3, 0.7/3
    assert _ms(sh[1]["valid_frac"]) == (approx(5 / 6), approx(1 / 6), 2)  # seeds: 1, 2/3

    d = result["difference"]["windows"]["second_half"]
    assert d["duration_ran_s"]["diff"] == approx(25 / 6)
    assert d["duration_ran_s"]["se"] == approx(math.sqrt(61) / 6)
    assert d["duration_ran_s"]["verdict"].startswith("paper higher, beyond 2 s.e.")
    assert d["reward"]["diff"] == approx(0.0) and d["reward"]["verdict"].startswith("within noise")

    # windows by policy version, U = 2: first quarter = version 0, last quarter = version 1
    # (version 2 is past the run); scores = mean AUC of the valid samples, per task
    assert run["windows"]["first_quarter"]["n"] == 2 and run["windows"]["last_quarter"]["n"] == 2
    assert run["scores"]["first_quarter"] == {AUC: 0.5} and run["scores"]["last_quarter"] == {
        AUC: approx(0.5)
    }
    assert run["scores"]["all"] == {AUC: approx((0.5 + 0.6 + 0.4 + 0.8) / 4)}
    paper_lq = paper["scores"]["last_quarter"][AUC]  # seeds: (0.9 + 0.7) / 2 = 0.8, 0.8
    assert _ms(paper_lq) == (approx(0.8), approx(0.0), 2)
    assert _ms(none["scores"]["last_quarter"][AUC]) == (
        approx(0.5),
        approx(0.0),
        2,
    )  # seeds: 0.5, 0.5
    assert result["difference"]["scores"]["last_quarter"][AUC]["verdict"].startswith("paper better")
    assert _ms(paper["per_version_scores"]["2"][AUC]) == (
        approx(0.95),
        approx(0.05),
        2,
    )  # seeds: 1.0, 0.9

    # final best-of-K / mean-of-K of the trained policy
    auc, loss = paper["final"][AUC], paper["final"][LOSS]
    assert _ms(auc["trained_best"]) == (approx(0.96), approx(0.01), 2)
    assert _ms(none["final"][AUC]["trained_best"]) == (approx(0.85), approx(0.05), 2)
    assert _ms(loss["trained_mean"]) == (0.5, None, 1)  # seed 1 had no valid sample
    assert _ms(auc["initial_best"]) == (0.5, 0.0, 2)
    assert loss["lower_is_better"] is True and auc["lower_is_better"] is False
    fd = result["difference"]["final"]
    assert fd[AUC]["trained_best"]["diff"] == approx(0.11)
    assert fd[AUC]["trained_best"]["se"] == approx(math.sqrt(0.05**2 + 0.01**2))
    assert fd[AUC]["trained_best"]["verdict"].startswith("paper better")  # 0.11 > 2 x 0.051
    assert fd[LOSS]["trained_best"]["diff"] == approx(-0.1)
    assert fd[LOSS]["trained_best"]["verdict"].startswith("within noise")  # 0.1 < 2 x 0.141
    assert (
        fd[LOSS]["trained_mean"]["se"] is None
        and "cannot be told from noise" in fd[LOSS]["trained_mean"]["verdict"]
    )

    # wall-clock per run, across seeds
    assert _ms(none["wall"]["train_s"]) == (approx(40.0), approx(10.0), 2)
    assert _ms(paper["wall"]["job_s"]) == (approx(120.0), approx(10.0), 2)
    assert result["difference"]["wall"]["job_s"]["diff"] == approx(10.0)
    assert "within noise" in proc.stdout and "paper better" in proc.stdout


def test_argument_errors(tmp_path: Path, runs_dir: Path):
    proc = _run("--no-launch", "--seeds", "0", "--runs-dir", str(tmp_path))
    assert (
        proc.returncode == 2 and "--seeds, --updates and --eval-samples must be >= 1" in proc.stderr
    )
    proc = _run("--no-launch", "--", "seed=5")
    assert proc.returncode == 2 and "seed is set by this script" in proc.stderr
    proc = _run("--no-launch", "--", "learner.lr")
    assert proc.returncode == 2 and "expected KEY=VALUE" in proc.stderr
    proc = _run(
        "--no-launch", "--runs-dir", str(tmp_path / "empty"), "--out", str(tmp_path / "out")
    )
    assert proc.returncode == 1 and "no run dirs" in proc.stderr
    # a runs dir that is not empty is never launched into (a bad task id would stop any launch at once)
    proc = _run(
        "--runs-dir",
        str(runs_dir),
        "--out",
        str(tmp_path / "out"),
        "--",
        "tasks.ids=[no-such-task]",
    )
    assert proc.returncode == 1 and "is not empty" in proc.stderr and "launching" not in proc.stdout
    (runs_dir / "learner.duration_weighting=none,seed=0" / "config.yaml").write_text(
        "seed: 1\nlearner:\n  duration_weighting: none\n  max_updates: 2\n"
    )
    proc = _run("--no-launch", "--runs-dir", str(runs_dir), "--out", str(tmp_path / "out"))
    assert proc.returncode == 1 and "two runs of duration_weighting=none seed=1" in proc.stderr


def test_launch_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks" / "experiments"))
    ablation = importlib.import_module("duration_ablation")
    cfg = ablation.parse_args(
        [
            "--seeds",
            "3",
            "--updates",
            "7",
            "--eval-samples",
            "4",
            "--runs-dir",
            str(tmp_path),
            "--",
            "+model.bootstrap.hidden_size=64",
            "tasks.data_dir=/x/y",
        ]
    )
    argv = ablation.launch_argv(cfg)
    assert argv[:6] == [sys.executable, "-m", "mlerl.cli", "train", "-m", "seed=0,1,2"]
    assert argv[6:10] == [
        "learner.duration_weighting=none,paper",
        "learner.max_updates=7",
        "eval_samples=4",
        f"hydra.sweep.dir={tmp_path.resolve()}",
    ]
    assert argv[10] == (
        "hydra.job.config.override_dirname.exclude_keys="
        "[learner.max_updates,eval_samples,model.bootstrap.hidden_size,tasks.data_dir]"
    )
    assert argv[11:] == ["+model.bootstrap.hidden_size=64", "tasks.data_dir=/x/y"]


def test_first_seed_shifts_the_seeds(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Held-out seeds: --first-seed 3 --seeds 3 runs seeds 3, 4 and 5; a negative one is refused."""
    monkeypatch.syspath_prepend(str(REPO / "benchmarks" / "experiments"))
    ablation = importlib.import_module("duration_ablation")
    cfg = ablation.parse_args(["--seeds", "3", "--first-seed", "3", "--runs-dir", str(tmp_path)])
    assert ablation.launch_argv(cfg)[5] == "seed=3,4,5"
    with pytest.raises(SystemExit):
        ablation.parse_args(["--first-seed", "-1"])


def test_duration_mix_counts_each_program_at_its_typical_time(monkeypatch: pytest.MonkeyPatch):
    """A program that ran slowly under load counts at its median over all runs, so two runs that
    chose the same programs get the same ``duration_mix_s`` however busy the host was."""
    monkeypatch.syspath_prepend(str(REPO / "benchmarks" / "experiments"))
    ablation = importlib.import_module("duration_ablation")

    def s(code, status, dur):
        return {
            "code": code,
            "status": status,
            "duration_s": dur,
            "reward": 0.0,
            "valid": status == "ok",
        }

    busy = [s("A", "ok", 9.0), s("B", "ok", 4.0)]
    quiet = [s("A", "ok", 3.0), s("B", "ok", 2.0), s("A", "ok", 5.0), s("", "not_run", 0.0)]
    typical = ablation.typical_durations(busy + quiet)
    assert typical == {"A": 5.0, "B": 3.0}  # medians of (9, 3, 5) and (4, 2)
    assert ablation.sample_figures(busy, typical)["duration_mix_s"] == pytest.approx(4.0)
    assert ablation.sample_figures(busy, typical)["duration_ran_s"] == pytest.approx(6.5)
    assert ablation.sample_figures(quiet[:2], typical)["duration_mix_s"] == pytest.approx(4.0)
    assert ablation.sample_figures(busy)["duration_mix_s"] is None  # no typical times given
