"""The local backend: runs a program as a host process group, isolated by bubblewrap and cgroups.

Isolation is required: a missing layer is an error at start-up (:class:`SandboxUnavailable`,
naming what is missing and the command that installs it), unless ``allow_unisolated`` is set,
in which case the run's log and report say what is missing. What it does, in layers
(``mlerl-sandbox doctor`` prints which are active here):
- Always: its own session and process group; a clean environment (nothing of the host's is
  inherited); stdin is /dev/null; no host descriptor but stdout/stderr reaches the program;
  rlimits RLIMIT_CORE=0, RLIMIT_FSIZE=disk limit, RLIMIT_CPU (never RLIMIT_AS: it breaks
  ``import torch``); streams drained continuously and bounded; at the deadline TERM,
  ``kill_grace_s``, KILL to the whole group; the work dir is removed.
- cgroups (root): a per-run memory cgroup (memory = memory + swap; OOM detected), a pids
  cgroup (fork bombs stop at ``pids``), a CPU quota, and kills through the cgroup (every
  descendant, including ``setsid``/double-forked ones; never a pid read from outside it).
- bubblewrap: an allowlisted filesystem (``_bwrap.py``: system dirs and the Python
  environment read-only, the task's public inputs read-only, its own work dir, a private
  /tmp; nothing of the data root, ``$HOME``, caches or run dirs); new pid, network, IPC, UTS
  and cgroup namespaces (no network at all, host processes invisible, bwrap is pid 1 and reaps
  zombies); no capabilities, no_new_privs. As root, the program runs as the host's
  ``sandbox_uid`` (setpriv after the mounts), so a 0700 answers directory is unreadable even
  by path; as a non-root executor, a user namespace maps it to the executor's uid.
- A tmpfs work dir (root): the work dir is ``disk_mb`` large (ENOSPC inside).
Set-up failures (bubblewrap could not make its mounts) are told apart from the program's own
failures by a word a shell inside the sandbox writes on a pipe before it execs the program; it
closes the pipe first, so the program never holds it. A set-up failure is retried with a fresh
work dir, then INFRA_ERROR. What it does not isolate: the kernel is shared; there is no disk I/O
or inode limit beyond the tmpfs size.
With bubblewrap, the sandbox of the next run of a shape is started while a program runs
(``SandboxConfig.prewarm``; the warm path ``_warm.py``, the pool ``_prewarm.py``): the same
layers, made ahead, one program each. Supervising and killing a run's processes: ``_proc.py``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

from mlerl.sandbox import _bwrap, _cgroup
from mlerl.sandbox._output import OutputSink
from mlerl.sandbox._prewarm import LAUNCHER, launchable
from mlerl.sandbox._proc import CgroupRemovals, Process, kill, said, supervise
from mlerl.sandbox._runner import Admission, Outcome, admitted, started
from mlerl.sandbox._types import (
    ExecutionRequest,
    ExecutionResult,
    Limits,
    OutputCallback,
    SandboxConfig,
    SandboxUnavailable,
    thread_env,
)
from mlerl.sandbox._warm import WarmPath
from mlerl.sandbox._workdir import WorkDir, create_workdir, owner_tag, stage_inputs

log = logging.getLogger("mlerl.sandbox")

_JOIN = 'while [ "$1" != -- ]; do echo $$ >"$1" || exit 125; shift; done; shift; exec "$@"'
# With cgroups, the shell that joins them also sets the rlimits (POSIX ulimit: -f in 512-byte
# blocks, -t in seconds; soft and hard), saving the separate ``prlimit`` exec of every run.
_LIMIT_AND_JOIN = 'ulimit -c 0 && ulimit -f "$1" && ulimit -t "$2" || exit 125; shift 2; ' + _JOIN
INSTALL_HINT = (
    "bash scripts/ci/setup_docker.sh (as root: installs bubblewrap, starts Docker), "
    "or apt-get install -y bubblewrap"
)


def _base_env(limits: Limits, home: str) -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "MPLCONFIGDIR": home,
        **thread_env(limits),
    }


def probe_isolation(config: SandboxConfig) -> dict[str, str]:
    """Each isolation layer of the local backend -> 'ok' or why it does not work here.

    bubblewrap is tried for real with the exact mounts and namespaces a run gets."""
    report: dict[str, str] = {}
    bwrap = shutil.which("bwrap")
    if not config.use_bwrap:
        report["bubblewrap"] = "disabled (sandbox.use_bwrap=false)"
    elif bwrap is None:
        report["bubblewrap"] = f"not installed (install: {INSTALL_HINT})"
    else:
        roots = _bwrap.interpreter_roots()
        argv = [
            bwrap,
            *_namespace_args(config),
            *_bwrap.mount_args("/tmp", None, roots),
            "--",
            *_drop_privileges(config),
            sys.executable,
            "-c",
            "pass",
        ]
        try:
            r = subprocess.run(
                argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
            )
            report["bubblewrap"] = (
                "ok" if r.returncode == 0 else f"fails: {r.stderr.strip()[-300:] or r.returncode}"
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            report["bubblewrap"] = f"fails: {exc}"
    if not config.use_cgroups:
        report["cgroups"] = "disabled (sandbox.use_cgroups=false)"
    else:
        cg = _cgroup.create(owner_tag(), "probe-" + uuid.uuid4().hex[:8], 64, 16, 1.0)
        if cg is None:
            report["cgroups"] = (
                "not writable (run as root, or delegate a cgroup v2 subtree to this user)"
            )
        else:
            for d in cg.dirs.values():  # empty: nothing ran in it
                d.rmdir()
            report["cgroups"] = "ok"
    return report


def _namespace_args(config: SandboxConfig) -> list[str]:
    args = [
        "--unshare-ipc",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--hostname",
        "sandbox",
    ]
    if os.geteuid() == 0:  # mounts as root, then setpriv to the sandbox uid (no user ns)
        return [*args, "--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    uid = str(config.sandbox_uid)
    return [*args, "--unshare-user", "--uid", uid, "--gid", uid, "--cap-drop", "ALL"]


def _drop_privileges(config: SandboxConfig) -> list[str]:
    if os.geteuid() != 0:
        return []
    uid = str(config.sandbox_uid)
    return ["setpriv", "--reuid", uid, "--regid", uid, "--clear-groups", "--"]


class LocalSandbox:
    """See the module docstring for exactly what is isolated."""

    def __init__(self, config: SandboxConfig) -> None:
        self.config = config
        self.admission = Admission(config.max_concurrency, config.queue_size)
        self.isolation = probe_isolation(config)
        self.missing = {k: v for k, v in self.isolation.items() if v != "ok"}
        if self.missing and not config.allow_unisolated:
            raise SandboxUnavailable(
                "the local sandbox cannot isolate programs on this host: "
                + "; ".join(f"{k}: {v}" for k, v in self.missing.items())
                + ". Fix that, use sandbox=docker, or accept running generated programs "
                "without that isolation with sandbox.allow_unisolated=true."
            )
        if self.missing:
            log.warning(
                "UNISOLATED local sandbox (sandbox.allow_unisolated=true): %s",
                "; ".join(f"{k}: {v}" for k, v in self.missing.items()),
            )
        self.bwrap = shutil.which("bwrap") if "bubblewrap" not in self.missing else None
        self.use_cgroups = "cgroups" not in self.missing
        self.prlimit = shutil.which("prlimit")
        self.owner = owner_tag()
        self.roots = _bwrap.interpreter_roots()
        self.stage_root = Path(config.work_root) / "inputs"
        self.removals = CgroupRemovals()  # run cgroups the kernel keeps busy for a while
        # Sandboxes started ahead: only where bubblewrap runs the shell that waits for "go".
        self._warm = WarmPath(config.prewarm if self.bwrap else 0, self)

    async def run(
        self, request: ExecutionRequest, on_output: OutputCallback | None = None
    ) -> ExecutionResult:
        async with admitted(self.config, self.admission, request, on_output) as run:
            while run.another_attempt():
                async with run.attempt() as attempt:
                    # a warm sandbox's work dir with the program written in, or a fresh one
                    wd = self._warm.take(run.request) or self.fresh_workdir(run.request)
                    attempt.workdir = wd
                    run.outcome = await self._execute(run.request, wd, run.sink)
        return run.result()

    async def close(self) -> None:
        """Each run cleans up after itself; discard the sandboxes started ahead, and wait for
        the run cgroups whose removal the kernel delayed."""
        await self._warm.close()
        await self.removals.close()

    def fresh_workdir(self, request: ExecutionRequest) -> WorkDir:
        data = request.data_dir
        return create_workdir(
            self.config.work_root,
            request.program,
            request.resolved_limits.disk_mb,
            self.config.tmpfs_workdir,
            owner_uid=self.config.sandbox_uid if self.bwrap and os.geteuid() == 0 else None,
            data_link=data if data is not None and not self.bwrap else None,
            input_mountpoint=data is not None and bool(self.bwrap),
        )

    def _argv(
        self,
        request: ExecutionRequest,
        wd: WorkDir,
        cg: _cgroup.RunCgroup | None,
        status_fd: int,
        input_host: str | None,
        go_fd: int | None = None,
    ) -> list[str]:
        lim = request.resolved_limits
        entry = list(request.entry)
        if entry[0] == "python":
            entry[0] = sys.executable
        argv: list[str] = []
        cpu_s = math.ceil(lim.wall_time_s * max(1.0, lim.cpus)) + 10
        if cg is not None:
            argv += [
                "/bin/sh",
                "-c",
                _LIMIT_AND_JOIN,
                "sh",
                str(lim.disk_mb * 2048),
                str(cpu_s),
                *cg.procs_files,
                "--",
            ]
        elif self.prlimit:  # no cgroup: RLIMIT_NPROC stands in for pids.max
            argv += [
                self.prlimit,
                "--core=0",
                f"--fsize={lim.disk_mb * 1024 * 1024}",
                f"--cpu={cpu_s}",
                f"--nproc={lim.pids}",
                "--",
            ]
        if self.bwrap:
            argv += [
                self.bwrap,
                *_namespace_args(self.config),
                *_bwrap.mount_args(str(wd.path), input_host, self.roots),
                "--",
                "/bin/bash",
                "-c",
            ]
            if go_fd is not None and launchable(request.entry):  # the interpreter waits
                return [
                    *argv,
                    _bwrap.STARTED_KEEP_PIPES,
                    "sh",
                    str(status_fd),
                    str(go_fd),
                    *_drop_privileges(self.config),
                    entry[0],
                    "-c",
                    LAUNCHER,
                    str(status_fd),
                    str(go_fd),
                    ",".join(self.config.preload),
                    *entry[1:],
                ]
            argv += (
                [_bwrap.STARTED, "sh", str(status_fd)]
                if go_fd is None
                else [_bwrap.STARTED_THEN_WAIT, "sh", str(status_fd), str(go_fd)]
            )
            argv += _drop_privileges(self.config)
        return argv + entry

    async def _execute(self, request: ExecutionRequest, wd: WorkDir, sink: OutputSink) -> Outcome:
        if self._warm.holds(wd):
            return await self._warm.execute(request, wd, sink)
        assert request.limits is not None
        try:
            # Synchronous (about 1 ms of mkdir and writes): a cancellation can then never
            # strike between the cgroups' creation and the ``finally`` that removes them.
            cg = self.run_cgroup(request.limits)
        except OSError as exc:
            out = started()
            out.infra_error = str(exc)
            return out
        try:
            return await self._execute_in(request, wd, sink, cg)
        finally:
            if cg is not None:
                await self.removals.remove(cg)

    async def _execute_in(
        self, request: ExecutionRequest, wd: WorkDir, sink: OutputSink, cg: _cgroup.RunCgroup | None
    ) -> Outcome:
        assert request.limits is not None
        input_host = await self.stage(request)
        out = started()
        status_r, status_w = os.pipe()
        os.set_blocking(status_r, False)
        try:
            try:
                proc = await self.spawn(request, wd, cg, input_host, status_w)
            except OSError as exc:
                out.infra_error = f"cannot start {request.entry[0]!r}: {exc}"
                return out
            finally:
                os.close(status_w)
            self._warm.started(request)
            try:
                await supervise(proc, sink, request.limits, out, cg)
            finally:
                await kill(proc, cg)
                if cg is not None:
                    out.oom = cg.oom_kills() > 0
            if self.bwrap and not said(status_r, b"started"):
                out.setup_failed = True
            return out
        finally:
            os.close(status_r)

    def run_cgroup(self, lim: Limits) -> _cgroup.RunCgroup | None:
        """The run's cgroups (None without cgroups); OSError where they cannot be made."""
        if not self.use_cgroups:
            return None
        cg = _cgroup.create(self.owner, uuid.uuid4().hex[:16], lim.memory_mb, lim.pids, lim.cpus)
        if cg is None:
            raise OSError("cannot create the run's cgroups")
        return cg

    async def stage(self, request: ExecutionRequest) -> str | None:
        """The host path of the request's staged public inputs (bubblewrap binds it)."""
        if not self.bwrap or request.data_dir is None:
            return None
        return str(await asyncio.to_thread(stage_inputs, request.data_dir, self.stage_root))

    async def spawn(
        self,
        request: ExecutionRequest,
        wd: WorkDir,
        cg: _cgroup.RunCgroup | None,
        input_host: str | None,
        status_w: int,
        go_r: int | None = None,
    ) -> Process:
        """Start the run's chain (``_argv``); ``go_r``: it waits for "go" (a warm sandbox)."""
        passed = (status_w,) if go_r is None else (status_w, go_r)
        return await asyncio.create_subprocess_exec(
            *self._argv(request, wd, cg, status_w, input_host, go_fd=go_r),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=wd.path,
            env=_base_env(request.resolved_limits, "/tmp" if self.bwrap else str(wd.path))
            | request.env,
            start_new_session=True,
            pass_fds=passed if self.bwrap else (),
        )
