"""`mlerl train +experiment=paper_scale` with the random Qwen2.5-0.5B: 3 updates end to end on GPU
(vLLM actor, FSDP2 learner over the visible GPUs, paper losses), on the tiny stand-in task.

The GPU run is marked ``gpu`` (skipped without CUDA, tests/conftest.py). Its command line is
composed and validated on every machine by ``test_paper_scale_command_composes`` (``prepare_only``:
nothing starts), so an override it relies on cannot disappear unnoticed between lent GPUs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mlerl.learner._buffer import read_journal

TASK = "standin-cancer-auc-tiny"
ENV = {**os.environ, "WANDB_SILENT": "true", "TOKENIZERS_PARALLELISM": "false"}


def paper_scale_argv(
    model_dir: Path, run_dir: Path, data_dir: Path, learner_procs: int, backend: str, *extra: str
) -> list[str]:
    """The paper's configuration, shrunk to 3 updates of 8 samples on one tiny task and one actor;
    LM instrumentation off (its frozen model would run on CPU), no closing evaluation."""
    return [
        sys.executable,
        "-m",
        "mlerl.cli",
        "train",
        "+experiment=paper_scale",
        f"model.path={model_dir}",
        f"hydra.run.dir={run_dir}",
        "tasks=standin_tiny",
        f"tasks.ids=[{TASK}]",
        f"tasks.data_dir={data_dir}",
        f"sandbox={backend}",
        "sandbox.max_concurrency=8",
        "actors.admission.max_in_flight=8",
        "instrument=ast",
        f"learner_procs={learner_procs}",
        "num_actors=1",
        "learner.batch_size=8",
        "learner.micro_batch_size=4",
        "learner.max_updates=3",
        "learner.checkpoint_every=3",
        "eval_samples=0",
        "logging=offline",
        "logging.console=false",
        *extra,
    ]


def _learner_procs() -> int:
    import torch

    n = torch.cuda.device_count()
    return max(p for p in (1, 2, 4, 8) if p <= max(n, 1))  # divides the batch of 8


def test_paper_scale_command_composes(tmp_path):
    """CPU: the GPU test's overrides compose, validate and resolve to the paper's engine and learner."""
    from mlerl.embedded import build_random_model

    model_dir = build_random_model("tiny", tmp_path / "model", log=lambda _: None)
    run_dir = tmp_path / "run"
    argv = paper_scale_argv(
        model_dir,
        run_dir,
        tmp_path / "data",
        2,
        "local",
        "prepare_only=true",
        "sandbox.allow_unisolated=true",
    )
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=ENV)
    assert done.returncode == 0, done.stderr[-3000:]
    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert cfg["model"]["path"] == str(model_dir) and cfg["learner_procs"] == 2
    assert cfg["actors"]["engine"] == "vllm" and cfg["actors"]["dtype"] == "bfloat16"
    assert cfg["actors"]["max_new_tokens"] == 1024 and cfg["actors"]["temperature"] == 0.7
    assert (
        cfg["learner"]["advantage"] == "gae"
        and cfg["learner"]["kl_coef"] == 0.001
        and cfg["learner"]["bf16"]
    )
    assert cfg["learner"]["max_updates"] == 3 and cfg["tasks"]["ids"] == [TASK]
    assert not (run_dir / "metrics.jsonl").exists()  # prepare_only: nothing ran


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_paper_scale_runs_three_updates_on_gpu(tmp_path, random_qwen25_05b, backend):
    run_dir = tmp_path / "run"
    argv = paper_scale_argv(
        random_qwen25_05b, run_dir, tmp_path / "data", _learner_procs(), backend
    )
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1700, env=ENV)
    logs = (
        {p.name: p.read_text()[-2000:] for p in (run_dir / "logs").glob("*.log")}
        if (run_dir / "logs").exists()
        else {}
    )
    assert done.returncode == 0, (done.stderr[-3000:], logs)
    metrics = [
        json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()
    ]
    learner = [m for m in metrics if m.get("stream") == "learner"]
    assert [m["step"] for m in learner][-1] == 3, learner
    samples = read_journal(run_dir / "buffer" / "journal.bin")[0]
    assert len(samples) >= 24
    for s in samples:
        assert len(s.response_ids) == len(s.behaviour_logprobs) > 0
        assert all(lp <= 0.0 for lp in s.behaviour_logprobs)
        assert max(s.response_ids) < 151936
    # a sample drawn after an update: the learner's weights reached the running vLLM engine
    assert max(s.policy_version for s in samples) >= 1
    assert (run_dir / "policy" / "config.json").is_file()
