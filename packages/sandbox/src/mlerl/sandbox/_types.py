"""The data types of the sandbox API: limits, requests, results, configuration, protocol.

Guarantees: every value is validated on construction (:class:`mlerl.protocol.ConfigError`
naming the field), so a bad request fails before anything is started and loses nothing.
"""

from __future__ import annotations

import dataclasses
import math
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from mlerl.protocol import ExecStatus, check

OutputCallback = Callable[[str, bytes], None]
"""``on_output(stream_name, chunk)``: ``stream_name`` is ``"stdout"`` or ``"stderr"``."""

MiB = 1024 * 1024


@dataclass
class Limits:
    """Resource limits of one execution."""

    wall_time_s: float = 600.0
    """Wall-clock limit from start; then TERM, ``kill_grace_s``, KILL -> TIMEOUT. 0: the
    request's ``time_limit_s`` (each task's own; the default of ``SandboxConfig.limits``)."""
    memory_mb: int = 4096
    """Memory (RSS + page cache + tmpfs writes); swap is not allowed on top. Excess -> OOM."""
    cpus: float = 1.0
    """CPU share (Docker: NanoCpus; local: cgroup CFS quota where available)."""
    pids: int = 1024
    """Processes + threads (BLAS and LightGBM pools need more than 64)."""
    output_bytes: int = 32 * MiB
    """Hard cap on stdout + stderr bytes; above it the program is killed -> OUTPUT_LIMIT."""
    disk_mb: int = 1024
    """Size of the writable work directory (a tmpfs where the host allows); full -> ENOSPC."""
    collect_max_bytes: int = 256 * MiB
    """Largest file copied out of the work directory; a larger one is not collected."""
    kill_grace_s: float = 2.0
    """Seconds between SIGTERM and SIGKILL at the deadline."""

    def __post_init__(self) -> None:
        check(self.wall_time_s >= 0, "wall_time_s", "must be >= 0 (0: the task's own limit)")
        check(self.memory_mb >= 16, "memory_mb", "must be >= 16")
        check(self.cpus > 0, "cpus", "must be > 0")
        check(self.pids >= 8, "pids", "must be >= 8")
        check(self.output_bytes >= 1024, "output_bytes", "must be >= 1024")
        check(self.disk_mb >= 1, "disk_mb", "must be >= 1")
        check(self.collect_max_bytes >= 0, "collect_max_bytes", "must be >= 0")
        check(self.kill_grace_s >= 0, "kill_grace_s", "must be >= 0")


THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "LOKY_MAX_CPU_COUNT",
)
"""What sizes a program's thread pools: OpenMP, the BLAS libraries, and joblib/loky's
``cpu_count``. The last is what LightGBM's default ``n_jobs`` asks for (the physical cores):
without it a LightGBM fit in a 1-CPU quota on a 2-core host ran 2 threads and took over 200 s
instead of 24 s, so improve answers that swapped in LightGBM without ``n_jobs`` timed out."""


def thread_env(limits: Limits) -> dict[str, str]:
    """``THREAD_VARIABLES`` set to the CPU share rounded up (at least 1)."""
    n = str(max(1, math.ceil(limits.cpus)))
    return dict.fromkeys(THREAD_VARIABLES, n)


def _check_collect_name(name: str) -> None:
    bad = not name or "/" in name or "\0" in name or name in (".", "..", "main.py")
    check(not bad, "collect", f"{name!r}: a plain file name in the work dir is required")


