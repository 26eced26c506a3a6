"""Backpressure of the learner: pending bytes of the buffer, the configured bounds, and the door
(``open_receiver``) that stops storing at them."""

import asyncio
import tempfile

import pytest

from mlerl.learner import ExperienceBuffer, LearnerConfig
from mlerl.learner._process import open_receiver, pending_full
from mlerl.protocol import ConfigError, SampleSender, TransportConfig, encode


def test_pending_bytes_follow_add_take_replay_and_restore(tmp_path, make_sample):
    buf = ExperienceBuffer(tmp_path)
    samples = [make_sample(seq=i, response_len=4 + 10 * i) for i in range(4)]
    sizes = [len(encode(s)) for s in samples]
    for s in samples:
        buf.add(s)
    assert buf.pending_bytes == sum(sizes)
    taken = buf.take(2)
    left = sum(size for s, size in zip(samples, sizes) if s not in taken)
    assert buf.pending_bytes == left
    state = buf.state_dict()
    buf.close()
    replayed = ExperienceBuffer(tmp_path)  # the journal replays every sample as pending ...
    assert replayed.pending_bytes == sum(sizes)
    replayed.load_state_dict(state)  # ... until the checkpoint marks the consumed ones
    assert replayed.pending_bytes == left and len(replayed) == 2
    replayed.take(2)
    assert replayed.pending_bytes == 0
    replayed.close()


def test_pending_bound_defaults_to_four_batches_and_is_at_least_a_batch():
    assert LearnerConfig(batch_size=8).pending_bound == 32
    assert LearnerConfig(batch_size=8, max_pending_samples=8).pending_bound == 8
    with pytest.raises(ConfigError, match="max_pending_samples"):
        LearnerConfig(batch_size=8, max_pending_samples=7)
    with pytest.raises(ConfigError, match="max_pending_bytes"):
        LearnerConfig(max_pending_bytes=0)


@pytest.mark.parametrize(
    "pending, pending_bytes, full",
    [
        (31, 0, False),
        (32, 0, True),  # the sample bound: 4 * B = 32
        (8, 999, False),
        (8, 1000, True),  # the byte bound, from B = 8 pending samples on
        (7, 10**9, False),  # below B the byte bound never blocks forming a batch
    ],
)
def test_pending_full_is_the_sample_bound_or_the_byte_bound_from_a_batch_on(
    pending, pending_bytes, full
):
    cfg = LearnerConfig(batch_size=8, max_pending_bytes=1000)
    assert pending_full(pending, pending_bytes, cfg) is full


async def _until(predicate, timeout: float = 15.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.05)


@pytest.mark.parametrize("bound", ["samples", "bytes"])
async def test_the_learner_door_stops_storing_at_its_bound_and_resumes_when_consumed(
    tmp_path, make_sample, bound
):
    """The receiver ``serve`` opens (``open_receiver``) over a real buffer: at the bound it
    stores and acks nothing new and tells the actor; an update consuming a batch makes room."""
    samples = [make_sample(seq=i, response_len=6, token_seed=0) for i in range(8)]
    size = len(encode(samples[0]))
    assert all(len(encode(s)) == size for s in samples)
    cfg = (
        LearnerConfig(batch_size=2, max_pending_samples=3)
        if bound == "samples"
        else LearnerConfig(batch_size=2, max_pending_samples=8, max_pending_bytes=3 * size)
    )
    buffer = ExperienceBuffer(tmp_path / "buffer")
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="mlerl-") as short:
        transport = TransportConfig(samples_address=f"ipc://{short}/s.sock")
        receiver = open_receiver(
            buffer,
            transport,
            cfg,
            lambda s: buffer.add(s, sync=False),
            buffer.sync,
            lambda s, r: None,
        )
        async with receiver:
            async with SampleSender(
                receiver.endpoint, "a0", resend_after_s=0.3, heartbeat_s=0.2
            ) as sender:
                for sample in samples:
                    await sender.send(sample)
                await _until(lambda: sender.learner_full and sender.acked_seq == 2)
                assert len(buffer) == 3  # 3 samples, or 3 samples' bytes
                buffer.take(2)  # an update consumed a batch: room for two more
                await _until(lambda: sender.acked_seq == 4 and sender.learner_full)
                assert len(buffer) == 3
                buffer.take(3)
                await sender.flush(timeout=15)
    assert len(buffer) == 3 and buffer.pending_bytes == 3 * size
    buffer.close()
