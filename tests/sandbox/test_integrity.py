"""Reward integrity at the sandbox level: hostile programs that try to read answers, forge an
INFRA status or use a host descriptor, on both backends (threat rows 10 and 17 of
docs/sandbox.md), and the refusal of a silently unisolated local sandbox.

The answers are planted as a canary in MLE-bench's layout beside the public inputs the program
is given; every program knows the canary's exact host path (the worst case of a path leak).
"""

from __future__ import annotations

import os
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

from mlerl.protocol import ExecStatus
from mlerl.sandbox import ExecutionRequest, Sandbox, SandboxConfig, SandboxUnavailable
from mlerl.sandbox._output import OutputSink
from mlerl.sandbox._runner import Admission, Outcome, admitted
from mlerl.sandbox._workdir import create_workdir

Env = Any


def prog(src: str) -> str:
    return textwrap.dedent(src).lstrip()


def plant(root: Path) -> tuple[Path, str]:
    """A data root with two tasks; returns (task 'a' public dir, canary)."""
    canary = "CANARY" + uuid.uuid4().hex
    for task in ("a", "b"):
        public, private = root / task / "prepared" / "public", root / task / "prepared" / "private"
        public.mkdir(parents=True)
        private.mkdir(parents=True)
        private.chmod(0o700)
        (public / "train.csv").write_text("id,y\n1,0\n")
        (private / "answers.csv").write_text(f"id,y\n1,{canary}\n")
    (root / "cache.txt").write_text(canary)
    return root / "a" / "prepared" / "public", canary


def plant_where_answers_live(roots: list[Path]) -> tuple[Path, list[str], list[str]]:
    """:func:`plant` in each root (the ``answer_roots`` fixture), task b's private dir without
    its 0700 (as a copy without ``-p`` leaves it); (a public dir, every canary path, canaries)."""
    paths, canaries = [], []
    for root in roots:
        public, canary = plant(root)
        (root / "b" / "prepared" / "private").chmod(0o755)
        canaries.append(canary)
        root = root.resolve()
        paths += [
            str(root / "a/prepared/private/answers.csv"),
            str(root / "b/prepared/private/answers.csv"),
            str(root / "cache.txt"),
        ]
    return public, paths, canaries


READ_ANSWERS = """
import os, re, sys
canary_paths = {paths!r}
found = []
def try_read(path):
    try:
        with open(path, errors="replace") as f:
            text = f.read(1 << 20)
        if "CANARY" in text:
            found.append(path)
            open("submission.csv", "w").write(text)
    except OSError:
        pass
# 1. the exact host paths, and relative routes from ./input
for p in canary_paths:
    try_read(p)
for rel in ("input/../private/answers.csv", "input/../../private/answers.csv",
            "../private/answers.csv", "input/../../../b/prepared/private/answers.csv",
            "input/../../../cache.txt"):
    try_read(rel)
# 2. mountinfo: every host path behind a mount, and its siblings
try:
    for line in open("/proc/self/mountinfo"):
        src = line.split()[3]
        for up in ("", "/..", "/../..", "/../../.."):
            base = os.path.normpath(src + up)
            for tail in ("private/answers.csv", "prepared/private/answers.csv", "cache.txt",
                         "a/prepared/private/answers.csv"):
                try_read(os.path.join(base, tail))
except OSError:
    pass
# 3. other processes' roots and cwds, and the cwd of pid 1
for pid in os.listdir("/proc"):
    if pid.isdigit():
        for p in canary_paths:
            try_read(f"/proc/{{pid}}/root{{p}}")
        try_read(f"/proc/{{pid}}/cwd/../private/answers.csv")
# 4. a symlink planted in the work dir, then read through it
try:
    os.symlink(canary_paths[0], "link.csv")
    try_read("link.csv")
except OSError:
    pass
# 5. brute force: walk the whole visible filesystem for answers files and the canary dir
for top in ("/", os.path.expanduser("~")):
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = [d for d in dirnames if d not in ("proc", "sys", "dev")]
        for name in filenames:
            if name in ("answers.csv", "cache.txt"):
                try_read(os.path.join(dirpath, name))
print("FOUND" if found else "nothing", found)
"""


async def test_row10_answers_unreachable_by_every_route(
    env: Env, sandbox: Sandbox, answer_roots: list[Path]
) -> None:
    """Canaries in the home data root and a checkout data dir: each task's private dir (task
    b's lost its 0700, as a copy without ``-p`` would) and the root itself."""
    env.require("bwrap")
    public, paths, canaries = plant_where_answers_live(answer_roots)
    result = await sandbox.run(
        env.request(prog(READ_ANSWERS.format(paths=paths)), data_dir=public, wall_time_s=60.0)
    )
    assert result.status is ExecStatus.OK, result
    assert result.stdout.text().startswith("nothing"), result.stdout.text()
    for canary in canaries:
        assert canary not in result.stdout.text() + result.stderr.text()
    assert "submission.csv" not in result.files


