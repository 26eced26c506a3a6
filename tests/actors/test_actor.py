import asyncio
import hashlib

import pytest

from mlerl.actors import ActorsConfig, AdmissionConfig, ImprovementConfig
from mlerl.actors._actor import Actor
from mlerl.actors._state import ActorState
from mlerl.protocol import ExecStatus, ParseStatus, PromptKind, WeightUpdate

from mlerl.actors._fakes import (
    NO_CODE,
    OK_RESPONSE,
    SYNTAX,
    FakeEngine,
    FakeSandbox,
    FakeSender,
    FakeTask,
    FakePipeline,
)


@pytest.fixture
def tasks(tmp_path):
    pub = tmp_path / "public"
    pub.mkdir()
    (pub / "train.csv").write_text("id,x,y\n1,2,0\n")
    return {"t1": FakeTask("t1", pub), "t2": FakeTask("t2", pub)}


def make_actor(tmp_path, tasks, *, engine=None, sandbox=None, sender=None, weights=None, **cfg):
    cfg.setdefault("admission", AdmissionConfig(max_in_flight=2, oversample=1.5))
    config = ActorsConfig(heartbeat_s=0.05, **cfg)
    return Actor(
        "a0",
        config,
        engine=engine or FakeEngine([OK_RESPONSE]),
        sandbox=sandbox or FakeSandbox(),
        sender=sender or FakeSender(),
        tasks=tasks,
        pipeline=FakePipeline(),
        state=ActorState(tmp_path / "state"),
        weights=weights,
    )


async def run(actor, timeout=30):
    async with asyncio.timeout(timeout):
        await actor.run()


async def test_sends_complete_samples_with_gapless_seqs(tmp_path, tasks):
    engine = FakeEngine([OK_RESPONSE, NO_CODE, SYNTAX])
    sender, sandbox = FakeSender(), FakeSandbox()
    actor = make_actor(
        tmp_path, tasks, engine=engine, sender=sender, sandbox=sandbox, max_samples=9
    )
    await run(actor)
    # the sandbox owns the limits: a program's request carries only what the task sets (the
    # health probe, run while not-run samples wait for a first execution, brings its own)
    programs = [r for r in sandbox.requests if r.data_dir is not None]
    assert programs and all(r.limits is None and r.time_limit_s == 30.0 for r in programs)
    sent = sender.sent[:9]
    assert [s.seq for s in sent] == list(range(9))
    assert all(s.sample_id == f"a0:{s.seq}" and s.actor_id == "a0" for s in sent)
    by_status = {}
    for s in sent:
        by_status.setdefault(s.parse_status, []).append(s)
        assert s.prompt_ids == [1, 2] and len(s.response_ids) == len(s.behaviour_logprobs) > 0
        assert s.policy_version == 0 and s.task_id in ("t1", "t2")
        # the sampling parameters travel with the sample (the learner scores at them)
        assert (s.temperature, s.top_p, s.top_k) == (
            actor.config.temperature,
            actor.config.top_p,
            actor.config.top_k,
        )
    assert set(by_status) == {ParseStatus.OK, ParseStatus.NO_CODE, ParseStatus.SYNTAX_ERROR}
    for s in by_status[ParseStatus.OK]:
        assert s.exec_status is ExecStatus.OK and s.valid_submission and s.score == 0.8
        assert s.reward == 0.8 and s.duration_s == 2.5  # Δt is the execution's duration
        assert s.markers == ["loaded data", "trained model"]
        assert s.t_sampled <= s.t_exec_started <= s.t_exec_finished <= s.t_graded
        assert "loaded data" in s.output_tail and "print('loaded data')" in s.code
        assert s.plan == "Fit a model."  # the response's text before its program
    for s in by_status[ParseStatus.NO_CODE] + by_status[ParseStatus.SYNTAX_ERROR]:
        assert s.exec_status is ExecStatus.NOT_RUN and s.reward == -10.0 and s.duration_s == 0.0
        assert s.t_exec_started is None and s.t_graded is None
    assert by_status[ParseStatus.SYNTAX_ERROR][0].code.startswith("def f(:")
    hb = (
        (tmp_path / "state" / "a0" / "heartbeat.json")
        if False
        else (actor.state.dir / "heartbeat.json")
    )
    assert hb.exists()


