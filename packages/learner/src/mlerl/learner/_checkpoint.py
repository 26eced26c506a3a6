"""Atomic checkpoints of the whole learner: models, optimizers, RNG, buffer state, version.

Layout: ``ROOT/step_{version:08d}/`` holding ``state.pt`` (torch.save of full, unsharded state
dicts) and ``COMMIT`` (written last, after an fsync of ``state.pt``). A checkpoint is written
in ``ROOT/.tmp-step_*`` and renamed into place only after ``COMMIT`` is on disk, so a crash at
any moment leaves either the previous complete checkpoint or the new one, never a partial one
that :func:`latest_checkpoint` would pick. Temp dirs of crashed writes are removed on the next
save.

Collective under FSDP2: every rank calls :func:`save_checkpoint` / :func:`load_checkpoint`;
rank 0 writes, and loading broadcasts from rank 0's full state dicts.
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mlerl.learner._learner import Learner
from mlerl.learner._models import is_distributed


def _options(**kw: Any):
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(full_state_dict=True, cpu_offload=True, **kw)


def learner_state(learner: Learner) -> dict[str, Any]:
    """Full state of the learner (collective under FSDP2; complete on rank 0)."""
    from torch.distributed.checkpoint.state_dict import get_state_dict

    state: dict[str, Any] = {"version": learner.version, "running_dt": learner.running_dt}
    state["policy"], state["policy_opt"] = get_state_dict(learner.policy, learner.policy_opt, options=_options())
    if learner.critic is not None:
        state["critic"], state["critic_opt"] = get_state_dict(learner.critic, learner.critic_opt, options=_options())
    state["rng"] = {"torch": torch.get_rng_state(), "python": random.getstate(), "numpy": np.random.get_state()}
    return state


def load_learner_state(learner: Learner, state: dict[str, Any]) -> None:
    from torch.distributed.checkpoint.state_dict import set_state_dict

    opts = _options(broadcast_from_rank0=is_distributed())
    set_state_dict(learner.policy, learner.policy_opt, model_state_dict=state["policy"], optim_state_dict=state["policy_opt"], options=opts)
    if learner.critic is not None:
        set_state_dict(learner.critic, learner.critic_opt, model_state_dict=state["critic"], optim_state_dict=state["critic_opt"], options=opts)
    learner.version, learner.running_dt = int(state["version"]), state["running_dt"]
    torch.set_rng_state(state["rng"]["torch"])
    random.setstate(state["rng"]["python"])
    np.random.set_state(state["rng"]["numpy"])


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_commit(tmp: Path) -> None:
    with open(tmp / "COMMIT", "w") as f:
        f.write("ok\n")
        f.flush()
        os.fsync(f.fileno())


def save_checkpoint(root: str | Path, learner: Learner, extra: dict[str, Any], keep: int = 2) -> Path | None:
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
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    _write_commit(tmp)
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


def load_checkpoint(path: str | Path, learner: Learner) -> dict[str, Any]:
    """Restore ``learner`` from ``path``; returns the ``extra`` dict saved with it."""
    path = Path(path)
    if not (path / "COMMIT").is_file():
        raise FileNotFoundError(f"{path}: not a complete checkpoint (no COMMIT marker)")
    state = torch.load(path / "state.pt", map_location="cpu", weights_only=False)
    load_learner_state(learner, state)
    return state["extra"]
