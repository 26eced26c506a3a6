"""Shared fixtures: a canned-answer engine and a runner backed by mlerl.sandbox's local backend."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from mlerl.protocol import ChatMessage, Completion, ExecStatus, SamplingParams
from mlerl.sandbox import ExecutionRequest, Limits, SandboxConfig, make_sandbox


class FakeEngine:
    """An InferenceEngine answering each prompt through ``answer(prompt_text) -> (text, finish)``."""

    policy_version = 0

    def __init__(self, answer, *, fail: Exception | None = None, delay_s: float = 0.0) -> None:
        self.answer, self.fail, self.delay_s = answer, fail, delay_s
        self.calls: list[int] = []  # batch size of each generate call

    async def generate(
        self, conversations: Sequence[Sequence[ChatMessage]], params: SamplingParams
    ) -> list[Completion]:
        self.calls.append(len(conversations))
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.fail is not None:
            raise self.fail
        out = []
        for conv in conversations:
            text, finish = self.answer(conv[-1].content)
            out.append(
                Completion(
                    prompt_ids=[], token_ids=[], logprobs=[], text=text, finish_reason=finish
                )
            )
        return out

    async def update_weights(self, update) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        return None


@dataclass
class Run:
    status: ExecStatus
    stdout: bytes
    """Everything the program wrote to stdout, as streamed by on_output."""
    files: dict[str, Path]


async def run_programs(
    programs: list[str],
    data_dir: Path | None = None,
    wall_time_s: float = 60.0,
    concurrency: int = 2,
) -> list[Run]:
    """Run programs in mlerl.sandbox's local backend, streaming stdout as the actors do."""
    sandbox = make_sandbox(SandboxConfig(backend="local", max_concurrency=concurrency))
    try:

        async def one(program: str) -> Run:
            chunks: list[bytes] = []

            def on_output(stream: str, chunk: bytes) -> None:
                if stream == "stdout":
                    chunks.append(chunk)

            req = ExecutionRequest(
                program=program,
                data_dir=data_dir,
                limits=Limits(wall_time_s=wall_time_s, kill_grace_s=0.5),
            )
            res = await sandbox.run(req, on_output=on_output)
            return Run(res.status, b"".join(chunks), res.files)

        async with asyncio.TaskGroup() as tg:
            tasks = [tg.create_task(one(p)) for p in programs]
        return [t.result() for t in tasks]
    finally:
        await sandbox.close()


@pytest.fixture
def run():
    def _run(program: str, data_dir: Path | None = None, wall_time_s: float = 60.0) -> Run:
        return asyncio.run(run_programs([program], data_dir, wall_time_s))[0]

    return _run
