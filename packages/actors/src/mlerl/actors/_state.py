"""The actor's durable state: the next sequence number and an on-disk outbox of unacked samples.

Exactly-once across SIGKILL, by resending from a persisted outbox (not by regenerating):

The self-improvement buffer's events (solutions added, parents chosen) go to ``parents.jsonl``
beside them, so a restarted actor revises the same archive.

1. A sample gets its seq only when it is written: ``record`` writes ``outbox/<seq>.msgpack``
   (temp file, fsync, rename) and then ``state.json`` with ``next_seq = seq + 1``.
2. Only then is it handed to the sender. After an ack for ``seq`` the files ``<= seq`` are
   deleted (``prune``).
3. On restart, ``next_seq`` is ``max(state.json, highest outbox seq + 1)`` and every outbox
   file is resent in seq order. The learner's receiver drops seqs at or below its watermark as
   duplicates, so a resent sample that had in fact been stored is not stored twice.

A kill before step 1 completes loses only that action's work (it had no seq, so the stream has
no gap); a kill after it loses nothing. Nothing here is shared between actors: each has its own
directory.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from mlerl.protocol import ProtocolError, Sample, decode, encode


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


class ActorState:
    def __init__(self, directory: str | Path) -> None:
        self.dir = Path(directory)
        self.outbox = self.dir / "outbox"
        self.outbox.mkdir(parents=True, exist_ok=True)
        self._state_path = self.dir / "state.json"
        saved = json.loads(self._state_path.read_text()) if self._state_path.exists() else {}
        seqs = self._outbox_seqs()
        self.next_seq = max(int(saved.get("next_seq", 0)), (seqs[-1] + 1) if seqs else 0)
        self.acked_seq = int(saved.get("acked_seq", -1))

    @property
    def parents_path(self) -> Path:
        """``parents.jsonl``: the improvement buffer's events (``ImprovementBuffer.replay``)."""
        return self.dir / "parents.jsonl"

    def parent_events(self) -> list[dict]:
        """The recorded parent events in order (a line a crash cut is skipped)."""
        if not self.parents_path.is_file():
            return []
        out = []
        for line in self.parents_path.read_text(encoding="utf-8").splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out

    def record_parent_event(self, event: dict) -> None:
        """Append one event to ``parents.jsonl`` (flushed, not fsynced: losing the last few on a
        crash costs a parent's visit count or a solution to revise, never a sample)."""
        with open(self.parents_path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(event) + "\n")

    def _outbox_seqs(self) -> list[int]:
        return sorted(int(p.stem) for p in self.outbox.glob("*.msgpack") if p.stem.isdigit())

    def _save(self) -> None:
        data = {"next_seq": self.next_seq, "acked_seq": self.acked_seq}
        _atomic_write(self._state_path, json.dumps(data).encode())

    def pending(self) -> list[Sample]:
        """Unacked samples from a previous life, in seq order.

        A corrupt file raises (skipping it would leave a gap the receiver waits on forever).
        """
        out = []
        for seq in self._outbox_seqs():
            if seq <= self.acked_seq:
                continue
            path = self.outbox / f"{seq:012d}.msgpack"
            try:
                msg = decode(path.read_bytes())
            except ProtocolError as exc:
                raise RuntimeError(f"{path}: corrupt outbox entry: {exc}") from exc
            if not isinstance(msg, Sample) or msg.seq != seq:
                raise RuntimeError(f"{path}: not the sample with seq {seq}")
            out.append(msg)
        return out

    def record(self, sample: Sample) -> None:
        """Persist ``sample`` (whose seq must be ``next_seq``) before it is sent."""
        if sample.seq != self.next_seq:
            raise ValueError(f"seq: expected {self.next_seq}, got {sample.seq}")
        _atomic_write(self.outbox / f"{sample.seq:012d}.msgpack", encode(sample))
        self.next_seq = sample.seq + 1
        self._save()

    def prune(self, acked_seq: int) -> int:
        """Forget samples acknowledged up to ``acked_seq``; return how many files were removed."""
        if acked_seq <= self.acked_seq:
            return 0
        removed = 0
        for seq in self._outbox_seqs():
            if seq <= acked_seq:
                (self.outbox / f"{seq:012d}.msgpack").unlink(missing_ok=True)
                removed += 1
        self.acked_seq = acked_seq
        self._save()
        return removed
