"""benchmarks/experiments/duration_bias.py: the update step on a hand-made frequency-biased batch (no sleeping)."""

import importlib
import math
import sys
from pathlib import Path

import pytest
import torch

from mlerl.learner import DurationWeighting
from mlerl.protocol import ExecStatus, PromptKind, Sample

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "experiments"))
_bench = importlib.import_module("duration_bias")
Run, bandit_update = _bench.Run, _bench.bandit_update


def _sample(seq: int, arm: int, duration: float, reward: float) -> Sample:
    return Sample(
        sample_id=f"w:{seq}",
        actor_id="w",
        seq=seq,
        task_id="bandit",
        prompt_kind=PromptKind.SCRATCH,
        prompt_ids=[0],
        response_ids=[arm],
        behaviour_logprobs=[math.log(1 / 3)],
        policy_version=0,
        t_sampled=0.0,
        duration_s=duration,
        exec_status=ExecStatus.OK,
        reward=reward,
    )


# In a period where each arm holds an equal share of execution time, the fast arm (0.05 s)
# completes 8 times for each completion of the slow arm (0.4 s): 8 fast_ok (R = 0.5), 1 slow_best
# (R = 1). Uniform policy pi = 1/3 each, behaviour log-probs log(1/3): ratio 1, no clipping; the
# entropy gradient is 0 at the uniform policy. With A = R (no baseline) and token mean over 9,
# the ascent direction is g = (1/9) sum_i w_i A_i (e_{a_i} - pi).
#   none:  sum = 4 e_ok + 1 e_slow - 5 pi -> g = (bad -5/3, ok 7/3, slow -2/3) / 9
#          = (-5/27, 7/27, -2/27): the better, slower arm is pushed *down*.
#   paper: mean dt = (8 * 0.05 + 0.4) / 9 = 0.8/9, w_fast = 0.5625, w_slow = 4.5:
#          sum = 2.25 (e_ok - pi) + 4.5 (e_slow - pi) -> g = (-2.25, 0, 2.25) / 9 = (-0.25, 0, 0.25).
# Both norms are < 1 (no gradient clipping); SGD with lr 1 moves theta by g.
BATCH = [_sample(i, 1, 0.05, 0.5) for i in range(8)] + [_sample(8, 2, 0.4, 1.0)]


@pytest.mark.parametrize(
    "mode, expected",
    [
        (DurationWeighting.none, [-5 / 27, 7 / 27, -2 / 27]),
        (DurationWeighting.paper, [-0.25, 0.0, 0.25]),
    ],
)
def test_duration_weighting_reverses_the_frequency_bias(mode, expected):
    run = Run(mode, seed=0, lr=1.0, baseline="none")
    bandit_update(run, BATCH)
    assert run.theta.detach().tolist() == pytest.approx(expected, abs=1e-5)


def test_critic_baseline_keeps_the_direction_without_weighting():
    # with a critic equal to this batch's mean reward b = (8 * 0.5 + 1) / 9 = 5/9, A = R - b:
    # slow: 1 - 5/9 = 4/9, ok: 0.5 - 5/9 = -1/18; a centred baseline keeps the slow arm's sign.
    run = Run(DurationWeighting.none, seed=0, lr=1.0)
    run.value = torch.tensor([5 / 9], requires_grad=True)
    run.opt_v = torch.optim.SGD([run.value], lr=0.5)
    bandit_update(run, BATCH)
    # g_slow = (1/9) [4/9 * (1 - 1/3) + 8 * (-1/18) * (-1/3)] = (1/9) [8/27 + 4/27] = 12/243
    assert run.theta[2].item() == pytest.approx(12 / 243, abs=1e-5)
