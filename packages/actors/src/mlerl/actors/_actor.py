"""The actor: generate -> parse -> execute -> grade -> reward -> send, forever.

:class:`Actor` schedules; the work it schedules is elsewhere: running and grading a program
(:mod:`._execute`), turning a finished action into a :class:`Sample` (:mod:`._sample`), what to
admit, execute or drop (:class:`~._admission.Admission`, a pure state machine), when the sandbox
counts as down (:class:`~._health.InfraHealth`, pure), prompts and parsing.

One asyncio event loop, structured: every task lives in one ``TaskGroup``. The scheduler wakes
only on events (an action changed phase, a weight update landed, the sender's acks or the
learner's room changed while the actor waits for them) or at the next staleness deadline; the
infrastructure watcher wakes on an execution's outcome, and probes every ``probe_s`` while
paused. Nothing polls.

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
- Every sent sample has all fields filled (:func:`._sample.make_sample`), its measured
  generation time included (monotonic clock, around the batch's ``engine.generate``).
- A program's outcome never crashes the actor; an engine exception fails only its batch.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from mlerl.actors._admission import Admission, Verdict
from mlerl.actors._config import ActorsConfig
from mlerl.actors._execute import Executed, execute, probe
from mlerl.actors._gate import VersionGate
from mlerl.actors._health import InfraHealth
from mlerl.actors._improve import ImprovementBuffer, creditable_markers
from mlerl.actors._parse import parse_response
from mlerl.actors._pipeline import Pipeline
from mlerl.actors._prompts import improve_prompt, scratch_prompt
from mlerl.actors._sample import Action, make_sample, solution
from mlerl.actors._state import ActorState, _atomic_write
from mlerl.protocol import ExecStatus, InferenceEngine, ParseStatus, Sample, WeightUpdate
from mlerl.sandbox import Sandbox

if TYPE_CHECKING:  # mlerl.bench imports pandas: only the type is needed here
    from mlerl.bench import TaskSpec

log = logging.getLogger(__name__)


class Sender(Protocol):
    """What the actor needs of :class:`mlerl.protocol.SampleSender`."""

    acked_seq: int
    """Highest seq the learner acknowledged (cumulatively)."""
    learner_full: bool
    """The learner said it takes no more samples for now (backpressure)."""

    @property
    def unacked(self) -> int:
        """Samples sent and not yet acknowledged."""
        ...

    async def send(self, sample: Sample) -> None: ...

    async def changed(self) -> None:
        """Return once ``acked_seq``, ``unacked`` or ``learner_full`` may have changed."""
        ...


_Held = tuple[Action, Executed, float, dict[str, float]]


class Actor:
    """Schedules one actor's actions (see the module docstring)."""

    def __init__(
        self,
        actor_id: str,
        config: ActorsConfig,
        *,
        engine: InferenceEngine,
        sandbox: Sandbox,
        sender: Sender,
        tasks: Mapping[str, TaskSpec],
        pipeline: Pipeline,
        state: ActorState,
        weights: AsyncIterator[WeightUpdate] | None = None,
        seed: int = 0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """Executions run under ``sandbox``'s own limits with each task's time limit."""
        self.actor_id, self.config = actor_id, config
        self.engine, self.sandbox, self.sender = engine, sandbox, sender
        self.tasks, self.pipeline, self.state = tasks, pipeline, state
        self.weights, self.clock = weights, clock
        self.task_ids = list(tasks)
        if not self.task_ids:
            raise KeyError("tasks: no task to act on")
        self.admission = Admission(config.admission, version=engine.policy_version)
        self.buffer = ImprovementBuffer(config.improvement, record=state.record_parent_event)
        skipped = self.buffer.replay(state.parent_events())  # a restart revises the same archive
        if skipped:
            log.warning(
                "actor %s: %d malformed events in %s skipped", actor_id, skipped, state.parents_path
            )
        self.rng = random.Random(f"{seed}:{actor_id}")
        self.gate = VersionGate()
        self.actions: dict[int, Action] = {}
        self.stats = {
            "generated": 0,
            "sent": 0,
            "dropped": 0,
            "infra_failed": 0,
            "engine_errors": 0,
            "backpressure_waits": 0,
            "backpressure_s": 0.0,
        }
        self.waiting = ""
        """Why no new work starts now (backpressure from the learner), or empty."""
        self._waiting_since: float | None = None
        self.health = InfraHealth(config.infra)
        self.infra_down = ""
        self._best_signed: dict[str, float] = {}
        """Per task: the best signed public score this actor has sent a submission for."""
        self._held: list[_Held] = []  # not_run, unsent until an execution got through
        self._wake = asyncio.Event()  # the scheduler has something to look at
        self._infra_news = asyncio.Event()  # an execution's outcome, or a sample held back
        self._done = asyncio.Event()
        self._send_lock = asyncio.Lock()  # seqs must reach the sender in order

    # ---- the loop -------------------------------------------------------------------------
    async def run(self) -> None:
        """Resend the persisted outbox, then act until ``max_samples`` are sent or cancelled."""
        for sample in self.state.pending():
            await self.sender.send(sample)
        async with asyncio.TaskGroup() as tg:
            helpers = [
                tg.create_task(self._heartbeat()),
                tg.create_task(self._watch_infra()),
                tg.create_task(self._follow_sender()),
            ]
            if self.weights is not None:
                helpers.append(tg.create_task(self._follow_weights()))
            work: set[asyncio.Task[None]] = set()
            try:
                await self._schedule(tg, work)
            finally:
                for t in [*helpers, *work]:
                    t.cancel()
        self._write_heartbeat()

    async def _schedule(self, tg: asyncio.TaskGroup, work: set[asyncio.Task[None]]) -> None:
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
            try:
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
            except TimeoutError:
                pass

    def _backpressure(self) -> str:
        """Why the learner cannot take more now (it said so, or it stopped acking), or ''."""
        unacked = self.sender.unacked
        if self.sender.learner_full:
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

    async def _follow_sender(self) -> None:
        """Wake the scheduler when the learner's acks or room change while it waits for them."""
        while True:
            await self.sender.changed()
            if self.waiting:
                self._wake.set()

    @staticmethod
    def _spawn(
        tg: asyncio.TaskGroup, work: set[asyncio.Task[None]], coro: Coroutine[Any, Any, None]
    ) -> None:
        task = tg.create_task(coro)
        work.add(task)
        task.add_done_callback(work.discard)

    def stop(self) -> None:
        """Finish: the loop exits and in-flight actions are cancelled (nothing sent is lost)."""
        self._done.set()
        self._wake.set()

    # ---- generation -----------------------------------------------------------------------
    def _plan(self) -> Action:
        task_id = self.rng.choice(self.task_ids)
        task = self.tasks[task_id]
        kind, parent = self.buffer.choose(task_id, self.rng)
        if parent is None:
            messages = scratch_prompt(task, self.config.prompts)
        else:
            messages = improve_prompt(
                task, parent.plan, parent.code, parent.output, self.config.prompts
            )
        return Action(task_id, kind, parent, messages)

    async def _generate(self, ids: list[int]) -> None:
        planned = {aid: self._plan() for aid in ids}
        params = self.config.sampling(seed=self.rng.randrange(2**31))
        try:
            async with self.gate.generating():
                version = self.engine.policy_version
                started = time.monotonic()
                completions = await self.engine.generate(
                    [a.messages for a in planned.values()], params
                )
                generation_s = (
                    time.monotonic() - started
                )  # every sample of the batch waited as long
        except Exception:
            log.exception("actor %s: generation of %d actions failed", self.actor_id, len(ids))
            self.stats["engine_errors"] += 1
            for aid in ids:
                self.admission.on_failed(aid)
            self._wake.set()
            return
        now = self.clock()
        for (aid, action), completion in zip(planned.items(), completions, strict=True):
            action.completion, action.version, action.t_sampled = completion, version, now
            action.params, action.generation_s = params, generation_s
            action.parsed = parse_response(
                completion.text, completion.finish_reason, self._edits_of(action)
            )
            self.actions[aid] = action
            self.admission.on_generated(aid, version, now)
            self.stats["generated"] += 1
        for aid in ids:
            if self.actions[aid].parsed.status is not ParseStatus.OK:  # type: ignore[union-attr]  # every generated action was parsed just above
                await self._finish(aid, Executed(ExecStatus.NOT_RUN))
        self._wake.set()

    def _edits_of(self, action: Action) -> str | None:
        """The program an IMPROVE answer's edits apply to (``prompts.improve_format: edit``)."""
        edit = self.config.prompts.improve_format == "edit"
        return action.parent.code if edit and action.parent is not None else None

    # ---- execution ------------------------------------------------------------------------
    async def _execute(self, aid: int) -> None:
        action = self.actions[aid]
        assert action.parsed is not None
        try:
            executed = await execute(
                action.parsed.code,
                self.tasks[action.task_id],
                sandbox=self.sandbox,
                pipeline=self.pipeline,
                retries=self.config.infra_retries,
                tail_chars=self.config.output_tail_chars,
                clock=self.clock,
                who=f"actor {self.actor_id}",
            )
        except Exception:
            log.exception("actor %s: execution pipeline failed", self.actor_id)
            executed = Executed(ExecStatus.INFRA_ERROR)
        self._record_infra(executed.status is ExecStatus.INFRA_ERROR)
        if executed.status is ExecStatus.INFRA_ERROR:
            self.stats["infra_failed"] += 1
            self.admission.on_failed(aid)
            self.actions.pop(aid, None)
            self._wake.set()
            return
        await self._finish(aid, executed)

    # ---- infrastructure health ------------------------------------------------------------
    def _record_infra(self, infra_error: bool) -> None:
        was_paused = self.health.paused
        self.health.record(infra_error, self.clock())
        if self.health.paused and not was_paused:
            log.warning("actor %s: sampling %s", self.actor_id, self.health.reason(self.clock()))
        elif was_paused and not self.health.paused:
            log.warning("actor %s: the sandbox is back; sampling resumes", self.actor_id)
        self._infra_news.set()
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
                log.error(
                    "actor %s: stopping, the sandbox stayed down: %s",
                    self.actor_id,
                    self.infra_down,
                )
                self.stop()
                return
            if self.health.paused or (self._held and not self.health.confirmed):
                self._record_infra(not await probe(self.sandbox))
                if self.health.paused:
                    await asyncio.sleep(self.config.infra.probe_s)
                continue
            if self.health.confirmed and self._held:  # held while the samples above were sent
                continue
            self._infra_news.clear()
            await self._infra_news.wait()

    # ---- results --------------------------------------------------------------------------
    async def _finish(self, aid: int, executed: Executed) -> None:
        action = self.actions.pop(aid)
        task = self.tasks[action.task_id]
        marks = creditable_markers(
            executed.markers, action.parent, self.config.improvement.credit_parent_markers
        )
        reward, parts = self.pipeline.reward(marks, executed.status, executed.graded, task)
        verdict = self.admission.on_finished(aid, self.clock())
        assert reward is not None
        if verdict is Verdict.DROP:
            self.buffer.add(solution(f"{self.actor_id}:x{aid}", action, executed, reward))
            self._drop(aid, "stale after execution")
            return
        if executed.status is ExecStatus.NOT_RUN and not self.health.confirmed:
            self._held.append((action, executed, reward, parts))  # sent once the backend is up
            self._infra_news.set()
            return
        await self._send(action, executed, reward, parts)

    async def _send(
        self, action: Action, executed: Executed, reward: float, parts: dict[str, float]
    ) -> None:
        async with self._send_lock:
            sample = make_sample(
                self.actor_id,
                self.state.next_seq,
                action,
                executed,
                reward,
                parts,
                submission=self._new_best(action.task_id, executed, parts),
            )
            self.state.record(sample)
            self.buffer.add(solution(sample.sample_id, action, executed, reward))
            await self.sender.send(sample)
        self.stats["sent"] += 1
        if self.config.max_samples and self.stats["sent"] >= self.config.max_samples:
            self.stop()
        self._wake.set()

    def _new_best(self, task_id: str, executed: Executed, parts: dict[str, float]) -> bytes | None:
        """The submission to send when this valid sample beats the actor's best so far on the
        task (``parts["score"]``, the public score signed so that higher is better); else None."""
        if not executed.graded.valid or executed.submission is None or "score" not in parts:
            return None
        signed = parts["score"]
        if task_id in self._best_signed and signed <= self._best_signed[task_id]:
            return None
        self._best_signed[task_id] = signed
        return executed.submission

    def _drop(self, aid: int, why: str) -> None:
        self.actions.pop(aid, None)
        self.stats["dropped"] += 1
        self._wake.set()
        log.info("actor %s: dropped action %d (%s)", self.actor_id, aid, why)

    # ---- weights and heartbeat ------------------------------------------------------------
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
            "actor_id": self.actor_id,
            "t": now,
            "policy_version": self.engine.policy_version,
            "next_seq": self.state.next_seq,
            "acked_seq": self.state.acked_seq,
            "alive_actions": self.admission.alive,
            **self.stats,
            **self.admission.stats,
            "backpressure_s": self.stats["backpressure_s"]
            + ongoing,  # the wait under way counts too
            "paused": self.health.reason(self.clock()),
            "infra_pauses": self.health.pauses,
            "held_not_run": len(self._held),
            "stopped": self.infra_down,
            "waiting": self.waiting,
            "unacked": self.sender.unacked,
        }
        _atomic_write(self.state.dir / "heartbeat.json", json.dumps(beat).encode())
