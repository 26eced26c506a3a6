"""A 2-rank FSDP2 run (torchrun, CPU, gloo) matches the single-process run."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

WORKER = Path(__file__).with_name("fsdp_worker.py")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_two_rank_fsdp_matches_single_process(tmp_path, tiny_model):
    one, two = tmp_path / "one", tmp_path / "two"
    spec = importlib.util.spec_from_file_location("fsdp_worker", WORKER)
    worker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(worker)
    worker.main(one)  # the single-process reference, in this process
    torchrun = Path(sys.executable).with_name("torchrun")
    subprocess.run(
        [str(torchrun), "--standalone", "--nproc_per_node=2", str(WORKER), str(two)],
        check=True,
        timeout=240,
    )
    w1 = load_file((one / "uri").read_text())
    w2 = load_file((two / "uri").read_text())
    assert w1.keys() == w2.keys() and "lm_head.weight" not in w1  # tied head left out
    initial = tiny_model().state_dict()
    moved = max((w1[k] - initial[k]).abs().max().item() for k in w1)
    assert moved > 1e-3  # the two updates changed the weights, so the comparison means something
    for k in w1:
        assert torch.allclose(w1[k], w2[k], atol=2e-5, rtol=1e-4), k
    assert float((one / "grad_norm").read_text()) == pytest.approx(
        float((two / "grad_norm").read_text()), rel=1e-4
    )
    assert (two / "ckpt").exists()
    # the split metrics are the whole batch's on 2 ranks too (each rank holds half of it)
    split1, split2 = (json.loads((d / "split.json").read_text()) for d in (one, two))
    assert split2["split/all/n"] == 8.0 and split1.keys() == split2.keys()
    assert split2 == pytest.approx(split1, rel=1e-4, abs=1e-6)
