"""evaluate_aide with the real local sandbox, instrumentation and grader (a scripted engine)."""

import asyncio

import pytest

from mlerl.actors import ActorsConfig, evaluate_aide
from mlerl.actors._aide import AideConfig
from mlerl.actors._pipeline import RealPipeline
from mlerl.protocol import Completion

from .test_actor_real import CRASH, PROGRAM, TASK, sandbox, task  # noqa: F401 (fixtures)


class ScriptedEngine:
    policy_version = 0

    def __init__(self, responses):
        self.responses, self.prompts = list(responses), []

    async def generate(self, conversations, params):
        self.prompts.append(conversations[0][-1].content)
        return [
            Completion(
                prompt_ids=[1],
                token_ids=[2],
                logprobs=[-0.1],
                text=self.responses.pop(0),
                finish_reason="stop",
            )
        ]

    async def close(self):
        pass


@pytest.mark.slow
async def test_aide_real_sandbox_and_grader(tmp_path, task, sandbox):  # noqa: F811
    # draft a crash, draft a valid program, then debug the crash (debug_prob 1): the debug prompt
    # shows the crash's real, cleaned terminal output (its progress markers, no nonce lines)
    engine = ScriptedEngine([CRASH, PROGRAM, PROGRAM])
    pipeline = RealPipeline()
    try:
        async with asyncio.timeout(240):
            out = await evaluate_aide(
                ActorsConfig(),
                {TASK: task},
                k=3,
                engine=engine,
                sandbox=sandbox,
                pipeline=pipeline,
                seed=0,
                aide=AideConfig(num_drafts=2, debug_prob=1.0),
            )
    finally:
        pipeline.close()
    s = out[TASK]
    assert s["k"] == 3 and s["statuses"] == {"ok": 2, "program_error": 1}
    assert s["actions"] == {"debug": 1, "draft": 2}
    assert 0.5 < s["best_score"] <= 1.0 and s["valid_frac"] == pytest.approx(2 / 3)  # AUC
    assert s["best_vs_executions"][0] is None and s["best_vs_executions"][2] == s["best_score"]
    assert s["mean_duration_s"] > 0 and all(w > 0 for w in s["wall_s"])
    debug = engine.prompts[2]
    assert "had a bug" in debug
    terminal = debug.split("Terminal output:")[1].splitlines()
    assert "imported packages" in terminal and "loaded data" in terminal  # nonce lines cleaned
