"""Atomic checkpoints of the whole learner: models, optimizers, RNG, buffer state, version.

Layout: ``ROOT/step_{version:08d}/`` holding ``state.pt`` (torch.save of full, unsharded state
dicts: tensors and plain Python values only) and ``COMMIT`` (``sha256 <hex of state.pt>``,
written last, after an fsync of ``state.pt``). A checkpoint is written
in ``ROOT/.tmp-step_*`` and renamed into place only after ``COMMIT`` is on disk, so a crash at
any moment leaves either the previous complete checkpoint or the new one, never a partial one
that :func:`latest_checkpoint` would pick. Temp dirs of crashed writes are removed on the next
save.

Loading never runs code from the file: ``torch.load(weights_only=True)`` refuses any pickle
global outside tensors and plain containers (numpy's RNG state is stored as a list for this),
and the bytes must match the sha256 in ``COMMIT``. :func:`restore_checkpoint` takes the newest
checkpoint that loads; a corrupt newer one is skipped with a warning.

Collective under FSDP2: every rank calls :func:`save_checkpoint` / :func:`load_checkpoint`;
rank 0 writes, and loading broadcasts from rank 0's full state dicts.
"""

from __future__ import annotations

import hashlib
import logging
import os
import random
import shutil
from pathlib import Path
from typing import IO, Any, cast

import numpy as np
import torch

from mlerl.learner._learner import Learner
from mlerl.learner._models import is_distributed

log = logging.getLogger(__name__)


class CheckpointError(RuntimeError):
    """A checkpoint is unreadable, fails its checksum or lacks learner state."""


def _options(**kw: Any):
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(full_state_dict=True, cpu_offload=True, **kw)


def learner_state(learner: Learner) -> dict[str, Any]:
    """Full state of the learner (collective under FSDP2; complete on rank 0)."""
    from torch.distributed.checkpoint.state_dict import get_state_dict

    state: dict[str, Any] = {"version": learner.version, "running_dt": learner.running_dt}
    state["policy"], state["policy_opt"] = get_state_dict(
        learner.policy, learner.policy_opt, options=_options()
    )
    if learner.critic is not None and learner.critic_opt is not None:
        state["critic"], state["critic_opt"] = get_state_dict(
            learner.critic, learner.critic_opt, options=_options()
        )
    name, keys, pos, has_gauss, cached = cast(
        tuple[str, np.ndarray, int, int, float], np.random.get_state()
    )  # plain values: weights_only loads them
    numpy_state = [
        name,
        torch.from_numpy(keys.astype(np.int64)),
        int(pos),
        int(has_gauss),
        float(cached),
    ]
    state["rng"] = {
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
        "numpy": numpy_state,
    }
    return state


