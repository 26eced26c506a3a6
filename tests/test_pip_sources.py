"""scripts/pip_sources.py: uv installs from pip's configured sources (the CPU torch wheel's
find-links directory on the project's machines), a ``PIP_*`` variable winning as in pip."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location(
    "mlerl_pip_sources", ROOT / "scripts" / "pip_sources.py"
)
sources = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sources)

LISTED = """\
:env:.default-timeout='180'
:env:.find-links='/opt/wheels'
global.cert='/etc/ssl/certs/ca-certificates.crt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/elsewhere'
global.index-url='https://mirror.example/simple'
install.index-url='https://install.example/simple'
"""


def test_the_winning_value_of_each_source_becomes_uv_flags():
    config = sources.parse_config_list(LISTED)
    assert config == {
        "find-links": "/opt/wheels",  # PIP_FIND_LINKS over the file's global.find-links
        "index-url": "https://install.example/simple",  # [install] over [global]
        "extra-index-url": "file:///opt/pypi/simple file:///opt/pypi-more/simple",
    }
    assert sources.uv_flags(config) == [
        "--index-strategy",
        "unsafe-best-match",
        "--index-url",
        "https://install.example/simple",
        "--extra-index-url",
        "file:///opt/pypi/simple",
        "--extra-index-url",
        "file:///opt/pypi-more/simple",
        "--find-links",
        "/opt/wheels",
    ]


def test_no_configuration_leaves_uv_on_its_defaults_but_pips_index_strategy():
    assert sources.uv_flags(sources.parse_config_list("")) == [
        "--index-strategy",
        "unsafe-best-match",
    ]


def test_the_script_reads_this_pips_configuration(tmp_path):
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nfind-links = /some/wheels\n")
    env = {"PIP_CONFIG_FILE": str(conf), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "pip_sources.py")],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout.split()
    assert out[:2] == ["--index-strategy", "unsafe-best-match"]
    assert "--find-links" in out and out[out.index("--find-links") + 1] == "/some/wheels"
