"""benchmarks/experiments/embedded_rl.py: the quarter split, the targets and the summary on a hand-made run dir."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks" / "experiments"))
bench = importlib.import_module("embedded_rl")
AUC, LOSS = "auc-task", "loss-task"


def _sample(v, kind, valid, reward, task=AUC, score=None, t=1.0, duration_s=0.0):
    return {
        "policy_version": v,
        "kind": kind,
        "valid": valid,
        "reward": reward,
        "task_id": task,
        "score": score,
        "t": t,
        "status": "ok" if valid else "not_run",
        "duration_s": duration_s,
    }


def _run_dir(tmp_path: Path, samples, seed=0, updates=8, aide=None) -> Path:
    d = tmp_path / f"seed{seed}"
    d.mkdir()
    (d / "config.yaml").write_text(f"seed: {seed}\nlearner:\n  max_updates: {updates}\n")
    (d / "samples.jsonl").write_text("\n".join(json.dumps(s) for s in samples) + "\n")
    task = lambda best, mean, valid, lower: {
        "best_score": best,
        "mean_score": mean,
        "valid_frac": valid,
        "lower_is_better": lower,
    }  # noqa: E731
    report = {
        "initial": {
            "per_seed": [
                {"tasks": {AUC: task(0.9, 0.8, 0.5, False), LOSS: task(0.2, 0.4, 0.5, True)}}
            ]
        },
        "trained": {
            "per_seed": [
                {"tasks": {AUC: task(0.95, 0.9, 0.6, False), LOSS: task(0.3, 0.3, 0.7, True)}}
            ]
        },
    }
    if aide is not None:  # (AUC best, loss best) of AIDE with the initial policy
        report["aide"] = {
            "per_seed": [
                {
                    "tasks": {
                        AUC: task(aide[0], 0.7, 0.4, False),
                        LOSS: task(aide[1], 0.5, 0.4, True),
                    }
                }
            ]
        }
    (d / "report.json").write_text(json.dumps(report))
    (d / "wall_clock_s").write_text("600")
    return d


# U = 8: first quarter = versions 0, 1; last quarter = versions 6, 7 (version 8 is past the run)
SAMPLES = [
    dict(_sample(0, "scratch", True, 0.5), sample_id="p"),
    _sample(0, "improve", False, -10.0),
    _sample(1, "scratch", False, -10.0),
    _sample(1, "scratch", False, -10.0),
    _sample(3, "scratch", True, 0.9),
    _sample(6, "scratch", True, 0.8),
    dict(_sample(6, "improve", True, 0.6), parent_id="p"),
    _sample(7, "scratch", True, 0.7),
    _sample(7, "improve", False, -10.0),
    _sample(8, "improve", True, 0.9),
]


def test_quarters_hand_numbers():
    q = bench.quarters(SAMPLES, 8)
    assert q["n_first_quarter"] == 4 and q["n_last_quarter"] == 4
    assert q["valid_first_quarter"] == 0.25 and q["valid_last_quarter"] == 0.75
    assert q["reward_first_quarter"] == pytest.approx((0.5 - 30) / 4)
    assert q["reward_last_quarter"] == pytest.approx((0.8 + 0.6 + 0.7 - 10) / 4)
    assert q["scratch_valid_last_quarter"] == 1.0 and q["improve_valid_last_quarter"] == 0.5
    assert q["improve_valid_first_quarter"] == 0.0


def test_valid_scratch_exec_time_and_score_by_quarter():
    rows = [  # U = 8; failed and improve samples do not count, nor version 3
        _sample(0, "scratch", True, -0.05, LOSS, score=0.05, duration_s=4.0),
        _sample(1, "scratch", True, -0.07, LOSS, score=0.07, duration_s=2.0),
        _sample(1, "scratch", False, -10.0, LOSS, duration_s=0.5),
        _sample(0, "improve", True, -0.01, LOSS, score=0.01, duration_s=9.0),
        _sample(3, "scratch", True, -0.01, LOSS, score=0.01, duration_s=9.0),
        _sample(6, "scratch", True, -0.04, LOSS, score=0.04, duration_s=8.0),
        _sample(7, "scratch", True, 0.9, AUC, score=0.9, duration_s=5.0),
    ]
    q = bench.quarters(rows, 8)
    assert q["scratch_exec_s_first_quarter"] == 3.0 and q["scratch_exec_s_last_quarter"] == 6.5
    assert q["scratch_score_by_task"] == {
        AUC: {"first_quarter": None, "last_quarter": 0.9},
        LOSS: {"first_quarter": pytest.approx(0.06), "last_quarter": 0.04},
    }


def test_improve_vs_parent_counts_valid_pairs_by_reward():
    rows = [
        dict(_sample(0, "scratch", True, -0.05, LOSS, score=0.05), sample_id="a"),
        dict(_sample(0, "scratch", True, 0.7, AUC, score=0.7), sample_id="b"),
        dict(_sample(0, "scratch", False, -10.0), sample_id="c"),
        dict(
            _sample(1, "improve", True, -0.04, LOSS, score=0.04), parent_id="a", sample_id="d"
        ),  # better
        dict(_sample(1, "improve", True, 0.6, AUC, score=0.6), parent_id="b"),  # worse
        dict(_sample(1, "improve", True, 0.7, AUC, score=0.7), parent_id="b"),  # a tie is not a win
        dict(_sample(1, "improve", True, 0.9), parent_id="c"),  # parent failed: not a pair
        dict(_sample(2, "improve", False, -10.0), parent_id="d"),  # child failed: not a pair
        dict(_sample(2, "improve", True, 0.9), parent_id="gone"),  # parent not in the run
    ]
    # reward changes: -0.04 - -0.05, 0.6 - 0.7, 0.7 - 0.7 -> mean (0.01 - 0.1 + 0) / 3 = -0.03
    assert bench.improve_vs_parent(rows) == {
        "improve_pairs_valid": 3,
        "improve_beats_parent": pytest.approx(1 / 3),
        "improve_reward_delta_mean": pytest.approx(-0.03),
    }
    assert bench.improve_vs_parent(rows[:3]) == {
        "improve_pairs_valid": 0,
        "improve_beats_parent": None,
        "improve_reward_delta_mean": None,
    }
    # only the children given are counted (the last quarter), their parents found among all samples
    assert bench.improve_vs_parent(rows, rows[3:4], "_last_quarter") == {
        "improve_pairs_valid_last_quarter": 1,
        "improve_beats_parent_last_quarter": 1.0,
        "improve_reward_delta_mean_last_quarter": pytest.approx(0.01),
    }


def test_a_failed_revision_that_reached_fewer_markers_than_its_parent_broke_it():
    two, one = ["loaded data", "trained model"], ["loaded data"]
    rows = [
        dict(_sample(0, "scratch", True, 0.7), sample_id="p", markers=two, status="ok"),
        dict(
            _sample(1, "improve", False, -9.9), parent_id="p", markers=one, status="program_error"
        ),  # broke it
        dict(
            _sample(1, "improve", False, -9.8), parent_id="p", markers=two + two, status="ok"
        ),  # as far: not broken
        dict(
            _sample(1, "improve", False, -10.0), parent_id="p", status="not_run"
        ),  # never ran: not counted
        dict(
            _sample(1, "improve", True, 0.8), parent_id="p", markers=[], status="ok"
        ),  # valid: not counted
        dict(
            _sample(2, "improve", False, -10.0), parent_id="gone", markers=[], status="timeout"
        ),  # parent unknown
    ]
    assert bench.improve_broke_parent(rows) == {"improve_ran_failed": 3, "improve_broke_parent": 1}
    assert bench.improve_broke_parent(rows, rows[2:], "_last_quarter") == {
        "improve_ran_failed_last_quarter": 2,
        "improve_broke_parent_last_quarter": 0,
    }


def test_summarise_run_targets(tmp_path):
    r = bench.summarise_run(_run_dir(tmp_path, SAMPLES))
    assert r["seed"] == 0 and r["updates"] == 8
    assert r["valid_gain_ok"] is True  # 0.75 >= 0.25 + 0.2 and reward up
    assert r["improve_ok"] is True  # 0.5 >= 0.5 * 1.0, and the one valid pair: 0.6 beats 0.5
    assert r["improve_pairs_valid"] == 1 and r["improve_beats_parent"] == 1.0
    # AUC 0.95 > 0.9 is better; log loss 0.3 > 0.2 is worse (lower is better)
    assert r["tasks"][AUC]["trained_beats_initial"] is True
    assert r["tasks"][LOSS]["trained_beats_initial"] is False
    assert r["trained_beats_initial"] is False
    assert (
        r["tasks"][LOSS]["aide_best"] is None and r["trained_beats_aide"] is None
    )  # no AIDE section
    assert r["wall_clock_minutes"] == 10.0


def test_aide_columns_from_report(tmp_path):
    # trained: AUC 0.95, loss 0.3; AIDE: AUC 0.92, loss 0.4 -> trained beats AIDE on both
    r = bench.summarise_run(_run_dir(tmp_path, SAMPLES, seed=0, aide=(0.92, 0.4)))
    assert r["tasks"][AUC]["aide_best"] == 0.92 and r["tasks"][AUC]["aide_mean"] == 0.7
    assert r["tasks"][LOSS]["aide_best"] == 0.4 and r["tasks"][LOSS]["aide_valid"] == 0.4
    assert (
        r["tasks"][AUC]["trained_beats_aide"] is True
        and r["tasks"][LOSS]["trained_beats_aide"] is True
    )
    assert r["trained_beats_aide"] is True
    # AIDE's loss 0.25 beats the trained 0.3 (lower is better)
    worse = bench.summarise_run(_run_dir(tmp_path, SAMPLES, seed=1, aide=(0.92, 0.25)))
    assert (
        worse["tasks"][LOSS]["trained_beats_aide"] is False and worse["trained_beats_aide"] is False
    )
    assert bench.summarise([r])["trained_beats_aide_equal_executions"] is True
    assert bench.summarise([r, worse])["trained_beats_aide_equal_executions"] is False
    assert bench.plot([r, worse], tmp_path / "out").stat().st_size > 0


def test_summary_mean_se_over_seeds(tmp_path):
    runs = [
        bench.summarise_run(_run_dir(tmp_path, SAMPLES, seed=0)),
        bench.summarise_run(
            _run_dir(tmp_path, [dict(s, valid=False, reward=-10.0) for s in SAMPLES], seed=1)
        ),
    ]
    s = bench.summarise(runs)
    # valid last quarter 0.75 and 0.0: mean 0.375, s.e. = |a - b| / 2 = 0.375
    assert s["valid_last_quarter"]["mean"] == pytest.approx(0.375)
    assert s["valid_last_quarter"]["se"] == pytest.approx(0.375)
    assert s["valid_gain_ok_every_seed"] is False
    assert s["trained_beats_aide_equal_executions"] is None
    assert s["wall_clock_minutes_max"] == 10.0
    assert bench.plot(runs, tmp_path / "out").stat().st_size > 0


def test_mean_se_single_value_has_no_se():
    assert bench.mean_se([2.0, None]) == {"mean": 2.0, "se": None, "n": 1}


def test_improve_ok_needs_revisions_that_beat_their_parents(tmp_path):
    # same validity as SAMPLES, but the valid revision (0.6) is now worse than its parent (0.65)
    rows = [dict(s, reward=0.65) if s.get("sample_id") == "p" else s for s in SAMPLES]
    r = bench.summarise_run(_run_dir(tmp_path, rows))
    assert r["improve_valid_last_quarter"] == 0.5 and r["improve_beats_parent"] == 0.0
    assert r["improve_ok"] is False


replay = importlib.import_module("embedded_rl_replay")


def test_replay_pure_parts():
    assert replay.split_samples([0, 1, 2, 3, 4]) == ([0, 2, 4], [1, 3])
    assert replay.parse_variant("w:normalize_advantages=true,loss_agg=seq_mean,lr=1e-4") == (
        "w",
        {"normalize_advantages": True, "loss_agg": "seq_mean", "lr": 1e-4},
    )
    before = {"logp": [-1.0, -2.0, -3.0], "entropy": [1.0, 1.0, 1.0]}
    after = {"logp": [-0.5, -2.5, -3.5], "entropy": [1.2, 1.0, 1.4]}
    d = replay.probe_deltas(before, after, [True, False, False])
    assert d["dlogp_valid"] == 0.5 and d["dlogp_failed"] == -0.5
    assert d["dlogp_valid_minus_failed"] == 1.0 and d["dentropy"] == pytest.approx(0.2)
    assert replay.probe_deltas(before, after, [False] * 3)["dlogp_valid"] is None


def test_selection_records_the_seeds_a_setting_was_chosen_on_and_whether_the_confirmation_is_held_out():
    assert bench.selection([0, 1, 2], [3, 4, 5]) == {
        "chosen_on_seeds": [0, 1, 2],
        "confirmed_on_seeds": [3, 4, 5],
        "overlap": [],
        "held_out": True,
    }
    assert bench.selection([2, 0], [0, 1, None]) == {
        "chosen_on_seeds": [0, 2],
        "confirmed_on_seeds": [0, 1],
        "overlap": [0],
        "held_out": False,
    }
    assert bench.selection(None, [1])["held_out"] is None


def test_closing_scores_by_task_carry_the_public_score_each_best_was_chosen_on(tmp_path):
    d0 = _run_dir(tmp_path, SAMPLES, seed=0)
    report = json.loads((d0 / "report.json").read_text())
    report["trained"]["per_seed"][0]["tasks"][LOSS]["best_public"] = 0.25
    (d0 / "report.json").write_text(json.dumps(report))
    r0 = bench.summarise_run(d0)
    assert (
        r0["tasks"][LOSS]["trained_best_public"] == 0.25
        and r0["tasks"][LOSS]["trained_best"] == 0.3
    )
    assert r0["tasks"][LOSS]["initial_best_public"] is None  # a report from before the split
    d1 = _run_dir(tmp_path, SAMPLES, seed=1)
    report["trained"]["per_seed"][0]["tasks"][LOSS].update(best_score=0.5, best_public=0.35)
    (d1 / "report.json").write_text(json.dumps(report))
    closing = bench.summarise([r0, bench.summarise_run(d1)])["closing_by_task"][LOSS]
    assert closing["trained_best"]["mean"] == pytest.approx(0.4) and closing["trained_best"][
        "se"
    ] == pytest.approx(0.1)
    assert closing["trained_best_public"]["mean"] == pytest.approx(0.3)
    assert closing["initial_best_public"] == {"mean": None, "se": None, "n": 0}


def test_zero_advantage_share_per_kind_is_the_mean_over_learner_updates():
    metrics = [
        {
            "stream": "learner",
            "split/kind/scratch/zero_adv_share": 0.0,
            "split/kind/improve/zero_adv_share": 1.0,
        },
        {
            "stream": "learner",
            "split/kind/scratch/zero_adv_share": 0.5,
        },  # no improve sample in this batch
        {
            "stream": "actors",
            "split/kind/improve/zero_adv_share": 0.0,
        },  # not the learner's: ignored
        {
            "stream": "learner",
            "split/kind/scratch/zero_adv_share": 0.25,
            "split/kind/improve/zero_adv_share": 0.5,
        },
    ]
    assert bench.zero_adv_by_kind(metrics) == {
        "zero_adv_share_scratch": 0.25,
        "zero_adv_share_improve": 0.75,
    }
    assert bench.zero_adv_by_kind([]) == {
        "zero_adv_share_scratch": None,
        "zero_adv_share_improve": None,
    }


def test_improve_samples_are_counted_by_how_they_ended():
    samples = [
        {"kind": "improve", "parse": "ok", "valid": True},
        {"kind": "improve", "parse": "ok", "valid": False},
        {"kind": "improve", "parse": "truncated", "valid": False},
        {"kind": "improve", "parse": "truncated", "valid": False},
        {"kind": "improve", "parse": "unchanged", "valid": False},
        {"kind": "improve", "valid": False},
        {"kind": "scratch", "parse": "ok", "valid": True},  # not an improve sample: not counted
    ]
    assert bench.improve_parse(samples) == {
        "ok": 2,
        "valid": 1,
        "truncated": 2,
        "unchanged": 1,
        "unknown": 1,
    }
    assert bench.improve_parse([{"kind": "scratch", "parse": "ok", "valid": True}]) == {}


def test_each_kinds_share_of_the_closing_winners(tmp_path):
    def with_kinds(seed, kinds):
        d = _run_dir(tmp_path, SAMPLES, seed=seed)
        report = json.loads((d / "report.json").read_text())
        for task, kind in zip((AUC, LOSS), kinds):
            report["trained"]["per_seed"][0]["tasks"][task]["best_kind"] = kind
        (d / "report.json").write_text(json.dumps(report))
        return bench.summarise_run(d)

    runs = [with_kinds(0, ("improve", "scratch")), with_kinds(1, ("scratch", None))]
    assert runs[0]["tasks"][AUC]["trained_best_kind"] == "improve"
    s = bench.summarise(runs)
    # 3 winners over 4 (seed, task) pairs: 1 improve, 2 scratch; one pair had no valid sample
    assert s["trained_best_kind_share"] == {
        "scratch": pytest.approx(2 / 3),
        "improve": pytest.approx(1 / 3),
        "n": 3,
        "none": 1,
    }
    # the initial policy's reports carry no best_kind here (a report from before it existed)
    assert s["initial_best_kind_share"] == {"scratch": None, "improve": None, "n": 0, "none": 4}


def test_a_malformed_line_is_an_error_naming_the_file_and_line(tmp_path):
    # no figure may be computed over silently dropped samples
    path = tmp_path / "samples.jsonl"
    path.write_text('{"a": 1}\n\n{"a": 2\n')
    with pytest.raises(ValueError, match=r"samples.jsonl:3: not JSON"):
        bench.read_jsonl(path)
    path.write_text('{"a": 1}\n\n{"a": 2}\n')
    assert bench.read_jsonl(path) == [{"a": 1}, {"a": 2}]
    assert bench.read_jsonl(tmp_path / "missing.jsonl") == []
