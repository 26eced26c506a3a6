"""Pure pieces: bounded capture, admission, validation, safe copy-out (no sandbox needed)."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from pathlib import Path

import pytest

from mlerl.protocol import ConfigError, ExecStatus
from mlerl.sandbox import CapturedOutput, ExecutionRequest, Limits, SandboxConfig
from mlerl.sandbox._output import OutputSink, StreamCapture
from mlerl.sandbox._runner import Admission, Outcome, decide
from mlerl.sandbox._types import THREAD_VARIABLES, thread_env
from mlerl.sandbox._workdir import collect


def test_capture_keeps_head_and_tail_and_counts_everything() -> None:
    cap = StreamCapture(head_bytes=4, tail_bytes=3)
    for chunk in (b"ab", b"cdef", b"ghij"):  # stream "abcdefghij", 10 bytes
        cap.feed(chunk)
    out = cap.result()
    # head = first 4 bytes "abcd"; tail = last 3 bytes "hij"; "efg" (3 bytes) dropped
    assert (out.head, out.tail, out.total_bytes, out.truncated) == ("abcd", "hij", 10, True)
    assert out.text() == "abcd\n[... 3 bytes dropped ...]\nhij"


def test_capture_small_output_is_not_truncated() -> None:
    cap = StreamCapture(head_bytes=4, tail_bytes=3)
    cap.feed(b"abcdef")  # head "abcd", tail "ef": all 6 bytes kept
    assert cap.result() == CapturedOutput("abcd", "ef", 6, False)
    assert cap.result().text() == "abcdef"


def test_sink_limit_callback_and_broken_callback() -> None:
    seen: list[tuple[str, bytes]] = []
    sink = OutputSink(limit_bytes=5, callback=lambda n, c: seen.append((n, c)))
    sink.feed("stdout", b"abc")
    sink.feed("stderr", b"de")  # 5 bytes: at the limit, not over it
    assert not sink.over_limit and seen == [("stdout", b"abc"), ("stderr", b"de")]
    sink.feed("stdout", b"f")
    assert sink.over_limit

    def boom(name: str, chunk: bytes) -> None:
        raise RuntimeError("bad callback")

    broken = OutputSink(limit_bytes=100, callback=boom)
    broken.feed("stdout", b"x")
    broken.feed("stdout", b"y")
    assert broken.streams["stdout"].total == 2 and "bad callback" in broken.callback_error


def test_status_precedence() -> None:
    sink = OutputSink(limit_bytes=10, callback=None)
    assert decide(Outcome(exit_code=0), sink) is ExecStatus.OK
    assert decide(Outcome(exit_code=1), sink) is ExecStatus.PROGRAM_ERROR
    assert decide(Outcome(exit_code=137, oom=True), sink) is ExecStatus.OOM
    assert decide(Outcome(timed_out=True, oom=True), sink) is ExecStatus.TIMEOUT
    sink.feed("stdout", b"x" * 11)
    assert decide(Outcome(timed_out=True), sink) is ExecStatus.OUTPUT_LIMIT
    assert decide(Outcome(infra_error="engine down"), sink) is ExecStatus.INFRA_ERROR


async def test_admission_bounds_running_and_blocks_beyond_the_queue() -> None:
    adm = Admission(max_concurrency=1, queue_size=1)
    release = asyncio.Event()
    peak = 0

    async def job() -> None:
        nonlocal peak
        async with adm.slot():
            peak = max(peak, adm.running)
            await release.wait()

    async with asyncio.TaskGroup() as tg:
        tasks = [tg.create_task(job()) for _ in range(3)]
        await asyncio.sleep(0.05)
        # 1 running, 1 waiting in the queue, the 3rd blocked before the queue (backpressure)
        assert (adm.running, adm.waiting) == (1, 1)
        release.set()
    assert peak == 1 and all(t.done() for t in tasks)
    assert (adm.running, adm.waiting) == (0, 0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"wall_time_s": -1},
        {"memory_mb": 1},
        {"cpus": 0},
        {"pids": 1},
        {"output_bytes": 10},
        {"disk_mb": 0},
        {"kill_grace_s": -1},
    ],
)
def test_limits_validate(kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigError) as info:
        Limits(**kwargs)  # type: ignore[arg-type]
    assert info.value.key == next(iter(kwargs))


def test_the_sandbox_owns_the_limits_and_a_request_brings_only_the_tasks_time() -> None:
    """The sandbox's limits apply unless a request carries its own; a wall time of 0 there is
    the request's ``time_limit_s``; nothing left at all is refused before anything runs."""
    from mlerl.sandbox._runner import limits_in_force

    defaults = Limits(wall_time_s=0, memory_mb=2048, pids=64)
    task = limits_in_force(defaults, ExecutionRequest(program="", time_limit_s=45))
    assert (task.wall_time_s, task.memory_mb, task.pids) == (45, 2048, 64)
    fixed = dataclasses.replace(defaults, wall_time_s=10)
    assert limits_in_force(fixed, ExecutionRequest(program="", time_limit_s=45)) == fixed
    own = Limits(wall_time_s=5, memory_mb=256)
    assert limits_in_force(defaults, ExecutionRequest(program="", limits=own)) is own
    with pytest.raises(ConfigError) as info:
        limits_in_force(defaults, ExecutionRequest(program=""))
    assert info.value.key == "limits.wall_time_s"


