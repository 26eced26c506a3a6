"""The real mlerl system wired for measurement, shared by ``async_vs_sync.py`` and ``overhead.py``.

What is real: the actor loop (:class:`mlerl.actors.Actor`, its admission and version
gate), the local sandbox (bubblewrap + cgroups where available), AST instrumentation with the
secure marker channel, grading in a subprocess, the reward, the actor's durable outbox, the
ZeroMQ sample stream (``SampleSender`` -> ``SampleReceiver``, acked after the learner's journal
fsync), the learner (``ExperienceBuffer``, ``Learner.update`` PPO + GAE critic on the tiny Qwen2
test model, ``publish_weights``) in its own process, and the weight broadcast back to the actor.

What is scripted: the policy. :class:`ScriptedEngine` writes the workload's programs in a fixed
order (real token ids, uniform behaviour log-probs), so a comparison isolates how executions
are scheduled. Timing probes wrap the sandbox, the pipeline and the sender without changing
what they do.

Modes (:func:`run_mode`): ``async`` is one actor that keeps ``concurrency`` executions busy and
a learner that updates whenever ``batch_size`` samples are stored (the system as shipped).
``sync`` is the same components driven in lock step: the actor generates exactly
``batch_size`` programs, runs them (``concurrency`` at a time) to the last one, then waits for
the learner's update before the next round.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import math
import multiprocessing
import os
import resource
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import TASK_ID, host_cpu_jiffies, program_id, self_time


# ---- the scripted policy ---------------------------------------------------------------------
class ScriptedEngine:
    """An ``InferenceEngine`` whose policy writes ``responses`` in order (cycling).

    Token ids are real: the prompt goes through the tokenizer's chat template (as ``HFEngine``
    does) and the response text through the tokenizer plus end-of-turn. Behaviour log-probs are
    those of a uniform policy (-log V), close to what the random test model assigns.
    ``budget`` (None: unlimited) caps the completions handed out; a call that would exceed it
    waits for :meth:`allow`. Weight updates are read and checked (sha256), not loaded.
    """

    def __init__(self, tokenizer: Any, responses: list[str], budget: int | None = None) -> None:
        if not responses:
            raise ValueError("responses: need at least one")
        self.tokenizer, self.responses, self.budget = tokenizer, responses, budget
        self.logprob = -math.log(len(tokenizer))
        self.calls: list[dict[str, Any]] = []
        self._version = 0
        self._next = 0
        self._more = asyncio.Event()

    @property
    def policy_version(self) -> int:
        return self._version

    def allow(self, n: int) -> None:
        """Let ``n`` more completions out."""
        self.budget = (self.budget or 0) + n
        self._more.set()

    async def generate(self, conversations: Any, params: Any) -> list[Any]:
        from mlerl.actors import chat_prompt_ids
        from mlerl.protocol import Completion

        while self.budget is not None and self.budget < len(conversations):
            self._more.clear()
            await self._more.wait()
        if self.budget is not None:
            self.budget -= len(conversations)
        t0 = time.time()
        out, pids = [], []
        for conv in conversations:
            text = self.responses[self._next % len(self.responses)]
            self._next += 1
            ids = self.tokenizer.encode(text, add_special_tokens=False) + [
                self.tokenizer.eos_token_id
            ]
            out.append(
                Completion(
                    prompt_ids=chat_prompt_ids(self.tokenizer, conv),
                    token_ids=ids,
                    logprobs=[self.logprob] * len(ids),
                    text=text,
                    finish_reason="stop",
                )
            )
            pids.append(program_id(text))
        self.calls.append({"t_start": t0, "t_end": time.time(), "pids": pids})
        await asyncio.sleep(0)
        return out

    async def update_weights(self, update: Any) -> None:
        from mlerl.protocol import read_update_bytes

        await asyncio.to_thread(read_update_bytes, update)
        self._version = max(self._version, update.version)

    async def close(self) -> None:
        pass


# ---- timing probes ---------------------------------------------------------------------------
@dataclass
class Probe:
    """Timestamps (Unix seconds) of each stage, keyed by program id or by sample seq."""

    prepared: dict[int, tuple[float, float]] = field(default_factory=dict)
    """pid -> (start, end) of instrumentation (``pipeline.prepare``)."""
    execs: list[dict[str, Any]] = field(default_factory=list)
    """One record per ``sandbox.run`` call (also cancelled ones)."""
    graded: dict[int, tuple[float, float]] = field(default_factory=dict)
    """pid -> (start, end) of grading (``pipeline.grade``)."""
    sent: dict[int, dict[str, Any]] = field(default_factory=dict)
    """seq -> {"pid", "t_send"}: the sample was handed to the sender."""
    acked: dict[int, float] = field(default_factory=dict)
    """seq -> when the sender first saw its (cumulative) ack."""
    pid_by_path: dict[str, int] = field(default_factory=dict)


class TimedSandbox:
    """A sandbox that records when each run was called and returned, and the program's own times."""

    def __init__(self, inner: Any, probe: Probe) -> None:
        self.inner, self.probe = inner, probe

    async def run(self, request: Any, on_output: Any = None) -> Any:
        rec: dict[str, Any] = {
            "pid": program_id(request.program),
            "t_call": time.time(),
            "status": "cancelled",
        }
        self.probe.execs.append(rec)
        try:
            result = await self.inner.run(request, on_output)
        finally:
            rec["t_return"] = time.time()
        rec.update(
            status=result.status.value,
            started_at=result.started_at,
            finished_at=result.finished_at,
            self_time=self_time(result.stdout.text()),
        )
        if "submission.csv" in result.files:
            self.probe.pid_by_path[str(result.files["submission.csv"])] = rec["pid"]
        return result

    async def close(self) -> None:
        await self.inner.close()


