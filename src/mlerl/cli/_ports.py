"""Loopback ports for a one-host run that nothing else can be handed.

Ports used to be picked by binding port 0 and closing the socket: the kernel hands the same
ephemeral ports to every ``bind(0)`` and every outgoing connection, so between our pick and the
learner's bind another process could take the port. It happened: torchrun's standalone
rendezvous (``localhost:0``) got the run's ``samples_address`` port and rank 0 could not bind.

Here a port can collide with nothing:
- it lies **outside the kernel's ephemeral range** (``/proc/sys/net/ipv4/ip_local_port_range``),
  so no ``bind(0)`` and no outgoing connection, torchrun's or gloo's included, is ever given it;
- the run's **torchrun rendezvous port is picked here too** (``--rdzv-endpoint``), so torchrun
  binds a port of ours, distinct from the two transport ports;
- each port is **locked for the run's lifetime** (``flock`` on ``<lock dir>/<port>.lock``,
  released by the kernel however the holder dies, SIGKILL included), so parallel ``mlerl
  train`` jobs on one host never pick the same one;
- it is free when picked (a test bind on every IPv4 address).

Only a program outside mlerl that binds a fixed port could still take one; the learner then
exits with ``transport.samples_address: ... is in use`` and the run stops with that reason.
"""

from __future__ import annotations

import fcntl
import os
import random
import socket
import tempfile
import weakref
from pathlib import Path

LOW, HIGH = 10000, 65535
"""The span searched, less the ephemeral range (below 10000: well-known service ports)."""


def ephemeral_range(path: str = "/proc/sys/net/ipv4/ip_local_port_range") -> tuple[int, int]:
    """The kernel's ephemeral port range, inclusive (Linux's default where unreadable)."""
    try:
        lo, hi = (int(x) for x in Path(path).read_text().split())
        return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def candidates(ephemeral: tuple[int, int], low: int = LOW, high: int = HIGH) -> list[int]:
    """Every port in [low, high] outside the inclusive ``ephemeral`` range."""
    lo, hi = ephemeral
    return [p for p in range(low, high + 1) if not lo <= p <= hi]


def default_lock_dir() -> Path:
    return Path(tempfile.gettempdir()) / "mlerl-ports"


class PortLease:
    """Ports held for one run: each one's lock stays taken until :meth:`release` or exit."""

    def __init__(self, lock_dir: Path | None = None) -> None:
        self.lock_dir = lock_dir or default_lock_dir()
        self.ports: list[int] = []
        self._fds: list[int] = []
        weakref.finalize(self, _close_all, self._fds)  # a lease nobody released

    def take(self, n: int, rng: random.Random | None = None) -> list[int]:
        """``n`` more distinct ports (see the module docstring); raises ``OSError`` when none is
        left."""
        pool = candidates(ephemeral_range())
        (rng or random.SystemRandom()).shuffle(pool)
        got: list[int] = []
        for port in pool:
            if len(got) == n:
                break
            if port not in self.ports and self.hold(port):
                got.append(port)
        if len(got) < n:
            raise OSError(
                f"no free loopback port outside the ephemeral range {ephemeral_range()}: "
                "set transport.samples_address and transport.weights_address"
            )
        return got

    def hold(self, port: int) -> bool:
        """Lock ``port`` for this run when no other run holds it and it is free to bind."""
        if not self.lock_dir.is_dir():
            self.lock_dir.mkdir(parents=True, exist_ok=True)
            try:  # shared by every user's runs, like /tmp itself (mkdir's mode is masked)
                os.chmod(self.lock_dir, 0o1777)
            except OSError:
                pass
        fd = os.open(self.lock_dir / f"{port}.lock", os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        if not bindable(port):
            os.close(fd)  # closing releases the lock
            return False
        self._fds.append(fd)
        self.ports.append(port)
        return True

    def release(self) -> None:
        _close_all(self._fds)
        self.ports.clear()


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)
    fds.clear()


def bindable(port: int) -> bool:
    """Whether a TCP listener could bind ``port`` on every IPv4 address right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as ZeroMQ and c10d do
        try:
            sock.bind(("", port))
        except OSError:
            return False
    return True


def loopback_port(address: str) -> int | None:
    """The port of a ``tcp://127.0.0.1:PORT`` address this host chose, else None."""
    prefix = "tcp://127.0.0.1:"
    if address.startswith(prefix) and address[len(prefix) :].isdigit():
        return int(address[len(prefix) :])
    return None
