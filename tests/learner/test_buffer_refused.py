"""ExperienceBuffer with a check: refused samples are logged, never journaled nor batched, and a
bad sample journaled earlier is skipped on replay instead of reaching an update."""

from __future__ import annotations

import json

import msgspec

from mlerl.learner import ExperienceBuffer
from mlerl.learner._buffer import read_journal
from mlerl.protocol import SampleLimits, check_sample

LIMITS = SampleLimits(vocab_size=512, reward_min=-10.0, reward_max=10.0)


def _check(sample):
    return check_sample(sample, LIMITS)


def test_refused_sample_is_logged_not_journaled_and_counts_as_stored(tmp_path, make_sample):
    buf = ExperienceBuffer(tmp_path, check=_check)
    good, bad = make_sample(seq=0), make_sample(seq=1, reward=1e6)
    assert buf.add(good)
    reason = _check(bad)
    assert reason is not None and buf.refuse(bad, reason)
    assert not buf.refuse(bad, reason)  # a resend is a duplicate
    assert len(buf) == 1 and buf.stored_keys() == {("a0", 0), ("a0", 1)}
    assert buf.counters["refused"] == 1 and buf.refused_by_field == {"reward": 1}
    buf.close()
    assert [s.seq for s in read_journal(tmp_path / "journal.bin")[0]] == [0]
    records = [json.loads(line) for line in (tmp_path / "refused.jsonl").read_text().splitlines()]
    assert [(r["actor_id"], r["seq"], r["sample_id"], r["reason"]) for r in records] == [
        ("a0", 1, "a0:1", reason)
    ]

    again = ExperienceBuffer(tmp_path, check=_check)  # restart: the refused key is still stored
    assert again.stored_keys() == {("a0", 0), ("a0", 1)} and len(again) == 1
    assert again.counters["refused"] == 1 and again.refused_by_field == {"reward": 1}
    again.close()


def test_bad_sample_already_journaled_is_skipped_on_replay(tmp_path, make_sample):
    old = ExperienceBuffer(tmp_path)  # an older build: no check at the door
    poisoned = msgspec.structs.replace(
        make_sample(seq=1), response_ids=[7, 512, 3, 4]
    )  # 512: outside the vocabulary
    for s in (make_sample(seq=0), poisoned, make_sample(seq=2)):
        old.add(s)
    old.close()

    buf = ExperienceBuffer(tmp_path, check=_check)
    assert [s.seq for s in buf.take(len(buf))] == [0, 2]
    assert buf.stored_keys() == {("a0", 0), ("a0", 1), ("a0", 2)}  # still acked/deduped
    assert buf.refused_by_field == {"response_ids": 1}
    buf.close()
    lines = (tmp_path / "refused.jsonl").read_text().splitlines()
    assert len(lines) == 1 and "outside the vocabulary" in json.loads(lines[0])["reason"]

    # a second restart neither logs it twice nor batches it
    buf = ExperienceBuffer(tmp_path, check=_check)
    assert len(buf) == 2 and buf.counters["refused"] == 1
    buf.close()
    assert len((tmp_path / "refused.jsonl").read_text().splitlines()) == 1


def test_torn_last_refusal_is_cut_off(tmp_path, make_sample):
    buf = ExperienceBuffer(tmp_path, check=_check)
    buf.refuse(make_sample(seq=0, reward=50.0), "reward: too high")
    buf.close()
    with open(tmp_path / "refused.jsonl", "a") as f:
        f.write('{"actor_id": "a0", "seq": 1, "rea')  # crash mid-write: never acked
    buf = ExperienceBuffer(tmp_path, check=_check)
    assert buf.stored_keys() == {("a0", 0)}
    buf.refuse(make_sample(seq=1, reward=50.0), "reward: too high")
    buf.close()
    seqs = [json.loads(x)["seq"] for x in (tmp_path / "refused.jsonl").read_text().splitlines()]
    assert seqs == [0, 1]
