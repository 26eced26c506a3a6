"""Real hostile programs against both backends (rows of docs/sandbox.md's threat table).

Every test also checks (conftest ``env`` fixture) that no process, container, cgroup or work
dir of the run is left behind. Timing bounds are loose: the machine is shared and loaded.
"""

from __future__ import annotations

import os
import shutil
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from mlerl.protocol import ExecStatus
from mlerl.sandbox import Sandbox

Env = Any  # the conftest fixture type (test modules cannot import conftest)


def prog(src: str) -> str:
    return textwrap.dedent(src).lstrip()


async def test_ok_program_data_and_collect(env: Env, sandbox: Sandbox, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.csv").write_text("id,y\n1,5\n")
    result = await sandbox.run(
        env.request(
            prog("""
        import os
        rows = open("input/train.csv").read().splitlines()
        open("submission.csv", "w").write("id,y\\n1,%s\\n" % rows[1].split(",")[1])
        print("rows", len(rows), "uid", os.getuid())
    """),
            data_dir=data,
        )
    )
    assert result.status is ExecStatus.OK, result
    assert result.exit_code == 0
    isolated = env.backend == "docker" or shutil.which("bwrap") is not None
    assert result.stdout.text() == f"rows 2 uid {65534 if isolated else os.getuid()}\n"
    assert result.files["submission.csv"].read_text() == "id,y\n1,5\n"
    assert result.finished_at >= result.started_at and 0 <= result.duration_s < 30


async def test_program_error_keeps_stderr(env: Env, sandbox: Sandbox) -> None:
    result = await sandbox.run(env.request("raise SystemExit('bad input')\n"))
    assert result.status is ExecStatus.PROGRAM_ERROR and result.exit_code == 1
    assert "bad input" in result.stderr.text()
    assert result.files == {}


@pytest.mark.parametrize("body", ["while True:\n    pass\n", "import time\ntime.sleep(1e9)\n"])
async def test_row1_infinite_loop_and_sleep_time_out(env: Env, sandbox: Sandbox, body: str) -> None:
    seen: list[bytes] = []
    request = env.request("print('marker', flush=True)\n" + body, wall_time_s=2.0, kill_grace_s=1.0)
    t0 = time.monotonic()
    result = await sandbox.run(request, on_output=lambda name, chunk: seen.append(chunk))
    assert result.status is ExecStatus.TIMEOUT
    assert 2.0 <= result.duration_s < 2.0 + 1.0 + 10.0  # limit + grace + slack for load
    assert time.monotonic() - t0 < 30
    assert b"marker" in b"".join(seen)  # streamed before the timeout, so it counts
    again = await sandbox.run(env.request("print('reused')\n"))  # the slot is reusable
    assert again.status is ExecStatus.OK and again.stdout.text() == "reused\n"


async def test_row2_descendants_do_not_survive(env: Env, sandbox: Sandbox) -> None:
    env.require("cgroups")
    result = await sandbox.run(
        env.request(
            prog("""
        import os, subprocess, time
        subprocess.Popen(["setsid", "sleep", "1000"])
        if os.fork() == 0:                 # double fork: the grandchild is orphaned
            if os.fork() == 0:
                os.setsid()
                while True:
                    open("late.txt", "a").write("x")
                    time.sleep(0.05)
            os._exit(0)
        time.sleep(0.3)
        print("parent exits")
    """),
            collect=("late.txt",),
        )
    )
    assert result.status is ExecStatus.OK, result
    # the fixture asserts that no process carrying this run's token is alive afterwards


async def test_row3_fork_bomb_hits_pids_limit(env: Env, sandbox: Sandbox) -> None:
    env.require("cgroups")
    result = await sandbox.run(
        env.request(
            prog("""
        import os, sys
        print("start", flush=True)
        while True:
            try:
                os.fork()
            except OSError:
                sys.stdout.write("fork refused\\n"); sys.stdout.flush()
                os._exit(3)
    """),
            pids=48,
            wall_time_s=8.0,
            memory_mb=1024,
        )
    )
    assert "fork refused" in result.stdout.text()  # a resource error, not the timeout
    assert result.status in (ExecStatus.PROGRAM_ERROR, ExecStatus.TIMEOUT)


async def test_row4_memory_bomb_is_oom(env: Env, sandbox: Sandbox) -> None:
    env.require("cgroups")
    result = await sandbox.run(
        env.request(
            prog("""
        hog = []
        while True:
            hog.append(bytearray(16 * 1024 * 1024))
    """),
            memory_mb=128,
        )
    )
    assert result.status is ExecStatus.OOM, result


@pytest.mark.slow
async def test_row4_torch_imports_under_2_gib(env: Env, sandbox: Sandbox) -> None:
    result = await sandbox.run(
        env.request(
            "import torch\nprint(torch.ones(3).sum().item())\n", memory_mb=2048, wall_time_s=120
        )
    )
    assert result.status is ExecStatus.OK, result
    assert result.stdout.text() == "3.0\n"


async def test_row5_gigabyte_of_stdout_is_cut_quickly(env: Env, sandbox: Sandbox) -> None:
    result = await sandbox.run(
        env.request(
            prog("""
        import sys
        sys.stdout.write("FIRST LINE\\n")
        block = "y" * (1 << 20)
        for _ in range(1024):  # 1 GiB
            sys.stdout.write(block)
    """),
            output_bytes=4 << 20,
        )
    )
    assert result.status is ExecStatus.OUTPUT_LIMIT
    out = result.stdout
    assert out.head.startswith("FIRST LINE\n") and out.truncated
    assert out.total_bytes > 4 << 20
    assert len(out.head) + len(out.tail) <= (64 << 10) + (1 << 20)  # memory stays bounded
    assert result.duration_s < 20  # killed at the cap, not after writing 1 GiB


@pytest.mark.parametrize("size", [200_000, 1_000_000, 100_000_000])
async def test_row6_big_output_then_exit_returns_promptly(
    env: Env, sandbox: Sandbox, size: int
) -> None:
    result = await sandbox.run(
        env.request(
            prog(f"""
        import sys
        sys.stdout.buffer.write(b"z" * {size})
    """),
            output_bytes=200_000_000,
        )
    )
    assert result.status is ExecStatus.OK, result.error
    assert result.stdout.total_bytes == size
    assert result.duration_s < 15


async def test_row7_disk_fill_is_enospc_inside(env: Env, sandbox: Sandbox) -> None:
    result = await sandbox.run(
        env.request(
            prog("""
        import errno
        try:
            with open("fill.bin", "wb") as f:
                while True:
                    f.write(b"d" * (1 << 20))
                    f.flush()
        except OSError as exc:
            print("refused", errno.errorcode[exc.errno])
    """),
            disk_mb=16,
            memory_mb=512,
        )
    )
    assert result.status is ExecStatus.OK, result
    assert result.stdout.text().split()[1] in ("ENOSPC", "EFBIG"), result.stdout.text()


async def test_row8_no_state_leaks_between_runs(env: Env, sandbox: Sandbox) -> None:
    env.require("bwrap")
    first = await sandbox.run(
        env.request(
            prog("""
        open("state.txt", "w").write("1")
        open("/tmp/state.txt", "w").write("1")
    """)
        )
    )
    assert first.status is ExecStatus.OK, first
    second = await sandbox.run(
        env.request(
            prog("""
        import os
        print(sorted(os.listdir(".")), os.path.exists("/tmp/state.txt"))
    """)
        )
    )
    assert second.stdout.text() == "['main.py'] False\n"


async def test_row9_writes_outside_the_work_dir_are_refused(
    env: Env, sandbox: Sandbox, tmp_path: Path
) -> None:
    env.require("bwrap")
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.csv").write_text("keep")
    grader = tmp_path / "grader.py"
    grader.write_text("GRADE = 1\n")
    result = await sandbox.run(
        env.request(
            prog(f"""
        import os, sys, sysconfig
        targets = [sys.executable, sysconfig.get_paths()["purelib"] + "/evil.pth",
                   "input/train.csv", "input/new.csv", "/etc/passwd", "/usr/bin/evil",
                   {str(grader)!r}, {str(data / "new.csv")!r}]
        for t in targets:
            try:
                open(t, "a").write("pwned")
                print("WROTE", t)
            except OSError:
                print("refused", t)
    """),
            data_dir=data,
        )
    )
    assert result.status is ExecStatus.OK, result
    lines = result.stdout.text().splitlines()
    # interpreter, site-packages, the data dir and system dirs: refused inside
    assert all(line.startswith("refused") for line in lines[:6]), lines
    # host paths under /tmp may be shadowed by the sandbox's private /tmp (a write there lands
    # in the sandbox's tmpfs): what matters is that nothing changed on the host
    assert (data / "train.csv").read_text() == "keep" and not (data / "new.csv").exists()
    assert grader.read_text() == "GRADE = 1\n"
    import sysconfig

    assert not Path(sysconfig.get_paths()["purelib"], "evil.pth").exists()
    assert not Path("/usr/bin/evil").exists() and "pwned" not in Path("/etc/passwd").read_text()


async def test_row11_linked_submissions_are_rejected(
    env: Env, sandbox: Sandbox, tmp_path: Path
) -> None:
    secret = tmp_path / "answers.csv"
    secret.write_text("id,y\n1,42\n")
    result = await sandbox.run(
        env.request(
            prog(f"""
        import os
        os.symlink({str(secret)!r}, "submission.csv")
        open("real.csv", "w").write("id,y\\n1,0\\n")
        os.link("real.csv", "hard.csv")
        os.mkfifo("fifo.csv")
        os.symlink("/etc/passwd", "passwd.csv")
    """),
            collect=("submission.csv", "hard.csv", "fifo.csv", "passwd.csv"),
        )
    )
    assert result.status is ExecStatus.OK
    assert result.files == {}
    for name in ("submission.csv", "hard.csv", "fifo.csv", "passwd.csv"):
        assert f"{name}: refused" in result.error
    assert "42" not in result.error


async def test_row12_no_network_egress(env: Env, sandbox: Sandbox) -> None:
    env.require("bwrap")
    import zmq
    import zmq.asyncio

    ctx = zmq.asyncio.Context()
    sock = ctx.socket(zmq.PULL)
    sock.setsockopt(zmq.LINGER, 0)
    port = sock.bind_to_random_port("tcp://127.0.0.1")
    try:
        result = await sandbox.run(
            env.request(
                prog(f"""
            import socket
            def attempt(what, fn):
                try:
                    fn()
                    print("REACHED", what)
                except OSError:
                    print("blocked", what)
            attempt("zmq", lambda: socket.create_connection(("127.0.0.1", {port}), timeout=3))
            attempt("dns", lambda: socket.getaddrinfo("pypi.org", 443))
            attempt("ext", lambda: socket.create_connection(("1.1.1.1", 443), timeout=3))
        """)
            )
        )
        assert await sock.poll(200) == 0  # nothing arrived on the trainer's port
    finally:
        sock.close()
        ctx.term()
    assert result.status is ExecStatus.OK, result
    assert result.stdout.text() == "blocked zmq\nblocked dns\nblocked ext\n"


async def test_row13_unprivileged_without_new_privileges(env: Env, sandbox: Sandbox) -> None:
    env.require("bwrap")
    result = await sandbox.run(
        env.request(
            prog("""
        import os
        status = dict(l.split(":\\t", 1) for l in open("/proc/self/status").read().splitlines()
                      if ":\\t" in l)
        print(os.getuid(), status["NoNewPrivs"].strip(), int(status["CapEff"].strip(), 16))
    """)
        )
    )
    assert result.stdout.text() == "65534 1 0\n", result


async def test_row14_orphans_leave_no_zombies(env: Env, sandbox: Sandbox) -> None:
    env.require("bwrap")
    result = await sandbox.run(
        env.request(
            prog("""
        import os, time
        for _ in range(200):
            pid = os.fork()
            if pid == 0:
                if os.fork() == 0:
                    os._exit(0)   # grandchild: orphaned once its parent is gone
                os._exit(0)
            os.waitpid(pid, 0)
        time.sleep(1.0)
        zombies = 0
        for p in os.listdir("/proc"):
            if p.isdigit():
                try:
                    stat = open(f"/proc/{p}/stat").read()
                except OSError:
                    continue
                zombies += stat[stat.rindex(")") + 2] == "Z"
        print("zombies", zombies)
    """)
        )
    )
    assert result.status is ExecStatus.OK, result
    assert result.stdout.text() == "zombies 0\n"


async def test_row18_one_hung_run_does_not_block_the_batch(env: Env) -> None:
    import asyncio

    sandbox = env.sandbox(max_concurrency=2, queue_size=8)
    try:
        hung = env.request("import time\ntime.sleep(1e9)\n", wall_time_s=3.0, kill_grace_s=0.5)
        quick = [env.request(f"print({i})\n") for i in range(5)]
        results = await asyncio.gather(sandbox.run(hung), *(sandbox.run(q) for q in quick))
    finally:
        await sandbox.close()
    assert results[0].status is ExecStatus.TIMEOUT
    assert [r.stdout.text() for r in results[1:]] == [f"{i}\n" for i in range(5)]
    assert all(r.status is ExecStatus.OK for r in results[1:])
