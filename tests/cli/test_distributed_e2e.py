"""Distributed `mlerl train` end to end: a 2-rank FSDP2 learner under torchrun (kill -9 of a
rank included), a stalled learner (backpressure), and split roles (learner and actors as
separate invocations, restarted in both orders). Real processes, tiny policy of conftest.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch

from mlerl.actors._state import ActorState
from mlerl.cli._ports import PortLease
from mlerl.learner._buffer import read_journal
from mlerl.learner._checkpoint import complete_checkpoints
from mlerl.protocol import decode

pytestmark = pytest.mark.slow

ENV = {**os.environ, "WANDB_SILENT": "true", "TOKENIZERS_PARALLELISM": "false"}


def _metrics(run_dir: Path) -> list[dict]:
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _steps(run_dir: Path) -> list[int]:
    return [m["step"] for m in _metrics(run_dir) if m.get("stream") == "learner"]


def _checkpointed(run_dir: Path) -> list[int]:
    """The versions of the run's committed checkpoints: what a learner killed now resumes from
    (each is written after its update's row)."""
    return [
        int(p.name.removeprefix("step_")) for p in complete_checkpoints(run_dir / "checkpoints")
    ]


def _journal(run_dir: Path):
    path = run_dir / "buffer" / "journal.bin"
    return read_journal(path)[0] if path.exists() else []


def _wait_for(predicate, timeout: float, what: str, proc: subprocess.Popen | None = None) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the run exited ({proc.returncode}) while waiting for {what}")
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    return dict(kv.split("=", 1) for kv in raw.decode(errors="replace").split("\0") if "=" in kv)


def _learner_rank(run_dir: Path, rank: int, processes) -> int:
    """pid of the learner worker with RANK=rank (torchrun's own process has no RANK)."""
    for line in processes(f"mlerl.learner --config {run_dir}"):
        pid = int(line.split(":", 1)[0])
        if _environ(pid).get("RANK") == str(rank) and "torch.distributed.run" not in line:
            return pid
    raise AssertionError(f"no learner rank {rank} among {processes(str(run_dir))}")


def _assert_exactly_once(learner_run: Path, actors_dirs: list[Path]) -> None:
    """The journal holds each (actor, seq) once; every seq an actor produced is in the journal
    or still in that actor's outbox (produced, not yet acknowledged)."""
    keys = [(s.actor_id, s.seq) for s in _journal(learner_run)]
    assert keys and len(keys) == len(set(keys))
    seen = 0
    for root in actors_dirs:
        for actor_dir in root.iterdir():
            produced = ActorState(actor_dir).next_seq
            outbox = {decode(p.read_bytes()).seq for p in (actor_dir / "outbox").glob("*.msgpack")}
            stored = {seq for actor, seq in keys if actor == actor_dir.name}
            assert stored | outbox == set(range(produced)), actor_dir.name
            seen += len(stored)
    assert seen == len(keys)  # no sample from an actor nobody knows of


def _one_rank_update_matches(run_dir: Path) -> None:
    """Replay the run's first update on one process (same config, same batch: the samples the
    step-1 checkpoint says were consumed) and compare with the 2-rank checkpoint's policy and
    critic. The critic is what makes the comparison mean something whatever the batch holds: its
    value loss (V - R)^2 has a gradient for any batch, while the policy's vanishes when the four
    samples are the same memorised program (equal rewards, probabilities near 1)."""
    from mlerl.learner import ExperienceBuffer, LearnerConfig
    from mlerl.learner._process import build_learner
    from mlerl.protocol import load_run, load_section

    after = torch.load(run_dir / "checkpoints" / "step_00000001" / "state.pt", weights_only=True)
    path = run_dir / "config.yaml"
    config = load_section(LearnerConfig, path, "learner")
    run = load_run(path)
    learner = build_learner(config, torch.device("cpu"), run.model.path, run.seed)
    assert learner.critic is not None
    models = {"policy": learner.policy, "critic": learner.critic}
    initial = {
        name: {k: v.clone() for k, v in m.state_dict().items()} for name, m in models.items()
    }
    consumed = {(a, s) for a, seqs in after["extra"]["buffer"]["consumed"].items() for s in seqs}
    assert len(consumed) == config.batch_size
    replay = ExperienceBuffer(run_dir.parent / "replay", config.batch_policy)
    for sample in _journal(run_dir):
        if (sample.actor_id, sample.seq) in consumed:
            replay.add(sample, sync=False)
    learner.update(replay.take(config.batch_size))
    replay.close()
    for name, model in models.items():
        got = model.state_dict()
        assert set(got) == set(after[name]), name
        for k, v in after[name].items():
            assert torch.allclose(got[k], v, atol=2e-5, rtol=1e-4), (name, k)
    # AdamW's first step moves a parameter with a non-vanishing gradient by about its lr (1e-3),
    # fifty times the comparison's tolerance
    moved = max(
        (after["critic"][k] - initial["critic"][k]).abs().max().item() for k in after["critic"]
    )
    assert moved > 5e-4, f"the critic moved only {moved}: the comparison would mean nothing"


def test_two_rank_learner_trains_and_survives_a_killed_rank(tmp_path, train_argv, processes):
    """`mlerl train learner_procs=2`: >= 3 updates; the first equals one rank's update on the
    same batch; kill -9 of rank 1 mid-run ends that torchrun; the supervisor starts a new one,
    which resumes from the last checkpoint and the journal: nothing lost, nothing duplicated, no
    process left."""
    run_dir = tmp_path / "run"
    argv = train_argv(
        run_dir,
        "learner_procs=2",
        "learner.max_updates=4",
        "learner.checkpoint_every=1",
        "learner.keep_checkpoints=10",
        "eval_samples=0",
        # GAE with a critic (not the default group baseline): its update is never empty, so the
        # one-rank replay below always compares weights that moved
        "learner.advantage=gae",
        "learner.critic=copy",
        "learner.normalize_advantages=false",
        "learner.critic_lr=1e-3",
    )
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV
    )
    try:
        _wait_for(
            lambda: any(s >= 1 for s in _steps(run_dir)) and _checkpointed(run_dir),
            900,
            "an update with two ranks and its checkpoint",
            proc,
        )
        killed = _learner_rank(run_dir, 1, processes)
        os.kill(killed, signal.SIGKILL)
        out, _ = proc.communicate(timeout=900)
    finally:
        proc.kill()
    log = (run_dir / "logs" / "learner.log").read_text()
    assert proc.returncode == 0, out[-3000:] + log[-3000:]
    steps = _steps(run_dir)
    # an update whose checkpoint was written just before the kill is not logged again
    assert steps[-1] == 4 and {1, 4} <= set(steps) <= {1, 2, 3, 4}, steps
    assert "restarting learner" in (run_dir / "supervisor.log").read_text()
    assert log.count("resumed from") >= 1, log[-3000:]
    _assert_exactly_once(run_dir, [run_dir / "actors"])
    assert (run_dir / "policy" / "config.json").is_file()
    assert processes(str(run_dir)) == []
    _one_rank_update_matches(run_dir)


