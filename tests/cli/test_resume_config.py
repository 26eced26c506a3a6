"""`mlerl train resume=DIR` with a broken config.yaml: one clear line, no traceback."""

import subprocess
import sys

import pytest


@pytest.mark.parametrize("content", ["learner: {a: [1, 2\n  b: :\n", "- just\n- a list\n"])
def test_unparsable_run_config_is_a_clear_error(tmp_path, content):
    (tmp_path / "config.yaml").write_text(content)
    done = subprocess.run([sys.executable, "-m", "mlerl.cli", "train", f"resume={tmp_path}"],
                          capture_output=True, text=True, timeout=300)
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
