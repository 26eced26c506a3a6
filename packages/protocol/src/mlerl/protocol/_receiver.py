"""The learner's end of the reliable sample stream: :class:`SampleReceiver` (ROUTER) takes
samples from many :class:`mlerl.protocol._sender.SampleSender` (DEALER), over ``tcp://`` or
``ipc://`` with the same code.

Guarantees, given ``on_sample``/``commit`` callbacks that store durably (the sender's side,
at-least-once delivery with go-back-N resends: :mod:`mlerl.protocol._sender`):

- **Exactly-once storage, in per-actor order.** The receiver stores ``(actor_id, seq)`` only when
  ``seq`` is exactly the actor's watermark + 1 (every seq from 0 up to the watermark is stored).
  A sample at or below the watermark is a duplicate: it is dropped and re-acknowledged. A sample
  above watermark + 1 arrived across a gap (a message lost when the receiver died): it is
  dropped unacknowledged and the sender's go-back-N resend fills the gap in order. So the order
  in which samples are first stored is ``0, 1, 2, ...`` for every actor.
- **Acks are cumulative and sent after storage.** ``Ack(actor_id, seq)`` means every seq <=
  ``seq`` of that actor is stored; it is sent only after ``on_sample`` (and ``commit``) returned.
  A lost ack is made good by any later one.
- **Restartable.** The receiver's dedupe state is a watermark per actor (bounded memory),
  rebuilt at start from the ``stored`` pairs the caller read back from its journal.
- **Never crashes on input.** Undecodable or invalid messages are counted (``malformed``) and
  logged; the loop goes on.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Iterable

import zmq
import zmq.asyncio

from mlerl.protocol._curve import CurveKeys, bind_server, release_server
from mlerl.protocol._messages import Ack, Heartbeat, ProtocolError, Sample, decode, encode
from mlerl.protocol._seqtrack import SeqTracker, Verdict
from mlerl.protocol._transport_config import TransportConfig
from mlerl.protocol._zmq import Running, make_socket, try_send

log = logging.getLogger(__name__)


OnSample = Callable[[Sample], Awaitable[None] | None]
Commit = Callable[[], Awaitable[None] | None]
Check = Callable[[Sample], str | None]
OnRefused = Callable[[Sample, str], Awaitable[None] | None]


async def _call(fn: Callable[..., Awaitable[None] | None], *args: object) -> None:
    result = fn(*args)
    if inspect.isawaitable(result):
        await result


class SampleReceiver(Running):
    """Receive samples from many :class:`SampleSender`; store each once, in order, then ack.

    ``on_sample(sample)`` is called for each new sample in order; ``commit()`` (optional) once
    per received batch before the acks of that batch go out: append in ``on_sample``, fsync in
    ``commit``. Either may be a plain function or a coroutine function (its result is awaited). An
    exception from either propagates out of :meth:`run`
    (nothing of that batch is acked). ``stored`` are the ``(actor_id, seq)`` pairs already stored
    by an earlier run (read back from the journal).

    ``check(sample)`` (optional) returns None for a sample fit to store or the reason to refuse
    it; a refused sample goes to ``on_refused(sample, reason)`` instead of ``on_sample`` and is
    counted (``counters["refused"]``). It is acknowledged like a stored one (else its sender
    would resend it forever and stall), so ``on_refused`` must record its key durably by the
    next ``commit`` and the caller must include refused keys in ``stored`` after a restart.
    ``curve`` makes the socket a CURVE server admitting only the run's actors (see
    ``mlerl.protocol._curve``).

    ``full()`` (optional) is backpressure: while it returns True a new sample is not stored and
    not acked (counted in ``counters["deferred"]``; its sender resends it later, in order, as
    after a gap) and every heartbeat reply carries ``state["full"] = 1``, which tells the
    actors to stop producing (:attr:`SampleSender.learner_full`). It is asked before each store,
    so what the caller holds never exceeds its own bound by more than one sample.
    """

    def __init__(
        self,
        address: str,
        on_sample: OnSample,
        *,
        stored: Iterable[tuple[str, int]] = (),
        commit: Commit | None = None,
        name: str = "learner",
        hwm: int = 10000,
        max_batch: int = 256,
        context: zmq.asyncio.Context | None = None,
        check: Check | None = None,
        on_refused: OnRefused | None = None,
        curve: CurveKeys | None = None,
        full: Callable[[], bool] | None = None,
    ) -> None:
        if (check is None) != (on_refused is None):
            raise ValueError(
                "check and on_refused go together: a refused sample is acked, so its key must be "
                "recorded"
            )
        self.address, self.name, self.max_batch = address, name, max_batch
        self._on_sample, self._commit = on_sample, commit
        self._check, self._on_refused = check, on_refused
        self._full = full
        self.tracker = SeqTracker(stored)
        self.last_seen: dict[str, float] = {}
        """``time.monotonic()`` of the last message from each actor."""
        self.counters = {
            "received": 0,
            "stored": 0,
            "duplicates": 0,
            "out_of_order": 0,
            "malformed": 0,
            "heartbeats": 0,
            "batches": 0,
            "refused": 0,
            "deferred": 0,
        }
        self._sock = make_socket(zmq.ROUTER, hwm, 100, context)
        self._sock.setsockopt(zmq.ROUTER_HANDOVER, 1)  # a reconnecting actor takes over its id
        self._curve = bind_server(self._sock, address, curve)  # True: holds the ZAP handler

    @classmethod
    def from_config(
        cls,
        config: TransportConfig,
        on_sample: OnSample,
        *,
        stored: Iterable[tuple[str, int]] = (),
        commit: Commit | None = None,
        check: Check | None = None,
        on_refused: OnRefused | None = None,
        full: Callable[[], bool] | None = None,
    ) -> SampleReceiver:
        return cls(
            config.samples_bind or config.samples_address,
            on_sample,
            stored=stored,
            commit=commit,
            hwm=config.receiver_hwm,
            max_batch=config.max_batch,
            check=check,
            on_refused=on_refused,
            curve=config.curve_keys(),
            full=full,
        )

    @property
    def endpoint(self) -> str:
        """The bound address, with a wildcard port (``tcp://127.0.0.1:*``) resolved."""
        return self._sock.getsockopt_string(zmq.LAST_ENDPOINT)

    def watermark(self, actor_id: str) -> int:
        """Highest seq such that every seq from 0 up to it is stored for ``actor_id`` (-1: none)."""
        return self.tracker.watermark(actor_id)

    def _malformed(self, why: str) -> None:
        self.counters["malformed"] += 1
        level = logging.WARNING if self.counters["malformed"] <= 10 else logging.DEBUG
        log.log(
            level,
            "receiver %s: dropped malformed message (%d so far): %s",
            self.name,
            self.counters["malformed"],
            why,
        )

    def _refuse(self, sample: Sample, reason: str) -> None:
        self.counters["refused"] += 1
        level = logging.WARNING if self.counters["refused"] <= 10 else logging.DEBUG
        log.log(
            level,
            "receiver %s: refused sample %s (%d so far): %s",
            self.name,
            sample.sample_id,
            self.counters["refused"],
            reason,
        )

    def _log_gap(self, actor_id: str, seq: int, expected: int) -> None:
        # a few are normal after a crash; many for one actor mean it did not start at seq 0
        n = self.counters["out_of_order"]
        level = logging.WARNING if n <= 10 or n % 10000 == 0 else logging.DEBUG
        log.log(
            level,
            "receiver %s: %s seq %d dropped, expecting seq %d first (%d so far)",
            self.name,
            actor_id,
            seq,
            expected,
            n,
        )

    async def _read_batch(self) -> list[list[bytes]]:
        batch = [await self._sock.recv_multipart()]
        while len(batch) < self.max_batch:
            try:
                batch.append(await self._sock.recv_multipart(flags=zmq.NOBLOCK))
            except zmq.Again:
                break
        return batch

    def _triage(
        self, batch: list[list[bytes]]
    ) -> tuple[list[Sample], dict[tuple[bytes, str], None]]:
        """Split a batch into samples to store (in order) and the (route, actor) pairs owed an
        ack."""
        accept: list[Sample] = []
        ack_to: dict[tuple[bytes, str], None] = {}
        expected: dict[str, int] = {}
        for frames in batch:
            if len(frames) != 2:
                self._malformed(f"{len(frames)} frames, expected 2")
                continue
            route, payload = frames
            try:
                msg = decode(payload)
            except ProtocolError as exc:
                self._malformed(str(exc))
                continue
            if isinstance(msg, Heartbeat):
                self.counters["heartbeats"] += 1
                self.last_seen[msg.sender] = time.monotonic()
                self._reply_heartbeat(route, msg)
                continue
            if not isinstance(msg, Sample):
                self._malformed(f"unexpected {type(msg).__name__} on the sample stream")
                continue
            self.counters["received"] += 1
            aid, seq = msg.actor_id, msg.seq
            self.last_seen[aid] = time.monotonic()
            verdict = self.tracker.verdict(aid, seq, expected.get(aid))
            if verdict is Verdict.STORE:
                accept.append(msg)
                expected[aid] = self.tracker.after(aid, seq)
                ack_to[(route, aid)] = None
            elif verdict is Verdict.DUPLICATE:
                self.counters["duplicates"] += 1
                ack_to[(route, aid)] = None
            else:  # across a gap: the sender resends in order
                self.counters["out_of_order"] += 1
                self._log_gap(aid, seq, expected.get(aid, self.watermark(aid) + 1))
        return accept, ack_to

    def is_full(self) -> bool:
        return self._full is not None and bool(self._full())

    def _reply_heartbeat(self, route: bytes, beat: Heartbeat) -> None:
        self._tell(route, beat.sender)

    def _tell(self, route: bytes, actor_id: str) -> None:
        """A heartbeat with the actor's watermark (a cumulative ack) and whether we are full."""
        state = {"watermark": float(self.watermark(actor_id))}
        if self._full is not None:
            state["full"] = float(self.is_full())
        reply = Heartbeat(sender=self.name, role="learner", t=time.time(), state=state)
        self._send(route, encode(reply))

    def _send(self, route: bytes, payload: bytes) -> None:
        # a dropped ack is made good by a later (cumulative) one, a heartbeat by the next beat
        try_send(self._sock, [route, payload])

    async def run(self) -> None:
        """Receive, store, ack until cancelled."""
        while True:
            batch = await self._read_batch()
            self.counters["batches"] += 1
            accept, ack_to = self._triage(batch)
            deferred: set[str] = set()
            for sample in accept:
                if sample.actor_id in deferred or (self._full is not None and self._full()):
                    # over the caller's bound: not stored, not acked; this and the actor's
                    # later seqs come again (go-back-N), after the actor has paused
                    deferred.add(sample.actor_id)
                    self.counters["deferred"] += 1
                    continue
                reason = self._check(sample) if self._check is not None else None
                if reason is None:
                    await _call(self._on_sample, sample)
                    self.counters["stored"] += 1
                else:
                    self._refuse(sample, reason)
                    await _call(self._on_refused, sample, reason)  # type: ignore[arg-type]  # on_refused is set whenever check is
                self.tracker.mark_stored(sample.actor_id, sample.seq)
            if accept and self._commit is not None:
                await _call(self._commit)
            for route, aid in ack_to:
                if aid in deferred:
                    self._tell(route, aid)  # the ack and the news that we are full
                else:
                    self._send(route, encode(Ack(actor_id=aid, seq=self.watermark(aid))))

    def close(self) -> None:
        if not self._sock.closed:
            self._sock.close(linger=0)
            if self._curve:
                release_server(self._sock)
