"""Self-imitation (``learner.replay_best``): the archive of each task's best distinct programs,
the replays it makes on the scratch prompt, and the update that trains on them."""

from __future__ import annotations

import io

import msgspec
import pytest
import torch

from mlerl.learner import Learner, LearnerConfig
from mlerl.learner._batch import collate, token_logprobs
from mlerl.learner._replay import ReplayArchive, fit_to_split, holds_program, replay_of
from mlerl.protocol import ConfigError, PromptKind, Sample

SCRATCH = [7, 8, 9]


def _scored(make_sample, seq, public, *, code=None, valid=True, kind=PromptKind.SCRATCH, task="t"):
    """A sample with a signed public score ``public`` (higher is better) and its program."""
    base = make_sample(seq=seq, prompt_len=3, response_len=4, task_id=task)
    return msgspec.structs.replace(
        base,
        prompt_kind=kind,
        prompt_ids=SCRATCH if kind is PromptKind.SCRATCH else [1, 2, seq % 500 + 3],
        parent_id=None if kind is PromptKind.SCRATCH else "a0:0",
        valid_submission=valid,
        score=-public,
        reward_parts={"score": public},
        code=code if code is not None else f"print({seq})",
    )


def _archive(k=2):
    return ReplayArchive(k, lambda s: "edit" not in s.code)


def test_the_archive_keeps_each_tasks_best_distinct_programs(make_sample):
    archive = _archive(k=2)
    archive.offer(
        [
            _scored(make_sample, 1, -0.10),
            _scored(make_sample, 2, -0.05, kind=PromptKind.IMPROVE),
            _scored(make_sample, 3, -0.01, valid=False),  # invalid: never kept
            _scored(make_sample, 4, -0.05),  # ties with 2: the first stays
            _scored(make_sample, 5, -0.02, code="print(2)"),  # the program of sample 2, kept
            _scored(make_sample, 6, -0.01, code="edit"),  # holds no whole program
            _scored(make_sample, 7, -0.50, task="u"),
        ]
    )
    assert [(v, s.seq) for v, s in archive.kept["t"]] == [(-0.05, 2), (-0.05, 4)]
    assert [s.seq for _, s in archive.kept["u"]] == [7]
    assert archive.prompts == {"t": SCRATCH, "u": SCRATCH}
    archive.offer([_scored(make_sample, 8, -0.04, kind=PromptKind.IMPROVE)])
    assert [s.seq for _, s in archive.kept["t"]] == [8, 2]


def test_replays_answer_the_scratch_prompt_and_skip_the_batchs_own(make_sample):
    archive = _archive(k=2)
    improve = _scored(make_sample, 1, -0.02, kind=PromptKind.IMPROVE, task="t")
    archive.offer([improve, _scored(make_sample, 2, -0.03, task="t")])
    archive.offer([_scored(make_sample, 3, -0.1, kind=PromptKind.IMPROVE, task="v")])
    replays = archive.replays([_scored(make_sample, 2, -0.03)])  # sample 2 is in the batch
    assert [r.sample_id for r in replays] == ["replay:a0:1"]  # v has no scratch prompt yet
    r = replays[0]
    assert r.prompt_kind is PromptKind.SCRATCH and r.prompt_ids == SCRATCH
    assert r.parent_id is None and r.parent_reward is None
    assert (r.response_ids, r.reward, r.code) == (
        improve.response_ids,
        improve.reward,
        improve.code,
    )
    assert replay_of(improve, [5]).prompt_ids == [5]


def test_the_archive_survives_a_weights_only_checkpoint(make_sample):
    archive = _archive(k=2)
    archive.offer([_scored(make_sample, 1, -0.02), _scored(make_sample, 2, -0.03)])
    buf = io.BytesIO()
    torch.save({"replay": archive.state_dict()}, buf)
    buf.seek(0)
    back = _archive(k=2)
    back.load_state_dict(torch.load(buf, weights_only=True)["replay"])
    assert back.kept == archive.kept and back.prompts == archive.prompts
    bad = archive.state_dict()
    bad["kept"]["t"][0][1] = "00"
    with pytest.raises(Exception):  # noqa: B017 - any refusal; never a half-loaded archive
        _archive().load_state_dict(bad)


def test_replays_are_cut_so_the_update_still_splits_evenly():
    rs = [object()] * 5
    assert len(fit_to_split(16, rs[:3], 1)) == 3
    assert len(fit_to_split(16, rs[:3], 4)) == 0  # 19 % 4 = 3: all three go
    assert len(fit_to_split(16, rs, 4)) == 4  # 21 % 4 = 1
    assert len(fit_to_split(16, rs, 2)) == 4


def test_holds_program_sees_a_rewrite_not_an_edit(make_sample):
    s = msgspec.structs.replace(make_sample(), code="import os\nprint(1)\n")
    assert holds_program(s, lambda ids: "Plan.\n```python\nimport os\n  print(1)\n```")
    assert not holds_program(s, lambda ids: "```\n<<<<<<< SEARCH\nprint(0)\n=======\nprint(1)\n")
    assert not holds_program(msgspec.structs.replace(s, code="  "), lambda ids: "anything")


def test_replay_best_needs_a_group_baseline():
    with pytest.raises(ConfigError, match="replay_best"):
        LearnerConfig(advantage="gae", replay_best=1)
    with pytest.raises(ConfigError, match="replay_best"):
        LearnerConfig(advantage="grpo", critic="none", replay_best=-1)


def _cfg(**kw):
    return LearnerConfig(
        batch_size=3,
        micro_batch_size=4,
        bf16=False,
        gradient_checkpointing=False,
        advantage="grpo",
        critic="none",
        kl_coef=0.0,
        lr=1e-2,
        loss_agg="seq_mean",
        **kw,
    )


def _group(make_sample):
    """Three fresh scratch samples (reward 0) and a replay of the same prompt (reward 1)."""
    fresh = [
        msgspec.structs.replace(make_sample(seq=i, reward=0.0), prompt_ids=SCRATCH)
        for i in range(3)
    ]
    best = msgspec.structs.replace(make_sample(seq=10, reward=1.0), prompt_ids=[4, 4, 4])
    return fresh, replay_of(best, SCRATCH)


def _logprob(learner: Learner, sample: Sample) -> float:
    with torch.no_grad():
        lp, _ = token_logprobs(learner.policy, collate([sample], 0, torch.device("cpu")))
    return float(lp.sum())


def test_an_update_raises_the_replayed_answer_and_ignores_its_old_logprobs(make_sample, tiny_model):
    fresh, replay = _group(make_sample)
    after = []
    for behaviour in (-1.0, -50.0):  # the replay's own behaviour log-probs must not matter
        learner = Learner(_cfg(replay_best=1), tiny_model())
        r = msgspec.structs.replace(replay, behaviour_logprobs=[behaviour] * 4)
        before = _logprob(learner, r)
        metrics = learner.update(fresh, [r])
        after.append(_logprob(learner, r))
        assert after[-1] > before  # the group's best: a positive advantage
        assert metrics["batch/size"] == 3.0 and metrics["replay/samples"] == 1.0
        assert metrics["replay/reward_mean"] == 1.0
        # grpo over the group's rewards (0, 0, 0, 1): 1 - mean 0.25
        assert metrics["replay/advantage_mean"] == pytest.approx(0.75)
    assert after[0] == pytest.approx(after[1], abs=1e-6)
    plain = Learner(_cfg(), tiny_model())
    plain.update(fresh)
    assert "replay/samples" not in plain.update(fresh)
