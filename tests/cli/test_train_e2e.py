"""`mlerl train` end to end: real processes, ZeroMQ, sandbox, grader, learner, W&B files.

Every run uses the tiny memorising policy of conftest.py on one tiny stand-in task.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from mlerl.actors._state import ActorState
from mlerl.learner._buffer import read_journal
from mlerl.learner._checkpoint import complete_checkpoints
from mlerl.protocol import ExecStatus, decode

pytestmark = pytest.mark.slow


def _metrics(run_dir: Path) -> list[dict]:
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _journal(run_dir: Path):
    samples, _, _ = read_journal(run_dir / "buffer" / "journal.bin")
    return samples


def _assert_run_complete(run_dir: Path, updates: int) -> None:
    steps = [m["step"] for m in _metrics(run_dir) if m.get("stream") == "learner"]
    assert steps[-1] == updates, steps  # the policy version advanced to max_updates
    samples = _journal(run_dir)
    assert len(samples) >= 4 * updates
    for s in samples:  # every field filled and consistent
        assert len(s.response_ids) == len(s.behaviour_logprobs) > 0
        assert s.prompt_ids and s.task_id == "standin-cancer-auc-tiny"
        if s.exec_status is not ExecStatus.NOT_RUN:
            assert s.t_sampled <= s.t_exec_started <= s.t_exec_finished <= s.t_graded
            assert s.duration_s == pytest.approx(s.t_exec_finished - s.t_exec_started, abs=0.5)
    versions = {s.policy_version for s in samples}
    assert max(versions) >= 1, "no sample was generated after a weight update"
    assert any(s.exec_status is ExecStatus.OK and s.valid_submission for s in samples), [
        (s.exec_status, s.output_tail[-300:]) for s in samples[:4]
    ]
    # one W&B run across resumes, unless a resume redid updates whose rows were logged after the
    # last checkpoint: then the earlier run is listed as superseded. The current run's file is
    # the newest and complete (a SIGKILLed learner's file may be cut short: metrics.jsonl is the
    # record that survives a crash).
    assert len(steps) == len(set(steps)), steps  # each update has one row
    run_id = (run_dir / "wandb" / "mlerl-run-id").read_text()
    superseded_file = run_dir / "wandb" / "mlerl-superseded-runs"
    superseded = superseded_file.read_text().split() if superseded_file.is_file() else []
    wandb_files = sorted((run_dir / "wandb").glob("offline-run-*/run-*.wandb"))
    assert wandb_files and wandb_files[-1].name == f"run-{run_id}.wandb", wandb_files
    assert {f.name for f in wandb_files} <= {f"run-{i}.wandb" for i in [run_id, *superseded]}
    assert run_id not in superseded
    assert wandb_files[-1].stat().st_size > 1000
    assert (run_dir / "policy" / "config.json").is_file()
    records = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert {r["sample_id"] for r in records} <= {s.sample_id for s in samples}


@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_train_runs_end_to_end(tmp_path, train, processes, backend, wandb_offline):
    run_dir = tmp_path / "run"
    evals = "eval_samples=2" if backend == "local" else "eval_samples=0"
    probe = ("learner.probe_samples=2", "learner.probe_every=2")
    done = train(run_dir, f"sandbox={backend}", "learner.max_updates=3", evals, *probe)
    assert done.returncode == 0, done.stderr[-3000:]
    _assert_run_complete(run_dir, updates=3)
    assert processes(str(run_dir)) == []
    # the decision probe: the initial policy (step 0) and every second update
    probed = [
        m["step"]
        for m in _metrics(run_dir)
        if m.get("stream") == "probe" and "standin-cancer-auc-tiny/parsed" in m
    ]
    assert probed == [0, 2], probed
    if backend == "local":
        report = json.loads((run_dir / "report.json").read_text())
        assert report["k"] == 2 and set(report) >= {"initial", "trained", "aide", "plots"}
        text = (run_dir / "report.md").read_text()
        assert text.startswith("# The run's best solution per task")
        assert "\n# Trained vs initial policy" in text
        _assert_best_solution_kept(run_dir, report["run"]["standin-cancer-auc-tiny"])
        assert any(p.endswith("best_score_vs_time.png") for p in report["plots"])
        # AIDE with the initial policy: the same K executions, best so far after each
        aide = report["aide"]["per_seed"][0]["tasks"]["standin-cancer-auc-tiny"]
        assert (
            report["aide"]["method"] == "aide"
            and aide["k"] == 2
            and len(aide["best_vs_executions"]) == 2
        )
        assert any(p.endswith("rl_vs_aide.png") for p in report["plots"])
        _assert_wandb_browsable(wandb_offline(run_dir))
        _assert_eval_of_trained_policy(run_dir)


def _assert_best_solution_kept(run_dir: Path, found: dict) -> None:
    """``best/<task>/`` holds the valid record of ``samples.jsonl`` with the best public score,
    whole, and the report's curve ends on its private score."""
    records = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text().splitlines()]
    valid = [r for r in records if r["valid"] and r["task_id"] == "standin-cancer-auc-tiny"]
    assert found["executions"] == sum(r["task_id"] == "standin-cancer-auc-tiny" for r in records)
    if not valid:
        assert found["best"] is None
        return
    top = max(r["score"] for r in valid)  # AUC: higher is better; the first of ties is kept
    first = next(r for r in valid if r["score"] == top)
    assert found["best"]["sample_id"] == first["sample_id"]
    d = run_dir / "best" / "standin-cancer-auc-tiny"
    assert (d / "program.py").read_text() == first["code"]
    assert (d / "submission.csv").read_text().splitlines()[0]  # the actor sent it whole
    assert found["best_vs_executions"][-1] == first["private_score"]


