"""``HFEngine``: the transformers inference engine (CPU or GPU), with its own sampling loop.

Guarantees:

- One log-prob per generated token, under the distribution the token was drawn from (see
  :mod:`mlerl.actors._sampling`; the same semantics as ``VLLMEngine``).
- ``token_ids`` end with the stop token when ``finish_reason == "stop"`` (the policy must learn
  to stop, so the stop token is part of the response); ``text`` omits special tokens.
- Reproducible: with ``SamplingParams.seed = s`` conversation ``i`` of a call is sampled with its
  own generator seeded ``s + i``, so its tokens do not depend on what it is batched with (up to
  floating-point effects of padding). ``seed=None`` draws fresh seeds.
- Concurrent ``generate`` calls with equal sampling settings (seed aside) are batched together,
  up to ``max_batch_size`` rows. The forward passes run in a worker thread, so the event loop
  stays responsive. There are no background tasks: the first waiting caller runs the batch.
- ``update_weights`` waits for the running batch, verifies the bytes (size, sha256, names and
  shapes) and only then swaps them in; ``policy_version`` then equals ``update.version``. An
  update not newer than the current version is ignored (broadcasts may repeat).
"""

from __future__ import annotations

import asyncio
import inspect
import random
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from mlerl.actors._prompts import chat_prompt_ids
from mlerl.actors._sampling import process_logits, sample_rows
from mlerl.protocol import ChatMessage, Completion, SamplingParams, WeightUpdate, load_into


@dataclass
class _Request:
    prompt_ids: list[int]
    params: SamplingParams
    seed: int
    result: Completion | None = None
    error: BaseException | None = None
    done: bool = field(default=False)


def _batch_key(p: SamplingParams) -> tuple:
    return (p.max_new_tokens, p.temperature, p.top_p, p.top_k)


