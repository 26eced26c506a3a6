"""Finding the markers a run reached in its stdout, chunk by chunk.

Guarantees: feeding a stream in any split (chunks may cut lines, even inside a multi-byte
character) finds the same markers as feeding it whole; memory stays bounded by
``max_line_bytes`` whatever the output size (a longer line is scanned through a sliding window
in paper mode and can never be a marker line in secure mode, where a marker line is short and
starts with the nonce). ``\\r`` ends a line as ``\\n`` does, so progress bars do not glue lines.

Matching, secure mode (``nonce`` given): the first non-empty line must be the prelude's
handshake ``<nonce>:key <K> <V>`` (two run-time keys the program's source never contains); if it
is anything else the channel is dead and nothing counts. After it, a line counts only if it is
exactly ``<K>:<marker>``; a ``<K>:tainted <why>`` line (the prelude saw an introspection attempt)
ends counting, and :attr:`MarkerScanner.tainted` says why. Later handshakes (a spawned child
running the prelude again, or a forger who read the nonce) are ignored. Paper mode
(``nonce=None``) counts any line containing a marker string, the paper's regex matching. Feed
stdout only.
"""

from __future__ import annotations

import re

from mlerl.instrument._markers import MARKERS

_ANY = re.compile("|".join(re.escape(m) for m in MARKERS).encode())
_WINDOW = max(len(m) for m in MARKERS)


class MarkerScanner:
    """Streaming marker detector. ``markers`` lists the distinct markers found, first seen first."""

    def __init__(self, nonce: str | None = None, *, max_line_bytes: int = 4096) -> None:
        if max_line_bytes < 256:
            raise ValueError("max_line_bytes must be >= 256")
        self._prefix = f"{nonce}:".encode() if nonce else None
        self._handshake = f"{nonce}:key ".encode() if nonce else None
        self._key: bytes | None = None  # b"<K>:" once the handshake is seen
        self._dead = False
        self.tainted: str | None = None
        """Why the run's channel was closed by the prelude (an introspection attempt), if it was."""
        self._max = max_line_bytes
        self._buf = b""
        self._overlong = False  # the current line already exceeded max_line_bytes
        self._found: dict[str, None] = {}

    @property
    def markers(self) -> list[str]:
        return list(self._found)

    @property
    def secure(self) -> bool:
        return self._prefix is not None

    def feed(self, chunk: bytes | str) -> None:
        data = chunk.encode("utf-8", "replace") if isinstance(chunk, str) else chunk
        parts = re.split(rb"[\r\n]", self._buf + data)
        self._buf = parts.pop()
        for line in parts:
            self._line(line, complete=True)
            self._overlong = False
        if len(self._buf) > self._max:
            self._line(self._buf, complete=False)
            self._buf = self._buf[-_WINDOW:] if self._prefix is None else b""
            self._overlong = True

    def close(self) -> list[str]:
        """Scan a final line without newline (a killed program's last words); return markers."""
        if self._buf:
            self._line(self._buf, complete=True)
            self._buf = b""
        return self.markers

    def _line(self, line: bytes, complete: bool) -> None:
        if self._prefix is None:
            for m in _ANY.findall(line):
                self._found.setdefault(m.decode(), None)
            return
        if self._dead or self._overlong or not complete:
            if not complete and self._key is None and not self._dead:
                self._dead = True  # an overlong first line cannot be the handshake
            return
        if self._key is None:
            if not line.strip():
                return
            keys = line[len(self._handshake or b"") :].split(b" ")
            ok = line.startswith(self._handshake or b"") and len(keys) == 2
            if ok and all(re.fullmatch(rb"[0-9a-f]{32}", k) for k in keys):
                self._key = keys[0] + b":"
            else:
                self._dead = True
            return
        if not line.startswith(self._key):
            return
        rest = line[len(self._key) :].decode("utf-8", "replace")
        if rest.startswith("tainted"):
            self._dead = True
            self.tainted = rest[len("tainted") :].strip() or "tainted"
            return
        if rest in MARKERS:
            self._found.setdefault(rest, None)


def scan_text(text: str | bytes, nonce: str | None = None) -> list[str]:
    """Markers in a complete output (convenience over :class:`MarkerScanner`)."""
    scanner = MarkerScanner(nonce)
    scanner.feed(text)
    return scanner.close()
