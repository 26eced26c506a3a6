"""``OpenAIEngine``: any OpenAI-compatible ``/v1/chat/completions`` server over HTTP (httpx).

Used for a frozen LM (instrumentation), for baselines such as AIDE on a hosted model, and
against ``vllm serve``. Guarantees:

- ``text`` and ``finish_reason`` always come from the server (``length`` means truncated).
- Token ids are filled when the server returns them (vLLM does with ``return_token_ids``,
  sent by default; ``prompt_ids`` then come from the response too), else left empty.
- ``logprobs`` are kept only when the server returned exactly one per token id; otherwise empty,
  so ``len(logprobs) in (0, len(token_ids))``. Their semantics are the server's: start vLLM with
  ``--logprobs-mode processed_logprobs`` to match ``HFEngine``/``VLLMEngine``.
- Connection errors and 5xx/429 answers are retried ``max_retries`` times; then, and for any
  other non-200 answer, :class:`EngineError` is raised with the status and the body's start.
- The served weights are fixed: ``update_weights`` raises, ``policy_version`` never changes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import httpx

from mlerl.protocol import ChatMessage, Completion, SamplingParams, WeightUpdate


class EngineError(RuntimeError):
    """The inference server failed or answered something unusable."""


class OpenAIEngine:
    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 600.0,
        max_concurrency: int = 16,
        max_retries: int = 2,
        vllm_extensions: bool = True,
        policy_version: int = 0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.AsyncClient(
            base_url=base_url.rstrip("/"), headers=headers, timeout=timeout_s, transport=transport
        )
        self.model = model
        self.max_retries = max_retries
        self.vllm_extensions = vllm_extensions
        self._version = policy_version
        self._slots = asyncio.Semaphore(max_concurrency)

    @property
    def policy_version(self) -> int:
        return self._version

    def request_body(
        self, conversation: Sequence[ChatMessage], params: SamplingParams, index: int
    ) -> dict:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in conversation],
            "max_tokens": params.max_new_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "n": 1,
            "logprobs": True,
        }
        if params.seed is not None:
            body["seed"] = params.seed + index
        if self.vllm_extensions:
            body["return_token_ids"] = True
            body["skip_special_tokens"] = True
            if params.top_k > 0:
                body["top_k"] = params.top_k
        return body

    async def generate(
        self, conversations: Sequence[Sequence[ChatMessage]], params: SamplingParams
    ) -> list[Completion]:
        try:
            async with asyncio.TaskGroup() as tg:
                tasks = [
                    tg.create_task(self._one(self.request_body(c, params, i)))
                    for i, c in enumerate(conversations)
                ]
        except* EngineError as group:
            # Callers handle one EngineError; the first failure stands for the batch.
            raise group.exceptions[0] from None
        return [t.result() for t in tasks]

    async def _one(self, body: dict) -> Completion:
        async with self._slots:
            data = await self._post(body)
        return parse_chat_response(data)

    async def _post(self, body: dict) -> dict:
        for attempt in range(self.max_retries + 1):
            last = attempt == self.max_retries
            try:
                resp = await self.client.post("/chat/completions", json=body)
            except httpx.TransportError as exc:
                if last:
                    raise EngineError(f"request failed: {exc!r}") from exc
                await asyncio.sleep(0.5 * 2**attempt)
                continue
            if resp.status_code == 200:
                try:
                    return resp.json()
                except ValueError as exc:
                    raise EngineError(f"response is not JSON: {resp.text[:200]!r}") from exc
            if resp.status_code in (429, 500, 502, 503, 504) and not last:
                await asyncio.sleep(0.5 * 2**attempt)
                continue
            raise EngineError(f"HTTP {resp.status_code}: {resp.text[:500]}")
        raise AssertionError("unreachable")

    async def update_weights(self, update: WeightUpdate) -> None:
        raise EngineError("OpenAIEngine serves fixed weights; it cannot apply a WeightUpdate")

    async def close(self) -> None:
        await self.client.aclose()


def parse_chat_response(data: dict) -> Completion:
    """A Completion from one chat-completions answer (``n=1``); EngineError if malformed."""
    try:
        choice = data["choices"][0]
        text = choice["message"].get("content") or ""
        reason = choice.get("finish_reason")
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise EngineError(f"malformed response: {str(data)[:300]}") from exc
    token_ids = [int(t) for t in (choice.get("token_ids") or [])]
    content = (choice.get("logprobs") or {}).get("content") or []
    logprobs = [float(e["logprob"]) for e in content if isinstance(e, dict) and "logprob" in e]
    if len(logprobs) != len(token_ids):
        logprobs = []
    return Completion(
        prompt_ids=[int(t) for t in (data.get("prompt_token_ids") or [])],
        token_ids=token_ids,
        logprobs=logprobs,
        text=text,
        finish_reason="length" if reason == "length" else "stop",
    )
