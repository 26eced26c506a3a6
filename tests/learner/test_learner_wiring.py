"""Learner.update wiring: duration weights reach the policy gradient, failures keep their
penalty, group baselines need no critic, removed KL estimator is refused."""

import msgspec
import pytest
import torch

from mlerl.learner import Learner, LearnerConfig
from mlerl.learner._batch import collate, token_logprobs
from mlerl.protocol import ConfigError, ExecStatus, PromptKind


class _GradRecorder(Learner):
    """Records the gradients just before each optimizer step (policy first, then critic)."""

    def _clip_and_step(self, model, opt):
        self.grads = getattr(self, "grads", []) + [
            {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        ]
        return super()._clip_and_step(model, opt)


def _on_policy(samples, model):
    """The samples with behaviour log-probs = the model's own, so every PPO ratio is exactly 1."""
    with torch.no_grad():
        logp, _ = token_logprobs(model, collate(samples))
    out = []
    for i, s in enumerate(samples):
        p, r = len(s.prompt_ids), len(s.response_ids)
        out.append(
            msgspec.structs.replace(s, behaviour_logprobs=logp[i, p - 1 : p - 1 + r].tolist())
        )
    return out


def _hand_gradient(model, samples, weights):
    """grad of -sum_i w_i R_i sum_t log pi(y_it) / N: the policy loss at ratio 1 with A = R
    (zero-initialised critic, gamma = lambda = 1), token_mean over N response tokens."""
    tb = collate(samples)
    logp, _ = token_logprobs(model, tb)
    per_sample = (logp * tb.mask).sum(-1)  # (B,)
    rewards = torch.tensor([s.reward for s in samples])
    loss = -(torch.tensor(weights) * rewards * per_sample).sum() / tb.mask.sum()
    model.zero_grad()
    loss.backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


BASE = dict(
    batch_size=2,
    micro_batch_size=2,
    bf16=False,
    gradient_checkpointing=False,
    kl_coef=0.0,
    entropy_coef=0.0,
)
GROUP_BATCH = dict(BASE, batch_size=4, micro_batch_size=4, critic="none", duration_weighting="none")
"""Four samples, no critic, no duration weights: the group-baseline tests' setting."""


def test_duration_weights_reach_the_policy_gradient(make_sample, tiny_model):
    # execution 2 s and 26 s, each after 10 s of generation: dt = [12, 36], mean 24 -> w = [0.5, 1.5]
    cfg = LearnerConfig(**BASE)
    assert cfg.duration_weighting.value == "paper"
    raw = [
        make_sample(seq=0, reward=1.0, duration_s=2.0, generation_s=10.0, response_len=3),
        make_sample(seq=1, reward=-0.5, duration_s=26.0, generation_s=10.0, response_len=5),
    ]
    samples = _on_policy(raw, tiny_model())
    learner = _GradRecorder(cfg, tiny_model())
    learner.update(samples)
    got = learner.grads[0]
    want = _hand_gradient(tiny_model(), samples, [0.5, 1.5])
    unweighted = _hand_gradient(tiny_model(), samples, [1.0, 1.0])
    assert got.keys() == want.keys()
    for name in want:
        assert torch.allclose(got[name], want[name], atol=1e-7, rtol=1e-4), name
    # the check has teeth: weights of one give a clearly different gradient
    assert max((unweighted[n] - want[n]).abs().max().item() for n in want) > 1e-4


@pytest.mark.parametrize("generation, differs", [(10.0, True), (0.0, False)])
def test_a_not_run_samples_reward_reaches_the_gradient(
    generation, differs, make_sample, tiny_model
):
    # A NOT_RUN sample (execution 0 s) beside a 30 s run, both generated in `generation` s. With
    # dt = generation + execution = [10, 40] its weight is 10 / 25 = 0.4, so its reward moves the
    # policy; with no generation time (a journal from before generation_s: the paper's exact dt)
    # its weight is 0 and the gradient is bit-identical whether it scored -10 or +10.
    cfg = LearnerConfig(**BASE)
    grads = []
    for reward in (-10.0, 10.0):
        batch = [
            make_sample(
                seq=0,
                reward=reward,
                duration_s=0.0,
                generation_s=generation,
                status=ExecStatus.NOT_RUN,
            ),
            make_sample(seq=1, reward=1.0, duration_s=30.0, generation_s=generation),
        ]
        learner = _GradRecorder(cfg, tiny_model())
        learner.update(batch)
        grads.append(learner.grads[0])
    same = all(torch.equal(grads[0][n], grads[1][n]) for n in grads[0])
    assert same is not differs


@pytest.mark.parametrize("advantage", ["grpo", "rloo", "entropic"])
def test_group_baselines_with_the_default_critic_build_none(advantage, make_sample, tiny_model):
    cfg = LearnerConfig(
        batch_size=4,
        micro_batch_size=2,
        bf16=False,
        gradient_checkpointing=False,
        advantage=advantage,
        normalize_advantages=True,
    )
    assert cfg.critic.value == "copy"  # the default, left as is
    learner = Learner(cfg, tiny_model())
    assert learner.critic is None and learner.critic_opt is None
    batch = [
        msgspec.structs.replace(
            make_sample(seq=i, task_id="same", reward=float(i)), prompt_ids=[5, 6, 7]
        )
        for i in range(4)
    ]
    metrics = learner.update(batch)  # used to crash: returns is None for the value loss
    assert metrics["grad_norm/policy"] > 0.0 and "loss/value" not in metrics


def test_k1_is_refused_with_the_reason():
    with pytest.raises(ConfigError, match="kl_estimator.*expected gradient is 0"):
        LearnerConfig(kl_estimator="k1")
    assert LearnerConfig().kl_estimator.value == "k3"


def test_grpo_std_floor_reaches_the_policy_gradient(make_sample, tiny_model):
    # one group of two near-identical rewards (std 5e-5): z-scores +-0.98 (eps 1e-6); a floor of
    # 0.01 makes them +-0.005, and at ratio 1 the gradient is linear in the advantages
    base = dict(BASE, advantage="grpo", grpo_std=True, duration_weighting="none")
    raw = [
        msgspec.structs.replace(
            make_sample(seq=i, task_id="t", reward=r, response_len=3 + i), prompt_ids=[5, 6, 7]
        )
        for i, r in enumerate((0.04002, 0.04012))
    ]
    samples = _on_policy(raw, tiny_model())
    grads = []
    for floor in (0.0, 0.01):
        learner = _GradRecorder(LearnerConfig(**base, grpo_std_floor=floor), tiny_model())
        learner.update(samples)
        grads.append(learner.grads[0])
    ratio = (5e-5 / (0.01 + 1e-6)) / (5e-5 / (5e-5 + 1e-6))
    for name in grads[0]:
        assert torch.allclose(grads[1][name], grads[0][name] * ratio, atol=1e-9, rtol=1e-2), name
    assert max(g.abs().max().item() for g in grads[0].values()) > 100 * max(
        g.abs().max().item() for g in grads[1].values()
    )


def _improve(sample, prompt):
    """``sample`` as an IMPROVE sample with prompt tokens ``prompt``."""
    return msgspec.structs.replace(
        sample, prompt_kind=PromptKind.IMPROVE, parent_id="a:99", prompt_ids=prompt
    )


def _scratch_pair_and_lone_revisions(make_sample):
    """Two scratch samples of one prompt (rewards 0.5, -10) and two revisions, each with a
    prompt of its own (rewards 0.4, -9.5): seqs 0-3."""
    scratch = [
        msgspec.structs.replace(make_sample(seq=i, reward=r), prompt_ids=[5, 6, 7])
        for i, r in enumerate((0.5, -10.0))
    ]
    lone = [
        _improve(make_sample(seq=2 + i, reward=r), [8, 9, 10 + i])
        for i, r in enumerate((0.4, -9.5))
    ]
    return scratch, lone


def test_improve_samples_revising_one_parent_carry_a_gradient_and_lone_revisions_do_not(
    make_sample, tiny_model
):
    # under a group baseline (groups = task + prompt tokens) an IMPROVE prompt used
    # once is a group of one (advantage 0); revisions of one parent share their prompt, so they
    # form a group (actors.improvement.revisions). The per-kind zero-advantage share shows which.

    cfg = LearnerConfig(**GROUP_BATCH, advantage="grpo", improve_group="prompt")
    scratch, lone = _scratch_pair_and_lone_revisions(make_sample)
    grouped = [
        _improve(make_sample(seq=2 + i, reward=r), [8, 9, 10]) for i, r in enumerate((0.4, -9.5))
    ]
    m_lone = Learner(cfg, tiny_model()).update(scratch + lone)
    m_grouped = Learner(cfg, tiny_model()).update(scratch + grouped)
    assert m_lone["split/kind/scratch/zero_adv_share"] == 0.0
    assert (
        m_lone["split/kind/improve/zero_adv_share"] == 1.0
        and m_lone["split/kind/improve/adv_std"] == 0.0
    )
    assert m_grouped["split/kind/improve/zero_adv_share"] == 0.0
    # GRPO without std: the two revisions get +-(0.4 - -9.5) / 2
    assert m_grouped["split/kind/improve/adv_std"] == pytest.approx(4.95, rel=1e-5)
    assert (
        m_grouped["split/all/zero_adv_share"] == 0.0 and m_lone["split/all/zero_adv_share"] == 0.5
    )


@pytest.mark.parametrize("advantage", ["grpo", "rloo"])
def test_under_the_default_grouping_no_prompt_kind_has_a_zero_advantage_by_construction(
    make_sample, tiny_model, advantage
):
    # with the LearnerConfig default (improve_group=task) a revision used once, the
    # paper's protocol, still has a baseline; only equal rewards give a zero advantage.

    cfg = LearnerConfig(**GROUP_BATCH, advantage=advantage)
    scratch, lone = _scratch_pair_and_lone_revisions(make_sample)
    m = Learner(cfg, tiny_model()).update(scratch + lone)
    assert (
        m["split/kind/scratch/zero_adv_share"] == 0.0
        and m["split/kind/improve/zero_adv_share"] == 0.0
    )
    # equal rewards are the only way to a zero advantage: two failed revisions of different parents
    failed = [msgspec.structs.replace(s, reward=-10.0) for s in lone]
    assert (
        Learner(cfg, tiny_model()).update(scratch + failed)["split/kind/improve/zero_adv_share"]
        == 1.0
    )


def test_improve_group_task_gives_lone_revisions_a_baseline_and_leaves_scratch_groups_alone(
    make_sample, tiny_model
):
    # learner.improve_group=task: the IMPROVE samples of a task form one group whatever their
    # prompts, so revisions of different parents compete; scratch groups are unchanged.
    from mlerl.learner._learner import advantage_group
    from mlerl.learner._config import ImproveGroup

    scratch, lone = _scratch_pair_and_lone_revisions(make_sample)
    assert advantage_group(lone[0], ImproveGroup.task) == advantage_group(
        lone[1], ImproveGroup.task
    )
    assert advantage_group(lone[0], ImproveGroup.prompt) != advantage_group(
        lone[1], ImproveGroup.prompt
    )
    assert advantage_group(scratch[0], ImproveGroup.task) == (scratch[0].task_id, (5, 6, 7))
    other_task = msgspec.structs.replace(lone[1], task_id="another")
    assert advantage_group(other_task, ImproveGroup.task) != advantage_group(
        lone[0], ImproveGroup.task
    )
    m = {
        g: Learner(
            LearnerConfig(**GROUP_BATCH, advantage="grpo", improve_group=g), tiny_model()
        ).update(scratch + lone)
        for g in ("prompt", "task")
    }
    assert m["prompt"]["split/kind/improve/zero_adv_share"] == 1.0
    assert m["task"]["split/kind/improve/zero_adv_share"] == 0.0
    # GRPO without std: the two revisions get +-(0.4 - -9.5) / 2; the scratch pair is unchanged
    assert m["task"]["split/kind/improve/adv_std"] == pytest.approx(4.95, rel=1e-5)
    assert m["task"]["split/kind/scratch/adv_std"] == pytest.approx(
        m["prompt"]["split/kind/scratch/adv_std"]
    )
    assert m["task"]["split/kind/scratch/adv_std"] == pytest.approx(5.25, rel=1e-5)
    with pytest.raises(ConfigError, match="improve_group"):
        LearnerConfig(improve_group="parent")


def test_validity_strata_reach_the_update_from_the_config(make_sample, tiny_model):
    # learner.advantage_strata=validity: a scratch group of one failure and three valid programs.
    # Unstratified, GRPO with std gives advantages of population std 1; stratified they are
    # (-sqrt 3, 1/sqrt 3 - sqrt 1.5, 1/sqrt 3, 1/sqrt 3 + sqrt 1.5), mean 0, variance
    # (3 + 3 * 1/3 + 2 * 1.5) / 4 = 7/4 (tests/learner/test_advantages.py derives them).
    samples = [
        msgspec.structs.replace(
            make_sample(seq=i, reward=r), prompt_ids=[5, 6, 7], valid_submission=r > 0
        )
        for i, r in enumerate((-9.8, 0.75, 0.77, 0.79))
    ]
    base = dict(GROUP_BATCH, advantage="grpo", grpo_std=True, grpo_std_floor=0.01)
    m = {
        strata: Learner(LearnerConfig(**base, advantage_strata=strata), tiny_model()).update(
            samples
        )
        for strata in ("none", "validity")
    }
    assert m["none"]["split/kind/scratch/adv_std"] == pytest.approx(1.0, rel=1e-4)
    assert m["validity"]["split/kind/scratch/adv_std"] == pytest.approx(1.75**0.5, rel=1e-4)
    with pytest.raises(ConfigError, match="advantage_strata"):
        LearnerConfig(advantage_strata="score")
    with pytest.raises(ConfigError, match="advantage_strata.*group baseline"):
        LearnerConfig(advantage="gae", advantage_strata="validity")


def test_the_entropic_advantage_reaches_the_update_from_the_config(make_sample, tiny_model):
    # learner.advantage=entropic, entropic_kl=ln 4 (the most a group of four can take): all the
    # weight on the best of (-9.8, 0.75, 0.77, 0.79), advantages 4 * (0, 0, 0, 1) - 1 =
    # (-1, -1, -1, 3), population std sqrt((1 + 1 + 1 + 9) / 4) = sqrt 3; GRPO without std
    # gives the same group a std of 4.577 (the failure dominates it).
    import math

    samples = [
        msgspec.structs.replace(
            make_sample(seq=i, reward=r), prompt_ids=[5, 6, 7], valid_submission=r > 0
        )
        for i, r in enumerate((-9.8, 0.75, 0.77, 0.79))
    ]
    base = dict(GROUP_BATCH, entropic_kl=math.log(4))
    m = {
        adv: Learner(LearnerConfig(**base, advantage=adv), tiny_model()).update(samples)
        for adv in ("grpo", "entropic")
    }
    assert m["entropic"]["split/kind/scratch/adv_std"] == pytest.approx(3**0.5, rel=1e-4)
    assert m["grpo"]["split/kind/scratch/adv_std"] == pytest.approx(4.5770, rel=1e-3)


def test_the_parent_baseline_reaches_the_update_from_the_config(make_sample, tiny_model):
    # learner.improve_baseline=parent: the two lone revisions (rewards 0.4, -9.5) of parents
    # that earned 0.3 and 0.5 are compared on their gains, +0.1 and -10.0: GRPO without std
    # gives them +-(0.1 - -10.0) / 2 = +-5.05 (on their rewards, +-4.95); scratch unchanged.
    scratch, lone = _scratch_pair_and_lone_revisions(make_sample)
    lone = [
        msgspec.structs.replace(s, parent_reward=p) for s, p in zip(lone, (0.3, 0.5), strict=True)
    ]
    base = dict(GROUP_BATCH, advantage="grpo")
    m = {
        b: Learner(LearnerConfig(**base, improve_baseline=b), tiny_model()).update(scratch + lone)
        for b in ("group", "parent")
    }
    assert m["group"]["split/kind/improve/adv_std"] == pytest.approx(4.95, rel=1e-5)
    assert m["parent"]["split/kind/improve/adv_std"] == pytest.approx(5.05, rel=1e-5)
    assert m["parent"]["split/kind/scratch/adv_std"] == pytest.approx(5.25, rel=1e-5)
    # a revision from a sender that predates the field keeps its reward
    old = [msgspec.structs.replace(s, parent_reward=None) for s in lone]
    cfg = LearnerConfig(**base, improve_baseline="parent")
    m_old = Learner(cfg, tiny_model()).update(scratch + old)
    assert m_old["split/kind/improve/adv_std"] == pytest.approx(4.95, rel=1e-5)
    with pytest.raises(ConfigError, match="improve_baseline"):
        LearnerConfig(improve_baseline="grandparent")
    with pytest.raises(ConfigError, match="improve_baseline.*group baseline"):
        LearnerConfig(advantage="gae", improve_baseline="parent")
