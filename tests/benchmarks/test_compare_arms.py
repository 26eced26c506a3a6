"""benchmarks/experiments/compare_arms.py: paired differences over common seeds, with hand numbers."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks" / "experiments"))
ca = importlib.import_module("compare_arms")
TASK = "rmsle-task"


def _results(path: Path, overrides: list[str], rows: dict[int, tuple[float, float]]) -> Path:
    """A results file; ``rows`` maps seed -> (valid_last_quarter, trained_best)."""
    runs = [
        {
            "seed": s,
            "valid_last_quarter": v,
            "tasks": {TASK: {"lower_is_better": True, "trained_best": b, "initial_best": 0.05}},
            "scratch_score_by_task": {
                TASK: {"first_quarter": 0.06, "last_quarter": None if b is None else b + 0.01}
            },
        }
        for s, (v, b) in rows.items()
    ]
    path.write_text(json.dumps({"overrides": overrides, "runs": runs}))
    return path


def test_paired_difference_over_common_seeds_by_hand(tmp_path: Path):
    ref = _results(
        tmp_path / "a.json", [], {3: (0.5, 0.040), 4: (0.6, 0.042), 5: (0.7, 0.044), 6: (0.1, 0.1)}
    )
    cand = _results(
        tmp_path / "b.json", ["x=1"], {3: (0.6, 0.041), 4: (0.8, 0.043), 5: (0.7, 0.045)}
    )
    assert ca.main([str(ref), str(cand), "--name", "cmp", "--out", str(tmp_path)]) == 0
    out = json.loads((tmp_path / "cmp.json").read_text())
    c = out["comparison"]
    assert c["seeds"] == [3, 4, 5]  # seed 6 has no partner
    v = c["runs"]["valid_last_quarter"]
    # differences +0.1, +0.2, 0.0: mean 0.1, sample sd 0.1, s.e. 0.1/sqrt(3) = 0.0577; 0.1 < 2 s.e.
    assert v["difference"]["mean"] == pytest.approx(0.1)
    assert v["difference"]["se"] == pytest.approx(0.1 / 3**0.5)
    assert v["beyond_noise"] is False
    assert v["per_seed"]["4"] == [0.6, 0.8]
    best = c["tasks"][TASK]["trained_best"]
    # +0.001 in every seed: s.e. 0, beyond noise, and worse for a lower-is-better score
    assert best["difference"]["mean"] == pytest.approx(0.001)
    assert best["beyond_noise"] is True and best["candidate_better"] is False
    assert c["tasks"][TASK]["initial_best"]["candidate_better"] is None  # identical in both arms
    # the valid scratch programs' last-quarter score (here best + 0.01): also +0.001 a seed
    learned = c["tasks"][TASK]["scratch_score_last_quarter"]
    assert learned["per_seed"]["3"] == [pytest.approx(0.050), pytest.approx(0.051)]
    assert (
        learned["difference"]["mean"] == pytest.approx(0.001)
        and learned["candidate_better"] is False
    )
    assert out["candidate"]["label"] == "x=1" and out["reference"]["label"].startswith("default")
    assert best["missing"] == {"reference": 0, "candidate": 0}


def test_a_seed_without_a_valid_best_is_counted_and_shown(tmp_path: Path, capsys):
    ref = _results(tmp_path / "a.json", [], {3: (0.5, 0.040), 4: (0.6, 0.042)})
    cand = _results(tmp_path / "b.json", ["x=1"], {3: (0.6, None), 4: (0.8, 0.043)})
    ca.main([str(ref), str(cand), "--name", "cmp", "--out", str(tmp_path)])
    best = json.loads((tmp_path / "cmp.json").read_text())["comparison"]["tasks"][TASK][
        "trained_best"
    ]
    assert best["missing"] == {"reference": 0, "candidate": 1}
    assert best["difference"]["n"] == 1 and best["per_seed"]["3"] == [0.040, None]
    assert "(1 seed without)" in capsys.readouterr().out


def test_no_common_seed_and_a_foreign_file_are_refused(tmp_path: Path):
    ref = _results(tmp_path / "a.json", [], {0: (0.5, 0.04)})
    cand = _results(tmp_path / "b.json", [], {1: (0.5, 0.04)})
    with pytest.raises(SystemExit, match="share no seed"):
        ca.main([str(ref), str(cand), "--name", "x", "--out", str(tmp_path)])
    (tmp_path / "c.json").write_text("{}")
    with pytest.raises(SystemExit, match="not an embedded_rl.py results file"):
        ca.main([str(ref), str(tmp_path / "c.json"), "--name", "x", "--out", str(tmp_path)])
