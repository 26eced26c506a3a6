"""benchmarks/experiments/paper_miniature.py: the figures, the paired differences and the verdicts with
hand-derived numbers, on hand-made run dirs written in the format real runs produce (no
training, no policy); resumability and --no-launch."""

from __future__ import annotations

import importlib
import json
import math
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks" / "experiments"))
pm = importlib.import_module("paper_miniature")
TASK = "rmsle-task"  # lower is better
SEEDS = (3, 4, 5)


def _s(
    v,
    score=None,
    private=None,
    t=1.0,
    duration=1.0,
    kind="scratch",
    code="c",
    task=TASK,
    status=None,
):
    valid = score is not None
    return {
        "policy_version": v,
        "task_id": task,
        "t": t,
        "valid": valid,
        "score": score,
        "private_score": private,
        "kind": kind,
        "duration_s": duration,
        "code": code,
        "reward": -score if valid else -10.0,
        "status": status or ("ok" if valid else "program_error"),
    }


# ---- pure figures -----------------------------------------------------------------------------
def test_learning_curve_scores_a_failure_minus_ten_and_weighs_each_version_alike():
    samples = [
        _s(0, 0.05),
        _s(0, None),  # v0: (-0.05 - 10) / 2 = -5.025, half valid
        _s(1, 0.04),
        _s(1, 0.06),  # v1: -0.05, all valid
        _s(2, 0.01),  # version 2 = U: past the run, ignored
        _s(0, 0.9, task="other"),
    ]  # another task: ignored
    c = pm.learning_curve(samples, TASK, lower=True, updates=2)
    assert c["curve"]["version"] == [0, 1]
    assert c["curve"]["paper_score"] == pytest.approx([-5.025, -0.05])
    assert c["curve"]["valid_frac"] == [0.5, 1.0]
    assert c["curve"]["valid_score"] == pytest.approx([-0.05, -0.05])
    assert c["paper_score_mean"] == pytest.approx(-2.5375) and c["never_valid"] is False
    # higher is better: the score is not flipped
    assert pm.learning_curve([_s(0, 0.8)], TASK, lower=False, updates=1)["paper_score_mean"] == 0.8
    dead = pm.learning_curve([_s(0, None), _s(1, None)], TASK, lower=True, updates=2)
    assert (
        dead["never_valid"] is True
        and dead["paper_score_mean"] == -10.0
        and dead["curve"]["valid_score"] == [None, None]
    )


def test_winner_kind_is_the_kind_of_the_program_rl_reports():
    samples = [
        _s(0, 0.06, t=1.0, kind="scratch"),
        _s(1, 0.04, t=3.0, kind="improve"),
        _s(1, 0.04, t=2.0, kind="scratch"),  # the same public score, earlier: it won first
        _s(1, 0.01, t=4.0, kind="improve", task="other"),
    ]
    assert (
        pm.winner_kind(samples, TASK, {"best_public": 0.05, "best_kind": "improve"}, lower=True)
        == "scratch"
    )
    # the closing best-of-K is strictly better on public: its winner's kind
    assert (
        pm.winner_kind(samples, TASK, {"best_public": 0.03, "best_kind": "improve"}, lower=True)
        == "improve"
    )
    assert pm.winner_kind([_s(0, None)], TASK, {"best_public": None}, lower=True) is None


def test_improvement_is_positive_when_better_in_the_tasks_direction():
    assert pm.improvement(0.04, 0.05, lower=True) == pytest.approx(0.01)
    assert pm.improvement(0.9, 0.8, lower=False) == pytest.approx(0.1)
    assert pm.improvement(0.06, 0.05, lower=True) == pytest.approx(-0.01)
    assert pm.improvement(None, 0.05, lower=True) is None


@pytest.mark.parametrize(
    "mean, se, n, expected",
    [
        (0.3, 0.1, 3, "reproduced"),  # 0.3 - 0.2 > 0
        (0.2, 0.1, 3, "within noise"),  # 0.2 - 0.2 = 0: not beyond 2 s.e.
        (0.1, 0.1, 3, "within noise"),  # -0.1 < 0 < 0.3
        (-0.1, 0.1, 3, "within noise"),
        (
            -0.2,
            0.1,
            3,
            "not reproduced",
        ),  # -0.2 + 0.2 = 0 <= 0: no effect in the paper's direction fits
        (-0.3, 0.1, 5, "not reproduced"),
        (0.0, 0.0, 3, "not reproduced"),  # an exact tie in every seed
        (0.3, 0.1, 2, "too few seeds"),
        (None, None, 0, "too few seeds"),
    ],
)
def test_verdict_rule(mean, se, n, expected):
    assert pm.verdict({"mean": mean, "se": se, "n": n}) == expected


