"""Turning a :class:`mlerl.protocol.WeightUpdate` into verified safetensors bytes.

Guarantees: the bytes returned have exactly ``size_bytes`` length and the announced sha256;
anything else raises :class:`WeightUpdateError` naming the problem, and the engine keeps its
current weights. ``uri`` is ``inline`` (bytes in ``payload``), a local path, or ``file://`` URL.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from urllib.parse import urlparse

from mlerl.protocol import WeightUpdate


class WeightUpdateError(ValueError):
    """A weight update could not be read or failed verification; weights are unchanged."""


def read_update_bytes(update: WeightUpdate) -> bytes:
    """The verified safetensors bytes of ``update``."""
    if update.uri == "inline":
        assert update.payload is not None  # WeightUpdate's invariant
        blob = update.payload
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


def make_update(state_dict: dict, version: int, path: str | Path | None = None) -> WeightUpdate:
    """A WeightUpdate for ``state_dict`` (tensors): inline, or written to ``path``.

    Tensors sharing storage (tied embeddings) are written once, under their first name.
    """
    from safetensors.torch import save

    seen: set[int] = set()
    unique = {}
    for name, tensor in state_dict.items():
        if tensor.data_ptr() in seen:
            continue
        seen.add(tensor.data_ptr())
        unique[name] = tensor.detach().contiguous().cpu()
    blob = save(unique)
    digest = hashlib.sha256(blob).hexdigest()
    if path is None:
        return WeightUpdate(version=version, uri="inline", size_bytes=len(blob), sha256=digest, payload=blob)
    Path(path).write_bytes(blob)
    return WeightUpdate(version=version, uri=str(path), size_bytes=len(blob), sha256=digest)
