"""The learner on CUDA: one GPU matches the CPU update, and FSDP2 over every visible GPU (NCCL)
matches one rank. Both run fsdp_worker.py's two PPO updates on the tiny Qwen2 in fp32 and compare
the published weights. Skipped without CUDA (tests/conftest.py)."""

import importlib.util
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

WORKER = Path(__file__).with_name("fsdp_worker.py")

pytestmark = pytest.mark.gpu


def _worker():
    spec = importlib.util.spec_from_file_location("fsdp_worker", WORKER)
    worker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(worker)
    return worker


def _compare(a: Path, b: Path, tiny_model, atol: float) -> None:
    wa, wb = load_file((a / "uri").read_text()), load_file((b / "uri").read_text())
    assert wa.keys() == wb.keys() and "lm_head.weight" not in wa
    initial = tiny_model().state_dict()
    assert (
        max((wa[k] - initial[k]).abs().max().item() for k in wa) > 1e-3
    )  # the updates moved the weights
    for k in wa:
        assert torch.allclose(wa[k], wb[k], atol=atol, rtol=1e-3), (
            k,
            (wa[k] - wb[k]).abs().max().item(),
        )
    assert float((a / "grad_norm").read_text()) == pytest.approx(
        float((b / "grad_norm").read_text()), rel=1e-3
    )


@pytest.mark.timeout(300)
def test_cuda_update_matches_cpu_update(tmp_path, tiny_model):
    worker = _worker()
    worker.main(tmp_path / "cpu", "cpu")
    worker.main(tmp_path / "cuda", "cuda")
    # fp32 on both (TF32 is off for matmuls by default); AdamW's first steps are ~lr * sign(grad),
    # so a gradient element near 0 may round to the other sign: the tolerance allows lr / 10
    assert not torch.backends.cuda.matmul.allow_tf32
    _compare(tmp_path / "cpu", tmp_path / "cuda", tiny_model, atol=1e-4)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_fsdp_over_all_gpus_matches_one_rank(tmp_path, tiny_model):
    gpus = torch.cuda.device_count()
    samples = 8 * gpus // math.gcd(8, gpus)  # a multiple of 8 that splits over the ranks
    _worker().main(tmp_path / "one", "cuda", samples)  # the single-process reference, on GPU 0
    torchrun = Path(sys.executable).with_name("torchrun")
    subprocess.run(
        [
            str(torchrun),
            "--standalone",
            f"--nproc_per_node={gpus}",
            str(WORKER),
            str(tmp_path / "all"),
            "cuda",
            str(samples),
        ],
        check=True,
        timeout=480,
    )
    _compare(tmp_path / "one", tmp_path / "all", tiny_model, atol=1e-4)
    assert (tmp_path / "all" / "ckpt").exists()
