"""The benchmarks that used to ship inside the packages start from benchmarks/ and
answer ``--help`` (their figures are measured by running them, not here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "script",
    [
        "throughput/protocol_throughput.py",
        "experiments/duration_bias.py",
        "throughput/engines.py",
        "throughput/sandbox_overhead.py",
        "throughput/grading.py",
        "experiments/embedded_improve.py",
    ],
)
def test_benchmark_script_answers_help(script):
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / script), "--help"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage" in done.stdout.lower() and "--out" in done.stdout
