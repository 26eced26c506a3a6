"""Metrics sinks: JSONL content, console output, fan-out, and real W&B offline run files."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from pathlib import Path

import pytest

from mlerl.protocol import MetricsConfig, make_sink
from mlerl.protocol._metrics import ConsoleSink, JsonlSink, MetricsSink, MultiSink, WandbSink


def test_jsonl_rows(tmp_path: Path) -> None:
    path = tmp_path / "m" / "metrics.jsonl"
    sink = JsonlSink(path)
    sink.log({"loss": 0.5, "kl": 0.01}, step=0)
    sink.log(
        {"reward": -10, "ok": True, "bad": float("nan"), "big": float("inf")}, 12, stream="actor/a0"
    )
    sink.close()
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["stream"], r["step"]) for r in rows] == [("learner", 0), ("actor/a0", 12)]
    assert rows[0]["loss"] == 0.5 and rows[0]["kl"] == 0.01
    assert rows[1]["reward"] == -10 and rows[1]["ok"] == 1.0
    assert rows[1]["bad"] == "nan" and rows[1]["big"] == "inf"
    assert all(isinstance(r["time"], float) for r in rows)
    with pytest.raises(ValueError, match="closed"):
        sink.log({"loss": 1.0}, 1)


@pytest.mark.parametrize(
    ("metrics", "step", "stream", "match"),
    [
        ({"loss": "high"}, 0, "learner", "loss"),
        ({"loss": None}, 0, "learner", "loss"),
        ({"step": 1.0}, 0, "learner", "step"),
        ({"loss": 1.0}, -1, "learner", "step"),
        ({"loss": 1.0}, 0, "", "stream"),
        ({"loss": 1.0}, 0, "actor/", "stream"),
    ],
)
def test_jsonl_rejects_bad_input(
    tmp_path: Path, metrics: dict, step: int, stream: str, match: str
) -> None:
    sink = JsonlSink(tmp_path / "m.jsonl")
    with pytest.raises((TypeError, ValueError), match=match):
        sink.log(metrics, step, stream=stream)
    sink.close()
    assert (tmp_path / "m.jsonl").read_text() == ""  # nothing half-written


def test_console_and_multi(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    jsonl = JsonlSink(tmp_path / "m.jsonl")
    sink = MultiSink([ConsoleSink(every=2), jsonl])
    assert isinstance(sink, MetricsSink) and isinstance(jsonl, MetricsSink)
    for step in range(3):
        sink.log({"loss": 1.0 / (step + 1)}, step)
    sink.close()
    out = capsys.readouterr().out
    assert "[learner] step=0 loss=1" in out and "step=2 loss=0.3333" in out and "step=1" not in out
    assert len((tmp_path / "m.jsonl").read_text().splitlines()) == 3


def test_multi_closes_all_then_raises() -> None:
    closed = []

    class Bad:
        def log(self, metrics, step, *, stream="learner"): ...
        def close(self):
            closed.append("bad")
            raise OSError("boom")

    class Good(Bad):
        def close(self):
            closed.append("good")

    with pytest.raises(OSError, match="boom"):
        MultiSink([Bad(), Good()]).close()
    assert closed == ["bad", "good"]


@pytest.fixture
def quiet_wandb(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in {
        "WANDB_SILENT": "true",
        "WANDB_DISABLE_GIT": "true",
        "WANDB_DISABLE_CODE": "true",
        "WANDB_CONSOLE": "off",
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("WANDB_MODE", raising=False)


def test_wandb_offline_writes_run_files(tmp_path: Path, quiet_wandb: None) -> None:
    sink = WandbSink(tmp_path, project="mlerl-test", config={"lr": 1e-5})
    sink.log({"loss": 0.25}, 0)
    sink.log({"loss": 0.125}, 1)
    sink.log({"reward": 1.5}, 40, stream="actor/a0")
    sink.close()
    runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    (log_file,) = runs[0].glob("run-*.wandb")
    # the .wandb file is a protobuf record log; its keys and JSON values are stored verbatim
    data = log_file.read_bytes()
    assert data.startswith(b":W&B")
    for needle in [
        b"learner/loss",
        b"0.125",
        b"actor/a0/reward",
        b"1.5",
        b"actor/a0/step",
        b"40",
        b"learner/*",
        b"actor/a0/*",
    ]:  # each stream's define_metric with its own step
        assert needle in data, needle


def test_wandb_disabled_writes_nothing(tmp_path: Path, quiet_wandb: None) -> None:
    sink = WandbSink(tmp_path, mode="disabled")
    sink.log({"loss": 1.0}, 0)
    sink.close()
    assert not list(tmp_path.rglob("*.wandb"))
    with pytest.raises(ValueError, match="mode"):
        WandbSink(tmp_path, mode="sometimes")


def test_console_without_rich_uses_print(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "rich.console", None)  # makes `from rich.console import` fail
    sink = ConsoleSink()
    sink.log({"reward": 0.5}, 3, stream="actor/a1")
    assert capsys.readouterr().out == "[actor/a1] step=3 reward=0.5\n"


def test_make_sink_on_the_same_run_dir_continues_the_wandb_run(
    tmp_path: Path, quiet_wandb: None
) -> None:
    config = MetricsConfig(console=False)
    first = make_sink(config, tmp_path, name="r")
    first.log({"loss": 1.0}, 0)
    first.close()
    run_id = (tmp_path / "wandb" / "mlerl-run-id").read_text()
    resumed = make_sink(config, tmp_path, name="r")  # what `mlerl train resume=...` does
    resumed.log({"loss": 0.5}, 1)
    resumed.close()
    runs = sorted((tmp_path / "wandb").glob("offline-run-*"))
    # W&B names a run's directory offline-run-<time>-<id>, with a -1 suffix when the same id
    # starts twice within a second
    assert len(runs) == 2 and all(f"-{run_id}" in r.name for r in runs)
    assert all((r / f"run-{run_id}.wandb").is_file() for r in runs)
    other = make_sink(config, tmp_path / "other", name="o")
    other.close()
    assert (tmp_path / "other" / "wandb" / "mlerl-run-id").read_text() != run_id


def _rows(path: Path) -> list[tuple[str, int]]:
    return [(r["stream"], r["step"]) for r in map(json.loads, path.read_text().splitlines())]


def test_rewind_cuts_the_updates_a_resume_does_again(tmp_path: Path) -> None:
    from mlerl.protocol._metrics import rewind_jsonl

    path = tmp_path / "metrics.jsonl"
    sink = JsonlSink(path)
    for step in (1, 2, 3, 4):
        sink.log({"loss": float(step)}, step)
    sink.close()
    with open(path, "a") as f:
        f.write('{"time": 1, "stream": "learner", "st')  # a torn last line of a killed learner
    assert rewind_jsonl(path, 4) == 1  # only the torn line goes
    assert rewind_jsonl(path, 2) == 2
    assert _rows(path) == [("learner", 1), ("learner", 2)]
    assert rewind_jsonl(path, 2) == 0


def test_a_resumed_sink_keeps_one_record_per_step(tmp_path: Path, quiet_wandb: None) -> None:
    """Restored at step 2 after logging 1..4: metrics.jsonl holds 1, 2, then the redone 3, 4 (not
    1, 2, 3, 4, 3, 4); W&B gets a new run that replays 1, 2 first, and the old run is listed."""
    config = MetricsConfig(console=False)
    first = make_sink(config, tmp_path, name="r", resume_step=0)
    # values with long decimal expansions: a needle like b"3.25" can occur in a binary W&B file
    # by chance (a timestamp, an id), and did once
    old = {step: step + 0.123456789 for step in (1, 2, 3, 4)}
    redone = {step: step + 10.987654321 for step in (3, 4)}
    for step in (1, 2, 3, 4):
        first.log({"loss": old[step]}, step)
    first.close()
    old_id = (tmp_path / "wandb" / "mlerl-run-id").read_text()
    resumed = make_sink(config, tmp_path, name="r", resume_step=2)
    for step in (3, 4):
        resumed.log({"loss": redone[step]}, step)
    resumed.close()
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [(r["step"], r["loss"]) for r in rows] == [
        (1, old[1]),
        (2, old[2]),
        (3, redone[3]),
        (4, redone[4]),
    ]
    new_id = (tmp_path / "wandb" / "mlerl-run-id").read_text()
    assert (
        new_id != old_id
        and (tmp_path / "wandb" / "mlerl-superseded-runs").read_text() == old_id + "\n"
    )
    (new_run,) = [r for r in (tmp_path / "wandb").glob("offline-run-*") if r.name.endswith(new_id)]
    data = (new_run / f"run-{new_id}.wandb").read_bytes()
    replayed_and_redone = [old[1], old[2], redone[3], redone[4]]
    for needle in [b"learner/loss", *(repr(v).encode() for v in replayed_and_redone)]:
        assert needle in data, needle
    for needle in [
        repr(old[3]).encode(),
        repr(old[4]).encode(),
    ]:  # the superseded 3, 4 are not in the new run
        assert needle not in data, needle
    # a resume that redoes nothing keeps the W&B run
    again = make_sink(config, tmp_path, name="r", resume_step=4)
    again.close()
    assert (tmp_path / "wandb" / "mlerl-run-id").read_text() == new_id


def test_console_lines_are_not_wrapped_off_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    sink = ConsoleSink()
    metrics = {f"split/task/task-{i}/score_mean": 0.5 + i for i in range(8)}
    sink.log(metrics, 3)
    (line,) = capsys.readouterr().out.splitlines()
    assert len(line) > 200 and line.endswith("split/task/task-7/score_mean=7.5")


def test_wandb_tables_and_images_refuse_bad_input(tmp_path: Path, quiet_wandb: None) -> None:
    sink = WandbSink(tmp_path, mode="offline")
    try:
        with pytest.raises(ValueError, match="row 1 has 1 cells, expected 2"):
            sink.log_table("t", ["a", "b"], [[1, 2], [3]], 0)
        with pytest.raises(FileNotFoundError, match="no file"):
            sink.log_images({"plot": tmp_path / "missing.png"}, 0)
        with pytest.raises(ValueError, match="stream"):
            sink.log_table("t", ["a"], [[1]], 0, stream="/bad")
    finally:
        sink.close()


def test_multisink_hands_tables_only_to_sinks_that_keep_media(tmp_path: Path) -> None:
    from mlerl.protocol import MediaSink

    got: list[tuple[str, int]] = []

    class Media:
        def log(
            self, metrics: Mapping[str, float], step: int, *, stream: str = "learner"
        ) -> None: ...

        def close(self) -> None: ...

        def log_table(
            self, key: str, columns: Any, rows: Any, step: int, *, stream: str = "learner"
        ) -> None:
            got.append((f"{stream}/{key}", len(rows)))

        def log_images(self, images: Any, step: int, *, stream: str = "learner") -> None:
            got.append((stream, len(images)))

    jsonl = JsonlSink(tmp_path / "m.jsonl")
    assert isinstance(Media(), MediaSink) and not isinstance(jsonl, MediaSink)
    sink = MultiSink([jsonl, Media()])
    sink.log_table("samples", ["a"], [[1], [2]], 3)
    sink.log_images({"p": tmp_path / "p.png"}, 0, stream="report")
    sink.close()
    assert got == [("learner/samples", 2), ("report", 1)]
    assert (tmp_path / "m.jsonl").read_text() == ""
