"""Fixtures for end-to-end runs of `mlerl train`.

The policy is a tiny Qwen2 bootstrapped by `mlerl.embedded` on ONE correct solution program,
trained until it reproduces it: sampled at the actors' temperature it then writes runnable
programs most of the time, so end-to-end runs exercise the sandbox, the grader and real
rewards, not only unparseable output. Built once per test session (cached by config key).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TASK = "standin-cancer-auc-tiny"

# Bootstrap overrides shared by every run, so the cache key is the same and only the first
# run builds the model.
BOOTSTRAP = [
    f"model.bootstrap.task_ids=[{TASK}]",
    "model.bootstrap.drafts_per_task=1",
    "model.bootstrap.improves_per_task=0",
    "model.bootstrap.instruments_per_task=0",
    "model.bootstrap.mistake_rate=0.0",
    "model.bootstrap.vocab_size=2048",
    "model.bootstrap.hidden_size=64",
    "model.bootstrap.num_layers=2",
    "model.bootstrap.num_heads=4",
    "model.bootstrap.num_kv_heads=2",
    "model.bootstrap.intermediate_size=128",
    "model.bootstrap.max_len=3072",
    "model.bootstrap.batch_tokens=3072",
    "model.bootstrap.sft_steps=300",
    "model.bootstrap.sft_seconds=600",
    "model.bootstrap.lr=3e-3",
    "model.bootstrap.bf16=false",
]


@pytest.fixture(scope="session")
def e2e_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the tiny policy and the task data are built: per session, or ``MLERL_E2E_ROOT``
    to keep them across sessions (repeated runs of the slow tests, e.g. a flake count)."""
    keep = os.environ.get("MLERL_E2E_ROOT")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        return Path(keep)
    return tmp_path_factory.mktemp("e2e")


def train_args(root: Path, run_dir: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "mlerl.cli", "train",
        f"hydra.run.dir={run_dir}",
        f"model.embedded_cache={root / 'cache'}",
        f"tasks.data_dir={root / 'data'}",
        f"tasks.ids=[{TASK}]",
        *BOOTSTRAP,
        "actors.max_new_tokens=640",
        "actors.temperature=0.3",  # near-greedy: the memorised program, reliably
        "learner.batch_size=4",
        "learner.micro_batch_size=4",
        "logging.console=false",
        *extra,
    ]  # fmt: skip


def run_train(
    root: Path, run_dir: Path, *extra: str, timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WANDB_SILENT": "true", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run(
        train_args(root, run_dir, *extra), capture_output=True, text=True, timeout=timeout, env=env
    )


def live_processes(marker: str) -> list[str]:
    """Command lines of live processes mentioning ``marker`` (a run directory)."""
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = next(
                (
                    ln
                    for ln in (proc / "status").read_text().splitlines()
                    if ln.startswith("State:")
                ),
                "",
            )
        except OSError:
            continue
        if marker in cmd and "Z (zombie)" not in state:
            out.append(f"{proc.name}: {cmd}")
    return out


@pytest.fixture
def train(e2e_root: Path):
    """``train(run_dir, *overrides, timeout=...)`` runs `mlerl train` to completion."""
    return lambda run_dir, *extra, timeout=900: run_train(
        e2e_root, run_dir, *extra, timeout=timeout
    )


@pytest.fixture
def train_argv(e2e_root: Path):
    """``train_argv(run_dir, *overrides)``: the command line, for runs a test interrupts."""
    return lambda run_dir, *extra: train_args(e2e_root, run_dir, *extra)


@pytest.fixture
def processes():
    return live_processes