def load_learner_state(learner: Learner, state: dict[str, Any]) -> None:
    from torch.distributed.checkpoint.state_dict import set_state_dict

    opts = _options(broadcast_from_rank0=is_distributed())
    set_state_dict(
        learner.policy,
        learner.policy_opt,
        model_state_dict=state["policy"],
        optim_state_dict=state["policy_opt"],
        options=opts,
    )
    if learner.critic is not None and learner.critic_opt is not None:
        set_state_dict(
            learner.critic,
            learner.critic_opt,
            model_state_dict=state["critic"],
            optim_state_dict=state["critic_opt"],
            options=opts,
        )
    learner.version, learner.running_dt = int(state["version"]), state["running_dt"]
    torch.set_rng_state(state["rng"]["torch"])
    random.setstate(state["rng"]["python"])
    name, keys, pos, has_gauss, cached = state["rng"]["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, cached))


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _HashingWriter:
    """File wrapper that hashes what ``torch.save`` writes (no second read of a large file)."""

    def __init__(self, f: Any) -> None:
        self.f, self.sha = f, hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.sha.update(data)
        return self.f.write(data)

    def flush(self) -> None:
        self.f.flush()


def _write_commit(tmp: Path, sha256: str) -> None:
    with open(tmp / "COMMIT", "w") as f:
        f.write(f"sha256 {sha256}\n")
        f.flush()
        os.fsync(f.fileno())


def save_checkpoint(
    root: str | Path, learner: Learner, extra: dict[str, Any], keep: int = 2
) -> Path | None:
    """Write a checkpoint of ``learner`` plus ``extra`` (e.g. the buffer's state_dict).

    Returns the committed directory on rank 0 (None elsewhere). Keeps the newest ``keep``.
    """
    state = learner_state(learner)
    if is_distributed() and torch.distributed.get_rank() != 0:
        torch.distributed.barrier()
        return None
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    for stale in root.glob(".tmp-step_*"):
        shutil.rmtree(stale, ignore_errors=True)
    final = root / f"step_{learner.version:08d}"
    tmp = root / f".tmp-{final.name}"
    tmp.mkdir()
    state["extra"] = extra
    with open(tmp / "state.pt", "wb") as f:
        writer = _HashingWriter(f)
        torch.save(state, cast(IO[bytes], writer))  # a write-only file that also hashes
        f.flush()
        os.fsync(f.fileno())
    _write_commit(tmp, writer.sha.hexdigest())
    _fsync_dir(tmp)
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    _fsync_dir(root)
    for old in complete_checkpoints(root)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    if is_distributed():
        torch.distributed.barrier()
    return final


def complete_checkpoints(root: str | Path) -> list[Path]:
    """Committed checkpoints under ``root``, oldest first."""
    root = Path(root)
    if not root.exists():
        return []
    return sorted(p for p in root.glob("step_*") if p.is_dir() and (p / "COMMIT").is_file())


def latest_checkpoint(root: str | Path) -> Path | None:
    found = complete_checkpoints(root)
    return found[-1] if found else None


def _sha256(path: Path) -> str:
    sha = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 24):
                sha.update(chunk)
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot read: {exc}") from exc
    return sha.hexdigest()


_REQUIRED = ("version", "running_dt", "policy", "policy_opt", "rng", "extra")


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """The verified state of checkpoint ``path``: COMMIT present, sha256 matching, loaded with
    ``weights_only=True`` (no code from the file runs), required keys present. Raises
    :class:`CheckpointError` otherwise (``FileNotFoundError`` without COMMIT)."""
    path = Path(path)
    if not (path / "COMMIT").is_file():
        raise FileNotFoundError(f"{path}: not a complete checkpoint (no COMMIT marker)")
    commit = (path / "COMMIT").read_text(errors="replace").split()
    if len(commit) == 2 and commit[0] == "sha256" and _sha256(path / "state.pt") != commit[1]:
        raise CheckpointError(f"{path}: state.pt does not match the sha256 in COMMIT (corrupt)")
    try:
        state = torch.load(path / "state.pt", map_location="cpu", weights_only=True)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise CheckpointError(
            f"{path}: state.pt is not a loadable checkpoint: {type(exc).__name__}: {first}"
        ) from exc
    missing = [k for k in _REQUIRED if not isinstance(state, dict) or k not in state]
    if missing:
        raise CheckpointError(f"{path}: state.pt lacks {', '.join(missing)}")
    return state


def load_checkpoint(path: str | Path, learner: Learner) -> dict[str, Any]:
    """Restore ``learner`` from ``path``; returns the ``extra`` dict saved with it."""
    state = read_checkpoint(path)
    try:
        load_learner_state(learner, state)
    except (KeyError, ValueError, TypeError, RuntimeError) as exc:
        raise CheckpointError(
            f"{path}: state does not fit this learner: {type(exc).__name__}: {exc}"
        ) from exc
    return state["extra"]


def restore_checkpoint(root: str | Path, learner: Learner) -> tuple[Path | None, dict[str, Any]]:
    """Restore ``learner`` from the newest checkpoint under ``root`` that loads: ``(path, extra)``,
    or ``(None, {})`` when there is none. A corrupt newer checkpoint is skipped with a warning;
    if checkpoints exist but none loads, :class:`CheckpointError` (starting over silently would
    discard the run's progress). Every rank sees the same files, so all ranks pick the same."""
    found = complete_checkpoints(root)
    for path in reversed(found):
        try:
            return path, load_checkpoint(path, learner)
        except CheckpointError as exc:
            log.warning("skipping checkpoint %s: %s; trying an older one", path.name, exc)
    if found:
        raise CheckpointError(
            f"{root}: none of the {len(found)} checkpoints loads; move them away to start over"
        )
    return None, {}
