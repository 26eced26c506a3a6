"""The ``mlerl-bench`` command: list, prepare, grade, grade-batch, validate, compare."""

import json

import pandas as pd

from mlerl.bench._grade import LEADERBOARD_KEYS, REPORT_KEYS
from mlerl.bench._cli import main

TASK = "standin-cancer-auc-tiny"


def test_list_prepare_grade_validate(tiny_data, capsys, tmp_path):
    assert main(["list", "--json", "--data-dir", str(tiny_data)]) == 0
    rows = json.loads(capsys.readouterr().out)
    ids = {r["id"] for r in rows}
    assert TASK in ids and "leaf-classification" in ids and len(ids) >= 30
    assert main(["prepare", TASK, "--data-dir", str(tiny_data)]) == 0
    capsys.readouterr()
    sample = tiny_data / TASK / "prepared" / "public" / "sample_submission.csv"
    assert (
        main(["grade", "--task", TASK, "--submission", str(sample), "--data-dir", str(tiny_data)])
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert (
        tuple(report) == REPORT_KEYS + LEADERBOARD_KEYS
        and report["score"] == 0.5
        and report["valid_submission"]
    )
    # both leaderboards: a constant prediction scores AUC 0.5 on each part
    assert (
        report["public_score"] == report["private_score"] == 0.5 and report["split"] == "public 0.5"
    )
    assert (
        main(
            [
                "grade",
                "--task",
                TASK,
                "--submission",
                str(sample),
                "--data-dir",
                str(tiny_data),
                "--public-fraction",
                "1",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["split"] == "full"
    assert (
        main(
            ["validate", "--task", TASK, "--submission", str(sample), "--data-dir", str(tiny_data)]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out) == {"valid": True, "reason": "submission is valid"}
    bad = tmp_path / "bad.csv"
    bad.write_text("id,target\n1,0.5\n")
    assert (
        main(["validate", "--task", TASK, "--submission", str(bad), "--data-dir", str(tiny_data)])
        == 1
    )
    out = json.loads(capsys.readouterr().out)
    assert out["valid"] is False and "score" not in out


def test_grade_batch_aggregates(tiny_data, capsys, tmp_path):
    main(["prepare", TASK, "--data-dir", str(tiny_data)])
    sample = tiny_data / TASK / "prepared" / "public" / "sample_submission.csv"
    batch = tmp_path / "batch.jsonl"
    batch.write_text(
        json.dumps({"competition_id": TASK, "submission_path": str(sample)})
        + "\n"
        + json.dumps({"task_id": TASK, "submission_path": "missing.csv"})
        + "\n"
    )
    out = tmp_path / "agg.json"
    assert (
        main(
            [
                "grade-batch",
                "--submissions",
                str(batch),
                "--data-dir",
                str(tiny_data),
                "--output",
                str(out),
            ]
        )
        == 0
    )
    agg = json.loads(out.read_text())
    assert (
        agg["total_runs"],
        agg["total_runs_with_submissions"],
        agg["total_valid_submissions"],
    ) == (2, 1, 1)
    assert len(agg["competition_reports"]) == 2 and agg["total_medals"] == 0


def test_errors_exit_2(capsys, tmp_path):
    assert (
        main(
            [
                "grade",
                "--task",
                "no-such-task",
                "--submission",
                "x.csv",
                "--data-dir",
                str(tmp_path),
            ]
        )
        == 2
    )
    assert "unknown task" in capsys.readouterr().err
    assert main(["compare", str(tmp_path / "absent.jsonl"), "--out", str(tmp_path / "o")]) == 2


def test_unprepared_task_grades_invalid_with_reason(capsys, tmp_path):
    sub = tmp_path / "s.csv"
    pd.DataFrame({"id": [1], "target": [0.5]}).to_csv(sub, index=False)
    assert (
        main(["grade", "--task", TASK, "--submission", str(sub), "--data-dir", str(tmp_path)]) == 0
    )
    captured = capsys.readouterr()
    assert json.loads(captured.out)["valid_submission"] is False and "prepare" in captured.err
