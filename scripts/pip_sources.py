"""pip's package sources as uv flags, so that `make install` with uv installs from where pip would.

    python scripts/pip_sources.py   # e.g. --index-strategy unsafe-best-match --find-links DIR

uv does not read pip's configuration (pip.conf, ``PIP_*`` variables); on the project's machines
that is where the CPU torch wheel comes from (a ``find-links`` directory). This reads the
effective ``index-url``, ``extra-index-url``, ``find-links`` and ``constraint`` from ``pip config
list`` (a ``PIP_*`` variable over the ``install`` section over ``global``, as pip ranks them) and
prints them as ``uv pip install`` flags, with ``--index-strategy unsafe-best-match``: like pip,
the best version across every index, not the first index that has the package. Standard library
only: it runs before anything is installed.
"""

from __future__ import annotations

import ast
import subprocess
import sys

FLAGS = {
    "index-url": "--index-url",
    "extra-index-url": "--extra-index-url",
    "find-links": "--find-links",
    "constraint": "--constraint",
}
SECTIONS = (":env:", "install", "global")
"""Highest precedence first."""


def parse_config_list(text: str) -> dict[str, str]:
    """``pip config list`` output (``section.key='value'`` lines) -> {key: the winning value}."""
    found: dict[tuple[str, str], str] = {}
    for line in text.splitlines():
        name, sep, raw = line.partition("=")
        if not sep:
            continue
        section, _, key = name.strip().rpartition(".")
        try:
            value = ast.literal_eval(raw.strip())
        except (ValueError, SyntaxError):
            value = raw.strip()
        found[(section, key)] = str(value)
    chosen = {}
    for key in FLAGS:
        for section in SECTIONS:
            if (section, key) in found:
                chosen[key] = found[(section, key)]
                break
    return chosen


def uv_flags(config: dict[str, str]) -> list[str]:
    """uv flags for pip's sources (several values of one key are whitespace-separated)."""
    flags = ["--index-strategy", "unsafe-best-match"]
    for key, flag in FLAGS.items():
        for value in config.get(key, "").split():
            flags += [flag, value]
    return flags


def main() -> int:
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True
    )
    print(" ".join(uv_flags(parse_config_list(listed.stdout if listed.returncode == 0 else ""))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
