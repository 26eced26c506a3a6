"""Duration weights and their diagnostics against hand-derived numbers."""

import math

import pytest
import torch

from mlerl.learner import DurationWeighting as W
from mlerl.learner import duration_weights, update_running_mean, weight_stats

D = torch.tensor([1.0, 2.0, 3.0, 6.0])  # mean 3


def test_none_and_paper():
    assert duration_weights(D, W.none).tolist() == [1.0, 1.0, 1.0, 1.0]
    # dt / mean = [1/3, 2/3, 1, 2]
    assert duration_weights(D, W.paper).tolist() == pytest.approx([1 / 3, 2 / 3, 1.0, 2.0])


def test_clipped():
    # paper [1/3, 2/3, 1, 2] capped at 1.5 -> [1/3, 2/3, 1, 1.5], mean 3.5/4 = 0.875 -> divide
    w = duration_weights(D, W.clipped, clip=1.5)
    assert w.tolist() == pytest.approx([x / 0.875 for x in (1 / 3, 2 / 3, 1.0, 1.5)])
    assert w.mean().item() == pytest.approx(1.0)


def test_log():
    raw = [math.log1p(x) for x in (1 / 3, 2 / 3, 1.0, 2.0)]  # [0.28768, 0.51083, 0.69315, 1.09861]
    mean = sum(raw) / 4  # 0.647568
    assert duration_weights(D, W.log).tolist() == pytest.approx([x / mean for x in raw], rel=1e-5)


def test_running_uses_the_given_scale_and_ema():
    # dt / 2 with a running mean of 2
    assert duration_weights(D, W.running, running_mean=2.0).tolist() == pytest.approx([0.5, 1.0, 1.5, 3.0])
    # no history yet: falls back to the batch mean (= paper)
    assert duration_weights(D, W.running).tolist() == pytest.approx([1 / 3, 2 / 3, 1.0, 2.0])
    # 0.9 * 2 + 0.1 * 3 = 2.1; first batch initialises to its mean
    assert update_running_mean(2.0, D, 0.9) == pytest.approx(2.1)
    assert update_running_mean(None, D, 0.9) == pytest.approx(3.0)


def test_floor_and_all_zero():
    # floor 2: [2, 2, 4, 4], mean 3 -> [2/3, 2/3, 4/3, 4/3]
    w = duration_weights(torch.tensor([0.0, 0.0, 4.0, 4.0]), W.paper, floor=2.0)
    assert w.tolist() == pytest.approx([2 / 3, 2 / 3, 4 / 3, 4 / 3])
    assert duration_weights(torch.zeros(3), W.paper).tolist() == [1.0, 1.0, 1.0]


def test_weight_stats():
    s = weight_stats(duration_weights(D, W.paper), D)
    # ESS = (sum w)^2 / sum w^2 = 16 / (1/9 + 4/9 + 1 + 4) = 16 / (50/9) = 2.88 -> / 4 = 0.72
    assert s["ess_frac"] == pytest.approx(0.72)
    # median of [1, 2, 3, 6] (torch: lower) = 2; slow = {3, 6}: mass (1 + 2) / 4 = 0.75
    assert s["grad_mass_slow"] == pytest.approx(0.75)
    assert s["grad_mass_fast"] == pytest.approx(0.25)
    # with |A| = [0, 0, 1, 0]: all mass on the sample with dt = 3 (slow)
    assert weight_stats(torch.ones(4), D, torch.tensor([0.0, 0.0, -1.0, 0.0]))["grad_mass_slow"] == 1.0
