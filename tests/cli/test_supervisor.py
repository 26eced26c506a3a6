"""Supervisor: a restartable primary is restarted (a multi-rank learner's new torchrun) and
descendants that left the process group (torchrun's ranks) are stopped with it."""

import sys
import time
from pathlib import Path

from mlerl.cli._supervisor import ChildSpec, Supervisor, descendants


def _alive(pid: int) -> bool:
    try:
        state = next(
            ln
            for ln in Path(f"/proc/{pid}/status").read_text().splitlines()
            if ln.startswith("State:")
        )
    except (OSError, StopIteration):
        return False
    return "Z (zombie)" not in state


def test_restartable_primary_is_restarted_then_its_exit_ends_the_run(tmp_path):
    marker = tmp_path / "runs"
    # fails the first time, succeeds the second
    code = (
        f"import pathlib,sys; p=pathlib.Path({str(marker)!r}); n=len(p.read_text()) if p.exists() else 0;"
        "p.write_text('x'*(n+1)); sys.exit(1 if n == 0 else 0)"
    )
    sup = Supervisor(
        [
            ChildSpec(
                "learner",
                [sys.executable, "-c", code],
                tmp_path / "l.log",
                restart=True,
                max_restarts=2,
            )
        ],
        primary="learner",
    )
    sup.start()
    try:
        assert sup.wait(poll_s=0.1, deadline_s=60) == 0
    finally:
        sup.stop()
    assert marker.read_text() == "xx" and "restarting learner (exit 1, #1)" in sup.events


def test_stop_kills_descendants_in_their_own_session(tmp_path):
    pid_file = tmp_path / "grandchild"
    code = (
        "import subprocess,sys,time;"
        "p=subprocess.Popen([sys.executable,'-c','import time; time.sleep(300)'], start_new_session=True);"
        f"open({str(pid_file)!r},'w').write(str(p.pid)); time.sleep(300)"
    )
    sup = Supervisor(
        [ChildSpec("learner", [sys.executable, "-c", code], tmp_path / "l.log")],
        primary="learner",
        grace_s=1.0,
    )
    sup.start()
    try:
        end = time.monotonic() + 60
        while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < end:
            time.sleep(0.1)
        grandchild = int(pid_file.read_text())
        assert grandchild in descendants(sup.pid("learner"))
    finally:
        sup.stop()
    end = time.monotonic() + 10
    while _alive(grandchild) and time.monotonic() < end:
        time.sleep(0.1)
    assert not _alive(grandchild)


def test_a_child_with_a_fatal_reason_is_not_restarted_and_says_why(tmp_path):
    """A restartable child that writes its ``fatal_file`` and fails ends the run at once, with
    that line as the reason; the file is removed before each start (a stale one means nothing)."""
    fatal = tmp_path / "learner.fatal"
    fatal.write_text("stale: from an earlier start\n")
    code = (
        f"import pathlib,sys; pathlib.Path({str(fatal)!r}).write_text('OSError: [Errno 28] No space left on device\\n');"
        "sys.exit(1)"
    )
    sup = Supervisor(
        [
            ChildSpec(
                "learner",
                [sys.executable, "-c", code],
                tmp_path / "l.log",
                restart=True,
                max_restarts=5,
                fatal_file=fatal,
            )
        ],
        primary="learner",
    )
    sup.start()
    try:
        assert sup.wait(poll_s=0.1, deadline_s=60) == 1
    finally:
        sup.stop()
    assert not any(e.startswith("restarting") for e in sup.events), sup.events
    assert sup.reason == "OSError: [Errno 28] No space left on device"


def test_a_failure_without_a_fatal_reason_is_restarted_then_reported(tmp_path):
    sup = Supervisor(
        [
            ChildSpec(
                "learner",
                [sys.executable, "-c", "import sys; sys.exit(3)"],
                tmp_path / "l.log",
                restart=True,
                max_restarts=2,
                fatal_file=tmp_path / "never",
            )
        ],
        primary="learner",
    )
    sup.start()
    try:
        assert sup.wait(poll_s=0.1, deadline_s=60) == 3
    finally:
        sup.stop()
    assert sum(e.startswith("restarting learner") for e in sup.events) == 2
    assert sup.reason == "exit 3 after 2 restarts"


def test_children_and_their_armed_descendants_die_with_a_killed_supervisor(tmp_path):
    """SIGKILL of the supervising process (no ``stop()`` runs) still ends its children, and a
    grandchild in its own session that armed ``die_with_parent`` (as torchrun's ranks do)."""
    import os
    import signal
    import subprocess

    pids = tmp_path / "pids"
    armed = tmp_path / "armed"
    grandchild = (
        "from mlerl.protocol import die_with_parent; import time; die_with_parent();"
        f"open({str(armed)!r},'w').write('1'); time.sleep(300)"
    )
    child = (
        "import subprocess,sys,time;"
        f"p=subprocess.Popen([sys.executable,'-c',{grandchild!r}], start_new_session=True);"
        f"open({str(pids)!r},'a').write(f'{{p.pid}}\\n'); time.sleep(300)"
    )
    supervisor = (
        f"import sys,time; from pathlib import Path; from mlerl.cli._supervisor import ChildSpec, Supervisor;"
        f"s=Supervisor([ChildSpec('learner',[sys.executable,'-c',{child!r}],Path({str(tmp_path / 'l.log')!r}))],"
        f"primary='learner'); s.start(); open({str(pids)!r},'a').write(f'{{s.pid(\"learner\")}}\\n');"
        "time.sleep(300)"
    )
    proc = subprocess.Popen([sys.executable, "-c", supervisor])
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end and not (
            armed.exists() and len(pids.read_text().split()) == 2
        ):
            time.sleep(0.1)
        watched = [int(p) for p in pids.read_text().split()]
        assert len(watched) == 2 and all(_alive(p) for p in watched)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        end = time.monotonic() + 10
        while time.monotonic() < end and any(_alive(p) for p in watched):
            time.sleep(0.1)
        assert not any(_alive(p) for p in watched)
    finally:
        proc.kill()


def test_events_are_written_as_they_happen(tmp_path):
    """A supervisor killed with -9 never reaches the end of the run: its record must already be
    on disk."""
    log = tmp_path / "supervisor.log"
    sup = Supervisor(
        [
            ChildSpec(
                "learner",
                [sys.executable, "-c", "import sys; sys.exit(4)"],
                tmp_path / "l.log",
                restart=True,
                max_restarts=1,
            )
        ],
        primary="learner",
        events_path=log,
    )
    sup.start()
    assert log.read_text().startswith("started learner pid=")
    try:
        sup.wait(poll_s=0.1, deadline_s=60)
    finally:
        sup.stop()
    lines = log.read_text().splitlines()
    assert (
        lines == sup.events
        and lines[1] == "restarting learner (exit 4, #1)"
        and lines[-1] == "learner exited 4"
    )