class TimedPipeline:
    """``inner`` (a ``Pipeline``) with instrumentation and grading timed."""

    def __init__(self, inner: Any, probe: Probe) -> None:
        self.inner, self.probe = inner, probe

    async def prepare(self, code: str) -> Any:
        t0 = time.time()
        out = await self.inner.prepare(code)
        self.probe.prepared[program_id(code)] = (t0, time.time())
        return out

    def grade(self, task: Any, path: Path) -> Any:
        t0 = time.time()
        out = self.inner.grade(task, path)
        self.probe.graded[self.probe.pid_by_path.get(str(path), -1)] = (t0, time.time())
        return out

    def scanner(self, nonce: str | None) -> Any:
        return self.inner.scanner(nonce)

    def reward(self, *args: Any) -> Any:
        return self.inner.reward(*args)

    def clean(self, text: str, nonce: str | None) -> str:
        return self.inner.clean(text, nonce)

    def close(self) -> None:
        self.inner.close()


class TimedSender:
    """What the actor needs of a ``SampleSender``, recording hand-over and ack times."""

    def __init__(self, inner: Any, probe: Probe) -> None:
        self.inner, self.probe = inner, probe
        self._unacked: list[int] = []

    @property
    def acked_seq(self) -> int:
        return self.inner.acked_seq

    @property
    def unacked(self) -> int:
        return self.inner.unacked

    @property
    def learner_full(self) -> bool:
        return self.inner.learner_full

    async def changed(self) -> None:
        await self.inner.changed()

    async def send(self, sample: Any) -> None:
        self.probe.sent[sample.seq] = {"pid": program_id(sample.code), "t_send": time.time()}
        self._unacked.append(sample.seq)
        await self.inner.send(sample)

    async def watch_acks(self, interval_s: float = 0.001) -> None:
        """Poll the sender's public ``acked_seq``; resolution ``interval_s``. Runs until cancelled."""
        while True:
            acked, now = self.inner.acked_seq, time.time()
            while self._unacked and self._unacked[0] <= acked:
                self.probe.acked[self._unacked.pop(0)] = now
            await asyncio.sleep(interval_s)


