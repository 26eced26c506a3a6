"""The weight-update wire contract, written once: what the learner publishes and every engine
(the HF engine, the vLLM worker) loads.

A :class:`~mlerl.protocol.WeightUpdate` announces a safetensors file of the HF model's own
parameter names, at most once per storage: a tied ``lm_head.weight`` (``tie_word_embeddings``)
is left out, as ``save_pretrained`` does, and restored by tying on load (:data:`TIED`). The
bytes travel inline (``payload``) or as a file (``uri``: a path or ``file://`` URL) written via
a temporary name and ``os.replace``, so a reader never sees a partial file. A reader gets the
bytes only after their size and sha256 match the announcement, and a state dict only after
every name and shape matches its model; anything else raises :class:`WeightUpdateError` and
the model keeps its weights. torch and safetensors are imported only when tensors are handled.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from mlerl.protocol._messages import ProtocolError, WeightUpdate

if TYPE_CHECKING:
    import torch

TIED = frozenset({"lm_head.weight"})
"""Parameters that share storage with the input embeddings when ``tie_word_embeddings``."""


class WeightUpdateError(ProtocolError):
    """A weight update could not be read or failed verification; weights are unchanged."""


def tied_names(model_config: Any) -> frozenset[str]:
    """The names left out of (and restored after) a weight file for this model config."""
    return TIED if getattr(model_config, "tie_word_embeddings", False) else frozenset()


def encode_weights(
    state_dict: Mapping[str, torch.Tensor], skip: frozenset[str] = frozenset()
) -> bytes:
    """Safetensors bytes of ``state_dict`` without ``skip`` (use :func:`tied_names`)."""
    from safetensors.torch import save

    return save(
        {k: v.detach().contiguous().cpu().clone() for k, v in state_dict.items() if k not in skip}
    )


def announce(
    blob: bytes, version: int, out_dir: str | Path | None = None, inline_max_bytes: int = -1
) -> WeightUpdate:
    """A WeightUpdate for ``blob``: inline when it fits ``inline_max_bytes`` (or no
    ``out_dir`` is given), else written atomically to ``out_dir/policy_v{version}.safetensors``."""
    digest = hashlib.sha256(blob).hexdigest()
    if out_dir is None or len(blob) <= inline_max_bytes:
        return WeightUpdate(
            version=version, uri="inline", size_bytes=len(blob), sha256=digest, payload=blob
        )
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"policy_v{version}.safetensors"
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        f.write(blob)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return WeightUpdate(
        version=version, uri=str(path.resolve()), size_bytes=len(blob), sha256=digest
    )


def read_update_bytes(update: WeightUpdate) -> bytes:
    """The bytes of ``update`` (inline, a path or a ``file://`` URL), verified."""
    if update.uri == "inline":
        blob = update.payload or b""
    else:
        parsed = urlparse(update.uri)
        if parsed.scheme not in ("", "file"):
            raise WeightUpdateError(f"uri: unsupported scheme {parsed.scheme!r} in {update.uri!r}")
        path = Path(parsed.path if parsed.scheme == "file" else update.uri)
        try:
            blob = path.read_bytes()
        except OSError as exc:
            raise WeightUpdateError(f"uri: cannot read {path}: {exc}") from exc
    if len(blob) != update.size_bytes:
        raise WeightUpdateError(f"size_bytes: announced {update.size_bytes}, got {len(blob)}")
    digest = hashlib.sha256(blob).hexdigest()
    if digest != update.sha256:
        raise WeightUpdateError(f"sha256: announced {update.sha256}, got {digest}")
    return blob


def read_update(update: WeightUpdate) -> dict[str, torch.Tensor]:
    """The verified state dict of ``update`` (not yet checked against a model)."""
    from safetensors.torch import load

    blob = read_update_bytes(update)
    try:
        return load(blob)
    except Exception as exc:  # safetensors raises its own error types on bad bytes
        raise WeightUpdateError(f"payload: not a safetensors file: {exc}") from exc


def check_against(
    own_shapes: Mapping[str, tuple[int, ...]], state: Mapping[str, Any], tied: frozenset[str]
) -> None:
    """Every name of ``state`` is the model's with its shape; only ``tied`` may be missing."""
    unexpected = sorted(set(state) - set(own_shapes))
    if unexpected:
        raise WeightUpdateError(f"payload: unexpected tensors {unexpected[:5]}")
    missing = sorted(set(own_shapes) - set(state) - tied)
    if missing:
        raise WeightUpdateError(f"payload: missing tensors {missing[:5]}")
    for name, tensor in state.items():
        if tuple(tensor.shape) != tuple(own_shapes[name]):
            raise WeightUpdateError(
                f"payload: {name} has shape {tuple(tensor.shape)}, "
                f"model has {tuple(own_shapes[name])}"
            )


def load_into(model: torch.nn.Module, update: WeightUpdate) -> None:
    """Verify ``update`` against ``model`` (an HF model) and copy it in; tied parameters follow
    their embedding. On any problem raise :class:`WeightUpdateError` with the model unchanged."""
    import torch

    state = read_update(update)
    own = model.state_dict()
    check_against(
        {k: tuple(v.shape) for k, v in own.items()},
        state,
        tied_names(getattr(model, "config", None)),
    )
    with torch.no_grad():
        for name, tensor in state.items():
            own[name].copy_(tensor)
