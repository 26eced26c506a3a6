"""Every command `mlerl --help` lists answers its own `--help` (no dead entries)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from mlerl.cli import _SUBCOMMANDS, main


def test_usage_lists_exactly_the_dispatched_commands(capsys):
    assert main(["--help"]) == 0
    listed = re.findall(r"^  (\w+) ", capsys.readouterr().out, flags=re.M)
    assert listed == list(_SUBCOMMANDS) and listed  # same commands, same order
    assert main(["no-such-command"]) == 2


@pytest.mark.parametrize("command", list(_SUBCOMMANDS))
def test_each_command_answers_help(command):
    done = subprocess.run(
        [sys.executable, "-m", "mlerl.cli", command, "--help"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage" in (done.stdout + done.stderr).lower() or "== Config ==" in done.stdout
    assert "Traceback" not in done.stderr


def test_the_cli_uses_only_the_packages_public_apis():
    """`mlerl.cli` imports other packages through their ``__init__`` (their table of
    contents), never their private modules."""
    from pathlib import Path

    import mlerl.cli

    private = re.compile(r"(?:from|import)\s+mlerl\.(?!cli\b)(\w+)\._\w+")
    offenders = [
        f"{path.name}: {m.group(0)}"
        for path in Path(mlerl.cli.__file__).parent.glob("*.py")
        for m in private.finditer(path.read_text())
    ]
    assert offenders == []
