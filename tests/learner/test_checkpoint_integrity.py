"""Checkpoints never execute code from the file, and a corrupt newest one falls back to the newest
valid one with a warning."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import subprocess
import sys

import pytest
import torch

from mlerl.learner import Learner, LearnerConfig
from mlerl.learner._checkpoint import CheckpointError, load_checkpoint, restore_checkpoint, save_checkpoint

CFG = dict(batch_size=4, micro_batch_size=2, bf16=False, gradient_checkpointing=False, lr=1e-3, critic_lr=1e-3)


class _Payload:
    """Unpickling this runs ``os.system(command)``."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


def _plant(path, state_obj) -> None:
    """A complete-looking checkpoint dir whose state.pt is ``state_obj`` (COMMIT with its sha256)."""
    path.mkdir(parents=True)
    torch.save(state_obj, path / "state.pt")
    digest = hashlib.sha256((path / "state.pt").read_bytes()).hexdigest()
    (path / "COMMIT").write_text(f"sha256 {digest}\n")


def _two_checkpoints(root, tiny_model):
    learner = Learner(LearnerConfig(**CFG), tiny_model())
    for version in (1, 2):
        learner.version = version
        save_checkpoint(root, learner, {"marker": version})
    return root / "step_00000001", root / "step_00000002"


def test_pickle_payload_in_a_checkpoint_does_not_run(tmp_path, tiny_model):
    marker = tmp_path / "pwned"
    evil = tmp_path / "ckpt" / "step_00000009"
    _plant(evil, {"version": 9, "extra": _Payload(f"touch {marker}")})
    # the payload is live: a plain unpickle (weights_only=False) in another process runs it
    code = f"import torch; torch.load({str(evil / 'state.pt')!r}, weights_only=False)"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    assert marker.exists()
    marker.unlink()

    learner = Learner(LearnerConfig(**CFG), tiny_model())
    with pytest.raises(CheckpointError, match="not a loadable checkpoint"):
        load_checkpoint(evil, learner)
    assert not marker.exists()


def test_corrupt_newest_checkpoint_falls_back_to_the_newest_valid(tmp_path, tiny_model, caplog):
    old, new = _two_checkpoints(tmp_path / "ckpt", tiny_model)
    data = bytearray((new / "state.pt").read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte in the tensor data: torch.load alone would not notice
    (new / "state.pt").write_bytes(bytes(data))
    learner = Learner(LearnerConfig(**CFG), tiny_model(seed=3))
    with caplog.at_level(logging.WARNING, logger="mlerl.learner._checkpoint"):
        path, extra = restore_checkpoint(tmp_path / "ckpt", learner)
    assert path == old and extra == {"marker": 1} and learner.version == 1
    assert "step_00000002" in caplog.text and "sha256" in caplog.text


def test_truncated_or_planted_newest_checkpoint_falls_back(tmp_path, tiny_model):
    marker = tmp_path / "pwned"
    old, new = _two_checkpoints(tmp_path / "ckpt", tiny_model)
    (new / "state.pt").write_bytes((new / "state.pt").read_bytes()[:1000])
    (new / "COMMIT").write_text("ok\n")  # old-style COMMIT without a checksum: torch.load must catch it
    _plant(tmp_path / "ckpt" / "step_00000003", {"version": 3, "extra": _Payload(f"touch {marker}")})
    learner = Learner(LearnerConfig(**CFG), tiny_model(seed=3))
    path, extra = restore_checkpoint(tmp_path / "ckpt", learner)
    assert path == old and learner.version == 1 and not marker.exists()


def test_no_loadable_checkpoint_is_an_error_not_a_fresh_start(tmp_path, tiny_model):
    old, new = _two_checkpoints(tmp_path / "ckpt", tiny_model)
    for ckpt in (old, new):
        (ckpt / "state.pt").write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match="none of the 2 checkpoints"):
        restore_checkpoint(tmp_path / "ckpt", Learner(LearnerConfig(**CFG), tiny_model()))
    assert restore_checkpoint(tmp_path / "empty", Learner(LearnerConfig(**CFG), tiny_model())) == (None, {})


def test_checkpoint_round_trips_rng_state(tmp_path, tiny_model):
    import random

    import numpy as np

    learner = Learner(LearnerConfig(**CFG), tiny_model())
    for seed in (np.random.seed, random.seed, torch.manual_seed):
        seed(7)
    save_checkpoint(tmp_path, learner, {})
    want = (np.random.rand(), random.random(), torch.rand(1).item())
    for seed in (np.random.seed, random.seed, torch.manual_seed):
        seed(0)
    restore_checkpoint(tmp_path, learner)
    assert (np.random.rand(), random.random(), torch.rand(1).item()) == want


