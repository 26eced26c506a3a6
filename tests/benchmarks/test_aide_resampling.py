"""benchmarks/experiments/aide_resampling.py: the resampling AIDE paired against the recorded
AIDE and the RL arms of discovery results files (hand-made files, no runs)."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks" / "experiments"))
ar = importlib.import_module("aide_resampling")
TASK = "standin-materials-rmsle-tiny"


def _study(path: Path, arm: str, rl: dict[str, float], aide: dict[str, float]) -> Path:
    path.write_text(json.dumps({
        "task": TASK, "direction": "lower", "executions": 240,
        "arms": {arm: {s: {"private": v} for s, v in rl.items()}},
        "baselines": {"aide": {s: {"private": v, "valid_frac": 0.1} for s, v in aide.items()}},
    }))  # fmt: skip
    return path


def _aide(dir_: Path, seed: int, private: float, k: int = 240) -> None:
    (dir_ / f"seed{seed}").mkdir(parents=True)
    summary = {"best_score": private, "best_public": private - 0.004, "valid_frac": 0.5, "k": k,
               "llm_calls": 300, "actions": {"draft": 5}, "statuses": {"ok": 120},
               "best_solution": {"action": "improve"}}  # fmt: skip
    doc = {"aide": {"parse_attempts": 3}, "per_seed": [{"tasks": {TASK: summary}}]}
    (dir_ / f"seed{seed}" / "aide.json").write_text(json.dumps(doc))


def test_pairs_the_resampling_aide_with_the_recorded_one_and_each_arm(tmp_path, monkeypatch):
    monkeypatch.setattr(ar, "RESULTS", tmp_path)
    first = _study(
        tmp_path / "d.json", "default", {"3": 0.080, "4": 0.060}, {"3": 0.078, "4": 0.083}
    )
    other = _study(tmp_path / "e.json", "b16", {"3": 0.070, "4": 0.075}, {"3": 1.0, "4": 1.0})
    for seed, private in ((3, 0.075), (4, 0.080)):
        _aide(tmp_path / "aide", seed, private)
    argv = ["--aide-dir", str(tmp_path / "aide"), "--seeds", "3,4", "--arm",
            f"default={first}:default", "--arm", f"b16={other}:b16", "--name", "out"]  # fmt: skip
    assert ar.main(argv) == 0
    out = json.loads((tmp_path / "out.json").read_text())
    paired = out["paired"]
    # lower is better: new AIDE - recorded = (0.078-0.075, 0.083-0.080) = (+0.003, +0.003)
    assert paired["aide - aide_recorded"]["mean"] == pytest.approx(0.003)
    assert paired["aide - aide_recorded"]["better_in"] == 2
    # default - AIDE: (0.075-0.080, 0.080-0.060) = (-0.005, +0.020): mean 0.0075, s.e. 0.0125
    assert paired["default - aide"]["mean"] == pytest.approx(0.0075)
    assert paired["default - aide"]["se"] == pytest.approx(0.0125)
    assert paired["default - aide"]["better_in"] == 1
    # the recorded AIDE comes from the first arm's file only (the second's is ignored)
    assert paired["b16 - aide"]["mean"] == pytest.approx((0.005 + 0.005) / 2)
    assert out["rows"][1] == {"task": TASK, "seed": 4, "aide_private": 0.080,
                              "aide_recorded_private": 0.083, "default_private": 0.060,
                              "b16_private": 0.075}  # fmt: skip
    assert out["per_seed"]["3"]["aide"]["parse_attempts"] == 3


def test_refuses_a_missing_seed_an_unknown_arm_and_another_budget(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(ar, "RESULTS", tmp_path)
    study = _study(tmp_path / "d.json", "default", {"3": 0.08}, {"3": 0.08})
    aide = tmp_path / "aide"
    base = ["--aide-dir", str(aide), "--seeds", "3", "--name", "out"]
    for argv, message in (
        ([*base, "--arm", f"default={study}:default"], "no AIDE result for seed 3"),
        ([*base, "--arm", f"x={study}:entropic"], "has no arm 'entropic'"),
        ([*base, "--arm", "x=default"], "expected NAME=FILE:ARM"),
    ):
        with pytest.raises(SystemExit):
            ar.main(argv)
        assert message in capsys.readouterr().err
    _aide(aide, 3, 0.07, k=16)
    with pytest.raises(SystemExit):
        ar.main([*base, "--arm", f"default={study}:default"])
    assert "AIDE took 16 steps, the study 240" in capsys.readouterr().err
    assert not (tmp_path / "out.json").exists()
