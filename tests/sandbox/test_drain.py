"""After a run exits, the local backend reads its output to the end, however late the event
loop gets to it, where the run's cgroup proves no writer is left; without that proof it stops
after ``DRAIN_UNPROVEN_S`` and says in the outcome that output was cut.

A real program writes 12 KiB at once and exits; its stdout reader hands the supervisor 1 KiB
per read, each after 0.4 s (an event loop busy with other runs), so about 4.4 s of output is
still unread at the exit: more than ``DRAIN_UNPROVEN_S``. The old fixed two seconds are the
likely way a marker printed just before a crash went missing from one run of the instrument
corpus under CI load (the only way found by which stdout already written can be lost).
"""

from __future__ import annotations

import asyncio
import sys

from mlerl.sandbox._output import OutputSink
from mlerl.sandbox._proc import DRAIN_UNPROVEN_S, supervise
from mlerl.sandbox._runner import Outcome, started
from mlerl.sandbox._types import Limits

BYTES = 12 * 1024
PROGRAM = f"import os\nos.write(1, b'x' * {BYTES})\n"
READ_BYTES, READ_DELAY_S = 1024, 0.4


class SlowReader:
    """A stream reader that gets to its data late (``READ_DELAY_S`` per ``READ_BYTES``)."""

    def __init__(self, inner: asyncio.StreamReader) -> None:
        self.inner = inner

    async def read(self, n: int = -1) -> bytes:
        await asyncio.sleep(READ_DELAY_S)
        return await self.inner.read(min(n, READ_BYTES))


class EmptiedCgroup:
    """A run cgroup whose kill left no process: every writer of the pipes is gone."""

    async def kill_all(self) -> bool:
        return True

    def signal_all(self, sig: int) -> None:
        pass


async def _supervised(cg: EmptiedCgroup | None) -> tuple[int, Outcome]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        PROGRAM,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    assert proc.stdout is not None
    proc.stdout = SlowReader(proc.stdout)  # type: ignore[assignment]
    sink, out = OutputSink(10 * BYTES, None), started()
    await supervise(proc, sink, Limits(wall_time_s=60.0), out, cg)  # type: ignore[arg-type]
    return sink.streams["stdout"].total, out


async def test_an_emptied_cgroup_means_every_byte_is_read_after_the_exit() -> None:
    assert BYTES // READ_BYTES * READ_DELAY_S > DRAIN_UNPROVEN_S + 2.0  # the reader is slow
    total, out = await _supervised(EmptiedCgroup())
    assert out.exit_code == 0
    assert total == BYTES
    assert out.note == ""


async def test_without_a_cgroup_the_cut_output_is_said_in_the_note() -> None:
    total, out = await _supervised(None)
    assert out.exit_code == 0
    assert 0 < total < BYTES
    assert "output not read to its end" in out.note
