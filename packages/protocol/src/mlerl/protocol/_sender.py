"""The actor's end of the reliable sample stream: :class:`SampleSender` (DEALER) to the
learner's :class:`mlerl.protocol._receiver.SampleReceiver` (ROUTER), over ``tcp://`` or
``ipc://`` with the same code.

- **At-least-once delivery.** The sender keeps every sample in an in-memory outbox until it is
  acknowledged, and re-transmits unacknowledged samples after ``resend_after_s``. ZeroMQ holds
  nothing that matters: ``LINGER`` is 0 and a full send queue (high-water mark reached,
  ``zmq.Again``) just leaves the sample in the outbox to be retried when the socket is writable.
- **Go-back-N.** When the oldest unacknowledged sample is overdue, everything unacknowledged is
  sent again in order: the receiver stores only the next seq of each actor, so a gap (a message
  lost when the receiver died) is filled in order.
- **Cumulative acks.** ``Ack(actor_id, seq)``, or the watermark in the receiver's heartbeat
  reply, releases every seq <= ``seq`` from the outbox; a lost ack is made good by any later one.
  The heartbeat reply's ``full`` flag is the learner's backpressure
  (:attr:`SampleSender.learner_full`).

Not guaranteed: a sender process that dies loses its outbox (the actor must re-generate or
persist them itself); an actor that restarts must continue its seq numbering, not restart at 0
(samples at or below the receiver's watermark are treated as duplicates). Heartbeats report
liveness only; they never drop or reorder data. The receiver's side of the contract
(exactly-once storage in per-actor order, acks after storage): :mod:`mlerl.protocol._receiver`.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time

import zmq
import zmq.asyncio

from mlerl.protocol._curve import CurveKeys, secure_client
from mlerl.protocol._messages import Ack, Heartbeat, ProtocolError, Sample, decode, encode
from mlerl.protocol._transport_config import TransportConfig
from mlerl.protocol._zmq import Running, make_socket, try_send

log = logging.getLogger(__name__)


class SampleSender(Running):
    """Send samples of one actor to a :class:`SampleReceiver`, keeping each until it is acked.

    Use ``async with SampleSender(...) as sender:`` or run ``sender.run()`` in your TaskGroup;
    the loop transmits, re-transmits, reads acks and sends heartbeats.
    """

    def __init__(
        self,
        address: str,
        actor_id: str,
        *,
        resend_after_s: float = 5.0,
        hwm: int = 1000,
        heartbeat_s: float = 5.0,
        max_unacked: int = 4096,
        reconnect_ivl_ms: int = 100,
        context: zmq.asyncio.Context | None = None,
        curve: CurveKeys | None = None,
    ) -> None:
        if resend_after_s <= 0 or heartbeat_s <= 0:
            raise ValueError("resend_after_s and heartbeat_s must be > 0")
        if hwm < 1 or max_unacked < 1:
            raise ValueError("hwm and max_unacked must be >= 1")
        self.address, self.actor_id = address, actor_id
        self.resend_after_s, self.heartbeat_s = resend_after_s, heartbeat_s
        self.max_unacked = max_unacked
        self._sock = make_socket(zmq.DEALER, hwm, reconnect_ivl_ms, context)
        self._sock.setsockopt(zmq.IDENTITY, actor_id.encode())
        if curve is not None:  # only a learner holding the run's secret key is talked to
            secure_client(self._sock, curve)
        self._sock.connect(address)
        # seq -> [encoded bytes, monotonic time of the last transmission (-1: never)]
        self._outbox: collections.OrderedDict[int, list] = collections.OrderedDict()
        self._to_send: collections.deque[int] = collections.deque()
        self._last_seq = -1
        self._changed = asyncio.Event()  # outbox grew or shrank
        self._news = asyncio.Event()  # for ``changed``: replaced once set
        self.acked_seq = -1
        """Highest seq the receiver acknowledged (cumulatively)."""
        self.last_reply: float | None = None
        """``time.monotonic()`` of the last message from the receiver (ack or heartbeat)."""
        self.learner_full = False
        """The receiver's last heartbeat said it holds as many samples as it will take
        (backpressure): stop producing until a later heartbeat says otherwise."""
        self.counters = {"sent": 0, "resent": 0, "acked": 0, "hwm_full": 0, "malformed": 0}

    @classmethod
    def from_config(cls, config: TransportConfig, actor_id: str) -> SampleSender:
        return cls(
            config.samples_address,
            actor_id,
            resend_after_s=config.resend_after_s,
            hwm=config.sender_hwm,
            heartbeat_s=config.heartbeat_s,
            max_unacked=config.max_unacked,
            reconnect_ivl_ms=config.reconnect_ivl_ms,
            curve=config.curve_keys(),
        )

    @property
    def unacked(self) -> int:
        """Samples handed to :meth:`send` and not yet acknowledged."""
        return len(self._outbox)

    async def changed(self) -> None:
        """Return once ``acked_seq``, ``unacked`` or ``learner_full`` may have changed (a sample
        was queued, an ack or a heartbeat of the receiver arrived); never polls."""
        await self._news.wait()

    def _notify(self) -> None:
        self._changed.set()
        self._news.set()
        self._news = asyncio.Event()

    async def send(self, sample: Sample) -> None:
        """Queue ``sample`` for reliable delivery and try to transmit it now.

        Waits (without blocking the loop) while ``max_unacked`` samples are outstanding. Seqs
        must increase; the actor assigns them.
        """
        if sample.actor_id != self.actor_id:
            raise ValueError(
                f"actor_id: sample of {sample.actor_id!r} given to sender of {self.actor_id!r}"
            )
        if sample.seq <= self._last_seq:
            raise ValueError(f"seq: {sample.seq} is not above the last sent seq {self._last_seq}")
        while len(self._outbox) >= self.max_unacked:
            self._changed.clear()
            await self._changed.wait()
        self._last_seq = sample.seq
        self._outbox[sample.seq] = [encode(sample), -1.0]
        self._to_send.append(sample.seq)
        self._transmit()
        self._notify()

    async def flush(self, timeout: float | None = None) -> None:  # noqa: ASYNC109 - public API; asyncio.timeout inside
        """Wait until every sample sent so far is acknowledged (``TimeoutError`` after
        ``timeout``)."""
        async with asyncio.timeout(timeout):
            while self._outbox:
                self._changed.clear()
                await self._changed.wait()

    def _transmit(self) -> bool:
        """Transmit queued samples in order until the socket is full; True when all went out."""
        while self._to_send:
            seq = self._to_send[0]
            entry = self._outbox.get(seq)
            if entry is not None:
                if not try_send(self._sock, [entry[0]]):
                    self.counters["hwm_full"] += 1
                    return False
                self.counters["resent" if entry[1] >= 0 else "sent"] += 1
                entry[1] = time.monotonic()
            self._to_send.popleft()
        return True

    def _rewind_if_due(self) -> float:
        """Go back N when the oldest unacked sample is overdue; return seconds until the next
        check."""
        if not self._outbox:
            return self.resend_after_s
        first = next(iter(self._outbox.values()))
        if first[1] < 0:  # never transmitted yet: it is queued already
            return self.resend_after_s
        wait = first[1] + self.resend_after_s - time.monotonic()
        if wait > 0:
            return wait
        self._to_send = collections.deque(self._outbox)  # go back N: everything unacked, in order
        return self.resend_after_s

    def _on_message(self, data: bytes) -> None:
        try:
            msg = decode(data)
        except ProtocolError as exc:
            self.counters["malformed"] += 1
            log.warning("sender %s: malformed message from receiver: %s", self.actor_id, exc)
            return
        self.last_reply = time.monotonic()
        if isinstance(msg, Ack) and msg.actor_id == self.actor_id:
            self._acked(msg.seq)
        elif isinstance(msg, Heartbeat) and "watermark" in msg.state:
            self.learner_full = bool(msg.state.get("full", 0.0))
            self._acked(int(msg.state["watermark"]))  # the reply doubles as a cumulative ack

    def _acked(self, seq: int) -> None:
        while self._outbox and next(iter(self._outbox)) <= seq:
            self._outbox.popitem(last=False)
            self.counters["acked"] += 1
        self.acked_seq = max(self.acked_seq, seq)
        self._notify()

    async def _pump(self) -> None:
        while True:
            wait = self._rewind_if_due()
            if not self._transmit():
                # full: wait until writable (bounded, so overdue resends are still noticed)
                timeout_ms = int(min(wait, self.resend_after_s) * 1000) + 1
                # pyzmq's types give the asyncio socket's poll no flags; it has them
                # (zmq/_future.py)
                await self._sock.poll(timeout_ms, zmq.POLLOUT)  # type: ignore[call-arg]
                continue
            self._changed.clear()
            try:
                async with asyncio.timeout(wait):
                    await self._changed.wait()
            except TimeoutError:
                pass

    async def _receive(self) -> None:
        while True:
            self._on_message(await self._sock.recv())

    async def _heartbeat(self) -> None:
        while True:
            beat = Heartbeat(
                sender=self.actor_id,
                role="actor",
                t=time.time(),
                state={"unacked": float(len(self._outbox)), "acked_seq": float(self.acked_seq)},
            )
            # when the data queue is full the beat is skipped: the data shows we are alive
            try_send(self._sock, [encode(beat)])
            await asyncio.sleep(self.heartbeat_s)

    async def run(self) -> None:
        """Transmit, resend, read acks and heartbeat until cancelled."""
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self._pump())
            tg.create_task(self._receive())
            tg.create_task(self._heartbeat())

    def close(self) -> None:
        """Close the socket at once; unacked samples stay readable in ``unacked``/the outbox."""
