"""A clean console: the code a default `mlerl train` runs prints no library warning or log line.

Three sources printed one on every run: Hydra (a deprecation warning for ``version_base``),
matplotlib (its INFO "generated new fontManager", which Hydra's console log handler passed on,
and its "building the font cache" notice when that takes over 5 s) and transformers (the
``past_key_values`` rename; tested with the engine in tests/actors/test_hf_engine.py). Each
check runs the code in a fresh interpreter with Python's default warning filters, as the
console sees it, and first shows that it would see the line.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

SLOW_FONT_CACHE = """
import threading
class _Now(threading.Timer):  # the font cache takes longer than matplotlib's 5 s notice delay
    def start(self):
        self.function()
threading.Timer = _Now
"""


def _stderr(code: str, tmp_path: Path, *args: str) -> str:
    env = {**os.environ, "MPLCONFIGDIR": str(tmp_path / "mpl")}  # no font cache yet
    env.pop("PYTHONWARNINGS", None)
    done = subprocess.run(
        [sys.executable, *args, "-c", textwrap.dedent(code)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_the_train_command_composes_its_config_silently(tmp_path):
    """``mlerl train --cfg job`` composes the config through ``hydra.main`` and prints it, then
    exits: whatever Hydra warns about on a run, it warns about here."""
    code = "import sys; from mlerl.cli import main; sys.exit(main(['train', '--cfg', 'job']))"
    assert _stderr(code, tmp_path) == ""


def test_the_hydra_check_sees_a_warning(tmp_path):
    """The check above is not vacuous: the argument Hydra no longer wants (1.4), or the
    missing one it still wants (1.3), is reported on stderr."""
    from mlerl.cli._config import VERSION_BASE

    wrong = "" if VERSION_BASE else "version_base='1.3', "
    code = f"""
    import hydra
    @hydra.main({wrong}config_path=None)
    def app(cfg): pass
    """
    assert "version_base" in _stderr(code, tmp_path)


def test_plots_load_matplotlib_silently(tmp_path):
    code = (
        SLOW_FONT_CACHE
        + """
from mlerl.cli._curves import load_pyplot
load_pyplot().figure()
"""
    )
    assert _stderr(code, tmp_path) == ""
    assert any((tmp_path / "mpl").glob("fontlist-*.json"))  # the cache was built and kept


def test_the_matplotlib_check_sees_the_notice(tmp_path):
    code = (
        SLOW_FONT_CACHE
        + """
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot
"""
    )
    assert "Matplotlib is building the font cache" in _stderr(code, tmp_path)


def test_library_info_logs_go_to_the_run_log_not_the_console(tmp_path):
    """Hydra's job logging as `mlerl train` configures it: a library's INFO record (matplotlib
    logs "generated new fontManager" whenever it builds its font cache) lands in the run's log
    file; a warning still reaches the console."""
    code = f"""
    import logging
    from pathlib import Path
    from hydra import compose, initialize_config_dir
    from hydra.core.utils import configure_log
    import mlerl.cli
    from mlerl.cli._config import VERSION_BASE, register

    register()
    with initialize_config_dir(str(Path(mlerl.cli.__file__).parent / "conf"), **VERSION_BASE):
        cfg = compose("train", overrides=["hydra.job_logging.handlers.file.filename={tmp_path}/run.log"],
                      return_hydra_config=True)
    configure_log(cfg.hydra.job_logging, cfg.hydra.verbose)
    logging.getLogger("matplotlib.font_manager").info("generated new fontManager")
    logging.getLogger("somewhere").warning("a real warning")
    """
    env = {**os.environ, "MPLCONFIGDIR": str(tmp_path / "mpl")}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    console = done.stdout + done.stderr
    assert "fontManager" not in console and "a real warning" in console
    assert "generated new fontManager" in (tmp_path / "run.log").read_text()
