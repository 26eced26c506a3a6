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
from mlerl.learner._checkpoint import (
    CheckpointError,
    load_checkpoint,
    restore_checkpoint,
    save_checkpoint,
)

from .test_checkpoint import CFG


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
    data[len(data) // 2] ^= (
        0xFF  # one flipped byte in the tensor data: torch.load alone would not notice
    )
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
    (new / "COMMIT").write_text(
        "ok\n"
    )  # old-style COMMIT without a checksum: torch.load must catch it
    _plant(
        tmp_path / "ckpt" / "step_00000003", {"version": 3, "extra": _Payload(f"touch {marker}")}
    )
    learner = Learner(LearnerConfig(**CFG), tiny_model(seed=3))
    path, extra = restore_checkpoint(tmp_path / "ckpt", learner)
    assert path == old and learner.version == 1 and not marker.exists()


def test_no_loadable_checkpoint_is_an_error_not_a_fresh_start(tmp_path, tiny_model):
    old, new = _two_checkpoints(tmp_path / "ckpt", tiny_model)
    for ckpt in (old, new):
        (ckpt / "state.pt").write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match="none of the 2 checkpoints"):
        restore_checkpoint(tmp_path / "ckpt", Learner(LearnerConfig(**CFG), tiny_model()))
    assert restore_checkpoint(tmp_path / "empty", Learner(LearnerConfig(**CFG), tiny_model())) == (
        None,
        {},
    )


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


# Mutation survivors (benchmarks/tools/mutation.py): the rank logic, with torch.distributed faked.


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
    assert (
        save_checkpoint(tmp_path / "ckpt", learner, {"a": 1}) == tmp_path / "ckpt" / "step_00000003"
    )
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
    assert re.search(r"state\.pt is not a loadable checkpoint: \w+: \S", str(info.value)), str(
        info.value
    )


# Mutation survivors of _checkpoint.py (benchmarks/tools/mutation.py; docs/experiments/test-quality.md)


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


# Survivors of the complete _checkpoint run (docs/experiments/test-quality.md): what COMMIT is a checksum, what state is
# complete, what directory is a checkpoint, the state a rank other than 0 gathers, the defaults
# of a save, and leftovers that cannot be removed.

_COMMITS = {
    "ok": "ok",  # the marker written before checksums
    "md5": "md5 " + "0" * 32,  # another kind of digest, sorting before "sha256" ...
    "sha512": "sha512 " + "0" * 128,  # ... and after it
    "sha256-alone": "sha256",  # one word: no digest to compare
    "three-words": "sha256 " + "0" * 64 + " 2026-11-25",
}


@pytest.mark.parametrize("commit", list(_COMMITS.values()), ids=list(_COMMITS))
def test_only_a_commit_of_sha256_and_its_hex_is_a_checksum(tmp_path, commit):
    """Exactly two words, ``sha256 <hex>``, are a checksum to verify. Any other COMMIT is the
    marker of the format before checksums: not compared with state.pt, which then stands or
    falls by ``torch.load(weights_only=True)`` (a sound one loads, whatever digest is named)."""
    from mlerl.learner._checkpoint import _REQUIRED, read_checkpoint

    _minimal_checkpoint(tmp_path / "c")
    (tmp_path / "c" / "COMMIT").write_text(commit + "\n")
    assert set(read_checkpoint(tmp_path / "c")) == set(_REQUIRED)


@pytest.mark.parametrize(
    ("state", "missing"),
    [
        ({"version": 1, "running_dt": None, "policy": {}, "policy_opt": {}}, "rng, extra"),
        ([1, 2], "version, running_dt, policy, policy_opt, rng, extra"),
        (3, "version, running_dt, policy, policy_opt, rng, extra"),
    ],
    ids=["dict-without-rng-and-extra", "list", "int"],
)
def test_a_state_without_the_learners_keys_is_refused(tmp_path, state, missing):
    from mlerl.learner._checkpoint import read_checkpoint

    _plant(tmp_path / "c", state)  # loads under weights_only, the checksum matches
    with pytest.raises(CheckpointError, match=f"state.pt lacks {missing}$"):
        read_checkpoint(tmp_path / "c")