async def test_samples_carry_their_measured_generation_time(tmp_path, tasks):
    # generation takes 0.2 s here, execution 2.5 s (the fake's): Δt = 2.7 s, nothing clamped
    sender = FakeSender()
    actor = make_actor(
        tmp_path,
        tasks,
        engine=FakeEngine([OK_RESPONSE, NO_CODE], delay=0.2),
        sender=sender,
        max_samples=4,
    )
    await run(actor)
    for s in sender.sent:
        assert 0.2 <= s.generation_s < 5.0
        assert s.dt_s == s.generation_s + s.duration_s
        assert s.duration_s == (2.5 if s.exec_status is ExecStatus.OK else 0.0)


async def test_generation_is_batched_across_slots(tmp_path, tasks):
    engine = FakeEngine([OK_RESPONSE])
    actor = make_actor(
        tmp_path,
        tasks,
        engine=engine,
        max_samples=3,
        admission=AdmissionConfig(max_in_flight=2, oversample=2.0),
    )
    await run(actor)
    assert len(engine.calls[0]) == 4  # capacity ceil(2.0 * 2) = 4 conversations in one call


async def test_infra_errors_are_retried_then_dropped_never_rewarded(tmp_path, tasks):
    sandbox = FakeSandbox(infra_failures=2)
    sender = FakeSender()
    actor = make_actor(
        tmp_path,
        tasks,
        sandbox=sandbox,
        sender=sender,
        max_samples=1,
        infra_retries=2,
        admission=AdmissionConfig(max_in_flight=1, oversample=1.0),
    )
    await run(actor)
    # two infra failures then success, all for the first action
    assert sandbox.runs == 3 and sender.sent[0].exec_status is ExecStatus.OK
    assert actor.stats["infra_failed"] == 0

    sandbox = FakeSandbox(infra_failures=3)
    sender = FakeSender()
    actor = make_actor(
        tmp_path / "b",
        tasks,
        sandbox=sandbox,
        sender=sender,
        max_samples=1,
        infra_retries=1,
        admission=AdmissionConfig(max_in_flight=1, oversample=1.0),
    )
    await run(actor)
    # action 1: 2 runs, both infra -> reported, nothing sent; action 2: infra, then OK
    assert actor.stats["infra_failed"] == 1
    assert [s.exec_status for s in sender.sent] == [ExecStatus.OK]
    assert all(s.exec_status is not ExecStatus.INFRA_ERROR for s in sender.sent)


async def test_engine_failure_fails_only_that_batch(tmp_path, tasks):
    engine = FakeEngine([OK_RESPONSE], fail_first=1)
    sender = FakeSender()
    actor = make_actor(tmp_path, tasks, engine=engine, sender=sender, max_samples=2)
    await run(actor)
    assert actor.stats["engine_errors"] == 1 and len(sender.sent) >= 2


async def test_improve_prompts_revise_earlier_solutions(tmp_path, tasks):
    sender = FakeSender()
    actor = make_actor(
        tmp_path,
        {"t1": tasks["t1"]},
        sender=sender,
        max_samples=20,
        improvement=ImprovementConfig(improve_prob=0.5),
    )
    await run(actor)
    improve = [s for s in sender.sent if s.prompt_kind is PromptKind.IMPROVE]
    scratch = [s for s in sender.sent if s.prompt_kind is PromptKind.SCRATCH]
    assert improve and scratch
    ids = {s.sample_id for s in sender.sent}
    assert all(s.parent_id in ids for s in improve)
    # each carries its parent's reward (the learner's improve_baseline=parent reads it)
    by_id = {s.sample_id: s for s in sender.sent}
    assert all(s.parent_reward == by_id[s.parent_id].reward for s in improve)
    assert all(s.parent_reward is None for s in scratch)
    # the IMPROVE conversation shows the previous code and its terminal output
    convs = [c for call in actor.engine.calls for c in call]
    revise = [
        c for c in convs if c[1].content.startswith("You have implemented a previous solution")
    ]
    assert revise and "print('loaded data')" in revise[0][1].content
    assert (
        "Terminal output of the previous solution:\n```\nloaded data\ntrained model"
        in revise[0][1].content
    )


