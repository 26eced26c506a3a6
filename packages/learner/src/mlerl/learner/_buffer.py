"""Timestamped experience buffer backed by an append-only journal (the durable enqueue).

Guarantees:

- ``add`` appends one length-prefixed, CRC-checked record (``mlerl.protocol.encode`` bytes) to
  ``journal.bin`` and fsyncs it (or defers the fsync to ``sync`` when ``sync=False``); only then
  may the transport ack the sample. A sample whose ``(actor_id, seq)`` is already stored is
  not stored twice (``add`` returns False).
- Reopening replays the journal. A torn *last* record (crash mid-write) is cut off and counted
  (``counters["torn"]``); damage followed by further records is corruption and raises
  :class:`JournalError` instead of silently losing samples.
- ``INFRA_ERROR`` samples are journaled (so they are acked and deduped) but never enter a batch;
  they are counted in ``counters["infra_error"]``.
- Batches: ``first_completed`` takes the B samples that completed first (completion time =
  ``t_graded`` or ``t_exec_finished`` or ``t_sampled``; the paper's Algorithm 1); ``oldest_first``
  takes the B sampled first. Samples not taken stay pending for a later batch; nothing is
  dropped. Ties break by journal order, so batch formation is deterministic on replay.
- With a ``check`` (``mlerl.protocol.check_sample`` bound to the learner's limits), a sample
  that fails it is refused: ``refuse`` appends ``{actor_id, seq, sample_id, task_id, reason,
  t}`` to ``refused.jsonl`` (fsynced by ``sync``) and never journals it; its key counts as
  stored (the transport acks it, dedupes it and rebuilds its watermark from ``stored_keys``).
  Replay applies the same check, so a bad sample journaled before (an older build, other
  limits) is refused and skipped instead of crashing every restart. Refusals are counted in
  ``counters["refused"]`` and per field in ``refused_by_field``.
- ``state_dict`` holds the consumed keys; a checkpoint stores it and ``load_state_dict`` after
  reopening restores exactly the pending set of that moment plus everything journaled since.

Not done: journal compaction (it grows by one record per sample; consumed samples are dropped
from memory but not from disk).
"""

from __future__ import annotations

import json
import logging
import os
import struct
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mlerl.learner._config import BatchPolicy
from mlerl.protocol import ExecStatus, ProtocolError, Sample, decode, encode

_HEADER = struct.Struct(">II")  # payload length, crc32(payload)
Key = tuple[str, int]
log = logging.getLogger(__name__)


class JournalError(RuntimeError):
    """The journal is damaged somewhere other than a torn last record."""


def completion_time(sample: Sample) -> float:
    """When the sample's execution (and grading) completed, falling back to when it was sampled."""
    for t in (sample.t_graded, sample.t_exec_finished):
        if t is not None:
            return t
    return sample.t_sampled


def read_journal(path: Path) -> tuple[list[Sample], int, bool]:
    """Samples in the journal, the byte offset after the last good record, and whether a torn
    tail followed it."""
    data = path.read_bytes() if path.exists() else b""
    samples: list[Sample] = []
    off = 0
    while off < len(data):
        if off + _HEADER.size > len(data):
            return samples, off, True
        length, crc = _HEADER.unpack_from(data, off)
        end = off + _HEADER.size + length
        if end > len(data):
            return samples, off, True
        payload = data[off + _HEADER.size : end]
        if zlib.crc32(payload) != crc:
            if end == len(data):
                return samples, off, True
            raise JournalError(
                f"{path}: bad checksum at byte {off} with {len(data) - end} bytes after it"
            )
        try:
            msg = decode(payload)
        except ProtocolError as exc:
            raise JournalError(f"{path}: undecodable record at byte {off}: {exc}") from exc
        if not isinstance(msg, Sample):
            raise JournalError(
                f"{path}: record at byte {off} is a {type(msg).__name__}, not a Sample"
            )
        samples.append(msg)
        off = end
    return samples, off, False