def _assert_wandb_browsable(run) -> None:
    """The offline W&B run holds samples tables as training went, the closing tables and plots."""
    history = run.history()
    tables = [r["learner/samples"] for r in history if "learner/samples" in r]
    assert tables, "no samples table"
    columns, rows = run.table(tables[0])
    assert {"plan", "program", "output_tail", "reward", "public_score", "private_score"} <= set(
        columns
    )
    assert 0 < len(rows) <= 16 and all(
        r[columns.index("task_id")] == "standin-cancer-auc-tiny" for r in rows
    )
    report = {k for r in history if "report/step" in r for k in r}
    assert {"report/rl_vs_aide", "report/learning_curves"} <= report
    assert any(k.startswith("report/trained_vs_initial_policy") for k in report)


def _assert_eval_of_trained_policy(run_dir: Path) -> None:
    """`mlerl eval` on the trained policy: K samples per seed, summaries and mean +- s.e."""
    import sys

    out = run_dir / "eval.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mlerl.cli",
            "eval",
            "--model",
            str(run_dir / "policy"),
            "--run",
            str(run_dir),
            "--k",
            "3",
            "--seeds",
            "2",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert [run["seed"] for run in result["per_seed"]] == [0, 1]
    for run in result["per_seed"]:
        summary = run["tasks"]["standin-cancer-auc-tiny"]
        assert summary["k"] == 3 and 0.0 <= summary["valid_frac"] <= 1.0
        if summary["best_score"] is not None:  # AUC: higher is better, best >= mean on the board it
            assert summary["best_public"] >= summary["mean_public"]  # was chosen on (public)
            assert summary["best_gap"] == pytest.approx(
                summary["best_score"] - summary["best_public"]
            )
    across = result["tasks"]["standin-cancer-auc-tiny"]
    assert across["valid_runs"] == sum(
        r["tasks"]["standin-cancer-auc-tiny"]["best_score"] is not None for r in result["per_seed"]
    )


