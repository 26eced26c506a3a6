"""Actor-side backpressure: no new generation while the learner says it is full or stops
acknowledging; the actor says so in heartbeat.json and resumes when the learner has room."""

import asyncio
import json

from mlerl.actors import ActorsConfig, AdmissionConfig
from mlerl.actors._actor import Actor
from mlerl.actors._fakes import (
    OK_RESPONSE,
    FakeEngine,
    FakeSandbox,
    FakeSender,
    FakeTask,
    FakePipeline,
)
from mlerl.actors._state import ActorState


class GatedSender(FakeSender):
    """A FakeSender whose learner can be 'full' and that acks only while ``ack`` is True; the
    actor hears of each change as it would from a real sender's ack or heartbeat."""

    def set_full(self, full: bool) -> None:
        self.learner_full = full
        self.notify()

    def release(self) -> None:
        self.acked_seq = self.watermark
        self.notify()


def _actor(tmp_path, sender, engine, **cfg):
    pub = tmp_path / "public"
    pub.mkdir(exist_ok=True)
    (pub / "train.csv").write_text("id,x,y\n1,2,0\n")
    config = ActorsConfig(
        heartbeat_s=0.05, admission=AdmissionConfig(max_in_flight=1, oversample=1.0), **cfg
    )
    return Actor(
        "a0",
        config,
        engine=engine,
        sandbox=FakeSandbox(),
        sender=sender,
        tasks={"t1": FakeTask("t1", pub)},
        pipeline=FakePipeline(),
        state=ActorState(tmp_path / "state"),
    )


def _beat(actor) -> dict:
    return json.loads((actor.state.dir / "heartbeat.json").read_text())


async def test_learner_full_stops_new_generations_until_it_has_room(tmp_path):
    sender, engine = GatedSender(), FakeEngine([OK_RESPONSE])
    sender.set_full(True)
    actor = _actor(tmp_path, sender, engine, max_samples=2)
    task = asyncio.create_task(actor.run())
    try:
        await asyncio.sleep(1.0)
        assert engine.calls == [] and sender.sent == []  # nothing started while full
        beat = _beat(actor)
        assert beat["waiting"] == "learner full" and actor.stats["backpressure_waits"] == 1
        assert beat["backpressure_s"] >= 0.5  # the wait under way is already counted in the beat
        sender.set_full(False)
        async with asyncio.timeout(20):
            await task
    finally:
        task.cancel()
    assert [s.seq for s in sender.sent] == [0, 1]
    assert _beat(actor)["waiting"] == "" and actor.stats["backpressure_s"] >= 0.9


async def test_unacked_bound_pauses_an_actor_whose_learner_went_silent(tmp_path):
    sender, engine = GatedSender(), FakeEngine([OK_RESPONSE])
    sender.ack = False  # a stopped learner: nothing is acknowledged
    actor = _actor(tmp_path, sender, engine, max_unacked=3, max_samples=6)
    task = asyncio.create_task(actor.run())
    try:
        async with asyncio.timeout(20):
            while len(sender.sent) < 3:
                await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)
        # one action in flight at most: the bound is exceeded by at most what was running
        assert len(sender.sent) <= 4 and "unacked" in _beat(actor)["waiting"]
        calls = len(engine.calls)
        await asyncio.sleep(0.5)
        assert len(engine.calls) == calls  # no new generation while waiting
        sender.ack = True
        sender.release()
        async with asyncio.timeout(20):
            await task
    finally:
        task.cancel()
    assert [s.seq for s in sender.sent] == list(range(6))
