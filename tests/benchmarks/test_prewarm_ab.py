"""benchmarks/throughput/prewarm_ab.py: the launch order, one run's figures and the paired verdict, on
hand-made run dirs (no training)."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks" / "throughput"))
ab = importlib.import_module("prewarm_ab")


def _run(
    root: Path, arm: int, seed: int, minutes: float, cpu_s: float = 60.0, updates: int = 5
) -> Path:
    """A run dir whose ``updates`` learner updates span ``minutes``, with two programs that ran
    (2 s and 4 s, one valid) and one without a program."""
    d = root / ab.run_name(arm, seed)
    d.mkdir(parents=True)
    step_s = minutes * 60 / (updates - 1)
    rows = [
        {"stream": "learner", "step": i + 1, "time": 1000.0 + i * step_s} for i in range(updates)
    ]
    rows.append({"stream": "actors", "time": 5000.0})  # not an update: ignored
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    samples = [
        {"status": "ok", "duration_s": 2.0, "valid": True},
        {"status": "error", "duration_s": 4.0, "valid": False},
        {"status": "not_run", "duration_s": 0.0, "valid": False},
    ]
    (d / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    (d / "cpu.json").write_text(json.dumps({"cpu_s": cpu_s, "wall_s": 99.0}))
    return d


def test_schedule_alternates_the_arms_order_per_seed():
    assert ab.schedule([3, 4, 5], [0, 2]) == [(3, 0), (3, 2), (4, 2), (4, 0), (5, 0), (5, 2)]


def test_launch_argv_sets_the_arm_and_skips_the_closing():
    argv = ab.launch_argv(4, 2, 10, Path("/r/x"))
    assert argv[1:] == [
        "-m",
        "mlerl.cli",
        "train",
        "seed=4",
        "learner.max_updates=10",
        "eval_samples=0",
        "sandbox.prewarm=2",
        "hydra.run.dir=/r/x",
    ]


def test_one_run_figures_by_hand(tmp_path: Path):
    row = ab.summarise_run(_run(tmp_path, 2, 7, minutes=2.0, cpu_s=50.0), 2, 7)
    assert row["updates"] == 5
    assert row["updates_per_min"] == pytest.approx(4 / 2.0)  # 4 intervals over 2 minutes
    assert row["cpu_s_per_update"] == pytest.approx(10.0)
    assert row["exec_s_mean"] == pytest.approx(3.0)  # the not_run sample has no execution time
    assert row["valid_frac"] == pytest.approx(1 / 3)


def test_paired_difference_decides_raises_only_above_two_standard_errors(tmp_path: Path):
    # 5 updates over m minutes is 4/m per minute. Arm 0: 2, 2, 2; arm 2: 4, 2, 2.
    # Paired +2, 0, 0: mean 2/3, s.e. 2/3, not above two s.e.
    for seed, (m0, m2) in enumerate([(2.0, 1.0), (2.0, 2.0), (2.0, 2.0)]):
        _run(tmp_path, 0, seed, m0)
        _run(tmp_path, 2, seed, m2)
    rows = [ab.summarise_run(tmp_path / ab.run_name(a, s), a, s) for s in range(3) for a in (0, 2)]
    summary = ab.aggregate(rows, [0, 2])
    d = summary["difference"]["2-0"]
    assert d["updates_per_min"]["mean"] == pytest.approx(2 / 3)
    assert d["updates_per_min"]["se"] == pytest.approx(2 / 3)
    assert d["raises_updates_per_min"] is False and d["seeds"] == [0, 1, 2]
    assert summary["arms"]["0"]["updates_per_min"]["mean"] == pytest.approx(2.0)
    # a consistent rise: arm 2 at 3.0, 3.2, 2.8 per minute, paired +1.0, +1.2, +0.8: mean 1.0, s.e. 0.115
    for seed, rate in enumerate([3.0, 3.2, 2.8]):
        _run(tmp_path / "b", 0, seed, 2.0)
        _run(tmp_path / "b", 2, seed, 4 / rate)
    rows = [
        ab.summarise_run(tmp_path / "b" / ab.run_name(a, s), a, s) for s in range(3) for a in (0, 2)
    ]
    d = ab.aggregate(rows, [0, 2])["difference"]["2-0"]
    assert d["updates_per_min"]["mean"] == pytest.approx(1.0)
    assert d["raises_updates_per_min"] is True


def test_main_aggregates_without_launching_and_refuses_an_empty_dir(tmp_path: Path):
    for seed in (0, 1):
        _run(tmp_path / "runs", 0, seed, 2.0)
        _run(tmp_path / "runs", 2, seed, 1.0)
    assert (
        ab.main(
            [
                "--seeds",
                "2",
                "--no-launch",
                "--runs-dir",
                str(tmp_path / "runs"),
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    result = json.loads((tmp_path / "prewarm_ab.json").read_text())
    assert result["seeds"] == [0, 1] and len(result["runs"]) == 4
    assert result["summary"]["difference"]["2-0"]["updates_per_min"]["mean"] == pytest.approx(2.0)
    with pytest.raises(SystemExit, match="no runs"):
        ab.main(["--no-launch", "--runs-dir", str(tmp_path / "empty"), "--out", str(tmp_path)])
