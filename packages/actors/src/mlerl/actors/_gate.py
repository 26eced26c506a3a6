"""A readers-writer gate so weight updates happen between generations, never during one.

Any number of generations may run at once; an update waits for them to finish and holds new
ones back until it is done (writer preference, so a steady stream of requests cannot starve
updates). This is what lets every completion carry the single policy version that produced it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class VersionGate:
    def __init__(self) -> None:
        self._cond = asyncio.Condition()
        self._active = 0
        self._updating = False
        self._waiting_updates = 0

    @asynccontextmanager
    async def generating(self) -> AsyncIterator[None]:
        async with self._cond:
            await self._cond.wait_for(lambda: not self._updating and self._waiting_updates == 0)
            self._active += 1
        try:
            yield
        finally:
            async with self._cond:
                self._active -= 1
                self._cond.notify_all()

    @asynccontextmanager
    async def updating(self) -> AsyncIterator[None]:
        async with self._cond:
            self._waiting_updates += 1
            try:
                await self._cond.wait_for(lambda: self._active == 0 and not self._updating)
            finally:
                self._waiting_updates -= 1
            self._updating = True
        try:
            yield
        finally:
            async with self._cond:
                self._updating = False
                self._cond.notify_all()