# ---- the learner process ---------------------------------------------------------------------
@dataclass
class LearnerSpec:
    model_dir: str
    run_dir: str
    samples_address: str
    weights_address: str
    batch_size: int
    updates: int
    torch_threads: int = 1


def _train_step(learner: Any, batch: list[Any], weights_dir: Path) -> dict[str, Any]:
    from mlerl.learner import publish_weights

    t0 = time.time()
    metrics = learner.update(batch)
    t1 = time.time()
    update = publish_weights(learner.policy, learner.version, weights_dir, 0)
    return {
        "t_start": t0,
        "t_update_end": t1,
        "t_end": time.time(),
        "version": learner.version,
        "lag_mean": metrics["staleness/versions_mean"],
        "lag_max": metrics["staleness/versions_max"],
        "loss_policy": metrics.get("loss/policy"),
        "update": update,
    }


async def _serve(spec: LearnerSpec) -> None:
    """Receive -> journal -> take B -> ``Learner.update`` + publish, ``spec.updates`` times."""
    import torch

    from mlerl.learner import ExperienceBuffer, LearnerConfig, build_learner, publish_weights
    from mlerl.protocol import SampleReceiver, WeightBroadcaster

    torch.set_num_threads(spec.torch_threads)
    run = Path(spec.run_dir)
    config = LearnerConfig(
        batch_size=spec.batch_size,
        micro_batch_size=min(spec.batch_size, 8),
        bf16=False,
        gradient_checkpointing=False,
        checkpoint_every=0,
        max_updates=spec.updates,
    )
    learner = build_learner(config, torch.device("cpu"), spec.model_dir)
    buffer = ExperienceBuffer(run / "buffer")
    arrived = asyncio.Event()
    samples: dict[str, dict[str, Any]] = {}

    def on_sample(s: Any) -> None:
        buffer.add(s, sync=False)
        samples[s.sample_id] = {
            "t_stored": time.time(),
            "duration_s": s.duration_s,
            "policy_version": s.policy_version,
            "status": s.exec_status.value,
            "valid": s.valid_submission,
            "score": s.score,
            "reward": s.reward,
            "t_sampled": s.t_sampled,
            "t_exec_started": s.t_exec_started,
            "t_exec_finished": s.t_exec_finished,
            "t_graded": s.t_graded,
            "prompt_tokens": len(s.prompt_ids),
            "response_tokens": len(s.response_ids),
        }
        arrived.set()

    updates: list[dict[str, Any]] = []
    async with (
        SampleReceiver(spec.samples_address, on_sample, commit=buffer.sync) as receiver,
        WeightBroadcaster(spec.weights_address, republish_s=0.5) as broadcaster,
    ):
        broadcaster.publish(
            await asyncio.to_thread(publish_weights, learner.policy, 0, run / "weights", 0)
        )
        cpu0 = time.process_time()  # CPU while serving (start-up excluded)
        while learner.version < spec.updates:
            while not buffer.ready(spec.batch_size):
                arrived.clear()
                await arrived.wait()
            t_take = time.time()
            batch = buffer.take(spec.batch_size)
            record = await asyncio.to_thread(_train_step, learner, batch, run / "weights")
            broadcaster.publish(record.pop("update"))
            updates.append({**record, "t_take": t_take, "samples": [s.sample_id for s in batch]})
        result = {
            "updates": updates,
            "samples": samples,
            "cpu_s": time.process_time() - cpu0,
            "receiver": dict(receiver.counters),
        }
        (run / "learner.json").write_text(json.dumps(result))
        await asyncio.sleep(1.0)  # keep re-announcing the final version for the actor


def _learner_main(spec: LearnerSpec) -> None:
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(_serve(spec))


