"""Weight publication: the full policy state dict, announced as a WeightUpdate.

Guarantees:

- ``publish_weights`` is collective under FSDP2 (every rank must call it); the full state dict
  is gathered to rank 0 with CPU offload, and only rank 0 gets a ``WeightUpdate`` (others None).
- The bytes, the tied-weight rule, inline vs file and the verification on load are the one
  contract of :mod:`mlerl.protocol._weightfile` (``encode_weights``, ``announce``,
  ``load_into``), shared with the actors' engines.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

import torch

from mlerl.learner._models import is_distributed
from mlerl.protocol import WeightUpdate, announce, encode_weights, load_into, tied_names


def full_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The full (unsharded) CPU state dict; collective under FSDP2, empty on ranks > 0."""
    if is_distributed():
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        sd = cast(
            dict[str, torch.Tensor],  # full_state_dict=True: tensors, not DTensors
            get_model_state_dict(
                model, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
            ),
        )
    else:
        sd = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    return sd


def weights_bytes(model: torch.nn.Module, state_dict: dict[str, torch.Tensor]) -> bytes:
    """The weight file of ``state_dict`` for ``model`` (tied parameters left out)."""
    return encode_weights(state_dict, tied_names(getattr(model, "config", None)))


def publish_weights(
    model: torch.nn.Module, version: int, out_dir: str | Path, inline_max_bytes: int
) -> WeightUpdate | None:
    """Gather, serialise and announce the policy at ``version`` (rank 0 gets the update)."""
    sd = full_state_dict(model)
    if is_distributed() and torch.distributed.get_rank() != 0:
        return None
    return announce(weights_bytes(model, sd), version, out_dir, inline_max_bytes)


def load_weight_update(model: torch.nn.Module, update: WeightUpdate) -> None:
    """Verify ``update`` and load it into an HF model; on any problem raise and change nothing."""
    load_into(model, update)
