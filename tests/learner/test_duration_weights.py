"""Duration weights and their diagnostics against hand-derived numbers."""

import math

import pytest
import torch

from mlerl.learner import DurationWeighting as W
from mlerl.learner import LearnerConfig, duration_weights
from mlerl.learner._duration_weights import slot_durations, update_running_mean, weight_stats

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
    assert duration_weights(D, W.running, running_mean=2.0).tolist() == pytest.approx(
        [0.5, 1.0, 1.5, 3.0]
    )
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


# execution seconds of: a NOT_RUN sample (nothing ran), a crash after 0.5 s, two real runs
FAIL = torch.tensor([0.0, 0.5, 9.5, 30.0])


def test_slot_durations_floor_the_measured_dt():
    # dt = max(generation + execution, floor): [0 + 1, 5 + 1] floored at 3 -> [3, 6]
    assert slot_durations(torch.tensor([0.0, 5.0]) + 1.0, floor=3.0).tolist() == [3.0, 6.0]
    assert (
        slot_durations(FAIL).tolist() == FAIL.tolist()
    )  # no generation time, no floor: the paper's dt


GEN = 10.0  # seconds of generation every sample spent before its execution


def test_generation_time_keeps_failures_in_the_gradient():
    # dt = generation 10 + execution: [10, 10.5, 19.5, 40], mean 20 -> [0.5, 0.525, 0.975, 2.0]
    w = duration_weights(FAIL + GEN, W.paper)
    assert w.tolist() == pytest.approx([0.5, 0.525, 0.975, 2.0])
    # the paper's exact dt (execution only): mean 10 -> [0, 0.05, 0.95, 3.0]: the NOT_RUN sample's weight is 0
    assert duration_weights(FAIL, W.paper).tolist() == pytest.approx([0.0, 0.05, 0.95, 3.0])
    # every mode keeps it strictly positive once dt includes the generation time
    for mode in (W.paper, W.clipped, W.log, W.running):
        assert float(duration_weights(FAIL + GEN, mode, running_mean=20.0)[0]) > 0.0, mode
    # running: scale 25 (given) -> dt / 25 = [0.4, 0.42, 0.78, 1.6]
    assert duration_weights(FAIL + GEN, W.running, running_mean=25.0).tolist() == pytest.approx(
        [0.4, 0.42, 0.78, 1.6]
    )
    # the running mean is over the same dt: first batch 20; then 0.9 * 10 + 0.1 * 20 = 11
    assert update_running_mean(None, FAIL + GEN, 0.9) == pytest.approx(20.0)
    assert update_running_mean(10.0, FAIL + GEN, 0.9) == pytest.approx(11.0)


def test_default_config_gives_a_not_run_sample_a_positive_weight():
    # a NOT_RUN sample still spent its generation time: dt = 10 + 0 > 0
    cfg = LearnerConfig()
    assert cfg.duration_weighting is W.paper
    w = duration_weights(FAIL + GEN, cfg.duration_weighting, floor=cfg.duration_floor_s)
    assert float(w[0]) > 0.0


def test_weight_stats():
    s = weight_stats(duration_weights(D, W.paper), D)
    # ESS = (sum w)^2 / sum w^2 = 16 / (1/9 + 4/9 + 1 + 4) = 16 / (50/9) = 2.88 -> / 4 = 0.72
    assert s["ess_frac"] == pytest.approx(0.72)
    # median of [1, 2, 3, 6] (torch: lower) = 2; slow = {3, 6}: mass (1 + 2) / 4 = 0.75
    assert s["grad_mass_slow"] == pytest.approx(0.75)
    assert s["grad_mass_fast"] == pytest.approx(0.25)
    # with |A| = [0, 0, 1, 0]: all mass on the sample with dt = 3 (slow)
    assert (
        weight_stats(torch.ones(4), D, torch.tensor([0.0, 0.0, -1.0, 0.0]))["grad_mass_slow"] == 1.0
    )


# Mutation survivors (benchmarks/tools/mutation.py): the edges the tests above left open.


def test_a_single_sample_and_a_non_positive_running_mean():
    one = torch.tensor([2.0])
    # one sample still gets dt / running mean (not a weight of 1): 2 / 4
    assert duration_weights(one, W.running, running_mean=4.0).tolist() == [0.5]
    assert duration_weights(torch.zeros(0), W.paper).tolist() == []
    # a running mean of 0 (or below) is no scale: the batch mean (3) is used, as with none
    for bad in (0.0, -1.0):
        assert duration_weights(D, W.running, running_mean=bad).tolist() == pytest.approx(
            [1 / 3, 2 / 3, 1.0, 2.0]
        )
    # the EMA of an empty batch is the previous value
    assert update_running_mean(2.5, torch.zeros(0), 0.9) == 2.5
    assert update_running_mean(None, torch.zeros(0), 0.9) is None


