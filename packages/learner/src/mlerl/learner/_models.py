"""The critic (a value head on a copy of the policy's decoder), the frozen reference, and FSDP2.

Guarantees: the reference is a deep copy of the initial policy with ``requires_grad`` off and
in eval mode; the critic starts from the policy's decoder weights and a zero value head (so
initial values are 0 and the first advantages equal the rewards). ``shard`` applies
``fully_shard`` to every decoder layer and then the root, only when torch.distributed is
initialised; with one process and no process group models stay plain modules.
"""

from __future__ import annotations

import copy
from typing import TypeVar

import torch
from torch import nn

from mlerl.learner._batch import CausalLM
from mlerl.learner._config import CriticKind, LearnerConfig

M = TypeVar("M", bound=nn.Module)


class ValueModel(nn.Module):
    """V(prefix) at every position: a decoder (e.g. ``Qwen2Model``) plus a linear head."""

    def __init__(self, backbone: nn.Module, hidden_size: int) -> None:
        super().__init__()
        self.backbone: CausalLM = backbone
        self.v_head = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.v_head.weight)
        nn.init.zeros_(self.v_head.bias)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.backbone(
            input_ids=input_ids, attention_mask=attention_mask, use_cache=False
        ).last_hidden_state
        return self.v_head(hidden.to(self.v_head.weight.dtype)).squeeze(-1).float()  # (B, L)

    @classmethod
    def from_policy(cls, policy: CausalLM) -> ValueModel:
        base = getattr(policy, policy.base_model_prefix)  # e.g. Qwen2ForCausalLM.model
        return cls(copy.deepcopy(base), policy.config.hidden_size)


def make_reference(policy: CausalLM) -> CausalLM:
    ref = copy.deepcopy(policy)
    ref.eval()
    ref.requires_grad_(False)
    return ref


def make_critic(config: LearnerConfig, policy: CausalLM) -> ValueModel | None:
    if config.critic is CriticKind.none:
        return None
    return ValueModel.from_policy(policy)


def decoder_layers(model: CausalLM | ValueModel) -> list[nn.Module]:
    """The transformer blocks of an HF causal LM or a :class:`ValueModel`."""
    base = (
        model.backbone if isinstance(model, ValueModel) else getattr(model, model.base_model_prefix)
    )
    return list(base.layers)


def enable_checkpointing(model: CausalLM | ValueModel) -> None:
    base = model.backbone if isinstance(model, ValueModel) else model
    base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def is_distributed() -> bool:
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def shard(model: M, bf16: bool) -> M:
    """FSDP2: fully_shard each decoder layer, then the root (no-op without a process group)."""
    if not is_distributed():
        return model
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mp = (
        MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        if bf16
        else MixedPrecisionPolicy()
    )
    for layer in decoder_layers(model):
        fully_shard(layer, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    return model
