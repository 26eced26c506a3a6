"""Policy-weight announcements: the learner publishes (PUB, bind), actors subscribe (SUB, connect).

Guarantees:

- **Late joiners catch up.** ZeroMQ PUB/SUB drops what a subscriber was not connected for, so
  the broadcaster re-publishes its latest :class:`WeightUpdate` every ``republish_s`` while its
  loop runs (``async with`` or ``run()``). A subscriber that connects at any time receives the
  latest version within about ``republish_s``.
- **Versions never go backwards.** A subscriber yields only versions strictly newer than the
  newest it has yielded; re-publications and stale versions are skipped. Intermediate versions
  may be skipped too (only the newest matters to an actor).
- **Bounded memory.** The subscriber keeps one pending update (the newest); the broadcaster
  keeps the latest only. Inline payloads are re-published with the announcement, so large
  weights should travel by ``uri`` (a file both sides can read) rather than inline.
- Malformed messages are counted (``malformed``) and logged, never raised.
- With ``curve`` keys the PUB socket is a CURVE server that admits only the run's actors, and
  a subscriber completes its handshake only with the holder of the learner's secret key: no
  other process can read the weights or publish in the learner's place.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import zmq
import zmq.asyncio

from mlerl.protocol._curve import CurveKeys, bind_server, release_server, secure_client
from mlerl.protocol._messages import ProtocolError, WeightUpdate, decode, encode
from mlerl.protocol._transport_config import TransportConfig
from mlerl.protocol._zmq import Running, make_socket, try_send

log = logging.getLogger(__name__)


class WeightBroadcaster(Running):
    """Publish :class:`WeightUpdate` announcements; re-publish the latest periodically."""

    def __init__(
        self,
        address: str,
        *,
        republish_s: float = 1.0,
        hwm: int = 16,
        context: zmq.asyncio.Context | None = None,
        curve: CurveKeys | None = None,
    ) -> None:
        if republish_s <= 0:
            raise ValueError("republish_s must be > 0")
        self.address, self.republish_s = address, republish_s
        self.latest: WeightUpdate | None = None
        self._encoded: bytes | None = None
        self._sock = make_socket(zmq.PUB, hwm, 100, context)
        self._curve = bind_server(self._sock, address, curve)  # True: holds the ZAP handler

    @classmethod
    def from_config(cls, config: TransportConfig) -> WeightBroadcaster:
        return cls(
            config.weights_bind or config.weights_address,
            republish_s=config.republish_s,
            curve=config.curve_keys(),
        )

    @property
    def endpoint(self) -> str:
        """The bound address, with a wildcard port (``tcp://127.0.0.1:*``) resolved."""
        return self._sock.getsockopt_string(zmq.LAST_ENDPOINT)

    def publish(self, update: WeightUpdate) -> None:
        """Announce ``update`` now; it must be newer than the latest published version."""
        if self.latest is not None and update.version <= self.latest.version:
            raise ValueError(f"version: {update.version} is not newer than {self.latest.version}")
        self.latest, self._encoded = update, encode(update)
        try_send(self._sock, [self._encoded])

    async def run(self) -> None:
        """Re-publish the latest update every ``republish_s`` until cancelled."""
        while True:
            await asyncio.sleep(self.republish_s)
            if self._encoded is not None:
                try_send(self._sock, [self._encoded])  # a slow subscriber misses one; next comes

    def close(self) -> None:
        if not self._sock.closed:
            self._sock.close(linger=0)
            if self._curve:
                release_server(self._sock)


class WeightSubscriber:
    """Receive weight announcements newer than the newest already seen.

    ``await sub.latest()`` returns the newest update that is newer than ``version`` (waiting for
    one); ``async for update in sub`` yields them as they come. Needs no background task.
    """

    def __init__(
        self,
        address: str,
        *,
        version: int = -1,
        hwm: int = 16,
        context: zmq.asyncio.Context | None = None,
        curve: CurveKeys | None = None,
    ) -> None:
        self.address = address
        self.version = version
        """Newest version returned so far (-1: none)."""
        self.malformed = 0
        self._sock = make_socket(zmq.SUB, hwm, 100, context)
        self._sock.setsockopt(zmq.SUBSCRIBE, b"")
        if curve is not None:
            secure_client(self._sock, curve)
        self._sock.connect(address)

    @classmethod
    def from_config(cls, config: TransportConfig, *, version: int = -1) -> WeightSubscriber:
        return cls(config.weights_address, version=version, curve=config.curve_keys())

    def _decode(self, data: bytes) -> WeightUpdate | None:
        try:
            msg = decode(data)
        except ProtocolError as exc:
            self._reject(str(exc))
            return None
        if not isinstance(msg, WeightUpdate):
            self._reject(f"unexpected {type(msg).__name__}")
            return None
        return msg

    def _reject(self, why: str) -> None:
        self.malformed += 1
        level = logging.WARNING if self.malformed <= 10 else logging.DEBUG
        log.log(level, "weight subscriber: dropped message (%d so far): %s", self.malformed, why)

    async def latest(self) -> WeightUpdate:
        """Wait for, and return, the newest update with a version above :attr:`version`."""
        best = await self._drain(None)
        while best is None:
            best = self._newer(await self._sock.recv(), None)
            best = await self._drain(best)  # only the newest of what is queued matters
        self.version = best.version
        return best

    async def poll(self) -> WeightUpdate | None:
        """The newest queued update above :attr:`version`, or None at once if there is none."""
        best = await self._drain(None)
        if best is not None:
            self.version = best.version
        return best

    async def _drain(self, best: WeightUpdate | None) -> WeightUpdate | None:
        while True:
            try:
                data = await self._sock.recv(flags=zmq.NOBLOCK)
            except zmq.Again:
                return best
            best = self._newer(data, best)

    def _newer(self, data: bytes, best: WeightUpdate | None) -> WeightUpdate | None:
        update = self._decode(data)
        floor = self.version if best is None else best.version
        return update if update is not None and update.version > floor else best

    def __aiter__(self) -> AsyncIterator[WeightUpdate]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[WeightUpdate]:
        while True:
            yield await self.latest()

    def close(self) -> None:
        self._sock.close(linger=0)

    async def __aenter__(self) -> WeightSubscriber:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()
