"""Shared fixtures: a random tiny Qwen2 and a Sample factory."""

from __future__ import annotations

import itertools

import pytest
import torch

from mlerl.protocol import ExecStatus, PromptKind, Sample

TINY = dict(
    vocab_size=512,
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    intermediate_size=128,
    tie_word_embeddings=True,
)


def build_tiny_model(seed: int = 0):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    return Qwen2ForCausalLM(Qwen2Config(**TINY))


@pytest.fixture
def tiny_model():
    """Factory: tiny_model(seed=0) -> a random tiny Qwen2ForCausalLM."""
    return build_tiny_model


_counter = itertools.count()


def build_sample(
    *,
    actor_id: str = "a0",
    seq: int | None = None,
    reward: float = 1.0,
    duration_s: float = 1.0,
    prompt_len: int = 3,
    response_len: int = 4,
    t_sampled: float = 100.0,
    t_done: float | None = None,
    status: ExecStatus = ExecStatus.OK,
    policy_version: int = 0,
    task_id: str = "t",
    token_seed: int | None = None,
    behaviour_logprob: float = -1.0,
    generation_s: float = 0.0,
) -> Sample:
    seq = next(_counter) if seq is None else seq
    g = torch.Generator().manual_seed(seq if token_seed is None else token_seed)
    ids = torch.randint(1, 512, (prompt_len + response_len,), generator=g).tolist()
    t_done = t_sampled + duration_s if t_done is None else t_done
    return Sample(
        sample_id=f"{actor_id}:{seq}",
        actor_id=actor_id,
        seq=seq,
        task_id=task_id,
        prompt_kind=PromptKind.SCRATCH,
        prompt_ids=ids[:prompt_len],
        response_ids=ids[prompt_len:],
        behaviour_logprobs=[behaviour_logprob] * response_len,
        policy_version=policy_version,
        t_sampled=t_sampled,
        t_exec_started=t_sampled,
        t_exec_finished=t_done,
        t_graded=t_done,
        duration_s=duration_s,
        generation_s=generation_s,
        exec_status=status,
        reward=reward,
    )


@pytest.fixture
def make_sample():
    """Factory for valid Samples with controllable timing, reward and status."""
    return build_sample


@pytest.fixture
def tiny_kwargs():
    """The Qwen2Config keyword arguments of the tiny test model."""
    return dict(TINY)
