"""The local backend: runs a program as a host process group, isolated as far as this host allows.

What it does, in layers (``mlerl-sandbox doctor`` prints which are active here):
- Always: its own session and process group; a clean environment (nothing of the host's is
  inherited); stdin is /dev/null; rlimits RLIMIT_CORE=0, RLIMIT_FSIZE=disk limit, RLIMIT_CPU
  (never RLIMIT_AS: it breaks ``import torch``); streams drained continuously and bounded;
  at the deadline TERM, ``kill_grace_s``, KILL to the whole group; the work dir is removed.
- With cgroups (root): a per-run memory cgroup (memory = memory + swap; OOM detected), a pids
  cgroup (fork bombs stop at ``pids``; RLIMIT_NPROC is per-user and ignored for root, so it is
  only set where no pids cgroup exists), a CPU quota, and kills through the cgroup (every
  descendant, including ``setsid``/double-forked ones; never a pid read from outside it).
- With bubblewrap: the whole host filesystem read-only except the work dir and a private
  /tmp; ``./input`` a read-only bind of the data dir; new user, pid, network, IPC and UTS
  namespaces (no network at all, host processes invisible, bwrap is pid 1 and reaps zombies);
  uid 65534 inside with no capabilities and no_new_privs. When the executor runs as root, the
  sandbox uid maps to root outside (needed to reach an interpreter under /root): files it
  writes in the work dir belong to root, and only the read-only mounts (not permissions)
  protect the rest of the filesystem.
- With a tmpfs work dir (root): the work dir is ``disk_mb`` large (ENOSPC inside).
What it does not isolate: without bubblewrap the program sees and can write whatever the
executor's uid can (host files, /tmp, the network, other processes); without cgroups memory
is not limited (only the OS OOM killer) and ``setsid`` descendants can escape the group kill.
Even with bubblewrap, every host file readable by the executor is readable inside (put
private answers where the sandbox is not: the Docker backend shows only the image), the kernel
is shared, and there is no disk I/O or inode limit beyond the tmpfs size.
"""

from __future__ import annotations

import asyncio
import math
import os
import shutil
import signal
import sys
import time
import uuid

from mlerl.sandbox import _cgroup
from mlerl.sandbox._output import OutputSink
from mlerl.sandbox._runner import Admission, Outcome, run_request
from mlerl.sandbox._types import (
    ExecutionRequest,
    ExecutionResult,
    Limits,
    OutputCallback,
    SandboxConfig,
)
from mlerl.sandbox._workdir import WorkDir, create_workdir, owner_tag

_JOIN = 'while [ "$1" != -- ]; do echo $$ >"$1" || exit 125; shift; done; shift; exec "$@"'
_DRAIN_AFTER_EXIT_S = 2.0
_SETUP_ATTEMPTS = 3
# Runs inside bubblewrap once its setup succeeded: says so on a pipe, then runs the program.
_STARTED = 'printf started >"$1" || exit 126; shift; exec "$@"'


def _base_env(limits: Limits, home: str) -> dict[str, str]:
    threads = str(max(1, math.ceil(limits.cpus)))
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1", "MPLCONFIGDIR": home,
        "OMP_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads,
        "MKL_NUM_THREADS": threads,
    }


