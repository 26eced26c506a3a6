"""Process supervision for `mlerl train`: start components, restart the ones that die, stop all.

Guarantees:
- every child runs in its own session (process group), so stopping a child also stops what it
  spawned (sandboxes, vLLM engine processes);
- every child dies with the supervisor, however the supervisor dies (SIGKILL included:
  ``die_with_parent``), and so does what the child starts (learner ranks and sandboxes arm
  the same; grading processes end at EOF of their pipe);
- a child that names a ``fatal_file`` and exits non-zero after writing it is not restarted:
  the run ends with the one line it holds (a cause a restart would meet again);
- on stop (normal end, Ctrl-C, SIGTERM) children get SIGTERM, a grace period, then SIGKILL of
  the whole group: no orphans;
- a child marked ``restart=True`` that exits non-zero is restarted (bounded), which is how an
  actor killed with SIGKILL comes back and resumes from its last acked sequence number.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mlerl.protocol import die_with_parent


@dataclass
class ChildSpec:
    name: str
    argv: list[str]
    log_path: Path
    restart: bool = False
    """Restart when it exits non-zero (actors); the learner's exit ends the run instead."""
    max_restarts: int = 5
    fatal_exit_codes: tuple[int, ...] = ()
    """Exit codes that end the whole run (returned by :meth:`Supervisor.wait`), not restarted:
    e.g. an actor whose sandbox stayed down."""
    env: dict[str, str] = field(default_factory=dict)
    fatal_file: Path | None = None
    """Where the child writes the one-line reason when a restart cannot help (removed before
    each start)."""


@dataclass
class _Child:
    spec: ChildSpec
    proc: subprocess.Popen[bytes]
    restarts: int = 0


class Supervisor:
    """Runs children until the ``primary`` one exits, then stops the rest."""

    def __init__(
        self,
        specs: list[ChildSpec],
        primary: str,
        grace_s: float = 10.0,
        events_path: Path | None = None,
    ) -> None:
        self._specs = specs
        self._events_path = events_path
        self._primary = primary
        self._grace_s = grace_s
        self._children: dict[str, _Child] = {}
        self.events: list[str] = []
        """What happened (starts, restarts, exits), also appended to ``events_path`` as it
        happens, so a supervisor killed with -9 still leaves its record."""
        self.stopped_by = ""
        """The child whose exit ended :meth:`wait` (the primary, or one with a fatal code)."""
        self.reason = ""
        """Why :meth:`wait` ended with a failure, in one line ("" after a clean exit)."""

    def _spawn(self, spec: ChildSpec) -> subprocess.Popen[bytes]:
        spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(spec.log_path, "ab")  # noqa: SIM115 - owned by the child for its lifetime
        env = {**os.environ, **spec.env, "PYTHONUNBUFFERED": "1"}
        if spec.fatal_file is not None:
            spec.fatal_file.unlink(missing_ok=True)
        parent = os.getpid()
        try:
            return subprocess.Popen(
                spec.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                preexec_fn=lambda: die_with_parent(expected_parent=parent),
            )
        finally:
            log.close()

    def start(self) -> None:
        for spec in self._specs:
            self._children[spec.name] = _Child(spec, self._spawn(spec))
            self._event(f"started {spec.name} pid={self._children[spec.name].proc.pid}")

    def _event(self, line: str) -> None:
        self.events.append(line)
        if self._events_path is not None:
            with open(self._events_path, "a") as f:
                f.write(line + "\n")

    def pid(self, name: str) -> int:
        return self._children[name].proc.pid

    def wait(
        self,
        poll_s: float = 0.5,
        deadline_s: float | None = None,
        on_tick: Callable[[], None] | None = None,
    ) -> int:
        """Block until the primary exits (returns its code) or the deadline passes (returns 124).

        ``on_tick`` runs once per poll (progress display)."""
        start = time.monotonic()
        while True:
            for child in self._children.values():
                code = child.proc.poll()
                if code is None:
                    continue
                why = _fatal_reason(child.spec) if code != 0 else ""
                fatal = code in child.spec.fatal_exit_codes or bool(why)
                if (
                    code != 0
                    and not fatal
                    and child.spec.restart
                    and child.restarts < child.spec.max_restarts
                ):
                    child.restarts += 1
                    self._event(f"restarting {child.spec.name} (exit {code}, #{child.restarts})")
                    child.proc = self._spawn(child.spec)
                    continue
                if child.spec.name == self._primary or fatal:
                    self._event(f"{child.spec.name} exited {code}")
                    self.stopped_by = child.spec.name
                    if code != 0:
                        self.reason = why or (
                            f"exit {code}"
                            + (f" after {child.restarts} restarts" if child.restarts else "")
                        )
                    return code
            if deadline_s is not None and time.monotonic() - start > deadline_s:
                return 124
            if on_tick is not None:
                on_tick()
            time.sleep(poll_s)

    def stop(self) -> None:
        """TERM every child's process group, wait up to the grace period, then KILL.

        Descendants that started their own session (torchrun starts each rank so) are
        collected first and killed with the rest, so they are never orphaned."""
        alive = [c for c in self._children.values() if c.proc.poll() is None]
        strays = {pid for c in alive for pid in descendants(c.proc.pid)}
        for child in alive:
            _signal_group(child.proc.pid, signal.SIGTERM)
        end = time.monotonic() + self._grace_s
        for child in alive:
            try:
                child.proc.wait(timeout=max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for pid in strays:  # leaders of their own groups (torchrun's ranks) and their children
            _signal_group(pid, signal.SIGKILL)
        for child in self._children.values():
            # Kill the group even when the leader exited: its descendants may still live.
            _signal_group(child.proc.pid, signal.SIGKILL)
            try:
                child.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                print(f"mlerl: {child.spec.name} did not exit after SIGKILL", file=sys.stderr)


def _fatal_reason(spec: ChildSpec) -> str:
    if spec.fatal_file is None:
        return ""
    try:
        return spec.fatal_file.read_text().strip().splitlines()[0]
    except (OSError, IndexError):
        return ""


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` that leads its own process group (Linux ``/proc``)."""
    children: dict[int, list[int]] = {}
    leaders: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()  # after "pid (comm) ": state ppid pgrp ...
        child, ppid, pgrp = int(entry.name), int(fields[1]), int(fields[2])
        children.setdefault(ppid, []).append(child)
        if pgrp == child:
            leaders.add(child)
    out, todo = [], list(children.get(pid, []))
    while todo:
        p = todo.pop()
        if p in leaders:
            out.append(p)
        todo.extend(children.get(p, []))
    return out


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