def _cache_argument(model: torch.nn.Module) -> str:
    """The name of the KV cache in ``model``'s forward and outputs: ``cache`` since transformers
    5.24, which warns (FutureWarning) on the old ``past_key_values``; older 5.x (the vLLM venv
    pins one) knows only the old name."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


_LOADING = threading.Lock()
"""Engines built in several threads at once load one after the other: transformers builds a
model under a process-wide meta-device context, so a second load in the meantime finds its
parameters without data ("Cannot copy out of meta tensor")."""


class HFEngine:
    """A causal LM from a local model directory (weights + tokenizer with a chat template)."""

    def __init__(
        self,
        model_dir: str | Path,
        *,
        device: str = "cpu",
        dtype: str = "float32",
        max_batch_size: int = 16,
        policy_version: int = 0,
        stop_tokens: Sequence[str] = ("<|im_end|>",),
    ) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if max_batch_size < 1:
            raise ValueError(f"max_batch_size: must be >= 1, got {max_batch_size}")
        torch_dtype = "auto" if dtype == "auto" else getattr(torch, dtype)
        with _LOADING:
            self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
            # Any: transformers types from_pretrained's result by a wrapper whose .to() mypy
            # misreads
            model: Any = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch_dtype)
            self.model = model.to(device)
        self.model.eval()
        self._cache_arg = _cache_argument(self.model)
        self.device = torch.device(device)
        self.max_batch_size = max_batch_size
        self.max_model_len = int(getattr(self.model.config, "max_position_embeddings", 4096))
        ids = {self.tokenizer.convert_tokens_to_ids(t) for t in stop_tokens}
        if self.tokenizer.eos_token_id is not None:
            ids.add(self.tokenizer.eos_token_id)
        self.stop_ids = {i for i in ids if i is not None and i != self.tokenizer.unk_token_id}
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self._version = policy_version
        self._pending: list[_Request] = []
        self._lock = asyncio.Lock()
        self._thread_lock = threading.Lock()  # a cancelled caller's thread may still be running
        self._rng = random.Random()

    @property
    def policy_version(self) -> int:
        return self._version

    def encode(self, conversation: Sequence[ChatMessage]) -> list[int]:
        """Prompt token ids: the chat template with the assistant turn opened."""
        return chat_prompt_ids(self.tokenizer, conversation)

    async def generate(
        self, conversations: Sequence[Sequence[ChatMessage]], params: SamplingParams
    ) -> list[Completion]:
        base = params.seed if params.seed is not None else self._rng.randrange(2**31)
        reqs = []
        for i, conv in enumerate(conversations):
            ids = self.encode(conv)
            if len(ids) >= self.max_model_len:
                raise ValueError(
                    f"prompt {i}: {len(ids)} tokens >= max_model_len {self.max_model_len}"
                )
            reqs.append(_Request(ids, params, base + i))
        self._pending.extend(reqs)
        try:
            while not all(r.done for r in reqs):
                async with self._lock:
                    if all(r.done for r in reqs):
                        break
                    batch = self._take_batch()
                    await self._run_batch(batch)
        finally:
            self._pending = [r for r in self._pending if r not in reqs]
        for r in reqs:
            if r.error is not None:
                raise r.error
        return [r.result for r in reqs]  # type: ignore[misc]  # a request without an error has its result

    def _take_batch(self) -> list[_Request]:
        key = _batch_key(self._pending[0].params)
        batch = [r for r in self._pending if _batch_key(r.params) == key][: self.max_batch_size]
        self._pending = [r for r in self._pending if r not in batch]
        return batch

    async def _run_batch(self, batch: list[_Request]) -> None:
        try:
            results = await asyncio.to_thread(self._generate_batch, batch)
        except Exception as exc:  # noqa: BLE001 - a failed batch fails each caller's request with the error
            for r in batch:
                r.error, r.done = exc, True
            return
        except BaseException:
            # Cancelled while running: hand the other callers' rows back to the queue.
            self._pending[:0] = [r for r in batch if not r.done]
            raise
        for r, c in zip(batch, results, strict=True):
            r.result, r.done = c, True

    @torch.inference_mode()
    def _generate_batch(self, batch: list[_Request]) -> list[Completion]:
        with self._thread_lock:
            return self._decode(batch)

    def _decode(self, batch: list[_Request]) -> list[Completion]:
        p = batch[0].params
        n = len(batch)
        width = max(len(r.prompt_ids) for r in batch)
        max_new = min(p.max_new_tokens, self.max_model_len - width)
        ids = torch.full((n, width), self.pad_id, dtype=torch.long)
        attn = torch.zeros((n, width), dtype=torch.long)
        for i, r in enumerate(batch):  # left padding
            ids[i, width - len(r.prompt_ids) :] = torch.tensor(r.prompt_ids)
            attn[i, width - len(r.prompt_ids) :] = 1
        ids, attn = ids.to(self.device), attn.to(self.device)
        pos = (attn.cumsum(-1) - 1).clamp(min=0)
        gens = [torch.Generator(device=self.device).manual_seed(r.seed) for r in batch]
        tokens: list[list[int]] = [[] for _ in batch]
        logprobs: list[list[float]] = [[] for _ in batch]
        reasons: list[str | None] = [None] * n
        out = self.model(input_ids=ids, attention_mask=attn, position_ids=pos, use_cache=True)
        for step in range(max_new):
            processed = process_logits(out.logits[:, -1, :], p.temperature, p.top_k, p.top_p)
            tok, lp = sample_rows(processed, p.temperature <= 0, gens)
            for i, (t, logprob) in enumerate(zip(tok.tolist(), lp.tolist(), strict=True)):
                if reasons[i] is None:
                    tokens[i].append(t)
                    logprobs[i].append(logprob)
                    if t in self.stop_ids:
                        reasons[i] = "stop"
            if all(r is not None for r in reasons) or step == max_new - 1:
                break
            attn = torch.cat(
                [attn, torch.ones((n, 1), dtype=attn.dtype, device=self.device)], dim=1
            )
            pos = pos[:, -1:] + 1
            cache = {self._cache_arg: getattr(out, self._cache_arg)}
            out = self.model(
                input_ids=tok[:, None],
                attention_mask=attn,
                position_ids=pos,
                use_cache=True,
                **cache,
            )
        return [
            Completion(
                prompt_ids=list(r.prompt_ids),
                token_ids=tokens[i],
                logprobs=logprobs[i],
                text=str(
                    self.tokenizer.decode(tokens[i], skip_special_tokens=True)
                ),  # one sequence: a str
                finish_reason=reasons[i] or "length",
            )
            for i, r in enumerate(batch)
        ]

    async def update_weights(self, update: WeightUpdate) -> None:
        if update.version <= self._version:
            return
        async with self._lock:  # between generations
            await asyncio.to_thread(self._load, update)
            self._version = update.version

    def _load(self, update: WeightUpdate) -> None:
        with self._thread_lock:  # verified against the model first; unchanged on any error
            load_into(self.model, update)

    async def close(self) -> None:
        async with self._lock:
            self._pending.clear()