class LocalSandbox:
    """See the module docstring for exactly what is isolated."""

    def __init__(self, config: SandboxConfig) -> None:
        self.config = config
        self.admission = Admission(config.max_concurrency, config.queue_size)
        self.bwrap = shutil.which("bwrap") if config.use_bwrap else None
        self.prlimit = shutil.which("prlimit")
        self.owner = owner_tag()

    async def run(
        self, request: ExecutionRequest, on_output: OutputCallback | None = None
    ) -> ExecutionResult:
        return await run_request(self.config, self.admission, self._workdir, self._execute,
                                 request, on_output)

    async def close(self) -> None:
        """Nothing is held between runs (each run cleans up after itself)."""

    def _workdir(self, request: ExecutionRequest) -> WorkDir:
        data = request.data_dir
        return create_workdir(
            self.config.work_root, request.program, request.limits.disk_mb,
            self.config.tmpfs_workdir, owner_uid=None,
            data_link=data if data is not None and not self.bwrap else None,
            input_mountpoint=data is not None and bool(self.bwrap))

    def _argv(self, request: ExecutionRequest, wd: WorkDir,
              cg: _cgroup.RunCgroup | None, status_fd: int) -> list[str]:
        lim = request.limits
        entry = list(request.entry)
        if entry[0] == "python":
            entry[0] = sys.executable
        argv: list[str] = []
        if cg is not None:
            argv += ["/bin/sh", "-c", _JOIN, "sh", *cg.procs_files, "--"]
        if self.prlimit:
            cpu_s = math.ceil(lim.wall_time_s * max(1.0, lim.cpus)) + 10
            argv += [self.prlimit, "--core=0", f"--fsize={lim.disk_mb * 1024 * 1024}",
                     f"--cpu={cpu_s}"]
            if cg is None:
                argv.append(f"--nproc={lim.pids}")
            argv.append("--")
        if self.bwrap:
            uid = str(self.config.sandbox_uid)
            argv += [self.bwrap, "--unshare-all", "--unshare-user", "--uid", uid, "--gid", uid,
                     "--die-with-parent", "--new-session", "--hostname", "sandbox",
                     "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                     "--tmpfs", "/tmp"]
            for path in _interpreter_paths_under("/tmp"):  # the private /tmp hides them
                argv += ["--ro-bind", path, path]
            argv += ["--bind", str(wd.path), str(wd.path)]
            if request.data_dir is not None:
                argv += ["--ro-bind", str(request.data_dir.resolve()), str(wd.input_path)]
            argv += ["--chdir", str(wd.path), "--",
                     "/bin/sh", "-c", _STARTED, "sh", f"/proc/self/fd/{status_fd}"]
        return argv + entry

    async def _execute(self, request: ExecutionRequest, wd: WorkDir,
                       sink: OutputSink) -> Outcome:
        """Run once; retry when bubblewrap failed before starting the program.

        bwrap's recursive read-only bind of ``/`` fails (EINVAL) when another mount appears or
        vanishes meanwhile (a concurrent run's tmpfs, a Docker overlay). A shell inside the
        sandbox writes "started" on a pipe before exec'ing the program, so a missing word is a
        setup failure the program cannot fake (it never ran); it is retried, and INFRA_ERROR
        after the last attempt.
        """
        for attempt in range(_SETUP_ATTEMPTS):
            out, started = await self._execute_once(request, wd, sink)
            if started or out.infra_error:
                return out
            setup_error = sink.streams["stderr"].result().text().strip()[-500:]
            sink.reset()
            await asyncio.sleep(0.05 * (attempt + 1))
        out.infra_error = f"bubblewrap setup failed {_SETUP_ATTEMPTS} times: {setup_error}"
        return out

    async def _execute_once(self, request: ExecutionRequest, wd: WorkDir,
                            sink: OutputSink) -> tuple[Outcome, bool]:
        lim = request.limits
        cg = None
        if self.config.use_cgroups:
            cg = await asyncio.to_thread(_cgroup.create, self.owner, uuid.uuid4().hex[:16],
                                         lim.memory_mb, lim.pids, lim.cpus)
        env = _base_env(lim, "/tmp" if self.bwrap else str(wd.path)) | request.env
        out = Outcome(started_at=time.time())
        status_r, status_w = os.pipe()
        os.set_blocking(status_r, False)
        try:
            try:
                proc = await asyncio.create_subprocess_exec(
                    *self._argv(request, wd, cg, status_w), stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                    cwd=wd.path, env=env, start_new_session=True, pass_fds=(status_w,))
            except OSError as exc:
                if cg is not None:
                    await cg.remove()
                out.infra_error = f"cannot start {request.entry[0]!r}: {exc}"
                return out, False
            finally:
                os.close(status_w)
            try:
                await self._supervise(proc, sink, lim, out, cg)
            finally:
                await self._kill(proc, cg)
                if cg is not None:
                    out.oom = cg.oom_kills() > 0
                    await cg.remove()
            return out, self._program_started(status_r, out)
        finally:
            os.close(status_r)

    def _program_started(self, status_r: int, out: Outcome) -> bool:
        if not self.bwrap or out.exit_code == 0 or out.timed_out:
            return True
        try:
            status = os.read(status_r, 1 << 16)
        except BlockingIOError:
            status = b""
        return b"started" in status

    async def _supervise(self, proc: asyncio.subprocess.Process, sink: OutputSink,
                         lim: Limits, out: Outcome, cg: _cgroup.RunCgroup | None) -> None:
        limit_hit = asyncio.Event()

        async def pump(reader: asyncio.StreamReader | None, name: str) -> None:
            assert reader is not None
            while chunk := await reader.read(1 << 16):
                sink.feed(name, chunk)
                if sink.over_limit:
                    limit_hit.set()

        async with asyncio.TaskGroup() as tg:
            pumps = {tg.create_task(pump(proc.stdout, "stdout")),
                     tg.create_task(pump(proc.stderr, "stderr"))}
            exited = tg.create_task(proc.wait())
            hit = tg.create_task(limit_hit.wait())
            done, _ = await asyncio.wait({exited, hit}, timeout=lim.wall_time_s,
                                         return_when=asyncio.FIRST_COMPLETED)
            if exited not in done:
                out.timed_out = hit not in done
                await self._terminate(proc, cg, lim.kill_grace_s if out.timed_out else 0.0)
            out.finished_at = time.time()
            hit.cancel()
            await self._kill(proc, cg)  # descendants still holding the pipes
            _, pending = await asyncio.wait(pumps | {exited}, timeout=_DRAIN_AFTER_EXIT_S)
            for task in pending:
                task.cancel()
        out.exit_code = proc.returncode

    @staticmethod
    def _signal(proc: asyncio.subprocess.Process, cg: _cgroup.RunCgroup | None,
                sig: int) -> None:
        if cg is not None:
            cg.signal_all(sig)
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    async def _terminate(self, proc: asyncio.subprocess.Process,
                         cg: _cgroup.RunCgroup | None, grace: float) -> None:
        """TERM the group, wait ``grace``, then KILL it."""
        if grace > 0:
            self._signal(proc, cg, signal.SIGTERM)
            try:
                async with asyncio.timeout(grace):
                    await proc.wait()
            except TimeoutError:
                pass
        await self._kill(proc, cg)

    async def _kill(self, proc: asyncio.subprocess.Process,
                    cg: _cgroup.RunCgroup | None) -> None:
        if cg is not None:
            await cg.kill_all()
        self._signal(proc, None, signal.SIGKILL)


def _interpreter_paths_under(root: str) -> list[str]:
    """The interpreter's prefixes and import paths that lie under ``root`` (outermost only).

    bubblewrap gives each run a private tmpfs ``/tmp``; a project checked out under ``/tmp``
    (CI clones often are) would lose its venv there, so these are bound back read-only."""
    candidates = {sys.prefix, sys.base_prefix, sys.exec_prefix, *(p for p in sys.path if p)}
    inside = sorted(
        os.path.realpath(p) for p in candidates
        if os.path.isdir(p) and os.path.realpath(p).startswith(root.rstrip("/") + "/")
    )
    outermost: list[str] = []
    for path in inside:
        if not any(path == o or path.startswith(o + "/") for o in outermost):
            outermost.append(path)
    return outermost
