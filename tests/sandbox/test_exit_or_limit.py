"""The race every backend runs: the program's exit against its output limit and wall time
(``_runner.exit_or_limit``), with fakes for the process and its stopping."""

from __future__ import annotations

import asyncio

from mlerl.sandbox import Limits
from mlerl.sandbox._runner import Outcome, exit_or_limit


class _Program:
    """Exits when ``exit_now`` is set, or when stopped; records each ``stop(grace)``."""

    def __init__(self) -> None:
        self.exit_now = asyncio.Event()
        self.stops: list[float] = []

    async def wait(self) -> int:
        await self.exit_now.wait()
        return 0

    async def stop(self, grace: float) -> None:
        self.stops.append(grace)
        self.exit_now.set()


async def _race(lim: Limits, *, exit_after: float | None = None, limit_after: float | None = None):
    program, limit_hit, out = _Program(), asyncio.Event(), Outcome()
    loop = asyncio.get_running_loop()
    if exit_after is not None:
        loop.call_later(exit_after, program.exit_now.set)
    if limit_after is not None:
        loop.call_later(limit_after, limit_hit.set)
    async with asyncio.TaskGroup() as tg:
        exited = tg.create_task(program.wait())
        stopped = await exit_or_limit(tg, exited, limit_hit, lim, out, program.stop)
        # the helper leaves no task of its own waiting: this group ends once ``exited`` does
    return stopped, out.timed_out, program.stops, exited


async def test_a_program_that_exits_in_time_is_not_stopped() -> None:
    stopped, timed_out, stops, exited = await _race(
        Limits(wall_time_s=5.0, kill_grace_s=2.0), exit_after=0.01
    )
    assert (stopped, timed_out, stops) == (False, False, [])
    assert exited.result() == 0


async def test_the_wall_time_stops_it_with_the_kill_grace() -> None:
    stopped, timed_out, stops, exited = await _race(Limits(wall_time_s=0.05, kill_grace_s=1.5))
    assert (stopped, timed_out, stops) == (True, True, [1.5])
    assert exited.done()


async def test_the_output_limit_stops_it_at_once_and_is_no_timeout() -> None:
    stopped, timed_out, stops, _ = await _race(
        Limits(wall_time_s=5.0, kill_grace_s=2.0), limit_after=0.01
    )
    assert (stopped, timed_out, stops) == (True, False, [0.0])


async def test_an_exit_already_done_wins_over_a_limit_set_at_the_same_time() -> None:
    program, limit_hit, out = _Program(), asyncio.Event(), Outcome()
    program.exit_now.set()
    limit_hit.set()
    async with asyncio.TaskGroup() as tg:
        exited = tg.create_task(program.wait())
        await asyncio.sleep(0)  # ``exited`` has finished before the race starts
        assert exited.done()
        stopped = await exit_or_limit(tg, exited, limit_hit, Limits(), out, program.stop)
    assert (stopped, out.timed_out, program.stops) == (False, False, [])


async def test_a_failing_stop_propagates_and_leaves_no_waiter_behind() -> None:
    async def broken_stop(grace: float) -> None:
        raise RuntimeError("engine down")

    limit_hit, out = asyncio.Event(), Outcome()
    never = asyncio.Event()
    try:
        async with asyncio.TaskGroup() as tg:
            exited = tg.create_task(never.wait())
            await exit_or_limit(tg, exited, limit_hit, Limits(wall_time_s=0.01), out, broken_stop)
    except* RuntimeError as group:
        assert str(group.exceptions[0]) == "engine down"
    else:
        raise AssertionError("the stop's error was swallowed")
    assert out.timed_out and exited.cancelled()
