"""Per-update split diagnostics: hand-derived numbers on tiny tensors."""

import math

import pytest
import torch

from mlerl.learner._diagnostics import per_sample_stats, pg_mass, split_metrics


def test_pg_mass_token_and_seq_mean():
    adv = torch.tensor([[2.0, -1.0, 9.0], [-3.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    w = torch.tensor([0.5, 2.0])
    # sample 0: (|2| + |-1|) * 0.5 = 1.5 (the 9 is padding); sample 1: 3 * 2 = 6
    assert pg_mass(adv, mask, w, seq_mean=False).tolist() == pytest.approx([1.5, 6.0])
    # seq_mean divides by the token counts 2 and 1
    assert pg_mass(adv, mask, w, seq_mean=True).tolist() == pytest.approx([0.75, 6.0])


def test_per_sample_stats():
    mask = torch.tensor([[1, 1], [1, 0]])
    behaviour = torch.log(torch.tensor([[0.5, 0.25], [1.0, 1.0]]))
    ref = torch.log(torch.tensor([[0.5, 0.5], [0.5, 1.0]]))
    adv = torch.tensor([[1.0, 3.0], [-2.0, 0.0]])
    values = torch.tensor([[0.0, 1.0], [-1.0, 0.0]])
    returns = torch.tensor([[1.0, 1.0], [-3.0, 0.0]])
    st = per_sample_stats(
        mask,
        behaviour,
        adv,
        torch.ones(2),
        seq_mean=False,
        ref_logprobs=ref,
        values=values,
        returns=returns,
    )
    assert st["tokens"] == [2.0, 1.0]
    # entropy estimate: mean -log mu = (log 2 + log 4) / 2 = 1.5 log 2; second: -log 1 = 0
    assert st["entropy"] == pytest.approx([1.5 * math.log(2), 0.0])
    # k3 with r = ref/mu: token (0.5/0.5) -> 0; (0.5/0.25 = 2) -> 1 - log 2; sample 1: r = 0.5 -> -0.5 + log 2
    assert st["kl"] == pytest.approx([(1 - math.log(2)) / 2, -0.5 + math.log(2)])
    assert st["adv"] == pytest.approx([2.0, -2.0])
    assert st["value_err"] == pytest.approx([-0.5, 2.0])
    assert st["value_abs_err"] == pytest.approx([0.5, 2.0])
    assert st["pg_mass"] == pytest.approx([4.0, 2.0])


def test_per_sample_stats_without_reference_or_critic_is_nan():
    st = per_sample_stats(
        torch.ones(1, 2), torch.zeros(1, 2), torch.ones(1, 2), torch.ones(1), seq_mean=True
    )
    assert math.isnan(st["kl"][0]) and math.isnan(st["value_err"][0])


def _row(kind, task, valid, reward, score, status, mass, exec_s=1.0, adv=0.0):
    return dict(
        kind=kind,
        task=task,
        valid=valid,
        reward=reward,
        score=score,
        status=status,
        exec_s=exec_s,
        pg_mass=mass,
        adv=adv,
    )


def test_split_metrics_groups_and_shares():
    rows = [
        _row("scratch", "a", True, 0.9, 0.9, "ok", 1.0, exec_s=2.0, adv=1.0),
        _row("scratch", "b", False, -10.0, None, "program_error", 3.0, exec_s=0.5, adv=-1.0),
        _row("improve", "a", False, -10.0, None, "not_run", 4.0, exec_s=0.0, adv=-3.0),
        _row("improve", "a", True, 0.5, 0.5, "ok", 2.0, exec_s=4.0, adv=3.0),
    ]
    m = split_metrics(rows)
    assert m["split/all/n"] == 4
    assert m["split/all/valid_frac"] == 0.5
    assert m["split/all/reward_mean"] == pytest.approx((0.9 - 20 + 0.5) / 4)
    assert m["split/all/score_mean"] == pytest.approx(0.7)
    assert m["split/all/pg_share_failed"] == pytest.approx(7 / 10)
    assert m["split/kind/scratch/valid_frac"] == 0.5
    assert m["split/kind/improve/status/not_run"] == 0.5
    assert m["split/kind/improve/pg_share"] == pytest.approx(0.6)
    assert m["split/kind/improve/adv_mean"] == 0.0 and m["split/kind/improve/adv_std"] == 3.0
    assert m["split/task/a/n"] == 3 and m["split/task/a/exec_s_mean"] == pytest.approx(2.0)
    assert m["split/task/b/valid_frac"] == 0.0
    assert "split/task/b/score_mean" not in m  # no valid sample: nothing measured, nothing logged
    assert "split/all/kl" not in m  # no reference model


def test_split_metrics_empty():
    assert split_metrics([]) == {}


def test_update_reports_the_split(make_sample, tiny_model):
    from mlerl.learner import Learner, LearnerConfig

    cfg = LearnerConfig(batch_size=2, micro_batch_size=2, bf16=False, gradient_checkpointing=False)
    samples = [
        make_sample(seq=0, reward=1.0, duration_s=2.0, response_len=3),
        make_sample(seq=1, reward=-10.0, duration_s=0.0, response_len=5),
    ]
    m = Learner(cfg, tiny_model()).update(samples)
    assert m["split/all/n"] == 2
    assert m["split/all/reward_mean"] == pytest.approx(-4.5)
    kind = samples[0].prompt_kind.value
    assert m[f"split/kind/{kind}/n"] == 2
    for key in ("entropy", "kl", "value_err", "adv_mean", "pg_share"):
        assert math.isfinite(m[f"split/all/{key}"])
