"""``SeqTracker``: the receiver's exactly-once, in-order bookkeeping as a pure state machine.

Per actor it keeps a *watermark* (every seq from 0 up to it is stored) plus the seqs stored
above a hole, which exist only when restoring from a journal written by something else; they
are compacted into the watermark as soon as the hole is filled, so memory stays one integer per
actor in steady state. It owns no socket and no task: the receiver feeds it.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable


class Verdict(enum.Enum):
    STORE = "store"
    """The next seq of this actor: store it, then :meth:`SeqTracker.mark_stored`."""
    DUPLICATE = "duplicate"
    """Already stored: drop it and re-acknowledge."""
    GAP = "gap"
    """Ahead of an unstored seq: drop it unacknowledged; the sender resends in order."""


class SeqTracker:
    def __init__(self, stored: Iterable[tuple[str, int]] = ()) -> None:
        self._watermark: dict[str, int] = {}
        self._above: dict[str, set[int]] = {}
        for actor_id, seq in stored:
            if seq < 0:
                raise ValueError(f"seq: stored pair ({actor_id!r}, {seq}) has a negative seq")
            self._above.setdefault(actor_id, set()).add(seq)
        for actor_id in list(self._above):
            self._compact(actor_id, -1)

    def watermark(self, actor_id: str) -> int:
        """Highest seq such that every seq from 0 up to it is stored (-1: none)."""
        return self._watermark.get(actor_id, -1)

    def actors(self) -> list[str]:
        return sorted(self._watermark.keys() | self._above.keys())

    def after(self, actor_id: str, seq: int) -> int:
        """The seq expected next once ``seq`` is stored (skips seqs stored above a hole)."""
        above = self._above.get(actor_id, ())
        nxt = seq + 1
        while nxt in above:
            nxt += 1
        return nxt

    def verdict(self, actor_id: str, seq: int, expected: int | None = None) -> Verdict:
        """Classify an arriving seq; ``expected`` overrides the next seq (within a batch)."""
        nxt = self.watermark(actor_id) + 1 if expected is None else expected
        if seq == nxt:
            return Verdict.STORE
        if seq < nxt or seq in self._above.get(actor_id, ()):
            return Verdict.DUPLICATE
        return Verdict.GAP

    def mark_stored(self, actor_id: str, seq: int) -> None:
        """Record that ``seq`` (the next expected one) is now durably stored."""
        if seq != self.watermark(actor_id) + 1:
            raise ValueError(
                f"seq: {seq} stored out of order for {actor_id!r} "
                f"(watermark {self.watermark(actor_id)})"
            )
        self._compact(actor_id, seq)

    def _compact(self, actor_id: str, watermark: int) -> None:
        above = self._above.get(actor_id)
        while above and watermark + 1 in above:
            watermark += 1
            above.discard(watermark)
        self._watermark[actor_id] = watermark
        if not above:
            self._above.pop(actor_id, None)