async def test_mountinfo_names_no_data_root(env: Env, sandbox: Sandbox, tmp_path: Path) -> None:
    """The host paths behind the program's mounts reveal neither the data root nor the task."""
    env.require("bwrap")
    public, _ = plant(tmp_path / "data")
    result = await sandbox.run(
        env.request("print(open('/proc/self/mountinfo').read())", data_dir=public)
    )
    assert result.status is ExecStatus.OK, result
    assert str((tmp_path / "data").resolve()) not in result.stdout.text()
    assert "prepared" not in result.stdout.text()


async def test_program_holds_no_host_descriptor(env: Env, sandbox: Sandbox) -> None:
    env.require("bwrap")
    result = await sandbox.run(
        env.request(
            prog("""
        import os
        fds = sorted(int(x) for x in os.listdir("/proc/self/fd"))
        print([fd for fd in fds if fd > 2 and os.path.exists(f"/proc/self/fd/{fd}")
               and not os.readlink(f"/proc/self/fd/{fd}").startswith("/proc")])
    """)
        )
    )
    assert result.status is ExecStatus.OK, result
    assert result.stdout.text().strip() == "[]"


FORGE_INFRA = """
import os, sys, time
# drain or poison every pipe reachable through /proc, then fail the way a set-up failure would
for pid in ["self", *[p for p in os.listdir("/proc") if p.isdigit()]]:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        continue
    for fd in fds:
        path = f"/proc/{pid}/fd/{fd}"
        for flags in (os.O_RDONLY | os.O_NONBLOCK, os.O_WRONLY | os.O_NONBLOCK):
            try:
                h = os.open(path, flags)
            except OSError:
                continue
            try:
                if flags & os.O_WRONLY:
                    os.write(h, b"garbage")
                else:
                    os.read(h, 1 << 16)
            except OSError:
                pass
            os.close(h)
sys.stderr.write("bwrap: Can't mount proc on /newroot/proc: Operation not permitted\\n")
with open("attempts.txt", "a") as f:
    f.write("x")
print("\\nATTEMPTS=" + open("attempts.txt").read(), flush=True)
os._exit(1)
"""


async def test_row17_a_failing_program_cannot_forge_infra_error(env: Env, sandbox: Sandbox) -> None:
    result = await sandbox.run(env.request(FORGE_INFRA))
    assert result.status is ExecStatus.PROGRAM_ERROR, result
    assert result.exit_code == 1
    # ran once, on the program as submitted (writing into its own stdout is harmless)
    assert result.stdout.text().splitlines()[-1] == "ATTEMPTS=x"


@pytest.mark.parametrize(
    "failures, statuses", [(1, ExecStatus.PROGRAM_ERROR), (3, ExecStatus.INFRA_ERROR)]
)
async def test_setup_failure_is_retried_on_a_fresh_work_dir(
    tmp_path: Path, failures: int, statuses: ExecStatus
) -> None:
    """A set-up failure re-runs on a new work dir holding the program as submitted (the first
    attempt's edits are gone); after three, INFRA_ERROR."""
    config = SandboxConfig(work_root=str(tmp_path), allow_unisolated=True)
    seen: list[str] = []

    def make(request: ExecutionRequest):  # type: ignore[no-untyped-def]
        return create_workdir(str(tmp_path), request.program, 1, False, None)

    async def execute(request: ExecutionRequest, wd, sink: OutputSink) -> Outcome:  # type: ignore[no-untyped-def]
        seen.append((wd.path / "main.py").read_text())
        (wd.path / "main.py").write_text("scrubbed")
        return Outcome(exit_code=1, setup_failed=len(seen) <= failures)

    request = ExecutionRequest(program="print(1)", time_limit_s=10.0)
    async with admitted(config, Admission(1, 0), request, None) as run:
        while run.another_attempt():
            async with run.attempt() as attempt:
                attempt.workdir = make(run.request)
                run.outcome = await execute(run.request, attempt.workdir, run.sink)
    result = run.result()
    assert seen == ["print(1)"] * min(failures + 1, 3)
    assert result.status is statuses
    assert ("setup failed 3 times" in result.error) == (statuses is ExecStatus.INFRA_ERROR)


