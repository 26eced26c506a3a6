"""Backpressure state of the learner: pending bytes of the buffer and the configured bounds."""

import pytest

from mlerl.learner import ExperienceBuffer, LearnerConfig
from mlerl.protocol import ConfigError, encode


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
