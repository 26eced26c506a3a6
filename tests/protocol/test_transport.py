"""SampleSender / SampleReceiver in one process: dedupe, ordering, restore, bad input, liveness."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import zmq
import zmq.asyncio

from mlerl.protocol import Sample, SampleReceiver, SampleSender, decode, encode
from mlerl.protocol._messages import Ack, Heartbeat

from .conftest import make_sample


class Store:
    def __init__(self) -> None:
        self.items: list[tuple[str, int]] = []

    async def __call__(self, sample: Sample) -> None:
        self.items.append((sample.actor_id, sample.seq))


def _raw_dealer(address: str, identity: str) -> zmq.asyncio.Socket:
    sock = zmq.asyncio.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.IDENTITY, identity.encode())
    sock.connect(address)
    return sock


async def _next_ack(sock: zmq.asyncio.Socket) -> Ack:
    async with asyncio.timeout(20):
        while True:
            msg = decode(await sock.recv())
            if isinstance(msg, Ack):
                return msg


def _addr(short_dir: Path, name: str = "s") -> str:
    return f"ipc://{short_dir}/{name}.sock"


async def test_duplicates_reacked_and_gaps_dropped(short_dir: Path) -> None:
    store = Store()
    async with SampleReceiver(_addr(short_dir), store) as receiver:
        dealer = _raw_dealer(receiver.endpoint, "a0")
        try:
            # seq 0 stored; its duplicate is re-acked; seq 2 is across a gap: dropped, no ack
            for seq, expect_ack in [(0, 0), (0, 0), (2, None), (1, 1), (2, 2), (1, 2)]:
                await dealer.send(encode(make_sample(seq=seq)))
                if expect_ack is not None:
                    assert (await _next_ack(dealer)).seq == expect_ack
        finally:
            dealer.close()
    assert store.items == [("a0", 0), ("a0", 1), ("a0", 2)]
    assert receiver.counters["duplicates"] == 2
    assert receiver.counters["out_of_order"] == 1
    assert receiver.watermark("a0") == 2


async def test_restore_from_stored_pairs_with_a_hole(short_dir: Path) -> None:
    store = Store()
    stored = [("a0", 0), ("a0", 1), ("a0", 3), ("b", 0)]
    async with SampleReceiver(_addr(short_dir), store, stored=stored) as receiver:
        assert receiver.watermark("a0") == 1  # 0 and 1 contiguous; 3 remembered above the hole
        dealer = _raw_dealer(receiver.endpoint, "a0")
        try:
            await dealer.send(encode(make_sample(seq=1)))
            assert (await _next_ack(dealer)).seq == 1  # already stored: re-acked only
            await dealer.send(encode(make_sample(seq=2)))
            assert (await _next_ack(dealer)).seq == 3  # fills the hole: watermark jumps over 3
            await dealer.send(encode(make_sample(seq=3)))
            assert (await _next_ack(dealer)).seq == 3  # 3 was stored before the restart
        finally:
            dealer.close()
    assert store.items == [("a0", 2)]
    assert receiver.watermark("b") == 0


async def test_malformed_input_is_counted_and_survived(short_dir: Path) -> None:
    store = Store()
    async with SampleReceiver(_addr(short_dir), store) as receiver:
        dealer = _raw_dealer(receiver.endpoint, "a0")
        try:
            await dealer.send(b"\xc1garbage")
            await dealer.send(encode(make_sample())[:-3])
            await dealer.send_multipart([b"two", b"frames"])
            await dealer.send(encode(Ack(actor_id="a0", seq=0)))  # not a sample-stream message
            await dealer.send(encode(make_sample(seq=0)))
            assert (await _next_ack(dealer)).seq == 0
        finally:
            dealer.close()
    assert receiver.counters["malformed"] == 4
    assert store.items == [("a0", 0)]


async def test_heartbeats_tracked_and_answered(short_dir: Path) -> None:
    async with SampleReceiver(_addr(short_dir), Store(), name="L") as receiver:
        dealer = _raw_dealer(receiver.endpoint, "a7")
        try:
            await dealer.send(encode(Heartbeat(sender="a7", role="actor", t=1.0)))
            async with asyncio.timeout(20):
                reply = decode(await dealer.recv())
        finally:
            dealer.close()
    assert isinstance(reply, Heartbeat) and reply.sender == "L" and reply.role == "learner"
    assert reply.state == {"watermark": -1.0}
    assert "a7" in receiver.last_seen and receiver.counters["heartbeats"] == 1


async def test_sender_heartbeat_gets_reply(short_dir: Path) -> None:
    async with SampleReceiver(_addr(short_dir), Store()) as receiver:
        async with SampleSender(receiver.endpoint, "a3", heartbeat_s=0.05) as sender:
            async with asyncio.timeout(20):
                while sender.last_reply is None:
                    await asyncio.sleep(0.02)
    assert "a3" in receiver.last_seen


async def test_sender_keeps_samples_until_a_late_receiver_acks(short_dir: Path) -> None:
    address = _addr(short_dir)
    async with SampleSender(address, "a0", hwm=2, resend_after_s=0.2, max_unacked=50) as sender:
        for seq in range(20):
            await sender.send(make_sample(seq=seq))
        with pytest.raises(TimeoutError):
            await sender.flush(timeout=0.3)  # nobody is listening yet
        assert sender.unacked == 20
        store = Store()
        async with SampleReceiver(address, store):
            await sender.flush(timeout=30)
    assert sender.unacked == 0 and sender.acked_seq == 19
    assert store.items == [("a0", s) for s in range(20)]
    assert sender.counters["hwm_full"] > 0


async def test_changed_wakes_every_waiter_on_a_send_and_on_the_acks(short_dir: Path) -> None:
    """``changed`` is how an actor waits for the learner's acks or room without polling."""
    address = _addr(short_dir)
    async with SampleSender(address, "a0", resend_after_s=0.2) as sender:
        waiters = [asyncio.create_task(sender.changed()) for _ in range(2)]
        await asyncio.sleep(0.05)
        assert not any(w.done() for w in waiters)
        await sender.send(make_sample(seq=0))
        async with asyncio.timeout(5):
            await asyncio.gather(*waiters)  # a send wakes every waiter
        acked = asyncio.create_task(sender.changed())
        async with SampleReceiver(address, Store()):
            async with asyncio.timeout(30):
                await acked  # the ack arrives
                while sender.acked_seq < 0:
                    await sender.changed()
    assert sender.unacked == 0


