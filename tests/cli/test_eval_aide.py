"""`mlerl eval --aide` selects the AIDE baseline (the evaluation itself is stubbed here)."""

from __future__ import annotations

import json

import pytest

from mlerl.cli import _eval


def test_aide_flag_selects_the_baseline(tmp_path, monkeypatch, capsys):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    seen = {}

    def fake(model_path, tasks, *, method="best_of_k", **kwargs):
        seen.update(method=method, tasks=tasks, k=kwargs["k"], seeds=kwargs["seeds"])
        seen["attempts"] = kwargs["aide_parse_attempts"]
        return {"method": method}

    monkeypatch.setattr(_eval, "evaluate_over_seeds", fake)
    assert (
        _eval.main(["--model", str(model), "--tasks", "a,b", "--k", "4", "--seeds", "2", "--aide"])
        == 0
    )
    assert seen == {"method": "aide", "tasks": ["a", "b"], "k": 4, "seeds": [0, 1], "attempts": 3}
    assert json.loads(capsys.readouterr().out) == {"method": "aide"}
    _eval.main(["--model", str(model), "--tasks", "a", "--k", "1", "--seeds", "1"])
    assert seen["method"] == "best_of_k"
    _eval.main(["--model", str(model), "--tasks", "a", "--aide", "--aide-parse-attempts", "1"])
    assert seen["method"] == "aide" and seen["attempts"] == 1
    with pytest.raises(SystemExit):
        _eval.main(["--model", str(model), "--tasks", "a", "--aide", "--aide-parse-attempts", "0"])
    assert "--aide-parse-attempts must be >= 1" in capsys.readouterr().err


def test_unknown_method_is_refused():
    with pytest.raises(ValueError, match="method"):
        _eval.evaluate_over_seeds("m", ["a"], k=1, seeds=[0], method="mcts")