class LearnerProcess:
    """The learner in its own (spawned) process, as in a real run."""

    def __init__(self, spec: LearnerSpec) -> None:
        self.spec = spec
        self.proc = multiprocessing.get_context("spawn").Process(
            target=_learner_main, args=(spec,), daemon=True
        )

    def start(self) -> None:
        self.proc.start()

    async def wait_version(self, sub: Any, version: int, timeout_s: float) -> Any:
        """Wait until the subscriber has seen ``version``; the newest update read (or None)."""
        deadline, update = time.time() + timeout_s, None
        while sub.version < version:
            if not self.proc.is_alive():
                raise RuntimeError(
                    f"learner process exited (code {self.proc.exitcode}) before version {version}"
                )
            if time.time() > deadline:
                raise TimeoutError(
                    f"learner did not publish version {version} within {timeout_s} s"
                )
            try:
                update = await asyncio.wait_for(sub.latest(), 1.0)
            except TimeoutError:
                pass
        return update

    def result(self, timeout_s: float = 60.0) -> dict[str, Any]:
        self.proc.join(timeout_s)
        path = Path(self.spec.run_dir) / "learner.json"
        if not path.exists():
            raise RuntimeError(f"learner process wrote no {path} (exit code {self.proc.exitcode})")
        return json.loads(path.read_text())

    def stop(self) -> None:
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(10)


# ---- one mode, end to end --------------------------------------------------------------------
@dataclass
class SystemConfig:
    mode: str
    """``async`` (the shipped system) or ``sync`` (lock step: generate B, run all, update)."""
    samples: int
    """N: samples the learner consumes; the run ends with its N / B-th update."""
    batch_size: int
    """B: samples per update."""
    concurrency: int
    """C: executions at once (actor admission and sandbox)."""
    oversample: float = 1.5
    """``async``: the admission's m (actions alive <= ceil(m C)); the shipped default is 1.5."""
    torch_threads: int = 1
    """Threads of the learner process."""
    description_chars: int = 800
    """Prompt size (``PromptConfig``): sets the prompt's token count, hence the learner's work."""
    snippet_chars: int = 300
    exec_time_limit_s: float = 300.0
    watch_acks: bool = False
    """Record when each sample's ack arrives (1 ms polling)."""
    learner_timeout_s: float = 600.0

    def __post_init__(self) -> None:
        if self.mode not in ("sync", "async"):
            raise ValueError(f"mode: must be 'sync' or 'async', got {self.mode!r}")
        if self.batch_size < 1 or self.concurrency < 1 or self.samples < 1:
            raise ValueError("samples, batch_size and concurrency must be >= 1")
        if self.samples % self.batch_size:
            raise ValueError(
                f"samples ({self.samples}) must be a multiple of batch_size ({self.batch_size})"
            )
        if self.mode == "sync" and self.batch_size < self.concurrency:
            raise ValueError(
                "sync mode needs batch_size >= concurrency (a round generates exactly B programs)"
            )
        if self.oversample < 1:
            raise ValueError("oversample: must be >= 1")


def _cpu_seconds() -> float:
    """CPU seconds of this process and its reaped children (sandboxes, graders)."""
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


