"""Infrastructure down is not a training signal: the pause / resume / give-up rule, and an
actor against a sandbox that is down (then back, or for good)."""

import asyncio
import json

import pytest

from mlerl.actors import AdmissionConfig, ActorsConfig
from mlerl.actors._actor import Actor
from mlerl.actors._fakes import (
    NO_CODE,
    OK_RESPONSE,
    FakeEngine,
    FakeSandbox,
    FakeSender,
    FakeTask,
    FakePipeline,
)
from mlerl.actors._health import InfraConfig, InfraHealth
from mlerl.actors._state import ActorState
from mlerl.protocol import ConfigError, ExecStatus


def test_pauses_at_the_rate_resumes_on_success_and_gives_up_after_the_delay():
    h = InfraHealth(InfraConfig(window=4, min_outcomes=3, pause_rate=0.5, down_after_s=10.0))
    h.record(False, 0.0)  # ok
    h.record(True, 1.0)  # 1 of 2: too few outcomes to judge
    assert not h.paused and h.confirmed
    h.record(True, 2.0)  # 2 of 3 = 0.67 >= 0.5: pause at t=2
    assert h.paused and h.paused_since == 2.0 and not h.confirmed and h.pauses == 1
    assert "2 of the last 3" in h.reason(5.0)
    h.record(True, 3.0)
    assert not h.down(11.9) and h.down(12.0)  # 10 s after the pause began
    h.record(False, 12.5)  # a probe got through: afresh
    assert not h.paused and h.confirmed and h.reason(13.0) == ""
    h.record(True, 13.0)
    h.record(True, 14.0)
    assert not h.paused  # the window was cleared: 2 outcomes < min_outcomes
    h.record(False, 15.0)
    h.record(True, 16.0)  # window [T, T, F, T]: 3 of 4 -> pause again
    assert h.paused and h.pauses == 2


def test_mixed_outcomes_below_the_rate_never_pause():
    h = InfraHealth(InfraConfig(window=4, min_outcomes=2, pause_rate=0.75))
    for i in range(20):
        h.record(i % 2 == 0, float(i))  # half infra errors
    assert not h.paused


@pytest.mark.parametrize(
    "bad",
    [{"window": 0}, {"min_outcomes": 9}, {"pause_rate": 0.0}, {"probe_s": 0}, {"down_after_s": -1}],
)
def test_bad_infra_config_names_the_key(bad):
    with pytest.raises(ConfigError) as err:
        InfraConfig(**bad)
    assert next(iter(bad)) in str(err.value)


@pytest.fixture
def tasks(tmp_path):
    pub = tmp_path / "public"
    pub.mkdir()
    return {"t1": FakeTask("t1", pub)}


def actor_with(tmp_path, tasks, sandbox, sender, engine=None, **cfg):
    config = ActorsConfig(
        heartbeat_s=0.05,
        infra_retries=0,
        admission=AdmissionConfig(max_in_flight=2, oversample=1.0),
        infra=InfraConfig(window=4, min_outcomes=2, pause_rate=0.5, probe_s=0.05, **cfg),
    )
    return Actor(
        "a0",
        config,
        engine=engine or FakeEngine([OK_RESPONSE, NO_CODE]),
        sandbox=sandbox,
        sender=sender,
        tasks=tasks,
        pipeline=FakePipeline(),
        state=ActorState(tmp_path / "state"),
    )


async def test_backend_down_for_good_sends_nothing_and_stops_the_actor(tmp_path, tasks):
    """Half the responses are unparseable (they need no sandbox): none of them reaches the
    learner on its own while every execution fails; the actor pauses, then gives up."""
    sandbox, sender = FakeSandbox(infra_failures=10**9), FakeSender()
    actor = actor_with(tmp_path, tasks, sandbox, sender, down_after_s=0.5)
    async with asyncio.timeout(30):
        await actor.run()
    assert sender.sent == []
    assert actor.infra_down.startswith("paused: the sandbox failed")
    assert actor.stats["generated"] <= 4  # sampling stopped at the pause, not 0.5 s of it
    beat = json.loads((tmp_path / "state" / "heartbeat.json").read_text())
    assert beat["stopped"] == actor.infra_down and beat["infra_pauses"] == 1


async def test_backend_back_resumes_and_releases_held_samples_in_order(tmp_path, tasks):
    sandbox, sender = FakeSandbox(infra_failures=6), FakeSender()
    actor = actor_with(tmp_path, tasks, sandbox, sender, down_after_s=60.0)
    actor.config.max_samples = 6
    async with asyncio.timeout(30):
        await actor.run()
    assert actor.infra_down == "" and actor.health.pauses >= 1
    sent = sender.sent[:6]
    assert [s.seq for s in sent] == list(range(6))  # gapless, in order
    statuses = [s.exec_status for s in sent]
    assert ExecStatus.INFRA_ERROR not in statuses
    assert ExecStatus.OK in statuses and ExecStatus.NOT_RUN in statuses
    assert sandbox.runs >= 7  # six failures (executions and probes), then successes
