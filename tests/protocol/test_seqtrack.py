"""SeqTracker (the receiver's pure state machine), alone and inside a model of the protocol.

The model: a go-back-N sender per actor, a channel that loses, duplicates and reorders
messages and acks, and a receiver that crashes (losing in-flight messages and its memory) and
restores from its journal. Whatever hypothesis does, once the channel stops misbehaving every
sample is in the journal exactly once and in seq order per actor.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlerl.protocol._seqtrack import SeqTracker, Verdict


def test_verdicts_and_restore_with_a_hole() -> None:
    tracker = SeqTracker([("a", 0), ("a", 1), ("a", 3), ("b", 0)])
    assert (tracker.watermark("a"), tracker.watermark("b"), tracker.watermark("new")) == (1, 0, -1)
    assert tracker.verdict("a", 1) is Verdict.DUPLICATE
    assert tracker.verdict("a", 3) is Verdict.DUPLICATE  # stored above the hole
    assert tracker.verdict("a", 4) is Verdict.GAP
    assert tracker.verdict("a", 2) is Verdict.STORE
    assert tracker.after("a", 2) == 4  # 3 is already stored
    tracker.mark_stored("a", 2)
    assert tracker.watermark("a") == 3  # compacted over the hole
    assert tracker.verdict("new", 0) is Verdict.STORE and tracker.verdict("new", 1) is Verdict.GAP
    with pytest.raises(ValueError, match="out of order"):
        tracker.mark_stored("a", 9)
    with pytest.raises(ValueError, match="negative"):
        SeqTracker([("a", -1)])
    assert tracker.actors() == ["a", "b"]


ACTORS, N = ("a0", "a1"), 6
Action = st.tuples(
    st.sampled_from(["send", "deliver", "drop", "dup", "ack", "drop_ack", "timeout", "crash"]),
    st.integers(0, 50),
)


class Model:
    def __init__(self) -> None:
        self.outbox = {a: list(range(N)) for a in ACTORS}  # unacked seqs, in order
        self.queue = {a: list(range(N)) for a in ACTORS}  # to transmit, in order
        self.wire: list[tuple[str, int]] = []  # samples in flight, any order
        self.acks: list[tuple[str, int]] = []
        self.journal: list[tuple[str, int]] = []
        self.tracker = SeqTracker()

    def step(self, kind: str, k: int) -> None:
        actor = ACTORS[k % len(ACTORS)]
        if kind == "send" and self.queue[actor]:
            self.wire.append((actor, self.queue[actor].pop(0)))
        elif kind == "timeout":
            self.queue[actor] = list(self.outbox[actor])  # go back N
        elif kind == "crash":
            self.wire.clear()
            self.acks.clear()
            self.tracker = SeqTracker(self.journal)
        elif kind in ("deliver", "drop", "dup") and self.wire:
            msg = self.wire.pop(k % len(self.wire))
            if kind == "deliver":
                self.receive(*msg)
            elif kind == "dup":
                self.wire += [msg, msg]
        elif kind in ("ack", "drop_ack") and self.acks:
            actor, seq = self.acks.pop(k % len(self.acks))
            if kind == "ack":
                self.outbox[actor] = [s for s in self.outbox[actor] if s > seq]

    def receive(self, actor: str, seq: int) -> None:
        verdict = self.tracker.verdict(actor, seq)
        if verdict is Verdict.STORE:
            self.journal.append((actor, seq))  # durable before the ack
            self.tracker.mark_stored(actor, seq)
        if verdict is not Verdict.GAP:
            self.acks.append((actor, self.tracker.watermark(actor)))  # cumulative

    def settle(self) -> None:
        for _ in range(4 * N):
            for actor in ACTORS:
                self.queue[actor] = list(self.outbox[actor])
                while self.queue[actor]:
                    self.step("send", ACTORS.index(actor))
            while self.wire:
                self.step("deliver", 0)
            while self.acks:
                self.step("ack", 0)
            if not any(self.outbox.values()):
                return


@settings(max_examples=300, deadline=None)
@given(st.lists(Action, max_size=80))
def test_exactly_once_in_order_under_loss_duplication_reordering_and_crashes(actions) -> None:
    model = Model()
    for kind, k in actions:
        model.step(kind, k)
    model.settle()
    assert not any(model.outbox.values())
    for actor in ACTORS:
        assert [s for a, s in model.journal if a == actor] == list(range(N))