async def run_mode(
    cfg: SystemConfig,
    task: Any,
    model_dir: Path,
    tokenizer: Any,
    responses: list[str],
    workdir: Path,
) -> dict[str, Any]:
    """Run one mode until the learner has consumed ``cfg.samples``; raw timings of everything."""
    from mlerl.actors import (
        Actor,
        ActorsConfig,
        ActorState,
        AdmissionConfig,
        ImprovementConfig,
        PromptConfig,
        RealPipeline,
    )
    from mlerl.protocol import SampleSender, WeightSubscriber
    from mlerl.sandbox import Limits, SandboxConfig, make_sandbox

    run = workdir / cfg.mode
    run.mkdir(parents=True)
    updates = cfg.samples // cfg.batch_size
    spec = LearnerSpec(
        str(model_dir),
        str(run / "learner"),
        f"ipc://{run}/samples.sock",
        f"ipc://{run}/weights.sock",
        cfg.batch_size,
        updates,
        cfg.torch_threads,
    )
    learner = LearnerProcess(spec)
    probe = Probe()
    engine = ScriptedEngine(tokenizer, responses, budget=0 if cfg.mode == "sync" else None)
    sandbox = TimedSandbox(
        make_sandbox(
            SandboxConfig(
                backend="local",
                max_concurrency=cfg.concurrency,
                work_root=str(run / "sandbox"),
                limits=Limits(wall_time_s=cfg.exec_time_limit_s, memory_mb=1024),
            )
        ),
        probe,
    )
    pipeline = TimedPipeline(RealPipeline(), probe)
    state = ActorState(run / "state" / "a0")
    prompts = PromptConfig(description_chars=cfg.description_chars, snippet_chars=cfg.snippet_chars)
    stats: dict[str, int] = {}
    rounds: list[dict[str, float]] = []

    def actor(sender: Any, max_samples: int, admission: Any, weights: Any = None) -> Any:
        config = ActorsConfig(
            improvement=ImprovementConfig(improve_prob=0.0),
            prompts=prompts,
            admission=admission,
            max_samples=max_samples,
            heartbeat_s=1.0,
        )
        return Actor(
            "a0",
            config,
            engine=engine,
            sandbox=sandbox,
            sender=sender,
            tasks={TASK_ID: task},
            pipeline=pipeline,
            state=state,
            weights=weights,
        )

    def count(a: Any) -> None:
        for k, v in {**a.stats, **a.admission.stats}.items():
            stats[k] = stats.get(k, 0) + v

    learner.start()
    sub = WeightSubscriber(spec.weights_address)
    try:
        async with SampleSender(spec.samples_address, "a0") as raw, asyncio.TaskGroup() as tg:
            sender = TimedSender(raw, probe)
            watcher = tg.create_task(sender.watch_acks()) if cfg.watch_acks else None
            await learner.wait_version(sub, 0, cfg.learner_timeout_s)
            load_before, cpu0, host0, t_start = (
                os.getloadavg(),
                _cpu_seconds(),
                host_cpu_jiffies(),
                time.time(),
            )
            if cfg.mode == "sync":
                for r in range(updates):
                    t0 = time.time()
                    engine.allow(cfg.batch_size)
                    a = actor(
                        sender,
                        cfg.batch_size,
                        AdmissionConfig(
                            max_in_flight=cfg.concurrency,
                            oversample=cfg.batch_size / cfg.concurrency,
                        ),
                    )
                    await a.run()
                    count(a)
                    await raw.flush(timeout=120)
                    state.prune(raw.acked_seq)
                    t_executed = time.time()
                    update = await learner.wait_version(sub, r + 1, cfg.learner_timeout_s)
                    if update is not None:
                        await engine.update_weights(update)
                    rounds.append({"t_start": t0, "t_executed": t_executed, "t_end": time.time()})
            else:
                a = actor(
                    sender,
                    cfg.samples,
                    AdmissionConfig(max_in_flight=cfg.concurrency, oversample=cfg.oversample),
                    weights=aiter(sub),
                )
                await a.run()
                count(a)
                await raw.flush(timeout=120)
                state.prune(raw.acked_seq)
                await learner.wait_version(sub, updates, cfg.learner_timeout_s)
            t_done, cpu1, host1, load_after = (
                time.time(),
                _cpu_seconds(),
                host_cpu_jiffies(),
                os.getloadavg(),
            )
            if watcher is not None:
                await asyncio.sleep(0.01)
                watcher.cancel()
        result = learner.result()
    finally:
        sub.close()
        await sandbox.close()
        learner.stop()
    return {
        "mode": cfg.mode,
        "config": dataclasses.asdict(cfg),
        "t_start": t_start,
        "t_done": t_done,
        "t_end": result["updates"][-1]["t_end"],
        "rounds": rounds,
        "engine_calls": engine.calls,
        "probe": dataclasses.asdict(probe),
        "learner": result,
        "actor_stats": stats,
        "actor_cpu_s": cpu1 - cpu0,
        "host_cpu": [host0, host1],
        "load_before": list(load_before),
        "load_after": list(load_after),
    }
