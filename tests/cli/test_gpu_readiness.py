"""scripts/gpu_readiness.py refuses clearly, and writes nothing, without a GPU."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu_readiness.py"


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present: the script would run")
def test_refuses_without_a_gpu(tmp_path):
    results = SCRIPT.parents[1] / "benchmarks" / "results"
    before = {p.name for p in results.iterdir()}
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120,
                          env={"CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 2
    assert "no CUDA GPU" in done.stderr and "Nothing was run or written" in done.stderr
    assert {p.name for p in results.iterdir()} == before
