"""The inference-engine interface shared by actors (policy) and instrument (frozen LM).

Engines live in ``mlerl.actors`` (transformers, vLLM, OpenAI-compatible HTTP); this module
only fixes the shapes so ``mlerl.instrument`` can call an engine without importing torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import msgspec

from mlerl.protocol._messages import WeightUpdate


class ChatMessage(msgspec.Struct, frozen=True):
    role: str
    """``system``, ``user`` or ``assistant``."""
    content: str


class SamplingParams(msgspec.Struct, frozen=True, kw_only=True):
    max_new_tokens: int = 1024
    temperature: float = 0.7
    top_p: float = 1.0
    top_k: int = -1
    """-1 disables top-k (the paper's setting)."""
    seed: int | None = None


class Completion(msgspec.Struct, frozen=True, kw_only=True):
    prompt_ids: list[int]
    token_ids: list[int]
    logprobs: list[float]
    """Log-prob of each generated token; empty when the engine cannot provide them."""
    text: str
    finish_reason: str
    """``stop`` (end of sequence) or ``length`` (hit max_new_tokens: the output is truncated)."""


@runtime_checkable
class InferenceEngine(Protocol):
    """Generates completions for chat conversations; the engine applies its chat template."""

    @property
    def policy_version(self) -> int: ...

    async def generate(
        self, conversations: Sequence[Sequence[ChatMessage]], params: SamplingParams
    ) -> list[Completion]: ...

    async def update_weights(self, update: WeightUpdate) -> None: ...

    async def close(self) -> None: ...
