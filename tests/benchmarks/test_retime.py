"""benchmarks/experiments/retime.py: finding 2's programs run again side by side. The draw and
the means with hand-made numbers; one real retime of two hand-made runs through the sandbox."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks" / "experiments"))
retime = importlib.import_module("retime")
TASK = "standin-materials-rmsle-tiny"


def _s(v, sid, status="ok", code="c", duration=1.0, task=TASK):
    return {
        "policy_version": v,
        "sample_id": sid,
        "status": status,
        "code": code,
        "duration_s": duration,
        "task_id": task,
    }


def test_second_half_ran_keeps_the_second_half_programs_that_ran():
    samples = [
        _s(0, "v0"),  # first half of U = 3: versions 0, 1
        _s(1, "v1"),
        _s(2, "v2"),
        _s(2, "not_run", status="not_run"),
        _s(2, "no_code", code=""),
        _s(2, "other_task", task="other"),
        _s(3, "v3"),  # a closing sample of version U is still the second half
    ]
    kept = retime.second_half_ran(samples, TASK, updates=3)
    assert [s["sample_id"] for s in kept] == ["v2", "v3"]


def test_draw_interleaves_abba_and_leaves_the_longer_runs_rest_at_the_end():
    a = [_s(1, f"a{i}") for i in range(3)]
    b = [_s(1, f"b{i}") for i in range(5)]
    order = retime.draw(a, b, k=4, seed=0)
    sides = [side for side, _ in order]
    # a has 3 < k: all of it; b gives 4; pairs 0 and 2 run a first, pair 1 b first
    assert sides == ["a", "b", "b", "a", "a", "b", "b"]
    ids = [s["sample_id"] for _, s in order]
    assert sorted(i for i in ids if i.startswith("a")) == ["a0", "a1", "a2"]
    assert len({i for i in ids if i.startswith("b")}) == 4  # without replacement
    assert retime.draw(a, b, k=4, seed=0) == order  # the seed fixes the draw
    with pytest.raises(ValueError, match="k must be"):
        retime.draw(a, b, k=0, seed=0)


def test_summarise_means_per_side_with_hand_numbers():
    order = [("a", {"sample_id": 1}), ("b", {"sample_id": 2}), ("b", {"sample_id": 3})]
    order.append(("a", {"sample_id": 4}))
    out = retime.summarise(order, [2.0, 1.0, 3.0, 6.0])
    assert out["a"]["n"] == 2 and out["a"]["mean_s"] == 4.0  # (2 + 6) / 2
    assert out["b"]["mean_s"] == 2.0 and out["a_minus_b"] == 2.0
    assert out["a"]["times"] == [{"sample_id": 1, "seconds": 2.0}, {"sample_id": 4, "seconds": 6.0}]
    with pytest.raises(ValueError, match="3 programs but 2 times"):
        retime.summarise(order[:3], [1.0, 2.0])


def _run(root: Path, name: str, codes: list[str], data_dir: Path, task=TASK) -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "config.yaml").write_text(f"learner:\n  max_updates: 2\ntasks:\n  data_dir: {data_dir}\n")
    rows = [_s(0, f"{name}-first", code="raise SystemExit(3)\n", task=task)]
    rows += [_s(1, f"{name}-{i}", code=c, task=task) for i, c in enumerate(codes)]
    (d / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = {"trained": {"per_seed": [{"tasks": {task: {}}}]}}
    (d / "report.json").write_text(json.dumps(report))
    return d


def test_measure_runs_both_runs_programs_again_in_the_sandbox(tmp_path):
    data = tmp_path / "data"
    slow = _run(tmp_path, "slow", ["import time\ntime.sleep(1.0)\n"] * 2, data)
    quick = _run(tmp_path, "quick", ["print('done')\n"] * 2, data)
    result = retime.measure(slow, quick, k=2, seed=0)  # the data dir is run A's
    assert result["task"] == TASK and result["pool"] == {"a": 2, "b": 2}
    assert result["a"]["n"] == 2 and result["b"]["n"] == 2
    # only second-half programs ran: the version-0 sample is never drawn
    assert {t["sample_id"] for t in result["a"]["times"]} == {"slow-0", "slow-1"}
    assert result["a"]["mean_s"] >= 1.0 > result["b"]["mean_s"]
    assert result["a_minus_b"] == pytest.approx(result["a"]["mean_s"] - result["b"]["mean_s"])


def test_measure_refuses_runs_of_two_tasks_and_a_run_with_nothing_to_time(tmp_path):
    data = tmp_path / "data"
    a = _run(tmp_path, "a", ["print(1)\n"], data)
    other = _run(tmp_path, "other", ["print(1)\n"], data, task="standin-insults-auc-tiny")
    with pytest.raises(ValueError, match="ran standin-insults-auc-tiny"):
        retime.measure(a, other, k=1, seed=0)
    empty = _run(tmp_path, "empty", [], data)
    with pytest.raises(ValueError, match="no program ran in the second half.*empty"):
        retime.measure(a, empty, k=1, seed=0)