class ExperienceBuffer:
    """Pending samples ordered for batch formation, journaled on disk."""

    def __init__(
        self,
        directory: str | Path,
        policy: BatchPolicy = BatchPolicy.first_completed,
        *,
        check: Callable[[Sample], str | None] | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / "journal.bin"
        self.refused_path = self.directory / "refused.jsonl"
        self.policy = policy
        self.check = check
        """None, or ``check(sample) -> reason | None``; replay applies it too."""
        self.counters = {
            "added": 0,
            "duplicates": 0,
            "infra_error": 0,
            "torn": 0,
            "consumed": 0,
            "refused": 0,
        }
        self.refused_by_field: dict[str, int] = {}
        self._stored: set[Key] = set()
        self._consumed: set[Key] = set()
        self._pending: dict[Key, tuple[int, Sample]] = {}  # key -> (journal index, sample)
        self._sizes: dict[Key, int] = {}  # encoded bytes of each pending sample
        self.pending_bytes = 0
        """Encoded bytes of the pending samples (what backpressure bounds)."""
        self._index = 0
        samples, good, torn = read_journal(self.path)
        if torn:
            self.counters["torn"] += 1
            with open(self.path, "r+b") as f:
                f.truncate(good)
                os.fsync(f.fileno())
        self._refused: set[Key] = self._read_refused()
        # both files stay open for the buffer's lifetime (appended per sample); close() closes them
        self._refused_file = open(self.refused_path, "a", encoding="utf-8")  # noqa: SIM115 - see above
        self._refused_dirty = False
        self._stored |= self._refused
        for s in samples:
            self._admit(s)
        if self._refused_dirty:
            self.sync_refused()
        self._file = open(self.path, "ab")  # noqa: SIM115 - open until close(), as above

    def _read_refused(self) -> set[Key]:
        """Keys in ``refused.jsonl``; a torn last line (crash mid-write) is cut off."""
        if not self.refused_path.exists():
            return set()
        data = self.refused_path.read_bytes()
        keys: set[Key] = set()
        good = 0
        for line in data.splitlines(keepends=True):
            if not line.endswith(b"\n"):
                break  # torn tail (the last line): never acked, the sender resends the sample
            try:
                record = json.loads(line)
                key = (str(record["actor_id"]), int(record["seq"]))
            except (ValueError, KeyError, TypeError):
                raise JournalError(
                    f"{self.refused_path}: unreadable record at byte {good}"
                ) from None
            keys.add(key)
            self._count_refusal(str(record.get("reason", "")))
            good += len(line)
        if good < len(data):
            with open(self.refused_path, "r+b") as f:
                f.truncate(good)
                os.fsync(f.fileno())
        return keys

    def refuse(self, sample: Sample, reason: str, *, sync: bool = True) -> bool:
        """Record ``sample`` as refused (never journaled nor batched); False if already stored."""
        key = (sample.actor_id, sample.seq)
        if key in self._stored:
            self.counters["duplicates"] += 1
            return False
        self._record_refusal(sample, reason)
        if sync:
            self.sync_refused()
        return True

    def _record_refusal(self, sample: Sample, reason: str) -> None:
        key = (sample.actor_id, sample.seq)
        record = {
            "actor_id": sample.actor_id,
            "seq": sample.seq,
            "sample_id": sample.sample_id,
            "task_id": sample.task_id,
            "reason": reason,
            "t": round(time.time(), 3),
        }
        self._refused_file.write(json.dumps(record) + "\n")
        self._refused_dirty = True
        self._refused.add(key)
        self._stored.add(key)
        self._count_refusal(reason)

    def _count_refusal(self, reason: str) -> None:
        self.counters["refused"] += 1
        field = reason.split(":", 1)[0] or "?"
        self.refused_by_field[field] = self.refused_by_field.get(field, 0) + 1

    def sync_refused(self) -> None:
        self._refused_file.flush()
        os.fsync(self._refused_file.fileno())
        self._refused_dirty = False

    def _admit(self, sample: Sample, size: int | None = None) -> None:
        key = (sample.actor_id, sample.seq)
        reason = self.check(sample) if self.check is not None else None
        if reason is not None:  # journaled before (older build or other limits): skip it
            self._index += 1
            if key not in self._refused:
                log.warning(
                    "journal: skipping sample %s refused on replay: %s", sample.sample_id, reason
                )
                self._record_refusal(sample, reason)
            return
        self._stored.add(key)
        self._index += 1
        if sample.exec_status is ExecStatus.INFRA_ERROR:
            self.counters["infra_error"] += 1
        elif key not in self._consumed:
            self._pending[key] = (self._index, sample)
            self._sizes[key] = len(encode(sample)) if size is None else size
            self.pending_bytes += self._sizes[key]

    def add(self, sample: Sample, *, sync: bool = True) -> bool:
        """Journal ``sample`` (fsync unless ``sync=False``); False if it was already stored."""
        if (sample.actor_id, sample.seq) in self._stored:
            self.counters["duplicates"] += 1
            return False
        payload = encode(sample)
        self._file.write(_HEADER.pack(len(payload), zlib.crc32(payload)) + payload)
        if sync:
            self.sync()
        self.counters["added"] += 1
        self._admit(sample, len(payload))
        return True

    def sync(self) -> None:
        """Make every added (and refused) sample durable."""
        self._file.flush()
        os.fsync(self._file.fileno())
        if self._refused_dirty:
            self.sync_refused()

    def __contains__(self, key: Key) -> bool:
        return key in self._stored

    def __len__(self) -> int:
        """Samples eligible for a batch."""
        return len(self._pending)

    def stored_keys(self) -> set[Key]:
        """Every ``(actor_id, seq)`` in the journal (pending, consumed or INFRA_ERROR) or
        refused."""
        return set(self._stored)

    def last_consumed_seq(self) -> dict[str, int]:
        """Per actor, the highest seq that went into a batch."""
        out: dict[str, int] = {}
        for actor, seq in self._consumed:
            out[actor] = max(seq, out.get(actor, -1))
        return out

    def _order(self, item: tuple[int, Sample]) -> tuple[float, int]:
        index, s = item
        t = completion_time(s) if self.policy is BatchPolicy.first_completed else s.t_sampled
        return (t, index)

    def ready(self, n: int) -> bool:
        return len(self._pending) >= n

    def take(self, n: int) -> list[Sample]:
        """Remove and return the next ``n`` samples under the batch policy."""
        if n > len(self._pending):
            raise ValueError(f"take: {n} samples requested, {len(self._pending)} pending")
        chosen = sorted(self._pending.values(), key=self._order)[:n]
        batch = [s for _, s in chosen]
        for s in batch:
            key = (s.actor_id, s.seq)
            del self._pending[key]
            self.pending_bytes -= self._sizes.pop(key)
            self._consumed.add(key)
        self.counters["consumed"] += len(batch)
        return batch

    def state_dict(self) -> dict[str, Any]:
        by_actor: dict[str, list[int]] = {}
        for actor, seq in sorted(self._consumed):
            by_actor.setdefault(actor, []).append(seq)
        return {"consumed": by_actor, "policy": self.policy.value}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Mark the checkpoint's consumed samples; everything else journaled is pending."""
        self._consumed = {(a, int(s)) for a, seqs in state["consumed"].items() for s in seqs}
        for key in list(self._pending):
            if key in self._consumed:
                del self._pending[key]
                self.pending_bytes -= self._sizes.pop(key)
        self.counters["consumed"] = len(self._consumed)

    def close(self) -> None:
        if not self._file.closed:
            self.sync()
            self._file.close()
        if not self._refused_file.closed:
            if self._refused_dirty:
                self.sync_refused()
            self._refused_file.close()