def test_only_committed_directories_are_checkpoints(tmp_path):
    from mlerl.learner._checkpoint import complete_checkpoints, latest_checkpoint

    root = tmp_path / "ckpt"
    _minimal_checkpoint(root / "step_00000001")
    (root / "step_00000002").mkdir()  # a checkpoint being copied in: COMMIT comes last
    (root / "step_00000002" / "state.pt").write_bytes(b"partial")
    (root / "step_00000003").write_text("a file")
    _minimal_checkpoint(root / ".tmp-step_00000004")  # a write that was never renamed
    assert complete_checkpoints(root) == [root / "step_00000001"]
    assert latest_checkpoint(root) == root / "step_00000001"
    assert (
        complete_checkpoints(tmp_path / "absent") == []
        and latest_checkpoint(tmp_path / "absent") is None
    )


def test_a_rank_other_than_0_gathers_no_full_state(tiny_model, monkeypatch):
    """Under FSDP2 rank 0 alone writes: the full, unsharded state dicts are gathered to its host
    memory only (``full_state_dict``, ``cpu_offload``); another rank holds no copy of the model
    or optimizer (torch.distributed faked: rank 0, then rank 1)."""
    from mlerl.learner._checkpoint import learner_state

    learner = Learner(LearnerConfig(**CFG), tiny_model())
    learner.version = 5
    names = set(learner.policy.state_dict())
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.distributed, "get_rank", lambda group=None: 0)
    state = learner_state(learner)
    assert set(state["policy"]) == names and len(state["policy_opt"]["param_groups"]) == 1
    monkeypatch.setattr(torch.distributed, "get_rank", lambda group=None: 1)
    state = learner_state(learner)
    assert state["policy"] == {} and state["policy_opt"] == {}
    assert state["version"] == 5 and set(state["rng"]) == {"torch", "python", "numpy"}


def test_by_default_a_save_keeps_the_two_newest_under_a_root_it_makes(tmp_path, tiny_model):
    from mlerl.learner._checkpoint import complete_checkpoints

    root = tmp_path / "runs" / "a" / "ckpt"  # neither runs nor runs/a exists
    learner = Learner(LearnerConfig(**CFG), tiny_model())
    for version in (1, 2, 3):
        learner.version = version
        save_checkpoint(root, learner, {"v": version})
    assert [p.name for p in complete_checkpoints(root)] == ["step_00000002", "step_00000003"]


def test_leftovers_that_cannot_be_removed_do_not_fail_the_save(tmp_path, tiny_model):
    """A stale temp dir and an old checkpoint that cannot be removed (here symlinks to a run
    elsewhere, which rmtree refuses to follow) stay: the new checkpoint is committed and the
    save succeeds, and nothing behind the links is deleted."""
    elsewhere = tmp_path / "other_run"
    _minimal_checkpoint(elsewhere / "step_00000001")
    (elsewhere / "scratch").mkdir()
    (elsewhere / "scratch" / "keep.txt").write_text("x")
    root = tmp_path / "ckpt"
    root.mkdir()
    (root / "step_00000001").symlink_to(elsewhere / "step_00000001", target_is_directory=True)
    (root / ".tmp-step_00000009").symlink_to(elsewhere / "scratch", target_is_directory=True)
    learner = Learner(LearnerConfig(**CFG), tiny_model())
    learner.version = 2
    assert save_checkpoint(root, learner, {"a": 1}, keep=1) == root / "step_00000002"
    assert (root / "step_00000001").is_symlink() and (root / ".tmp-step_00000009").is_symlink()
    assert sorted(p.name for p in (elsewhere / "step_00000001").iterdir()) == ["COMMIT", "state.pt"]
    assert (elsewhere / "scratch" / "keep.txt").read_text() == "x"
    assert load_checkpoint(root / "step_00000002", learner) == {"a": 1}
