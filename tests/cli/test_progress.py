"""The console's per-update line: the best column follows each task's direction."""

from __future__ import annotations

import json

from mlerl.cli._progress import Progress, best_cell


def test_best_cell_follows_each_tasks_direction():
    record = {
        "split/task/auc/score_max": 0.91,
        "split/task/auc/score_min": 0.5,
        "split/task/rmsle/score_max": 60.99,
        "split/task/rmsle/score_min": 0.0392,
    }
    # the case: the batch held 60.99 and 0.0392 on a lower-is-better task
    assert best_cell(record, {"rmsle": True}) == "0.0392"
    assert best_cell(record, {"auc": False, "rmsle": True}) == "0.9100 0.0392"
    assert (
        best_cell(record, {"auc": False, "other": True}) == "0.9100 -"
    )  # no valid sample in the batch
    assert best_cell(record, {}) == "-"


def test_progress_prints_the_direction_aware_best(tmp_path):
    rec = {
        "step": 3,
        "batch/reward_mean": -0.5,
        "batch/score_max": 60.99,
        "split/task/t/score_min": 0.0392,
        "split/task/t/score_max": 60.99,
    }
    (tmp_path / "metrics.jsonl").write_text(json.dumps(rec) + "\n")
    progress = Progress(tmp_path, directions={"t": True})
    lines: list[str] = []
    progress.say = lines.append  # type: ignore[method-assign]
    progress.tick()
    assert "best score" in lines[0] and "0.0392" in lines[1] and "60.99" not in lines[1]


def test_closing_table_lines_are_not_wrapped_off_a_terminal(tmp_path, capsys):
    """stdout a log file (capsys: not a terminal): a 200-column table row stays one line, whole."""
    row = "| " + " | ".join(f"task-{i} 0.{i:04d} (0.{i:04d}, gap +0.0000)" for i in range(5)) + " |"
    assert len(row) > 160
    progress = Progress(tmp_path)
    progress.say(row)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and lines[0].endswith(row)
