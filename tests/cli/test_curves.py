"""Learning curves: reading metrics.jsonl and the rolling mean (pure), and the figure."""

import json
import math
import warnings

import pytest

from mlerl.cli._curves import plot_learning_curves, read_learner_metrics, rolling_mean


def test_rolling_mean_skips_nan():
    got = rolling_mean([1.0, 3.0, math.nan, 5.0, 7.0], 2)
    assert got[:3] == [1.0, 2.0, 3.0]
    assert got[3] == 5.0 and got[4] == 6.0
    assert math.isnan(rolling_mean([math.nan], 3)[0])


def test_read_learner_metrics_orders_steps_and_skips_torn_lines(tmp_path):
    p = tmp_path / "metrics.jsonl"
    p.write_text(
        "\n".join(
            [
                json.dumps({"stream": "learner", "step": 2, "a": 2.0}),
                json.dumps({"stream": "actor", "step": 1, "a": 9.0}),
                json.dumps({"stream": "learner", "step": 1, "a": 1.0}),
                '{"stream": "lea',
            ]
        )
    )
    assert [r["a"] for r in read_learner_metrics(p)] == [1.0, 2.0]


def test_plot_learning_curves(tmp_path):
    p = tmp_path / "metrics.jsonl"
    rows = [
        {
            "stream": "learner",
            "step": s,
            "split/all/valid_frac": 0.5,
            "split/kind/scratch/valid_frac": 0.6,
            "split/task/t1/score_mean": 0.9,
            "split/all/pg_share_failed": 0.7,
            "grad_norm/policy": 1.0,
        }
        for s in range(1, 6)
    ]
    p.write_text("\n".join(json.dumps(r) for r in rows))
    with warnings.catch_warnings():
        # most panels have no series here (as value error has none without a critic): they say
        # so instead of drawing an empty legend, which matplotlib warns about
        warnings.filterwarnings("error", message="No artists with labels")
        out = plot_learning_curves(p, tmp_path / "plots")
    assert out is not None and out.stat().st_size > 0
    p.write_text(json.dumps({"stream": "learner", "step": 1, "x": 1.0}))
    assert plot_learning_curves(p, tmp_path / "none") is None


def test_probe_series_and_plot(tmp_path):
    from mlerl.cli._curves import plot_decision_probe, probe_series

    probe = [
        {"stream": "probe", "step": 0, "t/parsed": 1.0, "t/MODEL=ridge": 0.75, "t/MODEL=svm": 0.25},
        {"stream": "probe", "step": 2, "t/parsed": 0.5, "t/MODEL=ridge": 0.5, "time_s": 1.5},
    ]  # step 2: no answer made svm
    rows = [probe[0], {"stream": "learner", "step": 1, "loss/policy": 0.1}, probe[1]]
    path = tmp_path / "metrics.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    series = probe_series(probe)
    assert series == {
        "t": {
            "MODEL=ridge": [(0, 0.75), (2, 0.5)],
            "MODEL=svm": [(0, 0.25), (2, 0.0)],
            "parsed": [(0, 1.0), (2, 0.5)],
        }
    }
    out = plot_decision_probe(path, tmp_path / "plots")
    assert out is not None and out.stat().st_size > 0
    path.write_text(json.dumps({"stream": "learner", "step": 1, "loss/policy": 0.1}) + "\n")
    assert plot_decision_probe(path, tmp_path / "none") is None
