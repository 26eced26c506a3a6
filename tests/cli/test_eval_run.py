"""`mlerl eval --run DIR` takes the run's tasks from its run contract (the evaluation is stubbed)."""

from __future__ import annotations

import pytest

from mlerl.cli import _eval
from mlerl.cli._config import validate
from mlerl.cli._train import _write_run_config

from .test_config import _compose


@pytest.fixture
def seen(tmp_path, monkeypatch):
    calls: dict = {}

    def fake(model_path, tasks, **kwargs):
        calls.update(
            tasks=tasks, **{k: kwargs[k] for k in ("data_dir", "tasks_dir", "public_fraction")}
        )
        calls["seeds"] = kwargs["seeds"]
        return {}

    monkeypatch.setattr(_eval, "evaluate_over_seeds", fake)
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    return calls


def test_the_runs_tasks_are_evaluated(tmp_path, seen):
    train = validate(
        _compose(
            [
                "transport.curve=false",
                "tasks.ids=[a,b]",
                "tasks.tasks_dir=/specs",
                "tasks.public_fraction=0.5",
            ]
        )
    )
    _write_run_config(train, tmp_path, tmp_path / "data", str(tmp_path / "model"))
    assert _eval.main(["--model", str(tmp_path / "model"), "--run", str(tmp_path)]) == 0
    assert seen == {
        "tasks": ["a", "b"],
        "data_dir": str(tmp_path / "data"),
        "tasks_dir": "/specs",
        "public_fraction": 0.5,
        "seeds": [0, 1, 2],
    }
    _eval.main(
        [
            "--model",
            str(tmp_path / "model"),
            "--run",
            str(tmp_path),
            "--tasks",
            "c",
            "--data-dir",
            "/d",
            "--public-fraction",
            "1",
            "--seeds",
            "2",
            "--first-seed",
            "4",
        ]
    )
    # the command line wins
    assert seen == {
        "tasks": ["c"],
        "data_dir": "/d",
        "tasks_dir": "/specs",
        "public_fraction": 1.0,
        "seeds": [4, 5],
    }


def test_without_a_run_the_train_defaults_apply(tmp_path, seen):
    assert _eval.main(["--model", str(tmp_path / "model")]) == 0
    assert seen == {
        "tasks": ["standin-cancer-auc-tiny"],
        "data_dir": "",
        "tasks_dir": "",
        "public_fraction": None,
        "seeds": [0, 1, 2],
    }


def test_a_negative_first_seed_is_refused(tmp_path, seen, capsys):
    with pytest.raises(SystemExit) as info:
        _eval.main(["--model", str(tmp_path / "model"), "--first-seed", "-1"])
    assert info.value.code == 2 and "--first-seed" in capsys.readouterr().err and seen == {}


def test_a_bad_run_config_names_the_key(tmp_path, seen, capsys):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.yaml").write_text("model: {path: /m}\ntasks: {ids: []}\n")
    with pytest.raises(SystemExit) as info:
        _eval.main(["--model", str(tmp_path / "model"), "--run", str(tmp_path / "run")])
    assert info.value.code == 2 and "tasks.ids" in capsys.readouterr().err


def test_scratch_only_keeps_the_runs_actor_settings_but_never_improves(
    tmp_path, monkeypatch, capsys
):
    bases = []
    monkeypatch.setattr(_eval, "evaluate_over_seeds", lambda *a, **kw: bases.append(kw["base"]))
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    train = validate(_compose(["transport.curve=false", "actors.temperature=0.7"]))
    _write_run_config(train, tmp_path, tmp_path / "data", str(tmp_path / "model"))
    argv = ["--model", str(tmp_path / "model"), "--run", str(tmp_path)]
    assert _eval.main(argv) == 0 and _eval.main([*argv, "--scratch-only"]) == 0
    mixed, scratch = bases
    assert mixed.improvement.improve_prob == 0.5 and scratch.improvement.improve_prob == 0.0
    assert scratch.temperature == mixed.temperature == 0.7
    assert scratch.prompts == mixed.prompts
    with pytest.raises(SystemExit) as info:
        _eval.main([*argv, "--scratch-only", "--aide"])
    assert info.value.code == 2 and "--scratch-only" in capsys.readouterr().err