# Mutation survivors (benchmarks/mutation.py): the rank logic, with torch.distributed faked.

def test_only_rank_0_writes_and_every_rank_meets_at_the_barrier(tmp_path, tiny_model, monkeypatch):
    from mlerl.learner import _checkpoint

    learner = Learner(LearnerConfig(**CFG), tiny_model())
    learner.version = 3
    calls = []
    monkeypatch.setattr(_checkpoint, "is_distributed", lambda: True)
    monkeypatch.setattr(torch.distributed, "barrier", lambda: calls.append("barrier"))
    for rank in (1, 2):
        monkeypatch.setattr(torch.distributed, "get_rank", lambda: rank)
        assert save_checkpoint(tmp_path / "ckpt", learner, {}) is None
    assert not (tmp_path / "ckpt").exists() and calls == ["barrier", "barrier"]
    monkeypatch.setattr(torch.distributed, "get_rank", lambda: 0)
    assert save_checkpoint(tmp_path / "ckpt", learner, {"a": 1}) == tmp_path / "ckpt" / "step_00000003"
    assert calls == ["barrier"] * 3  # rank 0 waits too, after the commit


def test_an_unloadable_state_names_the_loaders_error(tmp_path, tiny_model):
    bad = tmp_path / "ckpt" / "step_00000001"
    bad.mkdir(parents=True)
    (bad / "state.pt").write_bytes(b"not a zip archive at all\n")
    digest = hashlib.sha256((bad / "state.pt").read_bytes()).hexdigest()
    (bad / "COMMIT").write_text(f"sha256 {digest}\n")  # the checksum matches: the load itself fails
    learner = Learner(LearnerConfig(**CFG), tiny_model())
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(bad, learner)
    # "<path>: state.pt is not a loadable checkpoint: <ExceptionType>: <its first line>"
    assert re.search(r"state\.pt is not a loadable checkpoint: \w+: \S", str(info.value)), str(info.value)


# Mutation survivors of _checkpoint.py (benchmarks/mutation.py, 2026-11-25)

def _minimal_checkpoint(path, digest=None):
    """A state.pt with the required keys and a COMMIT naming ``digest`` (default: its own)."""
    from mlerl.learner._checkpoint import _REQUIRED

    path.mkdir(parents=True)
    torch.save({k: {} for k in _REQUIRED}, path / "state.pt")
    real = hashlib.sha256((path / "state.pt").read_bytes()).hexdigest()
    (path / "COMMIT").write_text(f"sha256 {digest or real}\n")
    return real


@pytest.mark.parametrize("stored", ["0" * 64, "f" * 64])
def test_a_checksum_that_differs_either_way_is_refused(tmp_path, stored):
    from mlerl.learner._checkpoint import read_checkpoint

    real = _minimal_checkpoint(tmp_path / "c", stored)
    assert real != stored
    with pytest.raises(CheckpointError, match="does not match the sha256"):
        read_checkpoint(tmp_path / "c")
    _minimal_checkpoint(tmp_path / "ok")
    assert set(read_checkpoint(tmp_path / "ok")) >= {"version", "policy"}


def test_an_unreadable_state_is_a_checkpoint_error(tmp_path):
    from mlerl.learner._checkpoint import read_checkpoint

    (tmp_path / "c" / "state.pt").mkdir(parents=True)  # a directory: open() raises an OSError
    (tmp_path / "c" / "COMMIT").write_text("sha256 " + "0" * 64)
    with pytest.raises(CheckpointError, match="cannot read"):
        read_checkpoint(tmp_path / "c")


def test_the_loaders_error_is_named_by_its_first_line(tmp_path, monkeypatch):
    from mlerl.learner import _checkpoint

    _minimal_checkpoint(tmp_path / "c")

    def fail(*a, **k):
        raise RuntimeError("first line\nsecond line")

    monkeypatch.setattr(_checkpoint.torch, "load", fail)
    with pytest.raises(CheckpointError) as info:
        _checkpoint.read_checkpoint(tmp_path / "c")
    assert str(info.value).endswith("RuntimeError: first line")


@pytest.mark.parametrize("error", [KeyError, ValueError, TypeError, RuntimeError])
def test_a_state_that_does_not_fit_the_learner_is_a_checkpoint_error(tmp_path, monkeypatch, error):
    from mlerl.learner import _checkpoint

    _minimal_checkpoint(tmp_path / "c")

    def misfit(learner, state):
        raise error("shape mismatch")

    monkeypatch.setattr(_checkpoint, "load_learner_state", misfit)
    with pytest.raises(CheckpointError, match=f"does not fit this learner: {error.__name__}"):
        _checkpoint.load_checkpoint(tmp_path / "c", learner=None)
