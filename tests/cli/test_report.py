"""The closing report: the AIDE section, the RL-vs-AIDE plot and the three evaluations it runs
(evaluate_policy is replaced by a stub: the real path is tests/actors/test_aide_real.py and the
end-to-end train test)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from mlerl.cli import _report
from mlerl.cli._config import TrainConfig
from mlerl.cli._progress import Progress

AUC, LOSS = "auc-task", "loss-task"


def _summary(best, lower, curve, elapsed=None):
    # the public score 0.01 above the private one: gap (private - public) -0.01
    return {
        "k": len(curve),
        "best_score": best,
        "best_public": best + 0.01,
        "best_gap": -0.01,
        "mean_score": best,
        "mean_public": best + 0.01,
        "valid_frac": 0.5,
        "lower_is_better": lower,
        "best_vs_executions": curve,
        "elapsed_s": elapsed,
    }


def _result(auc_best, loss_best, method="best_of_k"):
    tasks = {
        AUC: _summary(auc_best, False, [None, auc_best], [1.0, 2.0]),
        LOSS: _summary(loss_best, True, [loss_best, loss_best], [0.5, 3.0]),
    }
    return {"method": method, "k": 2, "per_seed": [{"seed": 0, "tasks": tasks}], "tasks": {}}


def _report_dict():
    return {
        "k": 2,
        "seed": 0,
        "initial": _result(0.8, 0.3),
        "trained": _result(0.9, 0.25),
        "aide": _result(0.95, 0.2, "aide"),
    }


def test_markdown_has_the_aide_section():
    text = _report.render_markdown(_report_dict(), [AUC, LOSS])
    assert text.startswith("# Trained vs initial policy")
    assert "## AIDE with the initial policy (2 program executions per task)" in text
    # trained 0.9 < AIDE 0.95 (AUC: worse); trained 0.25 > AIDE 0.2 (loss, lower better: worse)
    # private score first, then (public, gap); the mean as private (public)
    assert (
        f"| {AUC} | 0.9500 (0.9600, gap -0.0100) | 0.9500 (0.9600) | 0.50 | 0.9000 (0.9100, gap -0.0100) | no |"
        in text
    )
    assert (
        f"| {LOSS} | 0.2000 (0.2100, gap -0.0100) | 0.2000 (0.2100) | 0.50 | 0.2500 (0.2600, gap -0.0100) | no |"
        in text
    )
    # an older summary without public keys still renders
    old = _report_dict()
    for key in ("best_public", "best_gap", "mean_public"):
        old["aide"]["per_seed"][0]["tasks"][AUC].pop(key)
    assert f"| {AUC} | 0.9500 (n/a) | 0.9500 (n/a) |" in _report.render_markdown(old, [AUC, LOSS])
    no_aide = {k: v for k, v in _report_dict().items() if k != "aide"}
    assert "AIDE" not in _report.render_markdown(no_aide, [AUC, LOSS])


def test_better():
    assert _report.better(0.9, 0.8, False) and _report.better(0.1, 0.2, True)
    assert _report.better(0.1, None, False) and not _report.better(None, 0.1, False)
    assert not _report.better(0.5, 0.5, True)


def test_plot_rl_vs_aide(tmp_path):
    path = _report.plot_rl_vs_aide(
        _report_dict(), [AUC, LOSS], tmp_path / "plots" / "rl_vs_aide.png"
    )
    assert path is not None and path.stat().st_size > 0
    assert _report.plot_rl_vs_aide({"k": 2}, [AUC], tmp_path / "none.png") is None


def test_the_closing_evaluations_run_at_once_and_an_error_ends_the_others(tmp_path, monkeypatch):
    """The three evaluations overlap (each starts before any ends); an error in one ends the
    others at once (cancelled, their clean-up run) and is raised as it was."""
    run_dir = tmp_path / "run"
    (run_dir / "policy").mkdir(parents=True)
    (run_dir / "policy" / "config.json").write_text("{}")
    started, cleaned = [], []

    async def fake_evaluate_policy(model, task_ids, *, method="best_of_k", **kwargs):
        started.append(method)
        await asyncio.sleep(0.2)
        if method == "aide":
            raise RuntimeError("AIDE failed")
        try:
            await asyncio.sleep(60)
        finally:
            cleaned.append(Path(model).name)

    monkeypatch.setattr(_report, "evaluate_policy", fake_evaluate_policy)
    train = TrainConfig(eval_samples=2, seed=0)
    train.tasks.ids = [AUC]
    train.logging.wandb_mode = "disabled"
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="AIDE failed"):
        _report.write_report(train, run_dir, tmp_path / "initial", Progress(run_dir, enabled=False))
    assert time.monotonic() - t0 < 30
    assert sorted(started) == ["aide", "best_of_k", "best_of_k"]
    assert sorted(cleaned) == ["initial", "policy"]
    assert not (run_dir / "report.json").exists()


def test_write_report_runs_aide_with_the_initial_policy(tmp_path, monkeypatch, wandb_offline):
    run_dir = tmp_path / "run"
    (run_dir / "policy").mkdir(parents=True)
    (run_dir / "policy" / "config.json").write_text("{}")
    calls = []

    async def fake_evaluate_policy(model, task_ids, *, method="best_of_k", **kwargs):
        calls.append((Path(model).name, method, kwargs["k"], kwargs["seeds"]))
        return (
            {"initial": _result(0.8, 0.3), "policy": _result(0.9, 0.25)}[Path(model).name]
            if method != "aide"
            else _result(0.95, 0.2, "aide")
        )

    monkeypatch.setattr(_report, "evaluate_policy", fake_evaluate_policy)
    train = TrainConfig(eval_samples=2, seed=5)
    train.tasks.ids = [AUC, LOSS]
    _report.write_report(train, run_dir, tmp_path / "initial", Progress(run_dir, enabled=False))
    # the same K and seed for all three; AIDE is driven by the initial policy
    assert sorted(calls) == [
        ("initial", "aide", 2, [5]),
        ("initial", "best_of_k", 2, [5]),
        ("policy", "best_of_k", 2, [5]),
    ]
    report = json.loads((run_dir / "report.json").read_text())
    assert report["aide"]["method"] == "aide" and report["k"] == 2
    assert any(p.endswith("rl_vs_aide.png") for p in report["plots"])
    assert "## AIDE with the initial policy" in (run_dir / "report.md").read_text()
    # the closing tables and the plots are in the run's (offline) W&B run too
    row = {
        k: v
        for r in wandb_offline(run_dir).history()
        if r.get("report/step") == 0
        for k, v in r.items()
    }
    images = {
        k.removeprefix("report/")
        for k, v in row.items()
        if isinstance(v, dict) and v["_type"] == "image-file"
    }
    assert "rl_vs_aide" in images
    tables = {
        k.removeprefix("report/"): v
        for k, v in row.items()
        if isinstance(v, dict) and v["_type"] == "table-file"
    }
    assert set(tables) == {
        "the_run_s_best_solution_per_task_chosen_on_the_public_score",
        "trained_vs_initial_policy_best_of_2_samples_per_task_seed_5",
        "aide_with_the_initial_policy_2_program_executions_per_task",
    }
    columns, rows = wandb_offline(run_dir).table(
        tables["aide_with_the_initial_policy_2_program_executions_per_task"]
    )
    assert (
        columns[:2] == ["task", "AIDE best: private (public, gap)"]
        and columns[-1] == "trained beats AIDE"
    )
    assert rows == [
        [
            AUC,
            "0.9500 (0.9600, gap -0.0100)",
            "0.9500 (0.9600)",
            "0.50",
            "0.9000 (0.9100, gap -0.0100)",
            "no",
        ],
        [
            LOSS,
            "0.2000 (0.2100, gap -0.0100)",
            "0.2000 (0.2100)",
            "0.50",
            "0.2500 (0.2600, gap -0.0100)",
            "no",
        ],
    ]


def test_plots_dir_tables_and_figures_go_to_wandb(tmp_path, wandb_offline):
    """compare_runs writes CSV and markdown tables beside the PNGs: CSVs become tables, PNGs
    images, anything else is left out."""
    plots = tmp_path / "plots"
    figure = _report.plot_rl_vs_aide(_report_dict(), [AUC, LOSS], plots / "rl_vs_aide.png")
    (plots / "table.csv").write_text("task,best\nauc-task,0.9\n")
    (plots / "table.md").write_text("| task | best |\n|---|---|\n| auc-task | 0.9 |\n")
    _report._to_wandb(
        TrainConfig(), tmp_path, "", [figure, plots / "table.csv", plots / "table.md"]
    )
    row = {
        k: v for r in wandb_offline(tmp_path).history() if "report/step" in r for k, v in r.items()
    }
    assert row["report/rl_vs_aide"]["_type"] == "image-file" and "report/table_md" not in row
    assert wandb_offline(tmp_path).table(row["report/table"]) == (
        ["task", "best"],
        [["auc-task", "0.9"]],
    )


def test_markdown_tables_reads_each_table_under_its_heading():
    text = (
        "# One\n\n| a | b |\n|---|---|\n| 1 | x y |\n\ntext\n\n## Two\n| c |\n|:-:|\n| 2 |\n| 3 |"
    )
    assert _report.markdown_tables(text) == [
        ("One", ["a", "b"], [["1", "x y"]]),
        ("Two", ["c"], [["2"], ["3"]]),
    ]
    assert _report.markdown_tables("no tables") == []
    assert (
        _report.slug("Trained vs initial (best of 2, seed 5)")
        == "trained_vs_initial_best_of_2_seed_5"
    )


def test_markdown_shows_each_kinds_validity_and_which_kind_the_best_came_from():
    report = _report_dict()
    assert "Scratch and improve samples" not in _report.render_markdown(
        report, [AUC, LOSS]
    )  # older summaries
    for policy, winner in (("initial", "scratch"), ("trained", "improve")):
        for task in (AUC, LOSS):
            report[policy]["per_seed"][0]["tasks"][task].update(
                valid_frac_by_kind={"scratch": 0.75, "improve": 0.25}, best_kind=winner
            )
    report["trained"]["per_seed"][0]["tasks"][LOSS]["best_kind"] = None  # no valid sample
    text = _report.render_markdown(report, [AUC, LOSS])
    assert "## Scratch and improve samples (the same K, the best of both taken)" in text
    assert f"| {AUC} | initial | 0.75 | 0.25 | scratch |" in text
    assert f"| {AUC} | trained | 0.75 | 0.25 | improve |" in text
    assert f"| {LOSS} | trained | 0.75 | 0.25 | - |" in text


def test_best_so_far_is_chosen_on_public_and_shown_on_private():
    records = [
        {"valid": False, "score": None},
        {"valid": True, "score": 0.06, "private_score": 0.07},
        {"valid": True, "score": 0.05, "private_score": 0.09},  # better public, worse private
        {"valid": True, "score": 0.05, "private_score": 0.01},  # a tie on public: kept out
        {"valid": True, "score": 0.08, "private_score": 0.02},
    ]
    assert _report.best_so_far(records, lower_is_better=True) == [None, 0.07, 0.09, 0.09, 0.09]
    assert _report.best_so_far(records, lower_is_better=False) == [None, 0.07, 0.07, 0.07, 0.02]


def test_the_report_opens_with_the_runs_best_solution(tmp_path):
    import msgspec

    from mlerl.learner._samples import SampleLog
    from mlerl.protocol import ExecStatus, PromptKind, Sample

    def sample(seq, task, public, private, kind=PromptKind.SCRATCH):
        return Sample(
            sample_id=f"a0:{seq}",
            actor_id="a0",
            seq=seq,
            task_id=task,
            prompt_kind=kind,
            prompt_ids=[1],
            response_ids=[2],
            behaviour_logprobs=[-1.0],
            policy_version=seq,
            t_sampled=1.0,
            exec_status=ExecStatus.OK,
            reward=0.5,
            valid_submission=public is not None,
            score=public,
            private_score=private,
            reward_parts={} if public is None else {"score": -public},
            parent_id="a0:1" if kind is PromptKind.IMPROVE else None,
        )

    log = SampleLog(tmp_path, method="m", seed=0)
    for step, s in enumerate(
        [
            sample(0, LOSS, None, None),
            sample(1, LOSS, 0.30, 0.31),
            sample(2, LOSS, 0.20, 0.22, PromptKind.IMPROVE),
            sample(3, AUC, None, None),
        ]
    ):
        kept = b"id,p\n" if s.valid_submission else None
        log.add(msgspec.structs.replace(s, submission=kept), step)
        log.flush()
    log.close()
    found = _report.run_best(tmp_path, [AUC, LOSS], {AUC: False, LOSS: True})
    assert found[LOSS]["best"]["sample_id"] == "a0:2" and found[LOSS]["executions"] == 3
    assert found[LOSS]["best_vs_executions"] == [None, 0.31, 0.22]
    assert found[AUC]["best"] is None and found[AUC]["executions"] == 1
    text = _report.best_markdown(found, [AUC, LOSS], tmp_path)
    assert text.startswith("# The run's best solution per task")
    assert f"| {LOSS} | 0.2200 (0.2000) | 3 of 3 | 2 | improve | a0:2 |" in text
    assert f"| {AUC} | no valid solution |" in text


def test_a_run_without_the_closing_comparison_still_gets_its_plots(tmp_path, monkeypatch):
    """``eval_samples=0`` skips the three evaluations, not the run's own curves and probe."""
    monkeypatch.setattr(_report, "evaluate_policy", lambda *a, **k: 1 / 0)  # never called
    rows = [
        {"stream": "probe", "step": 0, "t/parsed": 1.0, "t/MODEL=ridge": 0.75},
        {"stream": "learner", "step": 1, "loss/policy": 0.1, "batch/reward_mean": 0.2},
        {"stream": "probe", "step": 2, "t/parsed": 0.5, "t/MODEL=ridge": 0.5},
    ]
    (tmp_path / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    train = TrainConfig(eval_samples=0)
    train.tasks.ids = [AUC]
    out = _report.write_report(train, tmp_path, tmp_path / "initial", Progress(tmp_path, False))
    assert out.read_text().startswith("# The run's best solution per task")
    assert (tmp_path / "plots" / "decision_probe.png").stat().st_size > 0
    assert not (tmp_path / "report.json").exists()  # no comparison was run