def _wait_for(predicate, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def _pid_of(marker: str, processes) -> int:
    found = [int(line.split(":", 1)[0]) for line in processes(marker)]
    assert found, marker
    return min(found)


def test_kill_9_learner_and_actor_then_resume_loses_and_duplicates_nothing(
    tmp_path, train, train_argv, processes
):
    run_dir = tmp_path / "run"
    argv = train_argv(
        run_dir,
        "learner.max_updates=6",
        "learner.checkpoint_every=1",
        "num_actors=2",
        "eval_samples=0",
    )
    env = {**os.environ, "WANDB_SILENT": "true"}
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    try:
        # an actor killed mid-run is restarted by the supervisor and resumes its sequence
        _wait_for(
            lambda: any(s.actor_id == "actor-1" for s in _journal(run_dir)),
            600,
            "a sample from actor-1",
        )
        os.kill(
            _pid_of(
                f"mlerl.actors --config {run_dir / 'config.yaml'} --actor-id actor-1", processes
            ),
            signal.SIGKILL,
        )  # this run's actor-1, not another run's on the same machine
        # the supervisor restarts it (before the learner dies: the learner's death ends the run,
        # and a learner killed first left actor-1 dead, unrestarted, in one run)
        _wait_for(
            lambda: "restarting actor-1" in (run_dir / "supervisor.log").read_text(),
            120,
            "the supervisor to restart actor-1",
        )
        # then the learner, once it has checkpointed at least one update (the checkpoint is
        # committed after the update's row, so the row alone does not mean one)
        _wait_for(
            lambda: complete_checkpoints(run_dir / "checkpoints"), 600, "a committed checkpoint"
        )
        os.kill(_pid_of(f"mlerl.learner --config {run_dir}", processes), signal.SIGKILL)
        out, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode != 0  # the learner's death ends the run
    assert processes(str(run_dir)) == []  # the supervisor stopped the actors too
    assert "restarting actor-1" in (run_dir / "supervisor.log").read_text()

    resumed = train(tmp_path / "ignored", f"resume={run_dir}")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    _assert_run_complete(run_dir, updates=6)

    # Exactly once: the journal holds each (actor, seq) once; every seq an actor produced is
    # in the journal or still in that actor's outbox (produced but not yet acknowledged).
    keys = [(s.actor_id, s.seq) for s in _journal(run_dir)]
    assert len(keys) == len(set(keys))
    for actor_dir in (run_dir / "actors").iterdir():
        produced = ActorState(actor_dir).next_seq  # 0 if it never recorded a sample
        outbox = {decode(p.read_bytes()).seq for p in (actor_dir / "outbox").glob("*.msgpack")}
        stored = {seq for actor, seq in keys if actor == actor_dir.name}
        assert stored | outbox == set(range(produced)), actor_dir.name
    assert processes(str(run_dir)) == []


def test_unreachable_sandbox_backend_stops_the_run_without_training(tmp_path, train, processes):
    """Infrastructure down is not a training signal: with the Docker engine unreachable, no
    sample reaches the learner (not even the unparseable ones that need no sandbox), the
    actor gives up after ``actors.infra.down_after_s`` and the run exits non-zero, saying why."""
    run_dir = tmp_path / "run"
    done = train(
        run_dir,
        "sandbox=docker",
        f"sandbox.docker_host=unix://{tmp_path}/no.sock",
        "sandbox.engine_timeout_s=2",
        "actors.infra.down_after_s=5",
        "actors.infra.probe_s=1",
        "learner.max_updates=3",
        "eval_samples=2",
    )
    assert done.returncode == 3, done.stderr[-3000:]
    assert "the sandbox stayed down" in done.stdout + done.stderr
    journal = run_dir / "buffer" / "journal.bin"
    assert not journal.exists() or _journal(run_dir) == []
    assert [m for m in _metrics(run_dir) if m.get("stream") == "learner"] == []
    assert not (run_dir / "report.md").exists()
    beat = json.loads((run_dir / "actors" / "actor-0" / "heartbeat.json").read_text())
    assert beat["stopped"].startswith("paused: the sandbox failed") and beat["sent"] == 0
    assert processes(str(run_dir)) == []
