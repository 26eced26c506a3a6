"""SampleReceiver with a check: refused samples are acked (the stream goes on) but not stored."""

from __future__ import annotations

import pytest

from mlerl.protocol import Sample, SampleReceiver, SampleSender

from .conftest import make_sample


def _check(sample: Sample) -> str | None:
    return "reward: too high" if sample.reward > 1.0 else None


async def test_refused_sample_is_acked_not_stored_and_the_stream_continues():
    stored: list[int] = []
    refused: list[tuple[int, str]] = []
    commits: list[int] = []
    receiver = SampleReceiver(
        "tcp://127.0.0.1:*",
        lambda s: stored.append(s.seq),
        check=_check,
        on_refused=lambda s, why: refused.append((s.seq, why)),
        commit=lambda: commits.append(len(refused)),
    )
    async with receiver, SampleSender(receiver.endpoint, "a0") as sender:
        for seq, reward in enumerate([0.5, 1e6, 0.25, 7.0]):
            await sender.send(make_sample(seq=seq, reward=reward))
        await sender.flush(timeout=20)  # would time out if a refused seq were never acked
    assert stored == [0, 2]
    assert refused == [(1, "reward: too high"), (3, "reward: too high")]
    assert receiver.counters["refused"] == 2 and receiver.counters["stored"] == 2
    assert receiver.watermark("a0") == 3 and sender.acked_seq == 3
    assert (
        commits and commits[-1] == 2
    )  # refusals are recorded before the commit that precedes the ack


async def test_a_restarted_receiver_treats_a_refused_key_as_already_stored():
    stored: list[int] = []
    refused: list[int] = []
    # the journal held seq 0, the refused log seq 1: a resend of 1 is a duplicate, 2 is next
    receiver = SampleReceiver(
        "tcp://127.0.0.1:*",
        lambda s: stored.append(s.seq),
        stored=[("a0", 0), ("a0", 1)],
        check=_check,
        on_refused=lambda s, why: refused.append(s.seq),
    )
    async with receiver, SampleSender(receiver.endpoint, "a0") as sender:
        await sender.send(make_sample(seq=1, reward=1e6))
        await sender.send(make_sample(seq=2))
        await sender.flush(timeout=20)
    assert stored == [2] and refused == [] and receiver.counters["duplicates"] == 1


def test_check_requires_somewhere_to_record_refusals():
    with pytest.raises(ValueError, match="on_refused"):
        SampleReceiver("tcp://127.0.0.1:*", lambda s: None, check=_check)
