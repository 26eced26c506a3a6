"""The actor: generate -> parse -> instrument -> execute -> grade -> reward -> send, forever.

One asyncio event loop, structured: every task lives in one ``TaskGroup``; the loop itself only
obeys :class:`~mlerl.actors._admission.Admission` (which decides admit / execute / drop) and
wakes on events (an action changed phase, a weight update landed, a staleness deadline).

Guarantees:

- Generation is batched: all actions admitted at once share one ``engine.generate`` call.
- Every sample carries the policy version that generated it: weight updates and generations
  are serialised by a :class:`VersionGate`, so the version read during a generation is exact.
  Updates are applied between generations, never during one.
- ``INFRA_ERROR`` executions are retried ``infra_retries`` times; then the action is counted in
  ``stats["infra_failed"]`` and nothing is sent (no reward is ever made up for it). While the
  backend fails most executions, sampling pauses and samples that did not run are held back
  (:mod:`._health`); a backend down for ``infra.down_after_s`` stops the actor
  (``infra_down`` says why).
- Sent samples are exactly-once at the learner across SIGKILL (see :mod:`._state`).
- Every sent sample has all fields filled: ids, behaviour log-probs, version, timestamps
  (sampled <= exec started <= exec finished <= graded) and ``duration_s`` = the execution's
  duration (0 when nothing ran).
- A program's outcome never crashes the actor; an engine exception fails only its batch.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import random
import shutil
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from mlerl.actors._admission import Admission, Verdict
from mlerl.actors._config import ActorsConfig
from mlerl.actors._gate import VersionGate
from mlerl.actors._health import InfraHealth
from mlerl.actors._improve import ImprovementBuffer, Solution
from mlerl.actors._parse import ParsedResponse, parse_response
from mlerl.actors._pipeline import Graded, Pipeline
from mlerl.actors._prompts import improve_prompt, scratch_prompt
from mlerl.actors._state import ActorState, _atomic_write
from mlerl.protocol import (
    ChatMessage,
    Completion,
    ExecStatus,
    InferenceEngine,
    ParseStatus,
    PromptKind,
    Sample,
    SamplingParams,
    WeightUpdate,
)

log = logging.getLogger(__name__)


class Sender(Protocol):
    """What the actor needs of :class:`mlerl.protocol.SampleSender`."""

    acked_seq: int

    async def send(self, sample: Sample) -> None: ...


@dataclass
class _Action:
    task_id: str
    kind: PromptKind
    parent: Solution | None
    messages: list[ChatMessage]
    completion: Completion | None = None
    parsed: ParsedResponse | None = None
    version: int = -1
    t_sampled: float = 0.0
    params: SamplingParams | None = None


@dataclass
class _Outcome:
    status: ExecStatus
    markers: list[str] = field(default_factory=list)
    graded: Graded = field(default_factory=lambda: Graded(None, False))
    t_started: float | None = None
    t_finished: float | None = None
    t_graded: float | None = None
    duration_s: float = 0.0
    output: str = ""


class Actor:
    def __init__(
        self,
        actor_id: str,
        config: ActorsConfig,
        *,
        engine: InferenceEngine,
        sandbox: Any,
        sender: Sender,
        tasks: Mapping[str, Any],
        pipeline: Pipeline,
        state: ActorState,
        weights: AsyncIterator[WeightUpdate] | None = None,
        seed: int = 0,
        limits: Any = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``limits``: the ``mlerl.sandbox.Limits`` of every execution (the run's
        ``sandbox.limits``; default ``SandboxConfig().limits``); ``wall_time_s`` 0 means each
        task's own ``time_limit_s``."""
        from mlerl.sandbox import SandboxConfig

        self.actor_id, self.config = actor_id, config
        self.limits = limits if limits is not None else SandboxConfig().limits
        self.engine, self.sandbox, self.sender = engine, sandbox, sender
        self.tasks, self.pipeline, self.state = tasks, pipeline, state
        self.weights, self.clock = weights, clock
        self.task_ids = list(tasks)
        if not self.task_ids:
            raise KeyError("tasks: no task to act on")
        self.admission = Admission(config.admission, version=engine.policy_version)
        self.buffer = ImprovementBuffer(config.improvement)
        self.rng = random.Random(f"{seed}:{actor_id}")
        self.gate = VersionGate()
        self.actions: dict[int, _Action] = {}
        self.stats = {"generated": 0, "sent": 0, "dropped": 0, "infra_failed": 0, "engine_errors": 0,
                      "backpressure_waits": 0, "backpressure_s": 0.0}
        self.waiting = ""
        """Why no new work starts now (backpressure from the learner), or empty."""
        self._waiting_since: float | None = None
        self.health = InfraHealth(config.infra)
        self.infra_down = ""
        self._held: list[tuple[_Action, _Outcome, float, dict]] = []  # not_run, unsent yet
        self._wake = asyncio.Event()
        self._done = asyncio.Event()
        self._send_lock = asyncio.Lock()  # seqs must reach the sender in order

    # ---- the loop -------------------------------------------------------------------------
    async def run(self) -> None:
        """Resend the persisted outbox, then act until ``max_samples`` are sent or cancelled."""
        for sample in self.state.pending():
            await self.sender.send(sample)
        async with asyncio.TaskGroup() as tg:
            helpers = [tg.create_task(self._heartbeat()), tg.create_task(self._watch_infra())]
            if self.weights is not None:
                helpers.append(tg.create_task(self._follow_weights()))
            work: set[asyncio.Task] = set()
            try:
                await self._schedule(tg, work)
            finally:
                for t in [*helpers, *work]:
                    t.cancel()
        self._write_heartbeat()

    async def _schedule(self, tg: asyncio.TaskGroup, work: set[asyncio.Task]) -> None:
        while not self._done.is_set():
            self._wake.clear()
            blocked = self._backpressure()
            ids = [] if self.health.paused or blocked else self.admission.admit()
            if ids:
                self._spawn(tg, work, self._generate(ids))
            for aid, verdict in self.admission.schedule(self.clock()):
                if verdict is Verdict.EXECUTE:
                    self._spawn(tg, work, self._execute(aid))
                else:
                    self._drop(aid, "stale before execution")
            deadline = self.admission.next_deadline()
            timeout = None if deadline is None else max(deadline - self.clock(), 0.0) + 0.01
            if blocked:  # the sender's state changes without waking us: look again soon
                timeout = 0.5 if timeout is None else min(timeout, 0.5)
            try:
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
            except TimeoutError:
                pass

    def _backpressure(self) -> str:
        """Why the learner cannot take more now (it said so, or it stopped acking), or ''."""
        unacked = int(getattr(self.sender, "unacked", 0))
        if getattr(self.sender, "learner_full", False):
            why = "learner full"
        elif unacked >= self.config.max_unacked:
            why = f"{unacked} samples unacked (learner not answering)"
        else:
            why = ""
        now = self.clock()
        if why and self._waiting_since is None:
            self._waiting_since = now
            self.stats["backpressure_waits"] += 1
            log.info("actor %s: waiting, %s", self.actor_id, why)
        elif not why and self._waiting_since is not None:
            self.stats["backpressure_s"] += now - self._waiting_since
            self._waiting_since = None
            log.info("actor %s: resuming, the learner takes samples again", self.actor_id)
        self.waiting = why
        return why

    def _spawn(self, tg: asyncio.TaskGroup, work: set[asyncio.Task], coro: Any) -> None:
        task = tg.create_task(coro)
        work.add(task)
        task.add_done_callback(work.discard)

    def stop(self) -> None:
        """Finish: the loop exits and in-flight actions are cancelled (nothing sent is lost)."""
        self._done.set()
        self._wake.set()

    # ---- generation -----------------------------------------------------------------------
    def _plan(self) -> _Action:
        task_id = self.rng.choice(self.task_ids)
        task = self.tasks[task_id]
        kind, parent = self.buffer.choose(task_id, self.rng)
        if parent is None:
            messages = scratch_prompt(task, self.config.prompts)
        else:
            messages = improve_prompt(task, parent.plan, parent.code, parent.output, self.config.prompts)
        return _Action(task_id, kind, parent, messages)

    async def _generate(self, ids: list[int]) -> None:
        planned = {aid: self._plan() for aid in ids}
        params = self.config.sampling(seed=self.rng.randrange(2**31))
        try:
            async with self.gate.generating():
                version = self.engine.policy_version
                completions = await self.engine.generate([a.messages for a in planned.values()], params)
        except Exception:
            log.exception("actor %s: generation of %d actions failed", self.actor_id, len(ids))
            self.stats["engine_errors"] += 1
            for aid in ids:
                self.admission.on_failed(aid)
            self._wake.set()
            return
        now = self.clock()
        for (aid, action), completion in zip(planned.items(), completions):
            action.completion, action.version, action.t_sampled = completion, version, now
            action.params = params
            action.parsed = parse_response(completion.text, completion.finish_reason, self._edits_of(action))
            self.actions[aid] = action
            self.admission.on_generated(aid, version, now)
            self.stats["generated"] += 1
        for aid in ids:
            if self.actions[aid].parsed.status is not ParseStatus.OK:  # type: ignore[union-attr]
                await self._finish(aid, _Outcome(ExecStatus.NOT_RUN))
        self._wake.set()

    def _edits_of(self, action: _Action) -> str | None:
        """The program an IMPROVE answer's edits apply to (``prompts.improve_format: edit``)."""
        edit = self.config.prompts.improve_format == "edit"
        return action.parent.code if edit and action.parent is not None else None

    # ---- execution ------------------------------------------------------------------------
    async def _execute(self, aid: int) -> None:
        action = self.actions[aid]
        task = self.tasks[action.task_id]
        try:
            outcome = await self._run_with_retries(action.parsed.code, task)  # type: ignore[union-attr]
        except Exception:
            log.exception("actor %s: execution pipeline failed", self.actor_id)
            outcome = _Outcome(ExecStatus.INFRA_ERROR)
        self._record_infra(outcome.status is ExecStatus.INFRA_ERROR)
        if outcome.status is ExecStatus.INFRA_ERROR:
            self.stats["infra_failed"] += 1
            self.admission.on_failed(aid)
            self.actions.pop(aid, None)
            self._wake.set()
            return
        await self._finish(aid, outcome)

    async def _run_with_retries(self, code: str, task: Any) -> _Outcome:
        from mlerl.sandbox import ExecutionRequest

        prepared = await self.pipeline.prepare(code)
        limits = dataclasses.replace(self.limits, wall_time_s=self.limits.wall_time_s or float(task.time_limit_s))
        request = ExecutionRequest(program=prepared.program, data_dir=task.public_dir, limits=limits)
        for attempt in range(self.config.infra_retries + 1):
            scanner = self.pipeline.scanner(prepared.nonce)

            def on_output(stream: str, chunk: bytes, scanner: Any = scanner) -> None:
                if stream == "stdout":
                    scanner.feed(chunk)

            result = await self.sandbox.run(request, on_output)
            try:
                if result.status is not ExecStatus.INFRA_ERROR:
                    return await self._grade(result, scanner.close(), task, prepared.nonce)
                log.warning("actor %s: infra error (attempt %d): %s", self.actor_id, attempt + 1, result.error)
            finally:
                for path in {Path(p).parent for p in result.files.values()}:
                    shutil.rmtree(path, ignore_errors=True)
        return _Outcome(ExecStatus.INFRA_ERROR)

    async def _grade(self, result: Any, markers: list[str], task: Any, nonce: str | None) -> _Outcome:
        graded = Graded(None, False, "no submission")
        submission = result.files.get("submission.csv")
        if result.status is ExecStatus.OK and submission is not None:
            graded = await asyncio.to_thread(self.pipeline.grade, task, Path(submission))
        out, err = result.stdout.text(), result.stderr.text()
        joined = out + ("\n" if out and err and not out.endswith("\n") else "") + err
        output = self.pipeline.clean(joined, nonce)
        limit = self.config.output_tail_chars
        return _Outcome(
            status=result.status,
            markers=markers,
            graded=graded,
            t_started=result.started_at,
            t_finished=result.finished_at,
            t_graded=self.clock(),
            duration_s=max(float(result.duration_s), 0.0),
            output=output[len(output) - limit :] if limit else "",
        )

    # ---- infrastructure health ------------------------------------------------------------
    def _record_infra(self, infra_error: bool) -> None:
        was_paused = self.health.paused
        self.health.record(infra_error, self.clock())
        if self.health.paused and not was_paused:
            log.warning("actor %s: sampling %s", self.actor_id, self.health.reason(self.clock()))
        elif was_paused and not self.health.paused:
            log.warning("actor %s: the sandbox is back; sampling resumes", self.actor_id)
        self._wake.set()

    async def _watch_infra(self) -> None:
        """Release held samples once an execution got through; while paused, probe the
        backend every ``probe_s``; give up after ``down_after_s``."""
        while True:
            if self.health.confirmed and self._held:
                held, self._held = self._held, []
                for item in held:
                    await self._send(*item)
            now = self.clock()
            if self.health.down(now):
                self.infra_down = self.health.reason(now)
                log.error("actor %s: stopping, the sandbox stayed down: %s", self.actor_id,
                          self.infra_down)
                self.stop()
                return
            if self.health.paused or (self._held and not self.health.confirmed):
                self._record_infra(not await self._probe())
                if self.health.paused:
                    await asyncio.sleep(self.config.infra.probe_s)
                continue
            await asyncio.sleep(0.2)

    async def _probe(self) -> bool:
        """Run a trivial program: True when the backend ran it (whatever its status)."""
        from mlerl.sandbox import ExecutionRequest, Limits

        try:
            result = await self.sandbox.run(ExecutionRequest(
                program="pass\n", collect=(), limits=Limits(wall_time_s=60.0, memory_mb=256)))
        except Exception:
            log.exception("actor %s: sandbox probe failed", self.actor_id)
            return False
        return result.status is not ExecStatus.INFRA_ERROR

    # ---- results --------------------------------------------------------------------------
    async def _finish(self, aid: int, outcome: _Outcome) -> None:
        action = self.actions.pop(aid)
        task = self.tasks[action.task_id]
        reward, parts = self.pipeline.reward(outcome.markers, outcome.status, outcome.graded, task)
        verdict = self.admission.on_finished(aid, self.clock())
        parsed = action.parsed
        assert parsed is not None and reward is not None
        if verdict is Verdict.DROP:
            self._remember(f"{self.actor_id}:x{aid}", action, outcome, reward)
            self._drop(aid, "stale after execution")
            return
        if outcome.status is ExecStatus.NOT_RUN and not self.health.confirmed:
            self._held.append((action, outcome, reward, parts))  # sent once the backend is up
            return
        await self._send(action, outcome, reward, parts)

    async def _send(self, action: _Action, outcome: _Outcome, reward: float, parts: dict) -> None:
        async with self._send_lock:
            sample = self._sample(action, outcome, reward, parts)
            self.state.record(sample)
            self._remember(sample.sample_id, action, outcome, reward)
            await self.sender.send(sample)
        self.stats["sent"] += 1
        if self.config.max_samples and self.stats["sent"] >= self.config.max_samples:
            self.stop()
        self._wake.set()

    def _remember(self, sample_id: str, action: _Action, outcome: _Outcome, reward: float) -> None:
        parsed = action.parsed
        assert parsed is not None
        self.buffer.add(
            Solution(sample_id, action.task_id, parsed.plan, parsed.code, outcome.output, reward,
                     outcome.status, parsed.status, outcome.graded.score, action.version)
        )  # fmt: skip

    def _sample(self, action: _Action, out: _Outcome, reward: float, parts: dict) -> Sample:
        c, parsed, p = action.completion, action.parsed, action.params
        assert c is not None and parsed is not None and p is not None
        # Clamp against clock skew between the actor and the sandbox so the order holds.
        t0 = action.t_sampled
        t1 = None if out.t_started is None else max(out.t_started, t0)
        t2 = None if out.t_finished is None else max(out.t_finished, t1 or t0)
        t3 = None if out.t_graded is None else max(out.t_graded, t2 or t0)
        seq = self.state.next_seq
        return Sample(
            sample_id=f"{self.actor_id}:{seq}", actor_id=self.actor_id, seq=seq,
            task_id=action.task_id, prompt_kind=action.kind,
            parent_id=action.parent.sample_id if action.parent else None,
            prompt_ids=list(c.prompt_ids), response_ids=list(c.token_ids),
            behaviour_logprobs=list(c.logprobs), policy_version=action.version,
            temperature=p.temperature, top_p=p.top_p, top_k=p.top_k,
            t_sampled=t0, t_exec_started=t1, t_exec_finished=t2, t_graded=t3,
            duration_s=out.duration_s, parse_status=parsed.status, exec_status=out.status,
            markers=list(out.markers), score=out.graded.score, private_score=out.graded.private_score,
            valid_submission=out.graded.valid,
            reward=float(reward), reward_parts=parts, code=parsed.code, output_tail=out.output,
        )  # fmt: skip

    def _drop(self, aid: int, why: str) -> None:
        self.actions.pop(aid, None)
        self.stats["dropped"] += 1
        self._wake.set()
        log.info("actor %s: dropped action %d (%s)", self.actor_id, aid, why)

    # ---- helpers --------------------------------------------------------------------------
    async def _follow_weights(self) -> None:
        assert self.weights is not None
        async for update in self.weights:
            try:
                async with self.gate.updating():
                    await self.engine.update_weights(update)
            except Exception:
                log.exception("actor %s: weight update %d rejected", self.actor_id, update.version)
                continue
            self.admission.on_version(self.engine.policy_version)
            self._wake.set()

    async def _heartbeat(self) -> None:
        while True:
            self._write_heartbeat()
            await asyncio.sleep(self.config.heartbeat_s)

    def _write_heartbeat(self) -> None:
        self.state.prune(self.sender.acked_seq)
        now = self.clock()
        ongoing = 0.0 if self._waiting_since is None else now - self._waiting_since
        beat = {
            "actor_id": self.actor_id, "t": now, "policy_version": self.engine.policy_version,
            "next_seq": self.state.next_seq, "acked_seq": self.state.acked_seq,
            "alive_actions": self.admission.alive, **self.stats, **self.admission.stats,
            "backpressure_s": self.stats["backpressure_s"] + ongoing,  # the wait under way counts too
            "paused": self.health.reason(self.clock()), "infra_pauses": self.health.pauses,
            "held_not_run": len(self._held), "stopped": self.infra_down,
            "waiting": self.waiting, "unacked": int(getattr(self.sender, "unacked", 0)),
        }  # fmt: skip
        _atomic_write(self.state.dir / "heartbeat.json", json.dumps(beat).encode())
