"""benchmarks/experiments/discovery_pool.py: held-out seeds of one arm pooled over results
files at one budget, on one task or several, on hand-made results (no runs)."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks" / "experiments"))
dp = importlib.import_module("discovery_pool")


def _result(arm, curves, baselines, executions, chosen_on=(0,), task="t", direction="lower"):
    """A discovery.py results file: ``curves`` and each baseline's are seed -> curve; each seed's
    probe says its seed, so a test can tell whose it is."""
    return {
        "task": task,
        "direction": direction,
        "executions": executions,
        "arms": {arm: {str(s): {"curve": c} for s, c in curves.items()}},
        "baselines": {
            b: {str(s): {"curve": c} for s, c in per.items()} for b, per in baselines.items()
        },
        "probe": {
            task: {
                arm: {
                    str(s): {
                        "first": {"K": 0.0},
                        "last": {"K": s / 10},
                        "first_step": 0,
                        "last_step": executions,
                    }
                    for s in curves
                }
            }
        },  # fmt: skip
        "selection": {"chosen_on_seeds": list(chosen_on)},
    }


def test_sign_test_counts_the_positive_differences_and_drops_ties():
    # 9 of 12 ahead: (C(12,9) + C(12,10) + C(12,11) + C(12,12)) / 2^12 = 299 / 4096
    assert dp.sign_test([1.0] * 9 + [-1.0] * 3) == pytest.approx(299 / 4096)
    assert dp.sign_test([0.5, 0.0, -0.1]) == pytest.approx(3 / 4)  # the tie is dropped: 1 of 2
    assert dp.sign_test([0.0]) is None and dp.sign_test([]) is None


def test_a_source_gives_its_held_out_seeds_at_the_budget():
    result = _result(
        "b16",
        {0: [0.09, 0.05], 3: [0.09, 0.07, 0.06], 4: [None, 0.08, 0.08]},
        {"scratch_bon": {0: [0.1, 0.1], 3: [0.08, 0.08, 0.05], 4: [0.1, 0.09, 0.09]}},
        executions=3,
    )
    rows = dp.source_rows(result, "b16", 2, "f.json", "sixteen")  # seed 0 was the design seed
    common = {
        "task": "t",
        "direction": "lower",
        "executions": 2,
        "arm": "sixteen",
        "source": "f.json",
    }
    assert rows == [
        {**common, "seed": 3, "rl_private": 0.07, "bon_scratch_private": 0.08},
        {**common, "seed": 4, "rl_private": 0.08, "bon_scratch_private": 0.09},
    ]
    with pytest.raises(ValueError, match="fewer than --at 4"):
        dp.source_rows(result, "b16", 4, "f.json", "b16")
    with pytest.raises(ValueError, match="no arm 'x'"):
        dp.source_rows(result, "x", 2, "f.json", "x")


def test_probe_rises_counts_each_decision_and_all_of_them():
    probe = {
        "3": {"first": {"A": 0.2, "B": 0.1}, "last": {"A": 0.5, "B": 0.3}},  # both rose
        "4": {"first": {"A": 0.2, "B": 0.1}, "last": {"A": 0.5, "B": 0.1}},  # B level: not risen
        "5": {"first": {"A": 0.4, "B": 0.0}, "last": {"A": 0.1, "B": 0.2}},
        "6": {"first": None, "last": None},  # no probe: not counted
    }
    assert dp.probe_rises(probe) == {"seeds": 3, "rose": {"A": 2, "B": 2}, "all": 1}


def test_pooled_differences_with_their_sd_and_sign_test():
    rows = [
        {"seed": 3, "rl_private": 0.07, "mix_private": 0.08},  # +0.01
        {"seed": 4, "rl_private": 0.08, "mix_private": 0.07},  # -0.01
        {"seed": 5, "rl_private": 0.05, "mix_private": 0.08},  # +0.03
        {"seed": 6, "rl_private": 0.05},  # no baseline: not paired
    ]
    got = dp.pool(rows, ["mix"], lower=True)["mix"]
    # differences +0.01, -0.01, +0.03: mean 0.01, s.d. 0.02, s.e. 0.02 / sqrt(3)
    assert got["n"] == 3 and got["seeds"] == [3, 4, 5] and got["better_in"] == 2
    assert got["mean"] == pytest.approx(0.01) and got["sd"] == pytest.approx(0.02)
    assert got["se"] == pytest.approx(0.02 / 3**0.5)
    assert got["sign_test_p"] == pytest.approx(4 / 8)  # 2 or 3 of 3 ahead


def test_the_script_pools_sources_and_refuses_a_seed_twice(tmp_path, capsys):
    a = _result("b16", {3: [0.07]}, {"mix": {3: [0.08]}}, executions=1)
    b = _result("b16x2", {4: [0.06, 0.05]}, {"mix": {4: [0.07, 0.04]}}, executions=2)
    c = _result("b16", {3: [0.8]}, {"mix": {3: [0.9]}}, executions=1, task="u", direction="higher")
    for name, r in {"a": a, "b": b, "c": c}.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(r))
    src = [f"{tmp_path / n}.json:{arm}" for n, arm in (("a", "b16"), ("b", "b16x2"), ("c", "b16"))]
    assert dp.main([*src, "--at", "1", "--out", str(tmp_path), "--name", "pooled"]) == 0
    out = json.loads((tmp_path / "pooled.json").read_text())
    assert (tmp_path / "pooled.png").stat().st_size > 0
    got = [(r["task"], r["seed"], r["arm"], r["rl_private"], r["mix_private"]) for r in out["rows"]]
    assert got == [
        ("t", 3, "b16", 0.07, 0.08),
        ("t", 4, "b16", 0.06, 0.07),
        ("u", 3, "b16", 0.8, 0.9),
    ]
    assert out["paired"]["t"]["mix"]["mean"] == pytest.approx(0.01) and out["executions"] == 1
    assert out["paired"]["u"]["mix"]["mean"] == pytest.approx(-0.1)  # higher is better there
    # the probe of seed 4 ends its 2-execution run, past the budget read: said so
    assert (
        out["probe"]["t"]["4"]["last"] == {"K": 0.4}
        and out["probe"]["t"]["4"]["run_executions"] == 2
    )
    assert out["probe"]["u"]["3"]["last"] == {"K": 0.3}
    assert out["probe_rose"]["t"] == {"seeds": 2, "rose": {"K": 2}, "all": 2}
    assert out["selection"]["t"] == {
        "chosen_on_seeds": [0],
        "confirmed_on_seeds": [3, 4],
        "overlap": [],
        "held_out": True,
    }
    assert "ahead on 2" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        dp.main([src[0], src[0], "--at", "1", "--out", str(tmp_path)])
    assert "already in an earlier source" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # b.json has 2 executions, a.json only 1
        dp.main([*src[:2], "--at", "2", "--out", str(tmp_path)])
    (tmp_path / "d.json").write_text(json.dumps({**c, "task": "t"}))  # "t" as higher-is-better
    with pytest.raises(SystemExit):
        dp.main([src[0], f"{tmp_path / 'd.json'}:b16", "--at", "1", "--out", str(tmp_path)])
    assert "not in an earlier source" in capsys.readouterr().err