def _rss_kb(pid: int) -> int:
    """Resident memory of ``pid`` and all its descendants, in KiB."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat[stat.rfind(")") + 2 :].split()[1]), []).append(
                int(entry.name)
            )
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        todo.extend(children.get(p, []))
        try:
            status = Path(f"/proc/{p}/status").read_text()
        except OSError:
            continue
        total += next(
            (int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0
        )
    return total


def test_stalled_learner_bounds_the_actors_and_they_resume(tmp_path, train_argv, processes):
    """SIGSTOP the learner for a minute: the actors stop at ``actors.max_unacked`` unacked samples,
    say so in heartbeat.json, hold memory flat, and resume when the learner continues."""
    run_dir = tmp_path / "run"
    argv = train_argv(
        run_dir,
        "learner.max_updates=3",
        "actors.max_unacked=4",
        "actors.heartbeat_s=1",
        "learner.max_pending_samples=4",
        "eval_samples=0",
    )
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV
    )
    beat_path = run_dir / "actors" / "actor-0" / "heartbeat.json"
    try:
        _wait_for(lambda: any(s >= 1 for s in _steps(run_dir)), 900, "the first update", proc)
        learner = min(
            int(line.split(":", 1)[0]) for line in processes(f"mlerl.learner --config {run_dir}")
        )
        # this run's actor only: another run's actor-0 may be alive on the same machine
        actor = min(
            int(line.split(":", 1)[0])
            for line in processes(
                f"mlerl.actors --config {run_dir / 'config.yaml'} --actor-id actor-0"
            )
        )
        os.kill(learner, signal.SIGSTOP)
        try:
            # either reason is the stopped learner: its samples go unacked, or (when it was
            # stopped while holding a full batch it had not trained on) its last word was "full"
            _wait_for(
                lambda: json.loads(beat_path.read_text()).get("waiting", "") != "",
                300,
                "the actor to wait for the stopped learner",
                proc,
            )
            rss, unacked = [], []
            for _ in range(12):  # a minute stalled
                time.sleep(5)
                rss.append(_rss_kb(actor))
                unacked.append(json.loads(beat_path.read_text())["unacked"])
            acked_while_stalled = json.loads(beat_path.read_text())["acked_seq"]
        finally:
            os.kill(learner, signal.SIGCONT)
        out, _ = proc.communicate(timeout=900)
    finally:
        proc.kill()
    assert proc.returncode == 0, out[-3000:]
    # bounded: at most the bound plus what was alive when it was reached (the actor's admission
    # capacity, 4), and not growing once that in-flight work is done
    assert max(unacked) <= 4 + 4 and unacked == sorted(unacked) and len(set(unacked[6:])) == 1, (
        unacked
    )
    outbox = run_dir / "actors" / "actor-0" / "outbox"
    settled = rss[4:]
    assert max(settled) - min(settled) < 0.05 * min(settled), rss  # flat: < 5% once settled
    (tmp_path / "stall.json").write_text(json.dumps({"rss_kb": rss, "unacked": unacked}))
    beat = json.loads(beat_path.read_text())
    # resumed: the learner acked samples after SIGCONT. (What the final beat's "waiting" says is
    # a race: once the learner has made its last update it stops answering, so the actor may end
    # waiting on unacked samples or on a full learner again.)
    assert beat["backpressure_waits"] >= 1 and beat["backpressure_s"] >= 55, beat
    assert beat["acked_seq"] > acked_while_stalled, (acked_while_stalled, beat)
    assert _steps(run_dir)[-1] == 3
    # after the stall every sample but those sent after the learner's last commit is acked: the
    # outbox holds at most what the actor may leave unacked plus what was in flight when that
    # bound was reached (the same 4 + 4 as during the stall; 5 was seen once: a bound of 4 flaked)
    assert len(list(outbox.glob("*.msgpack"))) <= 4 + 4
    _assert_exactly_once(run_dir, [run_dir / "actors"])
    assert processes(str(run_dir)) == []


_PORTS = PortLease()  # held for the session: ports no bind(0) or other run can be given


def test_split_roles_over_loopback_restart_in_both_orders(tmp_path, train_argv, processes):
    """The README's multi-host recipe on one host: `role=actors` started first (it waits for the
    learner's keys), then `role=learner`; the learner is killed (-9) and resumed while the
    actors run; then the actors are stopped and resumed while the learner runs. Nothing lost
    or duplicated.

    The learner holds at most one batch it has not trained on (``max_pending_samples`` = B = 4)
    and needs 8 updates, so it cannot finish on what it held when the actors were stopped: with
    the default 4 B it once ran from update 2 to its last (6) on buffered samples before the
    actors restarted, and the test then waited for a learner that had exited."""
    learner_dir, actors_dir = tmp_path / "learner", tmp_path / "actors"
    samples, weights = (f"tcp://127.0.0.1:{port}" for port in _PORTS.take(2))
    learner_argv = train_argv(
        learner_dir,
        "role=learner",
        "transport.samples_address=" + samples.replace("127.0.0.1", "0.0.0.0"),
        "transport.weights_address=" + weights.replace("127.0.0.1", "0.0.0.0"),
        "learner.max_updates=8",
        "learner.max_pending_samples=4",
        "learner.checkpoint_every=1",
        "eval_samples=0",
    )
    actors_argv = train_argv(
        actors_dir,
        "role=actors",
        "num_actors=1",
        f"transport.samples_address={samples}",
        f"transport.weights_address={weights}",
        f"transport.keys_dir={learner_dir / 'keys'}",
    )

    def start(argv):
        return subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV
        )

    procs = []
    try:
        actors = start(actors_argv)  # first: waits for the keys the learner creates
        procs.append(actors)
        _wait_for(lambda: (actors_dir / "config.yaml").exists(), 600, "the actors' config", actors)
        time.sleep(3)
        assert (
            actors.poll() is None and not (actors_dir / "logs").exists()
        )  # waiting, nothing started
        learner = start(learner_argv)
        procs.append(learner)
        _wait_for(
            lambda: any(s >= 1 for s in _steps(learner_dir)) and _checkpointed(learner_dir),
            900,
            "an update and its checkpoint",
            learner,
        )
        os.kill(
            min(
                int(line.split(":", 1)[0])
                for line in processes(f"mlerl.learner --config {learner_dir}")
            ),
            signal.SIGKILL,
        )
        learner.communicate(timeout=120)
        assert learner.returncode != 0
        learner = start(
            train_argv(tmp_path / "ignored", f"resume={learner_dir}")
        )  # actors still running
        procs.append(learner)
        _wait_for(
            lambda: (
                max(_steps(learner_dir), default=0) >= 2
                and "resumed from" in (learner_dir / "logs" / "learner.log").read_text()
            ),
            900,
            "an update after the learner's restart",
            learner,
        )
        actors.send_signal(signal.SIGTERM)  # now the learner is up first: restart the actors
        actors.communicate(timeout=120)
        assert learner.poll() is None, (
            f"the learner finished before the actors restarted: {_steps(learner_dir)}"
        )
        before = max(s.seq for s in _journal(learner_dir))
        actors = start(train_argv(tmp_path / "ignored2", f"resume={actors_dir}"))
        procs.append(actors)
        _wait_for(
            lambda: max(s.seq for s in _journal(learner_dir)) > before,
            900,
            "a sample from the restarted actors",
            actors,
        )
        out, _ = learner.communicate(timeout=900)
        assert learner.returncode == 0, out[-3000:]
        actors.send_signal(signal.SIGTERM)
        actors.communicate(timeout=120)
    finally:
        for p in procs:
            p.kill()
    assert _steps(learner_dir)[-1] == 8
    _assert_exactly_once(learner_dir, [actors_dir / "actors"])
    assert processes(str(learner_dir)) == [] and processes(str(actors_dir)) == []
