"""Learner.update: micro-batching preserves the gradient; INFRA_ERROR exclusion; config checks."""

import msgspec
import pytest
import torch

from mlerl.learner import Learner, LearnerConfig
from mlerl.learner._config import LossAgg, RatioBase
from mlerl.protocol import ConfigError, ExecStatus, to_object


class _GradRecorder(Learner):
    """Records the gradients just before each optimizer step."""

    def _clip_and_step(self, model, opt):
        self.grads = getattr(self, "grads", []) + [
            {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        ]
        return super()._clip_and_step(model, opt)


def _batch(make_sample, n=6):
    # varied lengths and rewards, so token-mean normalisation across micro-batches matters
    return [
        make_sample(
            seq=i,
            reward=float(i % 3) - 1,
            duration_s=0.5 + i,
            prompt_len=2 + i % 3,
            response_len=2 + (i * 5) % 7,
        )
        for i in range(n)
    ]


@pytest.mark.parametrize("agg", [LossAgg.token_mean, LossAgg.seq_mean])
def test_micro_batched_gradient_equals_full_batch(agg, make_sample, tiny_model):
    grads = []
    for mbs in (6, 4):
        cfg = LearnerConfig(
            batch_size=6,
            micro_batch_size=mbs,
            bf16=False,
            gradient_checkpointing=False,
            loss_agg=agg,
            kl_coef=0.01,
            entropy_coef=0.01,
        )
        learner = _GradRecorder(cfg, tiny_model())
        learner.update(_batch(make_sample))
        grads.append(learner.grads)
    for other in grads[1:]:
        for full, micro in zip(grads[0], other):  # policy, then critic
            assert full.keys() == micro.keys()
            for name in full:
                assert torch.allclose(full[name], micro[name], atol=1e-6, rtol=1e-4), name


def test_policy_gradient_is_nonzero_and_checkpointing_does_not_change_it(make_sample, tiny_model):
    out = []
    for ckpt in (False, True):
        cfg = LearnerConfig(
            batch_size=6, micro_batch_size=3, bf16=False, gradient_checkpointing=ckpt
        )
        learner = _GradRecorder(cfg, tiny_model())
        learner.update(_batch(make_sample))
        out.append(learner.grads[0])
    assert any(g.abs().sum() > 0 for g in out[0].values())
    for name in out[0]:
        assert torch.allclose(out[0][name], out[1][name], atol=1e-6), name


def test_infra_error_sample_is_excluded_from_the_update(make_sample, tiny_model):
    cfg = LearnerConfig(batch_size=6, micro_batch_size=3, bf16=False, gradient_checkpointing=False)
    batch = _batch(make_sample)
    infra = make_sample(seq=99, reward=-10.0, duration_s=100.0, status=ExecStatus.INFRA_ERROR)
    a, b = Learner(cfg, tiny_model()), Learner(cfg, tiny_model())
    ma = a.update(batch)
    mb = b.update(batch[:3] + [infra] + batch[3:])
    assert mb["batch/infra_error_excluded"] == 1.0 and ma["batch/infra_error_excluded"] == 0.0
    assert ma["weights/w_max"] == mb["weights/w_max"]  # its 100 s did not enter the duration mean
    for (n, p), q in zip(a.policy.named_parameters(), b.policy.parameters()):
        assert torch.equal(p, q), n


def test_proximal_mode_and_bf16_run_and_report_staleness(make_sample, tiny_model):
    cfg = LearnerConfig(
        batch_size=4,
        micro_batch_size=2,
        ratio_base=RatioBase.proximal,
        advantage="rloo",
        critic="none",
    )
    learner = Learner(cfg, tiny_model())
    # one prompt, four different responses: a real RLOO group
    batch = [
        msgspec.structs.replace(
            make_sample(seq=i, task_id="same", reward=float(i)), prompt_ids=[5, 6, 7]
        )
        for i in range(4)
    ]
    m1 = learner.update(batch)
    m2 = learner.update(batch)
    assert m1["version"] == 1.0 and m2["staleness/versions_mean"] == 1.0
    assert m1["policy/ratio_mean"] == pytest.approx(
        1.0, abs=1e-2
    )  # proximal = current params at the first step
    assert m1["loss/policy"] != 0.0 and m1["grad_norm/policy"] > 0.0


def test_update_rejects_indivisible_batch(make_sample, tiny_model):
    learner = Learner(LearnerConfig(batch_size=4, minibatches=2, bf16=False), tiny_model())
    with pytest.raises(ValueError, match="minibatches"):
        learner.update(_batch(make_sample, 3))


def test_config_validation_names_the_field():
    with pytest.raises(ConfigError, match="clip_ratio"):
        LearnerConfig(clip_ratio=1.5)
    with pytest.raises(ConfigError, match="critic"):
        LearnerConfig(advantage="gae", critic="none")
    with pytest.raises(ConfigError, match="duration_weighting"):
        LearnerConfig(duration_weighting="sqrt")
    with pytest.raises(ConfigError, match="grpo_std_floor"):
        LearnerConfig(grpo_std_floor=-0.01)
    cfg = to_object(LearnerConfig, {"duration_weighting": "clipped", "lr": 3e-6})
    assert cfg.duration_weighting.value == "clipped" and cfg.lr == 3e-6
    assert LearnerConfig().clip_ratio == 0.2 and LearnerConfig().kl_coef == 0.001  # paper defaults


@pytest.mark.parametrize("ratio_base", [RatioBase.behaviour, RatioBase.proximal])
def test_packed_update_equals_padded_update(ratio_base, make_sample, tiny_model):
    """The learner packs micro-batches (varlen attention, chunked response-only head); the loss
    and gradients equal those of the padded batch (the model left on plain SDPA)."""
    import mlerl.learner._learner as learner_mod

    out = []
    for packed in (True, False):
        cfg = LearnerConfig(
            batch_size=6,
            micro_batch_size=3,
            bf16=False,
            gradient_checkpointing=False,
            kl_coef=0.01,
            entropy_coef=0.01,
            ratio_base=ratio_base,
        )
        orig = learner_mod.use_varlen_attention
        if not packed:
            learner_mod.use_varlen_attention = lambda model: False
        try:
            learner = _GradRecorder(cfg, tiny_model())
        finally:
            learner_mod.use_varlen_attention = orig
        assert (learner.policy.config._attn_implementation == "sdpa") is not packed
        metrics = learner.update(_batch(make_sample))
        out.append((metrics, learner.grads))
    (m_packed, g_packed), (m_plain, g_plain) = out
    for key in ("loss/policy", "loss/entropy", "loss/kl", "loss/value"):
        assert m_packed[key] == pytest.approx(m_plain[key], rel=1e-5, abs=1e-7), key
    for packed_grads, plain_grads in zip(g_packed, g_plain):  # policy, then critic
        assert packed_grads.keys() == plain_grads.keys()
        for name in plain_grads:
            torch.testing.assert_close(
                packed_grads[name], plain_grads[name], rtol=1e-4, atol=1e-6, msg=name
            )