async def test_send_waits_when_max_unacked_reached(short_dir: Path) -> None:
    async with SampleSender(_addr(short_dir), "a0", max_unacked=3) as sender:
        for seq in range(3):
            await sender.send(make_sample(seq=seq))
        with pytest.raises(TimeoutError):  # no receiver: the 4th send must wait, not drop
            async with asyncio.timeout(0.3):
                await sender.send(make_sample(seq=3))
        assert sender.unacked == 3


async def test_send_rejects_foreign_actor_and_non_increasing_seq(short_dir: Path) -> None:
    async with SampleSender(_addr(short_dir), "a0") as sender:
        await sender.send(make_sample(seq=5))
        with pytest.raises(ValueError, match="actor_id"):
            await sender.send(make_sample(actor_id="zz", seq=6))
        with pytest.raises(ValueError, match="seq"):
            await sender.send(make_sample(seq=5))
        assert sender.unacked == 1


async def test_storage_failure_propagates_and_nothing_is_acked(short_dir: Path) -> None:
    async def broken(sample: Sample) -> None:
        raise OSError("disk full")

    with pytest.raises(ExceptionGroup) as info:
        async with SampleReceiver(_addr(short_dir), broken) as receiver:
            async with SampleSender(receiver.endpoint, "a0", resend_after_s=0.2) as sender:
                await sender.send(make_sample(seq=0))
                await sender.flush(timeout=30)
    assert info.group_contains(OSError)
    assert sender.unacked == 1 and receiver.watermark("a0") == -1