@dataclass
class ExecutionRequest:
    """One program to run. ``program`` is the source of ``main.py`` in a fresh work dir."""

    program: str
    data_dir: Path | None = None
    """Task public data, visible read-only at ``./input/`` (None: no ``input``)."""
    limits: Limits | None = None
    """None (the usual): the sandbox's own limits, ``SandboxConfig.limits``. A request sets
    them only where it needs other ones (a probe, a benchmark, the ``mlerl-sandbox`` command)."""
    time_limit_s: float | None = None
    """The task's wall-clock limit: used where the limits in force have ``wall_time_s`` 0."""
    collect: tuple[str, ...] = ("submission.csv",)
    """File names to copy out of the work dir after the run (regular files only)."""
    entry: tuple[str, ...] = ("python", "main.py")
    """Command run in the work dir; a leading ``python`` means the sandbox's interpreter."""
    env: dict[str, str] = field(default_factory=dict)
    """Extra environment variables (the host environment is never inherited)."""

    @property
    def resolved_limits(self) -> Limits:
        """The limits of a request the runner resolved (``limits_in_force``) before a backend
        sees it; a backend handed an unresolved one is a bug, said."""
        if self.limits is None:
            raise ValueError("limits: a backend got a request whose limits were not resolved")
        return self.limits

    def __post_init__(self) -> None:
        check(isinstance(self.program, str), "program", "must be source text (str)")
        check(len(self.entry) > 0 and all(self.entry), "entry", "must be a non-empty command")
        check(self.time_limit_s is None or self.time_limit_s > 0, "time_limit_s", "must be > 0")
        check(
            self.limits is None or self.limits.wall_time_s > 0 or self.time_limit_s is not None,
            "limits.wall_time_s",
            "must be > 0 in a request without time_limit_s",
        )
        self.collect = tuple(self.collect)
        self.entry = tuple(self.entry)
        for name in self.collect:
            _check_collect_name(name)
        if self.data_dir is not None:
            self.data_dir = Path(self.data_dir)
            check(self.data_dir.is_dir(), "data_dir", f"{self.data_dir} is not a directory")
        for key, value in self.env.items():
            ok = key and "=" not in key and "\0" not in key + value
            check(bool(ok), "env", f"invalid variable {key!r}")

    @classmethod
    def from_file(cls, path: str | Path, **kwargs: object) -> ExecutionRequest:
        """A request whose program is the text of ``path``."""
        return cls(program=Path(path).read_text(), **kwargs)  # type: ignore[arg-type]  # kwargs are ExecutionRequest's fields, checked by it


@dataclass
class CapturedOutput:
    """A bounded capture of one stream: the first and last bytes, and how many there were."""

    head: str = ""
    tail: str = ""
    total_bytes: int = 0
    truncated: bool = False
    """True when bytes between ``head`` and ``tail`` were dropped."""

    def text(self) -> str:
        """Head and tail joined, with a marker where bytes were dropped."""
        if not self.truncated:
            return self.head + self.tail
        dropped = self.total_bytes - len(self.head.encode()) - len(self.tail.encode())
        return f"{self.head}\n[... {max(dropped, 0)} bytes dropped ...]\n{self.tail}"


@dataclass
class ExecutionResult:
    """How one execution ended. Only ``INFRA_ERROR`` is the harness's fault."""

    status: ExecStatus
    exit_code: int | None
    """Exit status; negative = killed by that signal (local), 128+n style from Docker."""
    started_at: float
    finished_at: float
    duration_s: float
    stdout: CapturedOutput
    stderr: CapturedOutput
    files: dict[str, Path]
    """Collected file name -> host path (in a directory the caller owns and deletes)."""
    error: str = ""
    """Harness-side explanation (timeout, limit, rejected file, engine error)."""

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict (status lower-case, paths as strings)."""
        out = dataclasses.asdict(self)
        out["status"] = self.status.value
        out["files"] = {k: str(v) for k, v in self.files.items()}
        return out


class Sandbox(Protocol):
    """Runs untrusted programs. ``run`` never raises for a program's behaviour."""

    async def run(
        self, request: ExecutionRequest, on_output: OutputCallback | None = None
    ) -> ExecutionResult: ...

    async def close(self) -> None: ...


def _default_work_root() -> str:
    return os.path.join(tempfile.gettempdir(), "mlerl-sandbox")


