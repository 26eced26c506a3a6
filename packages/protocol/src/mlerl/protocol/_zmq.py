"""Small ZeroMQ helpers shared by the transport modules (private).

Sockets are created with ``LINGER`` 0 (nothing that matters lives in ZeroMQ's queues: the
sender's outbox holds unacked data), explicit send/receive high-water marks and reconnect
intervals. Sends never wait: :func:`try_send` reports a full queue instead of blocking.
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any, Self, cast

import zmq
import zmq.asyncio


def make_socket(
    kind: int, hwm: int, reconnect_ivl_ms: int, context: zmq.asyncio.Context | None
) -> zmq.asyncio.Socket:
    ctx = context or zmq.asyncio.Context.instance()
    sock = ctx.socket(kind)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.SNDHWM, hwm)
    sock.setsockopt(zmq.RCVHWM, hwm)
    sock.setsockopt(zmq.RECONNECT_IVL, reconnect_ivl_ms)
    sock.setsockopt(zmq.RECONNECT_IVL_MAX, max(reconnect_ivl_ms, 2000))
    return sock


def try_send(sock: zmq.asyncio.Socket, frames: list[bytes]) -> bool:
    """Send without waiting; False when the high-water mark is reached (nothing was queued).

    Goes through the asyncio socket (not a sync shadow) so its edge-triggered readiness
    bookkeeping stays right; with ``NOBLOCK`` the returned future is already resolved.
    """
    # typed as an Awaitable; on an asyncio socket it is an asyncio.Future
    fut = cast("asyncio.Future[Any]", sock.send_multipart(frames, flags=zmq.NOBLOCK))
    if not fut.done():  # only if someone awaits a blocking send on this socket: we never do
        fut.cancel()
        return False
    exc = fut.exception()
    if isinstance(exc, zmq.Again):
        return False
    if exc is not None:
        raise exc
    return True


class Running:
    """``async with`` support: run ``self.run()`` in a TaskGroup owned by the context manager."""

    async def run(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def close(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        self._tg = asyncio.TaskGroup()
        await self._tg.__aenter__()
        self._task = self._tg.create_task(self.run())
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        try:
            self._task.cancel()
            await self._tg.__aexit__(et, exc, tb)  # raises, or returns None
            return None
        finally:
            self.close()
