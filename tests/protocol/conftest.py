"""Shared builders for the protocol tests."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mlerl.protocol import ExecStatus, PromptKind, Sample


def make_sample(actor_id: str = "a0", seq: int = 0, **overrides: Any) -> Sample:
    fields: dict[str, Any] = dict(
        sample_id=f"{actor_id}:{seq}",
        actor_id=actor_id,
        seq=seq,
        task_id="spaceship-titanic",
        prompt_kind=PromptKind.SCRATCH,
        prompt_ids=[1, 2, 3],
        response_ids=[4, 5],
        behaviour_logprobs=[-0.5, -1.25],
        policy_version=3,
        t_sampled=100.0,
        t_exec_started=101.0,
        t_exec_finished=130.5,
        t_graded=131.0,
        duration_s=29.5,
        exec_status=ExecStatus.OK,
        markers=["imported packages", "loaded data"],
        score=0.8,
        valid_submission=True,
        reward=0.8,
        reward_parts={"score": 0.8},
        code="print(1)",
        output_tail="1\n",
    )
    fields.update(overrides)
    return Sample(**fields)


@pytest.fixture
def sample_factory():  # noqa: ANN201
    return make_sample


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A short directory path: ipc:// socket paths are limited to ~100 characters."""
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="mlerl-") as tmp:
        yield Path(tmp)
