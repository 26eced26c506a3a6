"""The W&B samples table the learner logs after each update: bounded rows, cut texts, and what
an offline run's files hold afterwards."""

from __future__ import annotations

import json

import msgspec

from mlerl.learner._samples import (
    SAMPLES_TABLE_COLUMNS,
    SampleLog,
    cut,
    log_samples_table,
    table_row,
)
from mlerl.protocol import ExecStatus, MetricsConfig, PromptKind, make_sink


def test_cut_keeps_short_texts_and_says_how_much_it_dropped():
    assert cut("abc", 3) == "abc"
    assert cut("abcdef", 4) == "abcd\n... (2 more characters)"


def _improve(make_sample, seq: int, **fields):
    sample = make_sample(seq=seq, reward=0.25 * seq, duration_s=1.5)
    return msgspec.structs.replace(
        sample, prompt_kind=PromptKind.IMPROVE, parent_id="a0:0", **fields
    )


def test_sample_log_keeps_the_newest_rows_since_the_last_update(tmp_path, make_sample):
    log = SampleLog(tmp_path, method="m", seed=0, table_rows=2)
    for seq in (1, 2, 3):
        log.add(
            _improve(
                make_sample,
                seq,
                plan=f"plan {seq}",
                code="x" * 5000,
                output_tail="out",
                score=0.5,
                private_score=0.4,
                valid_submission=True,
                parent_reward=0.5,
            ),
            step=7,
        )
    log.add(make_sample(seq=9, status=ExecStatus.INFRA_ERROR), step=7)  # never rewarded: no row
    assert log.take_table() == []  # nothing until the journal commit
    log.flush()
    rows = [dict(zip(SAMPLES_TABLE_COLUMNS, row)) for row in log.take_table()]
    assert [r["sample_id"] for r in rows] == ["a0:2", "a0:3"]  # the newest two of three
    last = rows[-1]
    assert (last["kind"], last["parent_id"], last["plan"], last["status"], last["step"]) == (
        "improve",
        "a0:0",
        "plan 3",
        "ok",
        7,
    )
    assert (last["reward"], last["public_score"], last["private_score"], last["duration_s"]) == (
        0.75,
        0.5,
        0.4,
        1.5,
    )
    assert last["program"] == "x" * 4000 + "\n... (1000 more characters)"
    assert log.take_table() == []  # taken: the next update logs only what arrives after
    log.close()
    records = [json.loads(line) for line in (tmp_path / "samples.jsonl").read_text().splitlines()]
    assert len(records) == 3 and records[0]["code"] == "x" * 5000 and records[0]["plan"] == "plan 1"
    assert [r["parent_reward"] for r in records] == [
        0.5,
        0.5,
        0.5,
    ]  # what the revision started from
    assert table_row(records[0])[SAMPLES_TABLE_COLUMNS.index("program")].startswith(
        "x" * 4000 + "\n"
    )


def test_an_offline_run_holds_each_updates_samples_table(tmp_path, make_sample, wandb_offline):
    sink = make_sink(MetricsConfig(), tmp_path, name="r")
    log = SampleLog(tmp_path, method="m", seed=0, table_rows=16)
    for step, seqs in ((1, (1, 2)), (2, ()), (3, (3,))):
        for seq in seqs:
            log.add(
                _improve(make_sample, seq, plan=f"plan {seq}", code=f"print({seq})"), step=step - 1
            )
        log.flush()
        sink.log({"loss": 0.5}, step)
        log_samples_table(log, sink, step)
    sink.close()
    log.close()
    run = wandb_offline(tmp_path)
    tables = [
        (row["learner/step"], row["learner/samples"])
        for row in run.history()
        if "learner/samples" in row
    ]
    assert [step for step, _ in tables] == [1, 3]  # an update with no new sample logs no table
    columns, rows = run.table(tables[0][1])
    assert columns == list(SAMPLES_TABLE_COLUMNS)
    assert [
        (r[columns.index("sample_id")], r[columns.index("plan")], r[columns.index("program")])
        for r in rows
    ] == [("a0:1", "plan 1", "print(1)"), ("a0:2", "plan 2", "print(2)")]
    _, rows = run.table(tables[1][1])
    assert [r[columns.index("sample_id")] for r in rows] == ["a0:3"]


def test_no_table_without_wandb(tmp_path, make_sample):
    sink = make_sink(MetricsConfig(wandb_mode="disabled"), tmp_path, name="r")
    log = SampleLog(tmp_path, method="m", seed=0, table_rows=4)
    log.add(make_sample(seq=1), step=0)
    log.flush()
    log_samples_table(log, sink, 1)  # a sink without W&B keeps no media: nothing raised, no files
    sink.close()
    log.close()
    assert not (tmp_path / "wandb").exists()