def test_a_zero_wall_time_means_the_tasks_limit_in_config_but_a_request_needs_one() -> None:
    assert Limits(wall_time_s=0).wall_time_s == 0  # SandboxConfig.limits: each task's own limit
    with pytest.raises(ConfigError) as info:
        ExecutionRequest(program="pass\n", limits=Limits(wall_time_s=0))
    assert info.value.key == "limits.wall_time_s"


@pytest.mark.parametrize("name", ["../x", "/etc/passwd", "", "a/b", "main.py"])
def test_request_rejects_unsafe_collect_names(name: str) -> None:
    with pytest.raises(ConfigError, match="collect"):
        ExecutionRequest(program="", collect=(name,))


def test_request_and_config_validation(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="data_dir"):
        ExecutionRequest(program="", data_dir=tmp_path / "missing")
    with pytest.raises(ConfigError, match="entry"):
        ExecutionRequest(program="", entry=())
    with pytest.raises(ConfigError, match="env"):
        ExecutionRequest(program="", env={"A=B": "1"})
    with pytest.raises(ConfigError, match="backend"):
        SandboxConfig(backend="vm")
    with pytest.raises(ConfigError, match="sandbox_uid"):
        SandboxConfig(sandbox_uid=0)
    prog = tmp_path / "p.py"
    prog.write_text("print(1)\n")
    assert ExecutionRequest.from_file(prog).program == "print(1)\n"


