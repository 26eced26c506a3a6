"""Backpressure on the sample stream: a full receiver stores and acks nothing new, says so in
its heartbeats, and takes the deferred samples, in order and exactly once, when it has room."""

from __future__ import annotations

import asyncio
from pathlib import Path

from mlerl.protocol import Sample, SampleReceiver, SampleSender

from .conftest import make_sample


async def _until(predicate, timeout: float = 20.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.05)


async def test_full_receiver_defers_then_takes_everything_in_order(short_dir: Path) -> None:
    stored: list[tuple[str, int]] = []
    bound = {"n": 3}  # the caller's bound on what it holds; "consuming" raises it

    def on_sample(sample: Sample) -> None:
        stored.append((sample.actor_id, sample.seq))

    def full() -> bool:
        return len(stored) >= bound["n"]

    address = f"ipc://{short_dir}/bp.sock"
    async with SampleReceiver(address, on_sample, full=full) as receiver:
        async with SampleSender(
            receiver.endpoint, "a0", resend_after_s=0.3, heartbeat_s=0.2
        ) as sender:
            for seq in range(8):
                await sender.send(make_sample(seq=seq))
            # never more than the bound is stored; the rest waits in the sender's outbox
            await _until(lambda: sender.learner_full)
            await asyncio.sleep(1.0)  # several resend rounds: still bounded, nothing acked beyond
            assert stored == [("a0", s) for s in range(3)]
            assert receiver.counters["deferred"] > 0
            assert sender.acked_seq == 2 and sender.unacked == 5
            bound["n"] = 100  # room again: the resends are stored, the news reaches the sender
            await sender.flush(timeout=20)
            await _until(lambda: not sender.learner_full)
    assert stored == [("a0", s) for s in range(8)]  # in order, none twice


async def test_full_defers_only_new_samples_duplicates_are_still_acked(short_dir: Path) -> None:
    stored: list[int] = []
    address = f"ipc://{short_dir}/bp2.sock"
    async with SampleReceiver(
        address, lambda s: stored.append(s.seq), stored=[("a0", 0), ("a0", 1)], full=lambda: True
    ) as receiver:
        async with SampleSender(
            receiver.endpoint, "a0", resend_after_s=0.3, heartbeat_s=0.2
        ) as sender:
            for seq in range(3):  # 0 and 1 were stored by an earlier run: acked; 2 is deferred
                await sender.send(make_sample(seq=seq))
            await _until(lambda: sender.acked_seq == 1 and sender.learner_full)
            await asyncio.sleep(0.5)
            assert sender.unacked == 1 and stored == []