def test_paired_difference_over_common_seeds_with_hand_numbers():
    ref = {3: 0.05, 4: 0.06, 5: 0.04, 6: 0.05}
    cand = {3: 0.04, 4: 0.05, 5: 0.01, 6: None}  # seed 6: the candidate has no valid program
    d = pm.paired(ref, cand, lambda c, r: pm.improvement(c, r, lower=True))
    # differences 0.01, 0.01, 0.03: mean 1/60; squared deviations sum to 2.667e-4, so the
    # sample variance is 1.333e-4 and the s.e. sqrt(1.333e-4 / 3) = 1/150
    assert d["mean"] == pytest.approx(1 / 60) and d["se"] == pytest.approx(1 / 150) and d["n"] == 3
    assert d["seeds"] == [3, 4, 5] and d["missing"] == 1 and d["per_seed"]["6"] is None
    assert d["verdict"] == "reproduced"  # 1/60 - 2/150 = 0.0033 > 0


def test_the_no_partial_credit_arm_is_the_paper_without_instrumentation():
    from mlerl.instrument import RewardConfig, RewardKind, compute_reward
    from mlerl.protocol import ExecStatus

    (override,) = pm.ARMS["no_partial_credit"]
    key, value = override.split("=")
    assert key == "instrument.reward.per_marker" and float(value) == 0.0
    for kind in (RewardKind.NORMALIZED, RewardKind.PAPER):
        cfg = RewardConfig(kind=kind, per_marker=float(value))
        markers = ["loaded data", "trained model"]
        assert (
            compute_reward(markers, ExecStatus.PROGRAM_ERROR, None, False, True, cfg).reward
            == -10.0
        )


# ---- hand-made grid ---------------------------------------------------------------------------
# Per seed 3, 4, 5 (lower is better; U = 2 updates, closing K = 4):
FINAL = {
    "default": (0.040, 0.041, 0.039),
    "no_duration": (0.041,) * 3,
    "no_partial_credit": (0.041,) * 3,
    "no_improve": (0.044, 0.041, 0.040),
}
BASE = {
    "initial_bon": (0.045, 0.046, 0.047),
    "aide": (0.038, 0.040, 0.037),
    "scratch_bon": (0.041, 0.040, 0.041),
}
EXEC_V1 = {"default": (6.0, 7.0, 8.0), "no_duration": (4.0, 4.0, 5.0)}  # second half (version 1)
VALID_V = {
    "no_partial_credit": ((False, True), (False, False), (True, True))
}  # (v0, v1) valid per seed
KIND = {"default": ("scratch", "scratch", "improve")}