ONE_MARKER = "Plan.\n```python\nprint('loaded data')\nopen('submission.csv','w')\n```"  # valid
NO_SUBMISSION = (
    "Plan.\n```python\nprint('loaded data')\nprint('trained model')\n```"  # ran, not valid
)
NO_SUBMISSION_B = "Plan.\n```python\nprint('trained model')\nprint('loaded data')\n```"


@pytest.mark.parametrize("credit_parent_markers", [True, False])
async def test_a_failed_revision_is_credited_only_for_markers_beyond_its_parent_when_asked(
    tmp_path, tasks, credit_parent_markers
):
    # one action at a time: the fake engine then answers ONE_MARKER, NO_SUBMISSION_B,
    # NO_SUBMISSION, ONE_MARKER, ... and the seeded actor draws the same parents every run
    sender = FakeSender()
    actor = make_actor(
        tmp_path,
        {"t1": tasks["t1"]},
        sender=sender,
        max_samples=30,
        engine=FakeEngine([ONE_MARKER, NO_SUBMISSION, NO_SUBMISSION_B]),
        admission=AdmissionConfig(max_in_flight=1, oversample=1.0),
        improvement=ImprovementConfig(
            improve_prob=1.0, credit_parent_markers=credit_parent_markers
        ),
    )
    await run(actor)
    by_id = {s.sample_id: s for s in sender.sent}
    failed = [s for s in sender.sent if s.exec_status is ExecStatus.OK and not s.valid_submission]
    for s in failed:  # fake reward: -10 + 0.1 per credited marker
        if s.prompt_kind is PromptKind.IMPROVE and not credit_parent_markers:
            assert s.reward == pytest.approx(
                -10.0 + 0.1 * len(set(s.markers) - set(by_id[s.parent_id].markers))
            )
        else:
            assert s.reward == pytest.approx(-10.0 + 0.1 * len(s.markers))
    # both cases occur: failed revisions of a one-marker parent (their second marker is new) and
    # of a parent that reached both markers (nothing new)
    revisions = [s for s in failed if s.prompt_kind is PromptKind.IMPROVE]
    assert {len(by_id[s.parent_id].markers) for s in revisions} == {1, 2}
    assert {round(s.reward, 6) for s in revisions} == (
        {-9.8} if credit_parent_markers else {-9.9, -10.0}
    )


async def _updates(versions, gate: asyncio.Event):
    await gate.wait()
    for v in versions:
        yield WeightUpdate(
            version=v,
            uri="inline",
            size_bytes=1,
            sha256=hashlib.sha256(b"w").hexdigest(),
            payload=b"w",
        )


async def test_weight_updates_between_generations_and_stale_drops(tmp_path, tasks):
    gate = asyncio.Event()
    sandbox = FakeSandbox(delay=0.05)
    sender = FakeSender()
    actor = make_actor(
        tmp_path,
        tasks,
        sandbox=sandbox,
        sender=sender,
        max_samples=12,
        weights=_updates([1, 2, 3, 4], gate),
        admission=AdmissionConfig(
            max_in_flight=1, oversample=3.0, max_versions_behind=1, drop_stale_executed=True
        ),
    )
    orig = actor._finish

    lag = []

    async def finish(aid, outcome):
        before = len(sender.sent)
        await orig(aid, outcome)
        if len(sender.sent) > before:
            lag.append(actor.admission.version - sender.sent[-1].policy_version)
        if len(sender.sent) == 2:
            gate.set()

    actor._finish = finish
    await run(actor)
    versions = [s.policy_version for s in sender.sent]
    assert versions == sorted(versions) and versions[-1] == 4
    # every sent sample was within one version of the policy at the time it was sent
    assert lag and max(lag) <= 1
    assert actor.stats["dropped"] >= 1
    assert [s.seq for s in sender.sent] == list(range(len(sender.sent)))


