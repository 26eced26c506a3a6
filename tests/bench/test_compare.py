"""compare: per-seed best@K / mean@K, mean +- s.e., paper columns, plots."""

import json
import math

import pytest

from mlerl.bench._compare import compare_runs, mean_se, per_seed, read_metrics
from mlerl.bench._task import Registry

AUC = "detecting-insults-in-social-commentary"  # higher is better, thresholds .83321/.82307/.79111
LEAF = "leaf-classification"  # lower is better


def _write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _rec(step, task, score, t, seed=0, valid=True, dur=10.0):
    return {
        "step": step,
        "task_id": task,
        "score": score,
        "valid": valid,
        "duration_s": dur,
        "t": t,
        "seed": seed,
    }


def test_mean_se_hand_values():
    # values 1, 2, 3: mean 2, sample std 1, s.e. 1 / sqrt(3)
    assert mean_se([1.0, 2.0, 3.0]) == pytest.approx((2.0, 1 / math.sqrt(3)))
    assert math.isnan(mean_se([4.0])[1]) and math.isnan(mean_se([])[0])


def test_best_and_mean_at_k_with_direction_and_medals(tmp_path):
    recs = [
        _rec(0, AUC, 0.70, 1),
        _rec(1, AUC, 0.84, 2),
        _rec(2, AUC, None, 3, valid=False),
        _rec(3, AUC, 0.99, 4),  # beyond K=3
        _rec(0, AUC, 0.80, 1, seed=1),
        _rec(1, AUC, 0.60, 2, seed=1),
        _rec(0, LEAF, 0.9, 1),
        _rec(1, LEAF, 0.5, 2),
        _rec(2, LEAF, 2.0, 3),
    ]
    frame = read_metrics([_write(tmp_path / "rl.jsonl", recs)])
    seeds = per_seed(frame, k=3, registry=Registry.load(data_dir=tmp_path))
    auc0 = seeds[(seeds.task_id == AUC) & (seeds.seed == 0)].iloc[0]
    # first 3 samples: 0.70, 0.84, invalid -> best 0.84 (>= gold 0.83321), mean 0.77, 2/3 valid
    assert tuple(float(auc0[c]) for c in ("best", "mean", "valid_rate", "medal")) == pytest.approx(
        (0.84, 0.77, 2 / 3, 1.0)
    )
    auc1 = seeds[(seeds.task_id == AUC) & (seeds.seed == 1)].iloc[0]
    # 0.80 is below silver 0.82307 but at least bronze 0.79111: a (bronze) medal
    assert (float(auc1.best), float(auc1.medal)) == (0.80, 1.0)
    leaf = seeds[seeds.task_id == LEAF].iloc[0]
    assert leaf.best == 0.5 and leaf.method == "rl"  # lower is better; method from file stem


def test_compare_writes_tables_and_plots(tmp_path):
    recs = [
        _rec(s, AUC, 0.6 + 0.01 * s, 100 * s, seed=seed, dur=30 - s)
        for seed in range(3)
        for s in range(5)
    ]
    recs += [
        _rec(s, LEAF, 1.0 - 0.1 * s, 100 * s, seed=seed) for seed in range(3) for s in range(5)
    ]
    paths = [
        _write(tmp_path / "rl.jsonl", recs),
        _write(tmp_path / "base.jsonl", [dict(r, score=r["score"] * 0.9) for r in recs]),
    ]
    written = compare_runs(paths, tmp_path / "out", k=5, registry=Registry.load(data_dir=tmp_path))
    names = {p.name for p in written}
    assert {
        "table.md",
        "table.csv",
        "best_score_vs_time.png",
        "duration_vs_step.png",
        "score_vs_step.png",
    } <= names
    md = (tmp_path / "out" / "table.md").read_text()
    assert "paper T1 Qwen2.5-3B RL" in md and "0.895" in md and "rl best@K" in md
    for png in ("best_score_vs_time.png", "duration_vs_step.png", "score_vs_step.png"):
        assert (tmp_path / "out" / png).read_bytes()[:4] == b"\x89PNG"


def test_bad_metrics_line_names_file_and_line(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps(_rec(0, AUC, 0.5, 1)) + '\n{"step": 1}\n')
    with pytest.raises(ValueError, match=r"m.jsonl:2"):
        read_metrics([path])


def test_best_is_chosen_on_public_and_reported_on_private(tmp_path):
    recs = [
        {**_rec(0, LEAF, 0.5, 1), "private_score": 0.9},  # best public (lower is better)
        {**_rec(1, LEAF, 0.7, 2), "private_score": 0.4},  # better private, never selected
        {**_rec(0, AUC, 0.8, 1)},
    ]  # no private score: reports its public one
    frame = read_metrics([_write(tmp_path / "rl.jsonl", recs)])
    seeds = per_seed(frame, k=None, registry=Registry.load(data_dir=tmp_path))
    leaf = seeds[seeds.task_id == LEAF].iloc[0]
    # public best 0.5 -> private 0.9, gap 0.9 - 0.5 = 0.4; mean private (0.9 + 0.4) / 2
    assert tuple(
        leaf[c] for c in ("best", "best_public", "gap", "mean", "mean_public")
    ) == pytest.approx((0.9, 0.5, 0.4, 0.65, 0.6))
    auc = seeds[seeds.task_id == AUC].iloc[0]
    assert (auc.best, auc.best_public, auc.gap) == pytest.approx((0.8, 0.8, 0.0))