@pytest.mark.parametrize("bind", ["tcp://127.0.0.1:*", "ipc"])
async def test_two_actors_in_process(bind: str, short_dir: Path) -> None:
    store = Store()
    bind = _addr(short_dir) if bind == "ipc" else bind
    async with SampleReceiver(bind, store) as receiver:
        async with (
            SampleSender(receiver.endpoint, "a0", hwm=5) as s0,
            SampleSender(receiver.endpoint, "a1", hwm=5) as s1,
        ):
            for seq in range(300):
                await s0.send(make_sample("a0", seq))
                await s1.send(make_sample("a1", seq))
            await s0.flush(timeout=30)
            await s1.flush(timeout=30)
    for actor in ("a0", "a1"):
        assert [s for a, s in store.items if a == actor] == list(range(300))


async def _lossy_proxy(front: zmq.asyncio.Socket, back: zmq.asyncio.Socket, seed: int) -> None:
    """Forward sender -> receiver dropping 10%, duplicating 10%, delaying 10% (reordering);
    and receiver -> sender dropping 30% of acks and heartbeats."""
    import random

    rng = random.Random(seed)
    held: list[bytes] = []

    async def forward() -> None:
        while True:
            _, payload = await front.recv_multipart()
            r = rng.random()
            if r < 0.1:
                continue
            if r < 0.2:
                held.append(payload)
                continue
            await back.send(payload)
            if r < 0.3:
                await back.send(payload)
            if held and rng.random() < 0.3:
                await back.send(held.pop(0))

    async def backward() -> None:
        while True:
            payload = await back.recv()
            if rng.random() >= 0.3:
                await front.send_multipart([b"a0", payload])

    async with asyncio.TaskGroup() as tg:
        tg.create_task(forward())
        tg.create_task(backward())


async def test_exactly_once_in_order_through_a_lossy_reordering_channel(short_dir: Path) -> None:
    ctx = zmq.asyncio.Context.instance()
    front = ctx.socket(zmq.ROUTER)
    front.setsockopt(zmq.LINGER, 0)
    front.bind(_addr(short_dir, "front"))
    store = Store()
    async with SampleReceiver(_addr(short_dir, "back"), store) as receiver:
        back = _raw_dealer(receiver.endpoint, "a0")
        try:
            async with asyncio.TaskGroup() as tg:
                proxy = tg.create_task(_lossy_proxy(front, back, seed=7))
                async with SampleSender(
                    _addr(short_dir, "front"), "a0", hwm=4, resend_after_s=0.1, heartbeat_s=0.05
                ) as sender:
                    for seq in range(100):
                        await sender.send(make_sample(seq=seq))
                    await sender.flush(timeout=60)
                proxy.cancel()
        finally:
            back.close()
            front.close()
    assert store.items == [("a0", s) for s in range(100)]
    assert receiver.counters["duplicates"] > 0 and receiver.counters["out_of_order"] > 0
    assert sender.counters["resent"] > 0


async def test_plain_function_callbacks_and_commit_before_ack(short_dir: Path) -> None:
    items: list[int] = []
    committed: list[int] = []  # len(items) at each commit
    acked_after_commit: list[bool] = []

    def on_sample(sample: Sample) -> None:
        items.append(sample.seq)

    def commit() -> None:
        committed.append(len(items))

    async with SampleReceiver(_addr(short_dir), on_sample, commit=commit) as receiver:
        async with SampleSender(receiver.endpoint, "a0") as sender:
            for seq in range(50):
                await sender.send(make_sample(seq=seq))
                # whatever is acked so far was committed before the ack went out
                acked_after_commit.append(
                    sender.acked_seq + 1 <= (committed[-1] if committed else 0)
                )
            await sender.flush(timeout=30)
    assert items == list(range(50))
    assert committed[-1] == 50 and 1 <= len(committed) <= receiver.counters["batches"]
    assert all(acked_after_commit)