def test_weight_stats_of_an_empty_batch_small_weights_and_no_mass():
    empty = torch.zeros(0)
    assert weight_stats(empty, empty) == {
        "ess_frac": 0.0,
        "grad_mass_slow": 0.0,
        "grad_mass_fast": 0.0,
        "w_max": 0.0,
    }
    # small uniform weights: ESS = (0.2)^2 / 0.02 = 2 of 2 samples -> 1.0 (no clamp at work)
    small = weight_stats(torch.tensor([0.1, 0.1]), torch.tensor([1.0, 2.0]))
    assert small["ess_frac"] == pytest.approx(1.0) and small["w_max"] == pytest.approx(0.1)
    # all |A| = 0: no mass anywhere, both shares 0 (not nan)
    none = weight_stats(torch.ones(4), D, torch.zeros(4))
    assert none["grad_mass_slow"] == 0.0 and none["grad_mass_fast"] == 0.0
    # the slow set is strictly above the median (torch's lower median of [1, 2, 3, 6] is 2)
    at_median = weight_stats(torch.ones(4), D, torch.tensor([0.0, 1.0, 0.0, 0.0]))
    assert at_median["grad_mass_slow"] == 0.0 and at_median["grad_mass_fast"] == 1.0


def test_clipped_caps_at_five_batch_means_by_default():
    # [1] * 9 + [7]: mean 1.6, the slow one at 7 / 1.6 = 4.375 < 5: nothing clipped (= paper)
    d = torch.tensor([1.0] * 9 + [7.0])
    assert duration_weights(d, W.clipped).tolist() == pytest.approx([0.625] * 9 + [4.375])


def test_sub_second_durations_are_weighted_like_any_others():
    # a batch mean below 1 s is still a time to correct for: D / 10 has the weights of D
    for mode in (W.paper, W.clipped, W.log):
        assert duration_weights(D / 10, mode).tolist() == pytest.approx(
            duration_weights(D, mode).tolist()
        ), mode


def test_a_running_mean_below_one_second_is_a_scale_and_zero_weights_have_no_ess():
    assert duration_weights(D, W.running, running_mean=0.5).tolist() == pytest.approx(
        [2.0, 4.0, 6.0, 12.0]
    )
    # all weights 0: 0 / max(0, 1e-30) = 0, not nan
    assert weight_stats(torch.zeros(2), torch.tensor([1.0, 2.0]))["ess_frac"] == 0.0


def test_the_default_clip_is_five_batch_means():
    # [1] * 19 + [7]: mean 1.3, the slow one at 7 / 1.3 = 5.38 batch means, capped at 5 (a clip of
    # 6 would not cap it); then renormalised by the mean (19 * 10/13 + 5) / 20 = 51/52
    d = torch.tensor([1.0] * 19 + [7.0])
    assert duration_weights(d, W.clipped).tolist() == pytest.approx([40 / 51] * 19 + [260 / 51])


def test_running_mean_defaults_and_a_small_decay():
    # the default floor is 0: a sub-second first batch is its own mean
    assert update_running_mean(None, torch.tensor([0.5, 0.25]), 0.9) == pytest.approx(0.375)
    # decay 0.25: 0.25 * 2 + 0.75 * 4 = 3.5
    assert update_running_mean(2.0, torch.tensor([4.0]), 0.25) == pytest.approx(3.5)


def test_weight_options_are_keyword_only():
    with pytest.raises(TypeError):
        duration_weights(D, W.paper, 0.0)  # type: ignore[misc]


def test_a_config_that_still_sets_the_removed_duration_overhead_is_refused_by_name(tmp_path):
    """Δt is measured (``Sample.dt_s``); the old hand-set generation time must not be silently
    ignored, so a config naming it fails and says which key."""
    from mlerl.protocol import ConfigError, load_section

    path = tmp_path / "config.yaml"
    path.write_text("learner:\n  duration_overhead_s: 1.0\n")
    with pytest.raises(ConfigError, match="learner.duration_overhead_s"):
        load_section(LearnerConfig, path, "learner")
    path.write_text("learner:\n  duration_floor_s: 1.0\n")
    assert load_section(LearnerConfig, path, "learner").duration_floor_s == 1.0
