"""`mlerl train resume=DIR`: a broken config.yaml, or an override that would change the run, is one
clear line, no traceback."""

import subprocess
import sys

import pytest


@pytest.mark.parametrize("content", ["learner: {a: [1, 2\n  b: :\n", "- just\n- a list\n"])
def test_unparsable_run_config_is_a_clear_error(tmp_path, content):
    (tmp_path / "config.yaml").write_text(content)
    done = subprocess.run(
        [sys.executable, "-m", "mlerl.cli", "train", f"resume={tmp_path}"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert f"config error: {tmp_path / 'config.yaml'}: " in done.stderr


def test_run_config_generates_private_keys_before_any_process_starts(tmp_path):
    import os
    import stat

    from omegaconf import OmegaConf

    from mlerl.cli._config import TrainConfig
    from mlerl.cli._train import _write_run_config
    from mlerl.protocol import CurveKeys

    path = _write_run_config(TrainConfig(), tmp_path, tmp_path / "data", "model")
    keys = CurveKeys(tmp_path / "keys")
    assert keys.server_public() != keys.client_public()
    assert stat.S_IMODE(os.stat(tmp_path / "keys" / "learner.key_secret").st_mode) == 0o600
    saved = OmegaConf.load(path)
    assert saved.transport.curve is True  # one key, read by the learner and the actors

    off = TrainConfig()
    off.transport.curve = False  # no keys needed
    other = tmp_path / "off"
    other.mkdir()
    saved = OmegaConf.load(_write_run_config(off, other, tmp_path / "data", "model"))
    assert saved.transport.curve is False and not (other / "keys").exists()


def _composed(*overrides: str):
    from pathlib import Path

    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    import mlerl.cli
    from mlerl.cli._config import VERSION_BASE, register, validate

    register()
    GlobalHydra.instance().clear()
    with initialize_config_dir(str(Path(mlerl.cli.__file__).parent / "conf"), **VERSION_BASE):
        return validate(compose("train", overrides=list(overrides)))


def test_resume_refuses_overrides_that_would_change_the_run_and_accepts_repeated_ones():
    from mlerl.cli._config import resume_conflicts

    stored = _composed("learner.lr=1e-5", "num_actors=2")
    stored.model.path = "/models/decided-at-start"  # what start-up wrote into the run config
    stored.transport.samples_address = "tcp://127.0.0.1:5555"

    # a Slurm resubmission repeats the run's own overrides: nothing to refuse
    same = ["resume=/r", "hydra.run.dir=/x", "learner.lr=1e-5", "num_actors=2"]
    assert resume_conflicts(same, _composed(*same[2:]), stored) == []
    # an empty start-up-decided key means "as decided": not a change
    assert (
        resume_conflicts(["model.path=", "learner.lr=1e-5"], _composed("learner.lr=1e-5"), stored)
        == []
    )

    changed = ["learner.lr=3e-4", "actors.temperature=0.5", "num_actors=2"]
    got = resume_conflicts(changed, _composed(*changed), stored)
    assert got == [
        "learner.lr: given 0.0003, the run has 1e-05",
        "actors.temperature: given 0.5, the run has 0.9",
    ], got
    # a group choice compares its whole section
    got = resume_conflicts(["learner=paper"], _composed("learner=paper"), stored)
    assert got and all(line.startswith("learner.") for line in got)


def test_resume_with_a_changing_override_is_a_clear_error(tmp_path):
    from omegaconf import OmegaConf

    from mlerl.cli._config import TrainConfig

    OmegaConf.save(OmegaConf.structured(TrainConfig()), tmp_path / "config.yaml")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mlerl.cli",
            "train",
            f"resume={tmp_path}",
            "learner.max_updates=99",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "learner.max_updates: given 99, the run has" in done.stderr, done.stderr[-2000:]
