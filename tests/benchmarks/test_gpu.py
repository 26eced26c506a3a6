"""benchmarks/throughput/gpu.py: its CPU dry run goes through the GPU run's own functions (random model build,
engine generation, learner update with tokens/s and MFU, learner -> engine weight sync) and writes
sane figures elsewhere; without a GPU the real run refuses and writes nothing."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "throughput" / "gpu.py"
RESULTS = REPO / "benchmarks" / "results"
CPU_ENV = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "TOKENIZERS_PARALLELISM": "false"}

# The tiny architecture (mlerl.embedded.ARCHITECTURES["tiny"]): hidden 128, 2 layers, 2 heads of
# 64, 1 KV head, MLP 256, vocab 4096. Per layer the weight matmuls hold
# 128*128 (q) + 2*128*64 (k, v) + 128*128 (o) + 3*128*256 (MLP) = 147,456 parameters.
TINY = SimpleNamespace(
    hidden_size=128,
    num_attention_heads=2,
    num_key_value_heads=1,
    intermediate_size=256,
    num_hidden_layers=2,
    vocab_size=4096,
    head_dim=64,
)
# One forward over a 32 + 32 token sequence: 2*(2*147,456)*64 + 4*2*128*64^2 + 2*4096*128*32
TINY_FORWARD = 37_748_736 + 4_194_304 + 33_554_432


def _module():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        spec = importlib.util.spec_from_file_location("gpu_benchmark", SCRIPT)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return module


def _listing() -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in RESULTS.iterdir()}


def test_flops_count_each_pass_of_the_configured_update():
    gpu = _module()
    assert gpu.forward_flops(TINY, 32, 32) == TINY_FORWARD
    assert gpu.forward_flops(TINY, 32, 32, lm_head=False) == TINY_FORWARD - 33_554_432
    policy_only = SimpleNamespace(
        ppo_epochs=1, ratio_base="behaviour", kl_coef=0.0, advantage="grpo", critic="none"
    )
    assert gpu.update_flops(policy_only, TINY, [(32, 32)] * 2) == 2 * 3 * TINY_FORWARD
    # the paper's losses: + the reference's forward, + the critic's forward and forward/backward
    paper = SimpleNamespace(
        ppo_epochs=2, ratio_base="proximal", kl_coef=0.001, advantage="gae", critic="copy"
    )
    body = TINY_FORWARD - 33_554_432
    assert (
        gpu.update_flops(paper, TINY, [(32, 32)])
        == (3 * 2 + 1 + 1) * TINY_FORWARD + (1 + 3 * 2) * body
    )


def test_peak_is_the_datasheet_figure_matched_on_the_device_name():
    gpu = _module()
    assert gpu.peak_tflops("NVIDIA H100 80GB HBM3", None) == (989.5, "datasheet (H100)")
    assert gpu.peak_tflops("NVIDIA H100 PCIe", None)[0] == 756.5
    assert gpu.peak_tflops("NVIDIA H200", None)[0] == 989.5
    assert gpu.peak_tflops("NVIDIA H100 PCIe", 500.0) == (500.0, "--peak-tflops")
    assert gpu.peak_tflops("cpu", None)[0] is None


def test_dry_run_measures_through_the_gpu_code_path(tmp_path):
    before = _listing()
    out = tmp_path / "gpu_dryrun.json"
    done = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--dry-run",
            "--out",
            str(out),
            "--peak-tflops",
            "0.5",
            "--model-cache",
            str(tmp_path / "models"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env=CPU_ENV,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert _listing() == before  # benchmarks/results/ untouched
    r = json.loads(out.read_text())
    assert (
        r["benchmark"] == "gpu" and r["dry_run"] is True and r["device"] == "cpu" and r["gpus"] == 0
    )
    assert r["peak_bf16_tflops"] == 0.5 and r["gpu_tests"] is None and r["git_commit"]
    row = r["models"]["tiny"]
    assert json.loads((Path(row["model_dir"]) / "random_model.json").read_text())["arch"] == "tiny"
    assert row["params"] == 820_352 and row["engine"] == "hf"
    gen = row["generation"]
    assert gen["temperature"] == 0.7 and gen["prompts"] == 4 and gen["new_tokens"] == 16
    assert 0 < gen["tokens_per_call"] <= 4 * 16 and gen["tokens_per_s_median"] > 0
    learner = row["learner"]
    assert len(learner["update_s"]) == 2 and learner["tokens_per_update"] == 8 * 64
    assert learner["tokens_per_s"] == pytest.approx(512 / learner["update_s_median"])
    assert (
        learner["flops_per_update"] == 8 * 3 * TINY_FORWARD
    )  # the policy alone: grpo, no critic, no KL
    assert learner["achieved_tflops"] == pytest.approx(
        learner["flops_per_update"] / learner["update_s_median"] / 1e12
    )
    assert learner["mfu"] == pytest.approx(learner["achieved_tflops"] / 0.5)
    sync = row["weight_sync"]
    assert sync["bytes"] > 4 * 820_352 - 4 * 4096 * 128  # fp32, the tied head left out
    assert len(sync["total_s"]) == 2 and all(t > 0 for t in sync["total_s"])
    assert sync["total_s"] == pytest.approx(
        [a + b for a, b in zip(sync["publish_s"], sync["engine_load_s"])]
    )
    assert sync["engine_version_after"] == 3 + 1  # 1 warm-up + 2 timed updates, then 2 publishes
    assert row["memory"]["process_max_rss_gib"] > 0.1


@pytest.mark.parametrize(
    "argv",
    [[], ["--dry-run"], ["--dry-run", "--out", str(RESULTS / "gpu.json")]],
    ids=["no-gpu", "dry-run-without-out", "dry-run-onto-measured-results"],
)
def test_refuses_and_writes_nothing(argv):
    before = _listing()
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env=CPU_ENV,
    )
    assert done.returncode == 2
    assert "Nothing was run or written" in done.stderr
    if not argv:
        assert "no CUDA GPU" in done.stderr and "--dry-run" in done.stderr
    assert _listing() == before
