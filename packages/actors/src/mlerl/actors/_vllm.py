"""``VLLMEngine``: vLLM's ``AsyncLLM`` in this process (install ``mlerl-actors[vllm]``).

vLLM pins torch/transformers, so it runs in its own venv (``scripts/ci/setup_vllm.sh``).
Guarantees, matching ``HFEngine``:

- log-probs are those of the processed sampling distribution (``logprobs_mode=
  "processed_logprobs"``: after temperature, top-k and top-p), one per generated token;
- the prompt is tokenized here with the model's chat template, so ``prompt_ids`` are exact;
- conversation ``i`` of a call with ``seed=s`` is sampled with seed ``s + i``;
- weight updates wait for running generations (:class:`VersionGate`), are verified (size,
  sha256), then loaded in the worker by :mod:`mlerl.actors._vllm_worker`, and the prefix cache
  is reset so no KV computed under old weights is reused.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from pathlib import Path

from mlerl.actors._gate import VersionGate
from mlerl.actors._prompts import chat_prompt_ids
from mlerl.protocol import ChatMessage, Completion, SamplingParams, WeightUpdate, read_update_bytes

_EXTENSION = "mlerl.actors._vllm_worker.WeightSyncExtension"


class VLLMEngine:
    def __init__(
        self,
        model_dir: str | Path,
        *,
        dtype: str = "bfloat16",
        max_model_len: int = 2048,
        gpu_memory_utilization: float = 0.3,
        enforce_eager: bool = True,
        policy_version: int = 0,
        seed: int = 0,
        stop_tokens: Sequence[str] = ("<|im_end|>",),
    ) -> None:
        from transformers import AutoTokenizer
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        ids = {self.tokenizer.convert_tokens_to_ids(t) for t in stop_tokens}
        self.stop_ids = sorted(i for i in ids if i is not None and i != self.tokenizer.unk_token_id)
        self.engine = AsyncLLM.from_engine_args(
            AsyncEngineArgs(
                model=str(model_dir),
                dtype=dtype,
                max_model_len=max_model_len,
                gpu_memory_utilization=gpu_memory_utilization,
                enforce_eager=enforce_eager,
                seed=seed,
                logprobs_mode="processed_logprobs",
                worker_extension_cls=_EXTENSION,
            )
        )
        self._version = policy_version
        self._gate = VersionGate()

    @property
    def policy_version(self) -> int:
        return self._version

    def encode(self, conversation: Sequence[ChatMessage]) -> list[int]:
        """Prompt token ids: the chat template with the assistant turn opened."""
        return chat_prompt_ids(self.tokenizer, conversation)

    async def generate(
        self, conversations: Sequence[Sequence[ChatMessage]], params: SamplingParams
    ) -> list[Completion]:
        prompts = [self.encode(c) for c in conversations]
        async with self._gate.generating(), asyncio.TaskGroup() as tg:
            tasks = [tg.create_task(self._one(ids, params, i)) for i, ids in enumerate(prompts)]
        return [t.result() for t in tasks]

    async def _one(self, prompt_ids: list[int], params: SamplingParams, index: int) -> Completion:
        from vllm import SamplingParams as VSamplingParams

        vparams = VSamplingParams(
            n=1,
            max_tokens=params.max_new_tokens,
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=params.top_k if params.top_k > 0 else 0,
            seed=None if params.seed is None else params.seed + index,
            logprobs=0,
            stop_token_ids=self.stop_ids,
            skip_special_tokens=True,
        )
        final = None
        async for out in self.engine.generate(
            {"prompt_token_ids": prompt_ids}, vparams, request_id=uuid.uuid4().hex
        ):
            final = out
        assert final is not None and final.finished
        seq = final.outputs[0]
        token_ids = list(seq.token_ids)
        logprobs = [
            float(pos[tok].logprob) for pos, tok in zip(seq.logprobs, token_ids, strict=True)
        ]
        return Completion(
            prompt_ids=prompt_ids,
            token_ids=token_ids,
            logprobs=logprobs,
            text=seq.text,
            finish_reason="stop" if seq.finish_reason == "stop" else "length",
        )

    async def update_weights(self, update: WeightUpdate) -> None:
        if update.version <= self._version:
            return
        blob = await asyncio.to_thread(read_update_bytes, update)
        async with self._gate.updating():
            await self.engine.collective_rpc("mlerl_load_weights", args=(blob,))
            await self.engine.reset_prefix_cache()
            self._version = update.version

    async def close(self) -> None:
        # Drop our reference so vLLM's __del__ does not shut down a second time at exit.
        engine, self.engine = self.engine, None
        if engine is not None:
            engine.shutdown()
