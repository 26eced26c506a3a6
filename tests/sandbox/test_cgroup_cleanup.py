"""The local backend never leaves a run's cgroups behind: not when the run is cancelled at any
await, and not when the kernel keeps them busy for a while after the kill.

One left-over cgroup of this process fails every later test's "nothing left" check: one run
cgroup left by an earlier test of the same process once turned 56 sandbox tests red. `_left`
repeats the conftest's `leftover_runs` (a test module cannot import conftest).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from mlerl.sandbox import ExecutionRequest, Limits, SandboxConfig, _cgroup, _local, make_sandbox
from mlerl.sandbox._doctor import _cgroups_work
from mlerl.sandbox._proc import CgroupRemovals
from mlerl.sandbox._workdir import owner_tag

SLOW_STAGING = 0.3  # seconds the staging thread takes in the cancellation test


def _left(work_root: Path) -> list[str]:
    """This process's run dirs and run cgroups that still exist."""
    owner = owner_tag()
    dirs = [work_root / owner, *(base / owner for base in _cgroup.base_dirs().values())]
    return [str(p) for d in dirs for p in d.glob("*") if p.is_dir()]


@pytest.mark.skipif(not _cgroups_work().startswith("ok"), reason="needs writable cgroups (root)")
@pytest.mark.parametrize("cancel_after_s", [0.0, 0.1, 1.5])
async def test_a_run_cancelled_at_any_point_leaves_no_cgroup_or_run_dir(
    tmp_path: Path, monkeypatch, cancel_after_s
) -> None:
    """Cancelled before it starts (0 s), while its inputs are staged (0.1 s: staging takes
    0.3 s here) or while the program runs (1.5 s): nothing of the run is left once the
    cancellation is through."""
    real_stage = _local.stage_inputs

    def slow_stage(*args, **kwargs):  # type: ignore[no-untyped-def]
        import time

        time.sleep(SLOW_STAGING)
        return real_stage(*args, **kwargs)

    monkeypatch.setattr(_local, "stage_inputs", slow_stage)
    data = tmp_path / "public"
    data.mkdir()
    (data / "train.csv").write_text("a,b\n1,2\n")
    work_root = tmp_path / "sandbox"
    sandbox = make_sandbox(SandboxConfig(backend="local", work_root=str(work_root)))
    request = ExecutionRequest(
        program="import time; time.sleep(30)",
        data_dir=data,
        limits=Limits(wall_time_s=60.0, memory_mb=512, pids=64),
    )
    task = asyncio.create_task(sandbox.run(request))
    await asyncio.sleep(cancel_after_s)
    if cancel_after_s > 1:
        assert _left(work_root), "the run should be under way by now"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await sandbox.close()
    assert _left(work_root) == []


class _BusyCgroup:
    """A run cgroup the kernel keeps busy for the first ``busy_for`` removal attempts."""

    procs_files: list[str] = []

    def __init__(self, busy_for: int) -> None:
        self.busy_for, self.attempts = busy_for, 0

    async def remove(self) -> bool:
        self.attempts += 1
        return self.attempts > self.busy_for


async def test_a_busy_cgroup_is_removed_in_the_background_and_close_waits_for_it() -> None:
    removals = CgroupRemovals()
    busy = _BusyCgroup(busy_for=2)
    await removals.remove(busy)  # type: ignore[arg-type]
    assert busy.attempts == 1 and len(removals) == 1  # returned without waiting
    await removals.close()
    assert busy.attempts == 3 and not removals


async def test_a_cgroup_removed_at_once_leaves_nothing_pending() -> None:
    removals = CgroupRemovals()
    free = _BusyCgroup(busy_for=0)
    await removals.remove(free)  # type: ignore[arg-type]
    assert free.attempts == 1 and not removals


async def test_background_removal_gives_up_after_its_patience(caplog) -> None:
    stuck = _BusyCgroup(busy_for=10**6)
    await CgroupRemovals().remove_later(stuck, patience_s=2.5)  # type: ignore[arg-type]
    assert 2 <= stuck.attempts <= 3
    assert "could not remove the run cgroups" in caplog.text
