"""Best-of-K evaluation of a fixed policy with the paper's test-time protocol.

The paper (section 3.3) generates solutions from scratch and runs the agent again to improve
them, then takes the best of both. :func:`evaluate` runs the same actor loop as training
(same prompts, parser, instrumentation, sandbox, grader and reward) with no learner: the
policy never changes, ``k`` samples are drawn per task, a fraction ``improve_prob`` of them
improving earlier ones once any exist, and each task's samples are summarised by
:func:`summarise` (best and mean score, valid fraction). Nothing is sent over the network: a
local collector stands in for the learner.
"""

from __future__ import annotations

import dataclasses
import math
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mlerl.actors._actor import Actor
from mlerl.actors._config import ActorsConfig
from mlerl.actors._state import ActorState
from mlerl.protocol import InferenceEngine, Sample


class _Collector:
    """Receives every sample at once and acks it (the actor's view of a learner)."""

    def __init__(self) -> None:
        self.samples: list[Sample] = []
        self.acked_seq = -1

    async def send(self, sample: Sample) -> None:
        if sample.seq > self.acked_seq:
            self.samples.append(sample)
            self.acked_seq = sample.seq


def summarise(samples: list[Sample], lower_is_better: bool) -> dict[str, Any]:
    """Best-of-K and mean over the K samples of one task (invalid samples have no score)."""
    scores = [s.score for s in samples if s.valid_submission and s.score is not None and not math.isnan(s.score)]
    best = (min(scores) if lower_is_better else max(scores)) if scores else None
    return {
        "k": len(samples),
        "best_score": best,
        "mean_score": sum(scores) / len(scores) if scores else None,
        "valid_frac": len(scores) / len(samples) if samples else 0.0,
        "mean_reward": sum(s.reward for s in samples) / len(samples) if samples else None,
        "mean_duration_s": sum(s.duration_s for s in samples) / len(samples) if samples else None,
        "improve_frac": sum(s.prompt_kind.value == "improve" for s in samples) / len(samples) if samples else 0.0,
        "lower_is_better": lower_is_better,
    }


async def evaluate(
    config: ActorsConfig,
    tasks: Mapping[str, Any],
    *,
    k: int,
    engine: InferenceEngine,
    sandbox: Any,
    pipeline: Any,
    state_dir: Path | None = None,
) -> dict[str, dict[str, Any]]:
    """Draw ``k`` samples per task from the fixed ``engine``; return each task's summary."""
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="mlerl-eval-") as tmp:
        root = Path(state_dir) if state_dir else Path(tmp)
        for task_id, task in tasks.items():
            collector = _Collector()
            task_config = dataclasses.replace(config, task_ids=[task_id], max_samples=k)
            actor = Actor(
                f"eval-{task_id}", task_config, engine=engine, sandbox=sandbox, sender=collector,
                tasks={task_id: task}, pipeline=pipeline, state=ActorState(root / task_id),
            )  # fmt: skip
            await actor.run()
            results[task_id] = summarise(collector.samples[:k], bool(task.lower_is_better))
    return results