@dataclass
class SandboxConfig:
    """Which backend runs programs and how many at once."""

    backend: str = "local"
    """``local`` (process group + cgroups + bubblewrap where present) or ``docker``."""
    max_concurrency: int = 4
    """Executions running at once."""
    queue_size: int = 64
    """Callers waiting for a slot; further ``run`` calls block until one frees (backpressure)."""
    image: str = "mlerl-sandbox:local"
    """Docker image (``scripts/build_image.sh`` builds this tag; docker/Dockerfile for users)."""
    site_packages: str = "auto"
    """Docker: host dir bound read-only at /opt/mlerl-site and put on PYTHONPATH. ``auto``:
    this interpreter's site-packages (the project venv); empty: none (self-contained image)."""
    docker_host: str = ""
    """Engine URL; empty: ``DOCKER_HOST`` or the default socket (Podman's API works too)."""
    engine_timeout_s: float = 60.0
    """Per-call timeout of engine requests (create/start); stop/kill/remove use 10-30 s."""
    work_root: str = field(default_factory=_default_work_root)
    """Where per-run work dirs and collected files are created."""
    use_bwrap: bool = True
    """Local: wrap in bubblewrap when installed (read-only fs, no network, own pid ns)."""
    use_cgroups: bool = True
    """Local: per-run memory/pids/cpu cgroups when writable (needs root)."""
    tmpfs_workdir: bool = True
    """Mount a size-limited tmpfs per work dir when allowed (root), for the disk limit."""
    prewarm: int = 0
    """Local with bubblewrap: sandboxes kept started ahead of their programs (namespaces,
    mounts, cgroups and work dir made, waiting on a pipe), for the request shape (data dir,
    limits, entry, env) of recent runs. A run whose shape matches takes one and skips the
    start-up; each is used by one program only. 0 (the default): start every sandbox when its
    run begins. Opt-in because it did not raise the embedded run's updates per minute and
    cost CPU (``benchmarks/throughput/prewarm_ab.py``; docs/benchmarks.md); 2 saves ~30 ms of
    latency per run where programs are short and the host is idle."""
    preload: list[str] = field(default_factory=list)
    """Local, with ``prewarm``: modules the waiting interpreter imports before its program
    arrives (e.g. ``[numpy, pandas, sklearn]``), so a program's own imports of them are
    instant. They load with the sandbox's environment (a program's later change of, say,
    ``OMP_NUM_THREADS`` does not reach them) and their memory counts against the run's limit;
    a module that fails to import is left for the program to import (and fail) itself."""
    sandbox_uid: int = 65534
    """Unprivileged uid the program runs as (Docker user; local: the host uid as root, else
    the uid inside bubblewrap's user namespace)."""
    allow_unisolated: bool = False
    """Local: run even where bubblewrap or cgroups are missing or disabled. Off by default:
    without them a program can read the host (answers included), use the network and escape
    the kill; the run's log and report then say ``UNISOLATED``."""
    limits: Limits = field(default_factory=lambda: Limits(wall_time_s=0.0))
    """The limits of every execution whose request carries none (the actors' requests carry
    only the task's ``time_limit_s``); ``wall_time_s`` 0: each request's ``time_limit_s``."""

    def __post_init__(self) -> None:
        check(self.backend in ("local", "docker"), "backend", "must be 'local' or 'docker'")
        check(self.max_concurrency >= 1, "max_concurrency", "must be >= 1")
        check(self.queue_size >= 0, "queue_size", "must be >= 0")
        check(self.prewarm >= 0, "prewarm", "must be >= 0")
        check(
            all(
                isinstance(m, str) and m.replace(".", "").replace("_", "").isalnum()
                for m in self.preload
            ),
            "preload",
            "must be module names like 'sklearn.ensemble'",
        )
        check(bool(self.image), "image", "must not be empty")
        check(self.engine_timeout_s > 0, "engine_timeout_s", "must be > 0")
        check(bool(self.work_root), "work_root", "must not be empty")
        check(self.sandbox_uid > 0, "sandbox_uid", "must be a non-root uid")
        check(
            self.allow_unisolated or (self.use_bwrap and self.use_cgroups),
            "allow_unisolated",
            "must be true to disable use_bwrap or use_cgroups",
        )


class SandboxUnavailable(RuntimeError):
    """The requested backend cannot isolate programs here; the message says what to install."""
