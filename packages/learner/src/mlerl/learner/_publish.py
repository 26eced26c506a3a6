"""Weight publication: the full policy state dict as safetensors bytes plus a WeightUpdate.

Guarantees:

- ``publish_weights`` is collective under FSDP2 (every rank must call it); the full state dict
  is gathered to rank 0 with CPU offload, and only rank 0 gets a ``WeightUpdate`` (others None).
- The bytes are a safetensors file of the HF model's own parameter names; a tied
  ``lm_head.weight`` is left out (as ``save_pretrained`` does) and restored by tying on load.
- Small payloads travel inline; larger ones are written to ``out_dir/policy_v{version}.safetensors``
  via a temporary file and ``os.replace``, so a reader never sees a partial file.
- ``load_weight_update`` verifies size and sha256 and checks every name and shape *before*
  touching the model: on any mismatch it raises :class:`WeightUpdateError` and the model keeps
  its weights.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from urllib.parse import urlparse

import torch

from mlerl.protocol import WeightUpdate

from mlerl.learner._models import is_distributed


class WeightUpdateError(ValueError):
    """A weight update failed verification; the model was not changed."""


def _tied_keys(model: torch.nn.Module) -> set[str]:
    return {"lm_head.weight"} if getattr(getattr(model, "config", None), "tie_word_embeddings", False) else set()


def full_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The full (unsharded) CPU state dict; collective under FSDP2, empty on ranks > 0."""
    if is_distributed():
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        sd = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    else:
        sd = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    return sd


def weights_bytes(model: torch.nn.Module, state_dict: dict[str, torch.Tensor]) -> bytes:
    from safetensors.torch import save

    skip = _tied_keys(model)
    return save({k: v.detach().contiguous().clone() for k, v in state_dict.items() if k not in skip})


def publish_weights(model: torch.nn.Module, version: int, out_dir: str | Path, inline_max_bytes: int) -> WeightUpdate | None:
    """Gather, serialise and announce the policy at ``version`` (rank 0 gets the update)."""
    sd = full_state_dict(model)
    if is_distributed() and torch.distributed.get_rank() != 0:
        return None
    blob = weights_bytes(model, sd)
    digest = hashlib.sha256(blob).hexdigest()
    if len(blob) <= inline_max_bytes:
        return WeightUpdate(version=version, uri="inline", size_bytes=len(blob), sha256=digest, payload=blob)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"policy_v{version}.safetensors"
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        f.write(blob)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return WeightUpdate(version=version, uri=str(path.resolve()), size_bytes=len(blob), sha256=digest)


def update_bytes(update: WeightUpdate) -> bytes:
    """The verified bytes of ``update`` (inline, a path, or a file:// URL)."""
    if update.uri == "inline":
        blob = update.payload or b""
    else:
        parsed = urlparse(update.uri)
        if parsed.scheme not in ("", "file"):
            raise WeightUpdateError(f"uri: unsupported scheme {parsed.scheme!r}")
        try:
            blob = Path(parsed.path if parsed.scheme else update.uri).read_bytes()
        except OSError as exc:
            raise WeightUpdateError(f"uri: cannot read {update.uri}: {exc}") from exc
    if len(blob) != update.size_bytes:
        raise WeightUpdateError(f"size_bytes: announced {update.size_bytes}, got {len(blob)}")
    if hashlib.sha256(blob).hexdigest() != update.sha256:
        raise WeightUpdateError("sha256: checksum mismatch")
    return blob


@torch.no_grad()
def load_weight_update(model: torch.nn.Module, update: WeightUpdate) -> None:
    """Verify ``update`` and load it into an HF model; on any problem raise and change nothing."""
    from safetensors.torch import load

    try:
        sd = load(update_bytes(update))
    except WeightUpdateError:
        raise
    except Exception as exc:  # safetensors raises its own error types for bad headers
        raise WeightUpdateError(f"payload: not a safetensors file: {exc}") from exc
    own = model.state_dict()
    missing = set(own) - set(sd) - _tied_keys(model)
    unexpected = set(sd) - set(own)
    if missing or unexpected:
        raise WeightUpdateError(f"names: missing {sorted(missing)[:5]}, unexpected {sorted(unexpected)[:5]}")
    for k, v in sd.items():
        if own[k].shape != v.shape:
            raise WeightUpdateError(f"{k}: shape {tuple(v.shape)} != model's {tuple(own[k].shape)}")
    for k, v in sd.items():
        own[k].copy_(v)