def test_unisolated_local_sandbox_is_refused(monkeypatch, tmp_path: Path) -> None:
    """A host without bubblewrap or writable cgroups: an error naming what is missing and how
    to install it, unless the user opts in; the opt-in is visible on the sandbox."""
    from mlerl.sandbox import _local, make_sandbox

    real_which = _local.shutil.which
    monkeypatch.setattr(
        _local.shutil, "which", lambda name: None if name == "bwrap" else real_which(name)
    )
    monkeypatch.setattr(_local._cgroup, "create", lambda *a, **k: None)
    with pytest.raises(SandboxUnavailable) as err:
        make_sandbox(SandboxConfig(work_root=str(tmp_path)))
    text = str(err.value)
    assert "bubblewrap: not installed" in text and "apt-get install -y bubblewrap" in text
    assert "cgroups: not writable" in text and "allow_unisolated=true" in text
    box = make_sandbox(SandboxConfig(work_root=str(tmp_path), allow_unisolated=True))
    assert set(box.missing) == {"bubblewrap", "cgroups"}  # type: ignore[attr-defined]
    with pytest.raises(Exception, match="allow_unisolated"):
        SandboxConfig(use_bwrap=False)


@pytest.mark.skipif(os.geteuid() != 0, reason="the host uid drop needs a root executor")
async def test_root_executor_runs_programs_as_the_sandbox_uid(
    env: Env, sandbox: Sandbox, tmp_path: Path
) -> None:
    """As root, the program's host uid is ``sandbox_uid``: a 0700 answers dir stays unreadable
    even if it were mounted."""
    env.require("bwrap")
    result = await sandbox.run(
        env.request("import os; print(os.getuid(), os.geteuid(), os.getgroups())")
    )
    assert result.status is ExecStatus.OK, result
    assert result.stdout.text().split()[:2] == ["65534", "65534"]


async def test_program_runs_under_the_core_file_size_and_cpu_rlimits(
    env: Env, sandbox: Sandbox
) -> None:
    """RLIMIT_CORE 0, RLIMIT_FSIZE = disk_mb and RLIMIT_CPU (wall time + 10 s at 1 cpu), soft
    and hard, whichever process sets them (the cgroup-joining shell or ``prlimit``)."""
    if env.backend != "local":
        pytest.skip("the rlimits are the local backend's layer (Docker has its own)")
    result = await sandbox.run(
        env.request(
            prog("""
        import resource
        for name in ("RLIMIT_CORE", "RLIMIT_FSIZE", "RLIMIT_CPU"):
            print(name, *resource.getrlimit(getattr(resource, name)))
    """),
            disk_mb=16,
            wall_time_s=30,
        )
    )
    assert result.status is ExecStatus.OK, result
    got = {
        line.split()[0]: tuple(int(x) for x in line.split()[1:])
        for line in result.stdout.text().splitlines()
    }
    assert got == {
        "RLIMIT_CORE": (0, 0),
        "RLIMIT_FSIZE": (16 << 20, 16 << 20),
        "RLIMIT_CPU": (40, 40),
    }


async def test_dev_shm_is_private_and_writable(env: Env, sandbox: Sandbox) -> None:
    """joblib's n_jobs needs POSIX semaphores in /dev/shm: writable inside, private to the run
    (nothing of it on the host or in the next run)."""
    env.require("bwrap")
    token = uuid.uuid4().hex
    first = await sandbox.run(
        env.request(
            prog(f"""
        import os, warnings
        open("/dev/shm/{token}", "w").write("x")
        from sklearn.ensemble import RandomForestClassifier
        import numpy as np
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # joblib's "will operate in serial mode" would raise
            RandomForestClassifier(n_estimators=4, n_jobs=2).fit(np.eye(4), [0, 1, 0, 1])
        print("ok")
    """)
        )
    )
    assert first.status is ExecStatus.OK, first
    assert not os.path.exists(f"/dev/shm/{token}")
    second = await sandbox.run(env.request(f"import os; print(os.path.exists('/dev/shm/{token}'))"))
    assert second.stdout.text().strip() == "False"


async def test_thread_pools_are_sized_to_the_cpu_share(env: Env, sandbox: Sandbox) -> None:
    """OpenMP, BLAS and joblib see the run's CPU share, not the host's cores. joblib's count is
    what LightGBM's default ``n_jobs`` uses: at the host's 2 in a 1-CPU quota a LightGBM fit of
    the embedded testbed ran past 200 s instead of 24 s (improve answers that swapped in
    LightGBM without ``n_jobs`` timed out)."""
    result = await sandbox.run(
        env.request(
            prog("""
        import os, joblib
        print(joblib.cpu_count(only_physical_cores=True), joblib.cpu_count(),
              os.environ["OMP_NUM_THREADS"], os.environ["OPENBLAS_NUM_THREADS"])
    """),
            cpus=1.0,
        )
    )
    assert result.status is ExecStatus.OK, result
    assert result.stdout.text().split() == ["1", "1", "1", "1"]
