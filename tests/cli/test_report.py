"""The closing report: the AIDE section, the RL-vs-AIDE plot and the three evaluations it runs
(evaluate_over_seeds is replaced by a stub: the real path is tests/actors/test_aide_real.py and the
end-to-end train test)."""

from __future__ import annotations

import json
from pathlib import Path

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


def test_write_report_runs_aide_with_the_initial_policy(tmp_path, monkeypatch, wandb_offline):
    run_dir = tmp_path / "run"
    (run_dir / "policy").mkdir(parents=True)
    (run_dir / "policy" / "config.json").write_text("{}")
    calls = []

    def fake_evaluate_over_seeds(model, task_ids, *, method="best_of_k", **kwargs):
        calls.append((Path(model).name, method, kwargs["k"], kwargs["seeds"]))
        return (
            {"initial": _result(0.8, 0.3), "policy": _result(0.9, 0.25)}[Path(model).name]
            if method != "aide"
            else _result(0.95, 0.2, "aide")
        )

    monkeypatch.setattr(_report, "evaluate_over_seeds", fake_evaluate_over_seeds)
    train = TrainConfig(eval_samples=2, seed=5)
    train.tasks.ids = [AUC, LOSS]
    _report.write_report(train, run_dir, tmp_path / "initial", Progress(run_dir, enabled=False))
    # the same K and seed for all three; AIDE is driven by the initial policy
    assert calls == [
        ("initial", "best_of_k", 2, [5]),
        ("policy", "best_of_k", 2, [5]),
        ("initial", "aide", 2, [5]),
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
