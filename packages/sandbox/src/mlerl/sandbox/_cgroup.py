"""Per-run cgroups for the local backend (cgroup v1 controllers or the v2 unified tree).

Guarantees, where the host lets this process write its cgroup tree (root here):
- memory: a hard limit equal to memory + swap (v1 ``memsw``; v2 ``swap.max=0``); an OOM kill
  inside is visible through :meth:`RunCgroup.oom_kills`.
- pids: ``pids.max`` counts every process and thread of the run, whatever uid it runs as
  (RLIMIT_NPROC is per-user and ignored for root, so it is not the mechanism here).
- cpu: a CFS quota of ``cpus`` cores.
- kill: :meth:`RunCgroup.kill_all` first forbids forks (``pids.max = 0`` or ``cgroup.kill``),
  then SIGKILLs every member until none is left: descendants that called ``setsid`` or
  double-forked are members too, and no pid is read outside the cgroup (no stale-pid kills).
Each run's cgroups live at ``<own cgroup>/mlerl-sandbox/<owner>/<run>``, so a reaper can find
those of dead executors. Where nothing is writable, :func:`create` returns None and the
backend reports the lesser isolation.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
V1_CONTROLLERS = ("memory", "pids", "cpu")


def _own_path(controller: str) -> str:
    """This process's cgroup path in ``controller`` ('' = the v2 unified entry)."""
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, names, path = line.rstrip("\n").split(":", 2)
            if controller in names.split(",") or (controller == "" and names == ""):
                return path
    return "/"


def is_v2() -> bool:
    return (ROOT / "cgroup.controllers").exists()


def base_dirs() -> dict[str, Path]:
    """controller -> the ``mlerl-sandbox`` directory under this process's cgroup."""
    if is_v2():
        return {"unified": ROOT / _own_path("").lstrip("/") / "mlerl-sandbox"}
    return {
        c: ROOT / c / _own_path(c).lstrip("/") / "mlerl-sandbox"
        for c in V1_CONTROLLERS
        if (ROOT / c).is_dir()
    }


def _write(path: Path, value: str) -> None:
    path.write_text(value)


class RunCgroup:
    """The cgroups of one run."""

    def __init__(self, dirs: dict[str, Path]) -> None:
        self.dirs = dirs

    @property
    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs.values()]

    def _main(self) -> Path:
        return self.dirs.get("unified") or self.dirs.get("pids") or next(iter(self.dirs.values()))

    def members(self) -> list[int]:
        try:
            text = (self._main() / "cgroup.procs").read_text()
        except OSError:
            return []
        return [int(p) for p in text.split()]

    def oom_kills(self) -> int:
        if "unified" in self.dirs:
            path, key = self.dirs["unified"] / "memory.events", "oom_kill"
        elif "memory" in self.dirs:
            path, key = self.dirs["memory"] / "memory.oom_control", "oom_kill"
        else:
            return 0
        try:
            for line in path.read_text().splitlines():
                k, _, v = line.partition(" ")
                if k == key:
                    return int(v)
        except (OSError, ValueError):
            pass
        return 0

    def signal_all(self, sig: int) -> None:
        for pid in self.members():
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    async def kill_all(self, rounds: int = 200) -> bool:
        """Forbid forks, SIGKILL every member until empty; True when empty."""
        if "unified" in self.dirs and (self.dirs["unified"] / "cgroup.kill").exists():
            try:
                _write(self.dirs["unified"] / "cgroup.kill", "1")
            except OSError:
                pass
        for key in ("pids", "unified"):
            if key in self.dirs:
                try:
                    _write(self.dirs[key] / "pids.max", "0")
                except OSError:
                    pass
        for _ in range(rounds):
            if not self.members():
                return True
            self.signal_all(signal.SIGKILL)
            await asyncio.sleep(0.01)
        return not self.members()

    async def remove(self) -> bool:
        """Kill what is left and delete the cgroups; True when all are gone."""
        await self.kill_all()
        ok = True
        for d in self.dirs.values():
            for _ in range(100):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    await asyncio.sleep(0.02)
            else:
                ok = False
        return ok


def _limits(dirs: dict[str, Path], memory_mb: int, pids: int, cpus: float) -> None:
    mem = str(memory_mb * 1024 * 1024)
    quota = str(max(1000, int(cpus * 100_000)))
    if "unified" in dirs:
        d = dirs["unified"]
        for name, value in (
            ("memory.max", mem),
            ("memory.swap.max", "0"),
            ("pids.max", str(pids)),
            ("cpu.max", f"{quota} 100000"),
        ):
            if (d / name).exists():
                _write(d / name, value)
        return
    if "memory" in dirs:
        _write(dirs["memory"] / "memory.limit_in_bytes", mem)
        memsw = dirs["memory"] / "memory.memsw.limit_in_bytes"
        if memsw.exists():
            _write(memsw, mem)
    if "pids" in dirs:
        _write(dirs["pids"] / "pids.max", str(pids))
    if "cpu" in dirs:
        _write(dirs["cpu"] / "cpu.cfs_period_us", "100000")
        _write(dirs["cpu"] / "cpu.cfs_quota_us", quota)


def create(owner: str, run_id: str, memory_mb: int, pids: int, cpus: float) -> RunCgroup | None:
    """The run's cgroups with limits set, or None where cgroups are not writable."""
    dirs: dict[str, Path] = {}
    try:
        for controller, base in base_dirs().items():
            d = base / owner / run_id
            d.mkdir(parents=True, exist_ok=False)
            dirs[controller] = d
        if "memory" not in dirs and "unified" not in dirs:
            raise OSError("no memory controller")
        _limits(dirs, memory_mb, pids, cpus)
    except OSError:
        for d in dirs.values():
            try:
                d.rmdir()
            except OSError:
                pass
        return None
    return RunCgroup(dirs)


async def reap(is_alive: Callable[[str], bool], everything: bool = False) -> int:
    """Kill and remove run cgroups of dead owners (all when ``everything``); returns count."""
    runs: dict[tuple[str, str], dict[str, Path]] = {}
    for controller, base in base_dirs().items():
        if not base.is_dir():
            continue
        for owner in base.iterdir():
            if owner.is_dir() and (everything or not is_alive(owner.name)):
                for run in owner.iterdir():
                    if run.is_dir():
                        runs.setdefault((owner.name, run.name), {})[controller] = run
    for dirs in runs.values():
        await RunCgroup(dirs).remove()
    for base in base_dirs().values():
        for owner in base.iterdir() if base.is_dir() else ():
            if everything or not is_alive(owner.name):
                try:
                    owner.rmdir()
                except OSError:
                    pass
    return len(runs)