def test_collect_accepts_only_small_regular_single_link_files(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    secret = tmp_path / "host_secret.txt"
    secret.write_text("answers")
    (work / "ok.csv").write_text("id,y\n1,2\n")
    (work / "sym.csv").symlink_to(secret)
    (work / "a.csv").write_text("x")
    os.link(work / "a.csv", work / "hard.csv")
    os.mkfifo(work / "fifo.csv")
    (work / "big.csv").write_bytes(b"x" * 101)
    (work / "dir.csv").mkdir()
    names = ("ok.csv", "sym.csv", "hard.csv", "fifo.csv", "big.csv", "dir.csv", "missing.csv")
    files, problems = collect(work, names, str(tmp_path / "out"), max_bytes=100)
    assert set(files) == {"ok.csv"}
    assert files["ok.csv"].read_text() == "id,y\n1,2\n"
    assert not files["ok.csv"].is_relative_to(work)
    joined = "\n".join(problems)
    for name in ("sym.csv", "hard.csv", "fifo.csv", "big.csv", "dir.csv"):
        assert name in joined
    assert "missing.csv" not in joined  # a missing file is not a problem, just absent
    assert secret.read_text() == "answers"


def test_mount_allowlist_binds_only_what_a_program_needs(monkeypatch, tmp_path):
    """The bubblewrap view: system dirs, the interpreter's prefixes, the work dir, the staged
    inputs; never ``/`` as a whole, never the data root or a parent of the venv."""
    import sys

    from mlerl.sandbox import _bwrap

    venv = tmp_path / "clone" / ".venv"
    (venv / "lib").mkdir(parents=True)
    monkeypatch.setattr(sys, "prefix", str(venv))
    monkeypatch.setattr(sys, "exec_prefix", str(venv))
    roots = _bwrap.interpreter_roots()
    assert str(venv.resolve()) in roots
    assert not any(r != p and r.startswith(p + "/") for r in roots for p in roots)  # outermost

    args = _bwrap.mount_args("/host/run/work", "/host/stage/abc", roots)
    binds = {
        (args[i], args[i + 1], args[i + 2])
        for i, a in enumerate(args)
        if a in ("--bind", "--ro-bind")
    }
    sources = {src for _, src, _ in binds}
    assert ("--ro-bind", str(venv.resolve()), str(venv.resolve())) in binds
    assert ("--bind", "/host/run/work", _bwrap.INNER_WORK) in binds
    assert ("--ro-bind", "/host/stage/abc", _bwrap.INNER_WORK + "/input") in binds
    assert "/" not in sources and str(tmp_path) not in sources
    assert not any(s == "/etc" or s.startswith(("/home", "/root/.cache")) for s in sources)
    # the venv's parents exist inside as plain 0755 dirs (bwrap would make them 0700)
    parent = str((tmp_path / "clone").resolve())
    assert args[args.index(parent) - 3 : args.index(parent) + 1] == [
        "--perms",
        "0755",
        "--dir",
        parent,
    ]
    assert args[-2:] == ["--chdir", _bwrap.INNER_WORK]
    # a venv under /tmp (a CI clone) is bound after the private /tmp, so it stays visible
    if str(venv.resolve()).startswith("/tmp/"):
        assert args.index("--tmpfs") < args.index(str(venv.resolve()))
        assert ["--dir", "/tmp"] not in [args[i : i + 2] for i in range(len(args))]


def test_staged_inputs_are_links_and_follow_changes(tmp_path):
    from mlerl.sandbox._workdir import stage_inputs

    data = tmp_path / "task" / "prepared" / "public"
    (data / "images").mkdir(parents=True)
    (data / "train.csv").write_text("a\n1\n")
    (data / "images" / "0.png").write_bytes(b"png")
    stage = stage_inputs(data, tmp_path / "stage")
    assert "prepared" not in str(stage) and "task" not in str(stage)
    assert (stage / "train.csv").read_text() == "a\n1\n"
    assert os.stat(stage / "train.csv").st_ino == os.stat(data / "train.csv").st_ino
    assert stage_inputs(data, tmp_path / "stage") == stage  # unchanged: reused
    (data / "train.csv").unlink()
    (data / "train.csv").write_text("a\n2\n")
    fresh = stage_inputs(data, tmp_path / "stage")
    assert fresh != stage and (fresh / "train.csv").read_text() == "a\n2\n"


async def test_leftovers_counts_this_processes_run_dirs(tmp_path):
    """``leftovers``: what a leak check counts; a run dir of this process counts, another's not."""
    from mlerl.sandbox import leftovers
    from mlerl.sandbox._workdir import owner_tag

    config = SandboxConfig(backend="local", work_root=str(tmp_path))
    assert await leftovers(config) == {"run_dirs": 0, "cgroups": 0}
    (tmp_path / owner_tag() / "run-1").mkdir(parents=True)
    (tmp_path / "1-0" / "run-2").mkdir(parents=True)  # another (dead) executor's: reap's business
    assert (await leftovers(config))["run_dirs"] == 1


# Mutation survivors (benchmarks/tools/mutation.py): the mount list in full, on a fake host.


def test_mount_args_in_full_on_a_fake_host(monkeypatch):
    """Every argument, in order, for a host where /bin, /sbin and /lib are links into /usr,
    /lib64 a dir, /lib32 and /libx32 absent, and two of the /etc files exist."""
    from mlerl.sandbox import _bwrap

    links = {"/bin": "usr/bin", "/sbin": "usr/sbin", "/lib": "usr/lib"}
    dirs = {"/usr", "/lib64"}
    files = {"/etc/ld.so.cache", "/etc/passwd"}
    monkeypatch.setattr(_bwrap.os.path, "islink", lambda p: p in links)
    monkeypatch.setattr(_bwrap.os, "readlink", lambda p: links[p])
    monkeypatch.setattr(_bwrap.os.path, "isdir", lambda p: p in dirs)
    monkeypatch.setattr(_bwrap.os.path, "exists", lambda p: p in files or p in dirs or p in links)
    # built at run time: equal to the module's "/usr" and "/lib64" but not the same objects
    roots = ["/" + "usr", "/usr/local/py", "/" + "lib64/py/venv", "/opt/py/venv", "/tmp/ci/venv"]
    args = _bwrap.mount_args("/w", "/in", roots)
    assert args == [
        "--dev",
        "/dev",
        "--perms",
        "1777",
        "--tmpfs",
        "/dev/shm",
        "--proc",
        "/proc",
        "--perms",
        "1777",
        "--tmpfs",
        "/tmp",
        "--ro-bind",
        "/usr",
        "/usr",
        "--symlink",
        "usr/bin",
        "/bin",
        "--symlink",
        "usr/sbin",
        "/sbin",
        "--symlink",
        "usr/lib",
        "/lib",
        "--ro-bind",
        "/lib64",
        "/lib64",
        "--perms",
        "0755",
        "--dir",
        "/etc",  # once, before the first /etc file
        "--ro-bind",
        "/etc/ld.so.cache",
        "/etc/ld.so.cache",
        "--ro-bind",
        "/etc/passwd",
        "/etc/passwd",
        # /usr and /usr/local/py: inside the /usr bind already; /lib64/py/venv: its parents are
        # in the /lib64 bind (none made); /opt/py/venv: its parents made 0755 first
        "--ro-bind",
        "/lib64/py/venv",
        "/lib64/py/venv",
        "--perms",
        "0755",
        "--dir",
        "/opt",
        "--perms",
        "0755",
        "--dir",
        "/opt/py",
        "--ro-bind",
        "/opt/py/venv",
        "/opt/py/venv",
        # under the private /tmp: /tmp exists already, only /tmp/ci is made
        "--perms",
        "0755",
        "--dir",
        "/tmp/ci",
        "--ro-bind",
        "/tmp/ci/venv",
        "/tmp/ci/venv",
        "--bind",
        "/w",
        "/workspace",
        "--ro-bind",
        "/in",
        "/workspace/input",
        "--chdir",
        "/workspace",
    ]
    # no staged inputs: no input mount
    assert _bwrap.mount_args("/w", None, [])[-5:] == [
        "--bind",
        "/w",
        "/workspace",
        "--chdir",
        "/workspace",
    ]


def test_outermost_roots_and_path_prefixes():
    from mlerl.sandbox._bwrap import _outermost, _parents, _under

    # a root inside another is dropped; a sibling sharing a prefix ("/opt/venv2") is not inside
    assert _outermost(["/opt/venv/lib", "/opt/venv2", "/opt/venv", "/opt/venv"]) == [
        "/opt/venv",
        "/opt/venv2",
    ]
    assert _under("/opt/venv", ["/opt/venv"]) and _under("/opt/venv/x", ["/opt/venv/"])
    assert not _under("/opt/venv2", ["/opt/venv"]) and not _under("/opt", ["/opt/venv"])
    assert _parents("/a/b/c") == ["/a", "/a/b"] and _parents("/a") == []


@pytest.mark.parametrize(("cpus", "threads"), [(0.25, "1"), (1.0, "1"), (1.5, "2"), (4.0, "4")])
def test_thread_env_rounds_the_cpu_share_up(cpus: float, threads: str) -> None:
    env = thread_env(Limits(cpus=cpus))
    assert set(env) == set(THREAD_VARIABLES) and "LOKY_MAX_CPU_COUNT" in env
    assert set(env.values()) == {threads}