def _write_run(
    runs_dir: Path, arm: str, i: int, seed: int, task=TASK, updates=2, k=4, dead=False
) -> Path:
    d = pm.run_dir_of(runs_dir, task, arm, seed)
    d.mkdir(parents=True)
    (d / "config.yaml").write_text(f"seed: {seed}\nlearner:\n  max_updates: {updates}\n")
    valid = (False, False) if dead else VALID_V.get(arm, ((True, True),) * 3)[i]
    v1 = EXEC_V1.get(arm, (3.0,) * 3)[i]
    samples = [
        _s(
            v,
            0.10 if valid[v] else None,
            0.11 if valid[v] else None,
            t=float(v + 1),
            duration=1.0 if v == 0 else v1,
            code=f"{arm}-{seed}-{v}",
            task=task,
        )
        for v in range(updates)
    ]
    (d / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    closing = {
        "k": k,
        "best_public": None if dead else 0.05,
        "best_score": None if dead else FINAL[arm][i],
        "lower_is_better": True,
        "best_kind": None if dead else KIND.get(arm, ("scratch",) * 3)[i],
        "elapsed_s": [1.0, 2.0, 3.0, 4.0],
    }
    (d / "report.json").write_text(
        json.dumps(
            {
                "seed": seed,
                "k": k,
                "initial": {"model": "/m"},
                "trained": {"per_seed": [{"tasks": {task: closing}}]},
            }
        )
    )
    (d / "wall_clock_s").write_text("100")
    if arm == "default":
        for method, finals in BASE.items():
            _write_baseline(d, method, finals[i], task)
    return d


def _write_baseline(run_dir: Path, method: str, best: float, task=TASK) -> None:
    summary = {
        "k": 6,
        "best_score": best,
        "best_public": best,
        "best_vs_executions": [0.09, best, best],
        "elapsed_s": [1.0, 2.0, 5.0],
        "valid_frac": 0.5,
    }
    (run_dir / f"equal_budget_{method}.json").write_text(
        json.dumps({"per_seed": [{"tasks": {task: summary}}]})
    )


def _grid(runs_dir: Path, seeds=SEEDS) -> None:
    for arm in pm.ARMS:
        for i, seed in enumerate(seeds):
            _write_run(runs_dir, arm, i, seed)


def test_no_launch_aggregates_a_three_seed_grid_with_hand_derived_verdicts(tmp_path, capsys):
    _grid(tmp_path / "runs")
    out = tmp_path / "out"
    assert (
        pm.main(
            [
                "--no-launch",
                "--runs-dir",
                str(tmp_path / "runs"),
                "--tasks",
                TASK,
                "--out",
                str(out),
            ]
        )
        == 0
    )
    result = json.loads((out / "paper_miniature.json").read_text())
    assert (out / "paper_miniature.png").is_file()
    assert result["incomplete_jobs"] == [] and result["training_wall_clock_s_total"] == 1200.0
    assert result["selection"]["held_out"] is True
    run = next(r for r in result["runs"] if r["arm"] == "default" and r["seed"] == 3)
    # training's best public 0.10 loses to the closing 0.05: RL reports the closing private 0.040
    assert (
        run["final_private"] == 0.040
        and run["budget_executions"] == 6
        and run["winner_kind"] == "scratch"
    )
    assert run["exec_mix_s_second_half"] == 6.0 and run["paper_score_mean"] == pytest.approx(-0.10)
    f = result["summary"][TASK]["findings"]
    # 1a: best-of-N - RL = 0.005, 0.005, 0.008: mean 0.006, s.e. 0.001
    assert f["rl_vs_best_of_n"]["mean"] == pytest.approx(0.006) and f["rl_vs_best_of_n"][
        "se"
    ] == pytest.approx(0.001)
    assert f["rl_vs_best_of_n"]["verdict"] == "reproduced"
    # 1b: AIDE - RL = -0.002, -0.001, -0.002: mean -1/600, s.e. 1/3000; -1/600 + 2/3000 < 0
    assert f["rl_vs_aide"]["mean"] == pytest.approx(-1 / 600) and f["rl_vs_aide"][
        "se"
    ] == pytest.approx(1 / 3000)
    assert f["rl_vs_aide"]["verdict"] == "not reproduced"
    # 1c: scratch-only best-of-N - RL = 0.001, -0.001, 0.002: mean 2/3000, s.e. sqrt(7)/3000
    assert f["rl_vs_scratch_best_of_n"]["mean"] == pytest.approx(2 / 3000)
    assert f["rl_vs_scratch_best_of_n"]["se"] == pytest.approx(math.sqrt(7) / 3000)
    assert f["rl_vs_scratch_best_of_n"]["verdict"] == "within noise"
    # beside it, like for like: scratch-only best-of-N - the no_improve run = -0.003, -0.001,
    # +0.001: mean -0.001, s.e. 2/sqrt(3) / 1000
    like = f["rl_vs_scratch_best_of_n"]["scratch_only_rl"]
    assert like["mean"] == pytest.approx(-0.001) and like["se"] == pytest.approx(
        0.002 / math.sqrt(3)
    )
    # 2: typical time, second half: 6-4, 7-4, 8-5 = 2, 3, 3: mean 8/3, s.e. 1/3
    assert f["duration"]["mean"] == pytest.approx(8 / 3) and f["duration"]["se"] == pytest.approx(
        1 / 3
    )
    assert f["duration"]["verdict"] == "reproduced" and f["duration"]["exec_ran_s_difference"][
        "mean"
    ] == pytest.approx(8 / 3)
    # 3: -0.1 - (-5.05, -10, -0.1) = 4.95, 9.9, 0: mean 4.95, s.e. 4.95 / sqrt(3); one run never valid
    assert f["partial_credit"]["mean"] == pytest.approx(4.95)
    assert f["partial_credit"]["se"] == pytest.approx(4.95 / math.sqrt(3))
    assert f["partial_credit"]["verdict"] == "within noise"
    assert f["partial_credit"]["never_valid"] == {"default": 0, "no_partial_credit": 1}
    # 4: scratch only - default = 0.004, 0, 0.001: mean 0.005/3, s.e. sqrt(13/3)/1000 / sqrt(3)
    assert f["improve"]["mean"] == pytest.approx(0.005 / 3)
    assert f["improve"]["se"] == pytest.approx(math.sqrt(13e-6 / 3 / 3))
    assert f["improve"]["verdict"] == "within noise"
    assert f["improve"]["relative"] == pytest.approx(
        0.04
    )  # (0.005 / 3) / mean(0.044, 0.041, 0.040)
    arms = result["summary"][TASK]["arms"]
    assert arms["default"]["winner_kind_share"]["scratch"] == pytest.approx(2 / 3)
    assert arms["no_partial_credit"]["never_valid"] == 1 and arms["aide"]["final_private"][
        "mean"
    ] == pytest.approx(0.115 / 3)
    table = capsys.readouterr().out
    assert "| 1a. RL beats best-of-N" in table and "0.0060 ± 0.0010 (3) | reproduced |" in table
    assert "never valid 0 vs 1" in table and "Table 4: better on 10 of 12 tasks" in table


def test_quick_prints_the_caveat_and_its_verdicts_say_too_few_seeds(tmp_path, capsys):
    _grid(tmp_path / "runs", seeds=(3,))  # --quick: one seed (3), the first task
    out = tmp_path / "out"
    assert (
        pm.main(
            [
                "--quick",
                "--no-launch",
                "--runs-dir",
                str(tmp_path / "runs"),
                "--tasks",
                f"{TASK},other",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert printed.count("proves nothing") == 2  # before and after the table
    result = json.loads((out / "paper_miniature.json").read_text())
    assert result["quick"] is True and result["tasks"] == [TASK] and result["seeds"] == [3]
    assert (
        result["updates"] == pm.QUICK["updates"]
        and result["eval_samples"] == pm.QUICK["eval_samples"]
    )
    f = result["summary"][TASK]["findings"]
    assert {x["verdict"] for x in f.values()} == {"too few seeds"}
    assert (
        f["rl_vs_best_of_n"]["mean"] == pytest.approx(0.005) and f["rl_vs_best_of_n"]["se"] is None
    )
    assert f["duration"]["mean"] == pytest.approx(2.0) and f["partial_credit"][
        "mean"
    ] == pytest.approx(4.95)


def test_runs_that_never_produced_a_valid_program_are_counted_not_dropped(tmp_path, capsys):
    for arm in pm.ARMS:  # nothing valid anywhere, as a policy that cannot write a program
        for i, seed in enumerate(SEEDS):
            _write_run(tmp_path / "runs", arm, i, seed, dead=True)
    out = tmp_path / "out"
    assert (
        pm.main(
            [
                "--no-launch",
                "--runs-dir",
                str(tmp_path / "runs"),
                "--tasks",
                TASK,
                "--out",
                str(out),
            ]
        )
        == 0
    )
    s = json.loads((out / "paper_miniature.json").read_text())["summary"][TASK]
    f = s["findings"]
    for key in ("rl_vs_best_of_n", "improve"):  # no final score: no pair, each seed counted missing
        assert f[key]["n"] == 0 and f[key]["missing"] == 3 and f[key]["verdict"] == "too few seeds"
    # the Figure 9 quantity is defined (-10 everywhere): a tie in every seed, so not reproduced
    assert f["partial_credit"]["mean"] == 0.0 and f["partial_credit"]["verdict"] == "not reproduced"
    assert f["partial_credit"]["never_valid"] == {"default": 3, "no_partial_credit": 3}
    assert s["arms"]["default"]["winner_kind_share"] == {
        "scratch": None,
        "improve": None,
        "n": 0,
        "none": 3,
    }
    assert "| - (0) | too few seeds |" in capsys.readouterr().out


def test_no_launch_over_nothing_says_so(tmp_path, capsys):
    assert (
        pm.main(["--no-launch", "--runs-dir", str(tmp_path), "--out", str(tmp_path / "out")]) == 1
    )
    assert "no finished runs" in capsys.readouterr().err
    assert not (tmp_path / "out" / "paper_miniature.json").exists()


# ---- resumability -----------------------------------------------------------------------------
def test_plan_skips_finished_runs_and_baselines(tmp_path):
    runs = tmp_path / "runs"
    _write_run(runs, "default", 0, 3)
    _write_run(runs, "no_improve", 0, 3)
    (pm.run_dir_of(runs, TASK, "default", 3) / "equal_budget_aide.json").unlink()
    assert pm.plan(runs, [TASK], [3]) == [
        ("train", TASK, 3, "no_duration"),
        ("train", TASK, 3, "no_partial_credit"),
        ("aide", TASK, 3, "default"),
    ]


def test_an_interrupted_run_is_resumed_with_its_own_config(tmp_path):
    d = pm.run_dir_of(tmp_path, TASK, "no_duration", 4)
    fresh = pm.train_argv(d, TASK, "no_duration", 4, 6, 4, ["actors.temperature=0.8"])
    assert fresh == [
        f"seed=4",
        f"tasks.ids=[{TASK}]",
        f"hydra.run.dir={d}",
        "learner.duration_weighting=none",
        "learner.max_updates=6",
        "eval_samples=4",
        "actors.temperature=0.8",
    ]
    assert pm.train_argv(d, TASK, "default", 4, None, None, []) == [
        "seed=4",
        f"tasks.ids=[{TASK}]",
        f"hydra.run.dir={d}",
    ]
    d.mkdir(parents=True)
    (d / "config.yaml").write_text("seed: 4\n")
    assert pm.train_argv(d, TASK, "no_duration", 4, 6, 4, ["actors.temperature=0.8"]) == [
        f"resume={d}"
    ]


def test_a_sitting_launches_only_what_is_missing_and_survives_a_failed_job(
    tmp_path, monkeypatch, capsys
):
    runs = tmp_path / "runs"
    _grid(runs, seeds=(3,))
    # what is left: the no_improve run, and (because the default run is new) both baselines of seed 4
    report = pm.run_dir_of(runs, TASK, "no_improve", 3) / "report.json"
    saved = report.read_text()
    report.unlink()  # interrupted: config.yaml and samples, no report
    _write_run(runs, "default", 1, 4)
    for m in pm.BASELINES:
        (pm.run_dir_of(runs, TASK, "default", 4) / f"equal_budget_{m}.json").unlink()
    for arm in ("no_duration", "no_partial_credit", "no_improve"):
        _write_run(runs, arm, 1, 4)
    calls = []

    def fake_train(run_dir, argv):
        calls.append(("train", run_dir.parent.name, argv[0]))
        raise pm.subprocess.CalledProcessError(
            1, "mlerl train"
        )  # the job fails: reported, the grid goes on

    def fake_baseline(run_dir, model, method, seed, k):
        calls.append((method, seed, k))
        _write_baseline(run_dir, method, 0.050)

    monkeypatch.setattr(pm, "launch_train", fake_train)
    monkeypatch.setattr(pm.equal_budget, "launch", fake_baseline)
    out = tmp_path / "out"
    assert (
        pm.main(["--runs-dir", str(runs), "--seeds", "2", "--tasks", TASK, "--out", str(out)]) == 0
    )
    # seed 3's no_improve has a config.yaml: resumed; seed 4's baselines at N = 2 training samples + K 4
    assert calls == [
        ("train", "no_improve", f"resume={pm.run_dir_of(runs, TASK, 'no_improve', 3)}"),
        ("initial_bon", 4, 6),
        ("aide", 4, 6),
        ("scratch_bon", 4, 6),
    ]
    result = json.loads((out / "paper_miniature.json").read_text())
    assert len(result["failed_launches"]) == 1 and "no_improve" in result["failed_launches"][0]
    assert result["incomplete_jobs"] == [f"train {TASK} 3 no_improve"]
    assert "FAILED" in capsys.readouterr().err
    assert result["summary"][TASK]["arms"]["initial_bon"]["final_private"]["n"] == 2
    # a second sitting with everything done launches nothing
    report.write_text(saved)
    calls.clear()
    assert (
        pm.main(["--runs-dir", str(runs), "--seeds", "2", "--tasks", TASK, "--out", str(out)]) == 0
    )
    assert calls == []


@pytest.mark.parametrize(
    "override",
    [
        "seed=1",
        "learner.duration_weighting=paper",
        "tasks.ids=[x]",
        "instrument.reward.per_marker=0.1",
        "learner.max_updates=3",
    ],
)
def test_overrides_the_script_owns_are_refused(override, capsys):
    with pytest.raises(SystemExit):
        pm.parse_args(["--no-launch", "--", override])
    assert "set by this script" in capsys.readouterr().err


def test_a_run_of_the_wrong_task_is_refused(tmp_path):
    d = _write_run(tmp_path, "default", 0, 3, task="other")
    target = pm.run_dir_of(tmp_path, TASK, "default", 3)
    target.parent.mkdir(parents=True)
    d.rename(target)
    with pytest.raises(ValueError, match="ran task other"):
        pm.collect(tmp_path, [TASK], [3])


# ---- --arms and the archive (a grid over sittings on fresh machines) ---------------------------
def test_arms_picks_what_is_launched(tmp_path, capsys):
    runs = tmp_path / "runs"
    assert pm.plan(runs, [TASK], [3, 4], ["default", "aide"]) == [
        ("train", TASK, 3, "default"),
        ("aide", TASK, 3, "default"),
        ("train", TASK, 4, "default"),
        ("aide", TASK, 4, "default"),
    ]
    assert len(pm.plan(runs, [TASK], [3])) == len(pm.ARMS) + len(pm.BASELINES)
    with pytest.raises(SystemExit):
        pm.parse_args(["--arms", "default,best_of_everything"])
    assert "best_of_everything" in capsys.readouterr().err


def _main(runs: Path, out: Path, *extra: str) -> dict:
    argv = ["--no-launch", "--runs-dir", str(runs), "--tasks", TASK, "--out", str(out), *extra]
    assert pm.main(argv) == 0
    return json.loads((out / "paper_miniature.json").read_text())


def test_a_grid_survives_a_fresh_machine_through_the_archive(tmp_path, capsys):
    out = tmp_path / "out"
    _grid(tmp_path / "first")
    first = _main(tmp_path / "first", out)
    archive = out / "paper_miniature_runs"
    packed = sorted(p.name for p in archive.iterdir())
    assert packed == sorted(
        f"{TASK}__{arm}__seed{seed}.tar.gz" for arm in pm.ARMS for seed in SEEDS
    )
    stamp = {p.name: p.read_bytes() for p in archive.iterdir()}
    # a new machine: nothing under --runs-dir; the same command gives the same summary
    second = _main(tmp_path / "fresh", out)
    assert "12 run(s) restored" in capsys.readouterr().out
    assert second["summary"] == first["summary"]
    assert {p.name: p.read_bytes() for p in archive.iterdir()} == stamp  # packed bytes are stable
    d = pm.run_dir_of(tmp_path / "fresh", TASK, "default", 3)
    assert (d / "equal_budget_aide.json").is_file() and (d / "samples.jsonl").is_file()


def test_baselines_finished_later_reach_the_archive_and_a_dir_that_lacks_them(tmp_path):
    out, runs = tmp_path / "out", tmp_path / "runs"
    _grid(runs, seeds=(3,))
    default = pm.run_dir_of(runs, TASK, "default", 3)
    saved = (default / "equal_budget_aide.json").read_text()
    (default / "equal_budget_aide.json").unlink()
    _main(runs, out, "--seeds", "1")  # packs the default run without AIDE
    (default / "equal_budget_aide.json").write_text(saved)  # AIDE finishes in a later sitting
    _main(runs, out, "--seeds", "1")
    (default / "equal_budget_aide.json").unlink()  # this machine lost it; the archive has it
    result = _main(runs, out, "--seeds", "1")
    assert (default / "equal_budget_aide.json").read_text() == saved
    assert result["summary"][TASK]["arms"]["aide"]["final_private"]["n"] == 1


def test_an_archive_of_other_settings_is_not_mixed_in(tmp_path, capsys):
    out = tmp_path / "out"
    _grid(tmp_path / "a", seeds=(3,))
    _main(tmp_path / "a", out, "--seeds", "1", "--updates", "6")
    assert pm.main(
        ["--no-launch", "--runs-dir", str(tmp_path / "b"), "--tasks", TASK, "--out", str(out),
         "--seeds", "1"]
    ) == 1  # fmt: skip
    err = capsys.readouterr().err
    assert "not restored, other settings" in err and "'updates': 6" in err
    assert "no finished runs" in err


def test_restore_writes_only_the_known_files(tmp_path):
    import io
    import tarfile

    archive = tmp_path / "archive"
    archive.mkdir()
    settings = pm.grid_settings(None, None, [])
    src = pm.archive_path(archive, TASK, "default", 3)
    with tarfile.open(src, "w:gz") as tar:
        for name, data in [
            (pm.GRID_FILE, json.dumps(settings).encode()),
            ("report.json", b"{}"),
            ("../escaped.txt", b"x"),
            ("checkpoints/state.pt", b"x"),
        ]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    restored, refused = pm.restore_runs(archive, tmp_path / "runs", [TASK], [3], settings)
    assert restored == [src.name] and refused == []
    d = pm.run_dir_of(tmp_path / "runs", TASK, "default", 3)
    assert sorted(p.name for p in d.iterdir()) == ["report.json"]
    assert not (tmp_path / "runs" / TASK / "default" / "escaped.txt").exists()


def test_quick_and_no_archive_pack_nothing(tmp_path):
    assert pm.parse_args(["--quick"]).archive is None
    assert pm.parse_args(["--no-archive"]).archive is None
    assert pm.parse_args(["--out", str(tmp_path)]).archive == tmp_path / "paper_miniature_runs"


def test_runs_of_another_initial_policy_are_left_out_of_the_pairs(tmp_path, capsys):
    import hashlib

    runs, out = tmp_path / "runs", tmp_path / "out"
    _grid(runs)
    model = tmp_path / "policy"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"weights of build A")
    for arm in pm.ARMS:
        for seed in SEEDS:
            report = pm.run_dir_of(runs, TASK, arm, seed) / "report.json"
            r = json.loads(report.read_text())
            r["initial"]["model"] = str(model)
            report.write_text(json.dumps(r))
    # seed 5's no_improve ran on another machine's build (restored from the archive)
    (pm.run_dir_of(runs, TASK, "no_improve", 5) / "policy_fingerprint").write_text(
        "0123456789abcdef\n"
    )
    result = _main(runs, out)
    fp = hashlib.sha256(b"weights of build A").hexdigest()[:16]
    assert (pm.run_dir_of(runs, TASK, "default", 3) / "policy_fingerprint").read_text() == fp + "\n"
    assert result["left_out_other_policy"] == [
        f"{TASK} no_improve seed 5: policy 0123456789abcdef, default's {fp}"
    ]
    assert "another initial policy" in capsys.readouterr().err
    improve = result["summary"][TASK]["findings"]["improve"]
    assert improve["seeds"] == [3, 4] and improve["n"] == 2  # seed 5's pair is gone
    # the baselines sample the default run's own policy, so finding 1 keeps all three seeds
    assert result["summary"][TASK]["findings"]["rl_vs_best_of_n"]["n"] == 3
    assert {r["policy"] for r in result["runs"] if r["arm"] in pm.BASELINES} == {fp}


# ---- finding 2 retimed side by side (--retime) -------------------------------------------------
def _write_retime(run_dir: Path, default_s: float, none_s: float) -> None:
    side = lambda m: {"n": 2, "mean_s": m, "times": []}  # noqa: E731
    body = {"k": 2, "a": side(default_s), "b": side(none_s), "a_minus_b": default_s - none_s}
    (run_dir / pm.RETIME_FILE).write_text(json.dumps(body))


def test_retimed_means_are_finding_2s_figure_and_the_typical_time_stays_beside_it(tmp_path):
    runs, out = tmp_path / "runs", tmp_path / "out"
    _grid(runs)
    # retimed default - none: 10 - 11, 12 - 10, 9 - 9 = -1, 2, 0: mean 1/3, s.e. sqrt(7/3)/sqrt(3)
    for seed, (d, n) in zip(SEEDS, ((10.0, 11.0), (12.0, 10.0), (9.0, 9.0)), strict=True):
        _write_retime(pm.run_dir_of(runs, TASK, "default", seed), d, n)
    f = _main(runs, out, "--no-archive")["summary"][TASK]["findings"]["duration"]
    assert f["measure"] == "retimed" and f["n"] == 3
    assert f["mean"] == pytest.approx(1 / 3) and f["se"] == pytest.approx(math.sqrt(7 / 9))
    assert f["verdict"] == "within noise"
    # the typical-time figure of the hand-made grid (8/3, see above) is kept for the reader
    assert f["typical_time_difference"]["mean"] == pytest.approx(8 / 3)
    # without the files the figure is the typical time again
    for seed in SEEDS:
        (pm.run_dir_of(runs, TASK, "default", seed) / pm.RETIME_FILE).unlink()
    f = _main(runs, out, "--no-archive")["summary"][TASK]["findings"]["duration"]
    assert f["measure"] == "typical_time" and f["mean"] == pytest.approx(8 / 3)


def test_retime_jobs_time_each_finished_seed_once_and_survive_a_failure(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    _grid(runs, seeds=(3, 4))
    _write_run(runs, "default", 2, 5)  # seed 5: its no_duration run has not finished
    calls = []

    def fake(a, b, k, seed):
        calls.append((a.parent.name, b.parent.name, k, seed))
        if seed == 4:
            raise RuntimeError("sandbox gone")
        return {"k": k, "a": {"n": k, "mean_s": 2.0}, "b": {"n": k, "mean_s": 1.0}}

    monkeypatch.setattr(pm.retime, "measure", fake)
    failed = pm.retime_jobs(runs, [TASK], [3, 4, 5], 8)
    assert calls == [("default", "no_duration", 8, 3), ("default", "no_duration", 8, 4)]
    assert failed == [f"retime {TASK} seed 4: sandbox gone"]
    written = pm.run_dir_of(runs, TASK, "default", 3) / pm.RETIME_FILE
    assert json.loads(written.read_text())["a"]["mean_s"] == 2.0
    calls.clear()
    pm.retime_jobs(runs, [TASK], [3, 4, 5], 8)  # the next sitting retries seed 4 only
    assert calls == [("default", "no_duration", 8, 4)]
    assert pm.retime_row(pm.run_dir_of(runs, TASK, "default", 3)) == {
        "default_s": 2.0, "no_duration_s": 1.0, "n": [8, 8], "k": 8
    }  # fmt: skip
    assert pm.retime_row(pm.run_dir_of(runs, TASK, "default", 4)) is None


def test_a_retime_reaches_the_archive_and_a_fresh_machine(tmp_path):
    out = tmp_path / "out"
    _grid(tmp_path / "first", seeds=(3,))
    _write_retime(pm.run_dir_of(tmp_path / "first", TASK, "default", 3), 5.0, 4.0)
    _main(tmp_path / "first", out, "--seeds", "1")
    result = _main(tmp_path / "fresh", out, "--seeds", "1")
    assert (pm.run_dir_of(tmp_path / "fresh", TASK, "default", 3) / pm.RETIME_FILE).is_file()
    f = result["summary"][TASK]["findings"]["duration"]
    assert f["measure"] == "retimed" and f["per_seed"] == {"3": 1.0}


def test_retime_must_not_be_negative(capsys):
    with pytest.raises(SystemExit):
        pm.parse_args(["--retime", "-1"])
    assert "--retime must be >= 0" in capsys.readouterr().err


def test_a_subset_does_not_replace_a_whole_grid_unless_asked(tmp_path, capsys):
    runs, out = tmp_path / "runs", tmp_path / "out"
    _grid(runs)
    _main(runs, out, "--no-archive")
    whole = (out / "paper_miniature.json").read_text()
    other = tmp_path / "other"
    _grid(other, seeds=(3,))  # an experiment on one seed, aimed by mistake at the same --out
    argv = ["--no-launch", "--runs-dir", str(other), "--tasks", TASK, "--out", str(out)]
    assert pm.main([*argv, "--seeds", "1", "--no-archive"]) == 1
    err = capsys.readouterr().err
    assert (
        "not written" in err and "holds 14 run(s)" in err
    )  # 4 arms + 3 baselines, seeds 4 and 5 and "default rmsle-task seed 4" in err
    assert (out / "paper_miniature.json").read_text() == whole
    assert pm.main([*argv, "--seeds", "1", "--no-archive", "--overwrite"]) == 0
    assert {r["seed"] for r in json.loads((out / "paper_miniature.json").read_text())["runs"]} == {
        3
    }
    assert pm.lost_runs(tmp_path / "none.json", []) == []


def test_a_retime_counts_only_where_its_no_duration_run_is_paired(tmp_path):
    import shutil

    runs, out = tmp_path / "runs", tmp_path / "out"
    _grid(runs)
    for seed in SEEDS:
        _write_retime(pm.run_dir_of(runs, TASK, "default", seed), 6.0, 5.0)
    shutil.rmtree(pm.run_dir_of(runs, TASK, "no_duration", 5))  # seed 5's ablation is gone
    f = _main(runs, out, "--no-archive")["summary"][TASK]["findings"]["duration"]
    assert f["measure"] == "retimed" and f["seeds"] == [3, 4] and f["mean"] == pytest.approx(1.0)
