"""Bounded capture of a program's output streams.

Guarantees: memory stays below ``head_bytes + tail_bytes`` per stream whatever the program
prints; every byte is counted; the optional callback sees every chunk, in order, as it
arrives (so markers printed before a timeout count); ``over_limit`` turns true as soon as the
two streams together pass the hard cap, which the backend answers by killing the program.
"""

from __future__ import annotations

from mlerl.sandbox._types import CapturedOutput, OutputCallback

HEAD_BYTES = 64 * 1024
TAIL_BYTES = 1024 * 1024


class StreamCapture:
    """First ``head_bytes`` and last ``tail_bytes`` of one stream."""

    def __init__(self, head_bytes: int = HEAD_BYTES, tail_bytes: int = TAIL_BYTES) -> None:
        self._head = bytearray()
        self._tail = bytearray()
        self._head_bytes = head_bytes
        self._tail_bytes = tail_bytes
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self._head_bytes - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        if len(chunk) >= self._tail_bytes:
            self._tail = bytearray(chunk[-self._tail_bytes :])
            return
        self._tail += chunk
        excess = len(self._tail) - self._tail_bytes
        if excess > 0:
            del self._tail[:excess]

    def result(self) -> CapturedOutput:
        kept = len(self._head) + len(self._tail)
        return CapturedOutput(
            head=self._head.decode("utf-8", "replace"),
            tail=self._tail.decode("utf-8", "replace"),
            total_bytes=self.total,
            truncated=kept < self.total,
        )


class OutputSink:
    """Both streams of one execution, the hard cap and the caller's callback."""

    def __init__(self, limit_bytes: int, callback: OutputCallback | None) -> None:
        self.streams = {"stdout": StreamCapture(), "stderr": StreamCapture()}
        self._limit = limit_bytes
        self._callback = callback
        self.callback_error: str = ""

    def reset(self) -> None:
        """Forget everything captured (a retried start whose program never ran)."""
        self.streams = {"stdout": StreamCapture(), "stderr": StreamCapture()}

    def feed(self, name: str, chunk: bytes) -> None:
        if self.over_limit:
            return  # the program is being killed; stop paying for its output
        self.streams[name].feed(chunk)
        if self._callback is not None and not self.callback_error:
            try:
                self._callback(name, chunk)
            except Exception as exc:  # noqa: BLE001 - a broken callback must not lose the execution
                self.callback_error = f"on_output raised {type(exc).__name__}: {exc}"

    @property
    def total(self) -> int:
        return sum(s.total for s in self.streams.values())

    @property
    def over_limit(self) -> bool:
        return self.total > self._limit

    def results(self) -> tuple[CapturedOutput, CapturedOutput]:
        return self.streams["stdout"].result(), self.streams["stderr"].result()
