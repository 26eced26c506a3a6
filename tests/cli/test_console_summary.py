"""The closing summary `mlerl train` prints reads in 100 columns, with every figure of
report.md in it; report.md keeps the full tables (the real evaluations are stubbed here, as in
tests/cli/test_report.py; the end-to-end train test runs them)."""

from __future__ import annotations

from pathlib import Path

from mlerl.cli import _report
from mlerl.cli._config import TrainConfig
from mlerl.cli._console import console_summary
from mlerl.cli._progress import Progress

TASK, TEXT = "standin-materials-rmsle-tiny", "standin-insults-auc-tiny"


def _summary(best: float, lower: bool) -> dict:
    return {
        "k": 16,
        "best_score": best,
        "best_public": best - 0.0056,
        "best_gap": 0.0056,
        "mean_score": best + 0.02,
        "mean_public": best + 0.01,
        "valid_frac": 0.75,
        "valid_frac_by_kind": {"scratch": 0.81, "improve": 0.62},
        "best_kind": "improve",
        "lower_is_better": lower,
        "best_vs_executions": [best] * 16,
        "elapsed_s": [float(i) for i in range(16)],
    }


def _result(materials: float, insults: float, method: str = "best_of_k") -> dict:
    tasks = {TASK: _summary(materials, True), TEXT: _summary(insults, False)}
    return {"method": method, "k": 16, "per_seed": [{"seed": 0, "tasks": tasks}], "tasks": {}}


def _report_dict() -> dict:
    return {
        "k": 16,
        "seed": 0,
        "initial": _result(0.0975, 0.8123),
        "trained": _result(0.0841, 0.8456),
        "aide": _result(0.0868, 0.8301, "aide"),
    }


def _cells(markdown: str) -> list[str]:
    return [
        cell
        for _, columns, rows in _report.markdown_tables(markdown)
        for cell in [*columns, *(c for r in rows for c in r)]
    ]


def test_the_report_markdown_is_wider_than_a_console():
    # what the summary is for: report.md's table lines are far wider than 100 columns
    markdown = _report.render_markdown(_report_dict(), [TASK, TEXT])
    assert max(len(line) for line in markdown.splitlines()) > 200


def test_the_printed_summary_fits_100_columns_and_keeps_every_figure(tmp_path, capsys):
    markdown = _report.render_markdown(_report_dict(), [TASK, TEXT])
    progress = Progress(tmp_path, enabled=True)
    for line in console_summary(markdown, full_report=str(tmp_path / "report.md")).splitlines():
        progress.say(line)
    printed = capsys.readouterr().out
    too_wide = [line for line in printed.splitlines() if len(line) > 100]
    assert too_wide == []
    flat = " ".join(printed.split())
    missing = [cell for cell in _cells(markdown) if " ".join(cell.split()) not in flat]
    assert missing == []
    # the last words name the full report (a long path goes on a line of its own)
    said = " ".join(line.split("] ", 1)[-1] for line in printed.splitlines())
    assert " ".join(said.split()).endswith(f"full tables: {tmp_path / 'report.md'}")
    # each task's figures stay together under its name
    block = printed[printed.index(f"task: {TASK} (lower is better)") :]
    assert block.index("0.0975 (0.0919, gap +0.0056)") < block.index(f"task: {TEXT}")


def test_a_table_that_fits_stays_a_table_and_a_wider_one_is_read_row_by_row():
    narrow = "# Kinds\n\n| task | valid |\n|---|---|\n| a | 0.50 |\n| bb | 0.25 |\n"
    assert console_summary(narrow, width=40) == "# Kinds\n\ntask  valid\na     0.50\nbb    0.25\n"
    wide = "| task | first column | second |\n|---|---|---|\n| t1 | " + "x" * 30 + " | 2 |\n"
    assert console_summary(wide, width=40).splitlines() == [
        "task: t1",
        "  first column  " + "x" * 24,
        "                " + "x" * 6,
        "  second        2",
    ]


def test_paragraphs_and_long_words_are_wrapped():
    text = "word " * 30 + "\n\n" + "y" * 130
    lines = console_summary(text, width=50).splitlines()
    assert max(len(line) for line in lines) <= 50
    assert "".join(lines[-3:]) == "y" * 130
    assert " ".join(" ".join(lines[:-4]).split()) == " ".join(["word"] * 30)


def test_write_report_prints_the_summary_and_writes_the_full_tables(tmp_path, monkeypatch, capsys):
    run_dir = tmp_path / "run"
    (run_dir / "policy").mkdir(parents=True)
    (run_dir / "policy" / "config.json").write_text("{}")
    results = {"initial": _result(0.0975, 0.8123), "policy": _result(0.0841, 0.8456)}

    async def fake_evaluate_policy(model, task_ids, *, method="best_of_k", **kwargs):
        return _result(0.0868, 0.8301, "aide") if method == "aide" else results[Path(model).name]

    monkeypatch.setattr(_report, "evaluate_policy", fake_evaluate_policy)
    train = TrainConfig(eval_samples=16, seed=0)
    train.tasks.ids = [TASK, TEXT]
    train.logging.wandb_mode = "disabled"
    _report.write_report(train, run_dir, tmp_path / "initial", Progress(run_dir, enabled=True))
    printed = capsys.readouterr().out
    assert [line for line in printed.splitlines() if len(line) > 100] == []
    assert "0.0841 (0.0785, gap +0.0056)" in printed and "trained beats AIDE" in printed
    full = (run_dir / "report.md").read_text()
    assert f"| {TASK} (lower is better) | 0.0975 (0.0919, gap +0.0056) |" in full
    assert max(len(line) for line in full.splitlines()) > 200