async def test_restart_resends_outbox_and_continues_seqs(tmp_path, tasks):
    # First life: nothing is acked; the process "dies" after 3 samples.
    sender1 = FakeSender(ack=False)
    sender1.watermark = -1
    actor1 = make_actor(
        tmp_path,
        tasks,
        sender=sender1,
        max_samples=3,
        admission=AdmissionConfig(max_in_flight=1, oversample=1.0),
    )
    await run(actor1)
    # the learner stored only seq 0 (the messages for 1 and 2 were lost with the process)
    learner = FakeSender()
    await learner.send(sender1.sent[0])
    # Second life with the same state dir: outbox resent in order, then new seqs from 3.
    actor2 = make_actor(
        tmp_path,
        tasks,
        sender=learner,
        max_samples=2,
        admission=AdmissionConfig(max_in_flight=1, oversample=1.0),
    )
    assert actor2.state.next_seq == 3
    await run(actor2)
    assert [s.seq for s in learner.sent[:4]] == [0, 0, 1, 2]  # 0 resent: a duplicate, deduped
    assert sorted(learner.stored) == list(range(len(learner.stored)))  # gapless, no duplicates
    assert learner.stored[1] == sender1.sent[1] and learner.stored[2] == sender1.sent[2]
    assert learner.sent[4].seq == 3
    # acked entries are pruned from the outbox
    assert not list(actor2.state.outbox.glob("*.msgpack"))


def test_no_task_is_rejected(tmp_path):
    with pytest.raises(KeyError, match="no task"):
        Actor(
            "a0",
            ActorsConfig(),
            engine=FakeEngine([OK_RESPONSE]),
            sandbox=FakeSandbox(),
            sender=FakeSender(),
            tasks={},
            pipeline=FakePipeline(),
            state=ActorState(tmp_path / "s"),
        )


async def test_a_sample_that_beats_the_actors_best_carries_its_submission(tmp_path, tasks):
    # every valid program scores 0.8 (the fake grader): on each task the first valid sample is
    # a new best and carries its submission file, later ties do not
    sender = FakeSender()
    actor = make_actor(tmp_path, tasks, sender=sender, max_samples=8)
    await run(actor)
    for task in ("t1", "t2"):
        valid = [s for s in sender.sent if s.task_id == task and s.valid_submission]
        assert valid, task
        assert valid[0].submission == b"id,target\n1,0.5\n"
        assert all(s.submission is None for s in valid[1:])
    assert all(s.submission is None for s in sender.sent if not s.valid_submission)


async def test_a_restarted_actor_revises_the_same_archive(tmp_path, tasks):
    improvement = ImprovementConfig(improve_prob=0.5, parent_choice="puct")
    first = make_actor(
        tmp_path, {"t1": tasks["t1"]}, sender=FakeSender(), max_samples=10, improvement=improvement
    )
    await run(first)
    archived = sorted((s.sample_id, n, b) for s, n, b in first.buffer.archived("t1"))
    assert archived and (tmp_path / "state" / "parents.jsonl").is_file()
    # revisions name their parent, so the parent's best descendant is set
    assert any(b is not None for _, _, b in archived)
    again = make_actor(tmp_path, {"t1": tasks["t1"]}, improvement=improvement)
    assert sorted((s.sample_id, n, b) for s, n, b in again.buffer.archived("t1")) == archived
