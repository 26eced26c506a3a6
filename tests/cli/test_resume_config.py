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
