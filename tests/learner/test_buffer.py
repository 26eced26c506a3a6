"""ExperienceBuffer: batch formation, INFRA_ERROR exclusion, dedupe, journal replay and torn records."""

import pytest

from mlerl.learner import ExperienceBuffer
from mlerl.learner._buffer import JournalError
from mlerl.learner._config import BatchPolicy
from mlerl.protocol import ExecStatus


def _four(buf, make_sample):
    # (t_sampled, t_done): s0 slow and early, s1/s2 fast, s3 slow and late
    for seq, (ts, td) in enumerate([(0.0, 10.0), (1.0, 2.0), (2.0, 3.0), (3.0, 20.0)]):
        assert buf.add(make_sample(seq=seq, t_sampled=ts, t_done=td, duration_s=td - ts))


def test_first_completed_keeps_slow_samples_for_later(tmp_path, make_sample):
    buf = ExperienceBuffer(tmp_path)
    _four(buf, make_sample)
    assert [s.seq for s in buf.take(2)] == [1, 2]  # completed at 2 and 3
    assert len(buf) == 2  # the slow ones wait, not dropped
    assert [s.seq for s in buf.take(2)] == [0, 3]
    assert buf.last_consumed_seq() == {"a0": 3}


def test_oldest_first_takes_by_sampling_time(tmp_path, make_sample):
    buf = ExperienceBuffer(tmp_path, BatchPolicy.oldest_first)
    _four(buf, make_sample)
    assert [s.seq for s in buf.take(2)] == [0, 1]


def test_infra_error_never_enters_a_batch(tmp_path, make_sample):
    buf = ExperienceBuffer(tmp_path)
    buf.add(make_sample(seq=0, t_sampled=0.0, t_done=1.0))
    buf.add(make_sample(seq=1, t_sampled=0.0, t_done=0.5, status=ExecStatus.INFRA_ERROR))
    buf.add(make_sample(seq=2, t_sampled=0.0, t_done=2.0))
    assert len(buf) == 2 and buf.counters["infra_error"] == 1
    assert ("a0", 1) in buf  # stored (so it is acked and deduped) ...
    assert [s.seq for s in buf.take(2)] == [0, 2]  # ... but never batched
    with pytest.raises(ValueError, match="requested"):
        buf.take(1)


def test_duplicate_is_not_stored_twice(tmp_path, make_sample):
    buf = ExperienceBuffer(tmp_path)
    assert buf.add(make_sample(seq=0))
    assert not buf.add(make_sample(seq=0))
    assert len(buf) == 1 and buf.counters["duplicates"] == 1


def test_reopen_replays_journal_and_restores_consumed(tmp_path, make_sample):
    buf = ExperienceBuffer(tmp_path)
    _four(buf, make_sample)
    buf.take(1)
    state = buf.state_dict()
    buf.take(1)  # consumed after the "checkpoint": must come back on resume
    buf.close()
    again = ExperienceBuffer(tmp_path)
    assert again.stored_keys() == {("a0", i) for i in range(4)}
    again.load_state_dict(state)
    assert [s.seq for s in again.take(3)] == [2, 0, 3]


def test_torn_last_record_is_cut_and_counted(tmp_path, make_sample):
    buf = ExperienceBuffer(tmp_path)
    _four(buf, make_sample)
    buf.close()
    data = buf.path.read_bytes()
    buf.path.write_bytes(data[:-7])  # crash in the middle of writing the 4th record
    again = ExperienceBuffer(tmp_path)
    assert again.counters["torn"] == 1 and len(again) == 3
    assert ("a0", 3) not in again  # not stored, so the actor's resend will be accepted
    assert again.add(make_sample(seq=3, t_sampled=3.0, t_done=20.0))
    again.close()
    third = ExperienceBuffer(tmp_path)
    assert third.counters["torn"] == 0 and len(third) == 4


def test_torn_header_is_cut(tmp_path, make_sample):
    buf = ExperienceBuffer(tmp_path)
    _four(buf, make_sample)
    buf.close()
    with open(buf.path, "ab") as f:
        f.write(b"\x00\x00")  # half a length prefix
    assert len(ExperienceBuffer(tmp_path)) == 4


def test_damage_before_the_end_raises(tmp_path, make_sample):
    buf = ExperienceBuffer(tmp_path)
    _four(buf, make_sample)
    buf.close()
    data = bytearray(buf.path.read_bytes())
    data[20] ^= 0xFF  # inside the first record's payload, records follow
    buf.path.write_bytes(bytes(data))
    with pytest.raises(JournalError, match="checksum"):
        ExperienceBuffer(tmp_path)
