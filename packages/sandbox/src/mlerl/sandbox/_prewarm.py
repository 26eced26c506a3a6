"""Sandboxes started ahead of their programs: the local backend's warm pool.

A warm sandbox is a complete run environment made before its program is known: the run's
cgroups, its work dir (tmpfs, empty ``main.py``), and bubblewrap with all of the run's
namespaces and mounts, whose inner shell has said "started", and whose waiting process (see
below) blocks on a pipe. A run takes one whose *shape* (data dir, limits, entry, env:
everything that went into its namespaces, mounts and environment) equals its request's,
writes ``main.py`` into the work dir, and writes "go"; the program then starts. So a program gets
exactly what a freshly started sandbox would give it, and each warm sandbox serves one program
only: nothing is shared between programs, isolation is unchanged. What is saved is the
start-up latency (the ``sh``, ``bwrap`` and ``bash`` execs, namespaces and mounts), not its CPU:
that is spent ahead, while the previous program runs.

For the usual entry (``python <script>.py ...``) the waiting process is the program's own
interpreter, already started (:data:`LAUNCHER`, ``python -c`` as the sandbox uid): on "go" it
runs the script as ``__main__`` in place, so the program also skips the interpreter's start-up
(and, with ``SandboxConfig.preload``, the imports of those modules).
What the script sees is what ``python main.py`` gives it: ``sys.argv``, ``sys.path[0]`` (the
script's directory), ``__file__``, ``__name__``, ``__spec__``/``__loader__``, the traceback of an
uncaught exception (launcher frames removed) and exit status 1, ``SystemExit``'s status, atexit.
Other entries wait in the inner shell (``_bwrap.STARTED_THEN_WAIT``) and are exec'd on "go".
Either way the waiting process says "running" on the status pipe after "go" and closes it
before the program starts: a run without that word is a sandbox that died while it waited
(never the program's doing), and is retried like a failed set-up.

Guarantees: at most ``capacity`` sandboxes wait at once (the oldest is discarded for a new
one); a sandbox made on another event loop, or whose process died, is never handed out;
``discard`` kills a sandbox through its cgroup and removes its work dir and cgroups.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from mlerl.sandbox import _cgroup
from mlerl.sandbox._types import ExecutionRequest
from mlerl.sandbox._workdir import WorkDir

Shape = tuple[object, ...]

LAUNCHER = r"""
import os, sys
status, go = int(sys.argv[1]), int(sys.argv[2])
for name in filter(None, sys.argv[3].split(",")):
    try:
        __import__(name)
    except Exception:
        pass
word = b""
while not word.endswith(b"\n") and len(word) < 16:
    chunk = os.read(go, 16)
    if not chunk:
        break
    word += chunk
if word != b"go\n":
    os._exit(126)
os.write(status, b"running")
os.close(status)
os.close(go)
import builtins, importlib.machinery, types
sys.argv = sys.argv[4:]
path = os.path.abspath(sys.argv[0])
sys.path[0] = os.path.dirname(path)
main = types.ModuleType("__main__")
main.__file__, main.__builtins__, main.__cached__ = path, builtins, None
main.__loader__ = importlib.machinery.SourceFileLoader("__main__", path)
sys.modules["__main__"] = main
del status, go, word, builtins, types
try:
    with open(path, "rb") as source:
        code = compile(source.read(), path, "exec")
    exec(code, main.__dict__)
except (SystemExit, KeyboardInterrupt):
    raise
except BaseException as exc:
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != path:
        tb = tb.tb_next
    sys.excepthook(type(exc), exc.with_traceback(tb), tb)
    sys.exit(1)
"""
"""Imports the comma-separated modules of ``argv[3]`` (``SandboxConfig.preload``), waits for
"go" on the descriptor named by ``argv[2]``, says "running" on ``argv[1]``, closes both, then
runs ``argv[4]`` (the script) with ``argv[4:]`` as ``sys.argv``, as ``python <script>`` would."""


def launchable(entry: tuple[str, ...]) -> bool:
    """Whether ``entry`` runs a script with the sandbox's interpreter (``python x.py ...``)."""
    return (
        len(entry) >= 2
        and entry[0] == "python"
        and entry[1].endswith(".py")
        and not entry[1].startswith("-")
    )


def shape_of(request: ExecutionRequest) -> Shape:
    """What a warm sandbox was made for: everything but the program and what is collected."""
    data = None if request.data_dir is None else str(request.data_dir.resolve())
    return (
        data,
        dataclasses.astuple(request.resolved_limits),
        tuple(request.entry),
        tuple(sorted(request.env.items())),
    )


@dataclass
class Warm:
    """One sandbox waiting for its program."""

    shape: Shape
    proc: asyncio.subprocess.Process
    wd: WorkDir
    cg: _cgroup.RunCgroup | None
    go_w: int
    """The host's end of the go pipe; closed once used or discarded."""
    status_r: int
    """The host's end of the status pipe ("started" was read; "running" follows "go")."""
    loop: asyncio.AbstractEventLoop

    def usable(self) -> bool:
        return self.proc.returncode is None and self.loop is asyncio.get_running_loop()

    def close_go(self) -> None:
        if self.go_w >= 0:
            os.close(self.go_w)
            self.go_w = -1

    def close_status(self) -> None:
        if self.status_r >= 0:
            os.close(self.status_r)
            self.status_r = -1


class WarmPool:
    """The waiting sandboxes, oldest first, and the spawns under way."""

    def __init__(self, capacity: int, discard: Callable[[Warm], Awaitable[None]]) -> None:
        self.capacity = capacity
        self._discard = discard
        self._waiting: list[Warm] = []
        self._spawning: dict[Shape, int] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def take(self, shape: Shape) -> Warm | None:
        """A usable sandbox made for ``shape``, or None."""
        for warm in list(self._waiting):
            if warm.shape != shape:
                continue
            self._waiting.remove(warm)
            if warm.usable():
                return warm
            self._background(self._discard(warm))
        return None

    def wants(self, shape: Shape) -> bool:
        """Whether one more sandbox for ``shape`` should be started now."""
        if self.capacity == 0:
            return False
        have = sum(w.shape == shape for w in self._waiting) + self._spawning.get(shape, 0)
        return have < self.capacity

    def refill(self, shape: Shape, spawn: Callable[[], Awaitable[Warm | None]]) -> None:
        """Start one sandbox for ``shape`` in the background (see :meth:`wants`)."""
        self._spawning[shape] = self._spawning.get(shape, 0) + 1

        async def make() -> None:
            try:
                warm = await spawn()
            finally:
                self._spawning[shape] -= 1
                if not self._spawning[shape]:
                    del self._spawning[shape]
            if warm is None:
                return
            self._waiting.append(warm)
            while len(self._waiting) > self.capacity:
                self._background(self._discard(self._waiting.pop(0)))

        self._background(make())

    def discard_later(self, warm: Warm) -> None:
        """Discard a sandbox taken but not used."""
        self._background(self._discard(warm))

    def _background(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        """Wait for the spawns under way, then discard every waiting sandbox."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        waiting, self._waiting = self._waiting, []
        await asyncio.gather(*(self._discard(w) for w in waiting), return_exceptions=True)
