"""Supervisor: a restartable primary is restarted (a multi-rank learner's new torchrun) and
descendants that left the process group (torchrun's ranks) are stopped with it."""

import sys
import time
from pathlib import Path

from mlerl.cli._supervisor import ChildSpec, Supervisor, descendants


def _alive(pid: int) -> bool:
    try:
        state = next(ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines() if ln.startswith("State:"))
    except (OSError, StopIteration):
        return False
    return "Z (zombie)" not in state


def test_restartable_primary_is_restarted_then_its_exit_ends_the_run(tmp_path):
    marker = tmp_path / "runs"
    # fails the first time, succeeds the second
    code = (f"import pathlib,sys; p=pathlib.Path({str(marker)!r}); n=len(p.read_text()) if p.exists() else 0;"
            "p.write_text('x'*(n+1)); sys.exit(1 if n == 0 else 0)")
    sup = Supervisor([ChildSpec("learner", [sys.executable, "-c", code], tmp_path / "l.log", restart=True,
                                max_restarts=2)], primary="learner")
    sup.start()
    try:
        assert sup.wait(poll_s=0.1, deadline_s=60) == 0
    finally:
        sup.stop()
    assert marker.read_text() == "xx" and "restarting learner (exit 1, #1)" in sup.events


def test_stop_kills_descendants_in_their_own_session(tmp_path):
    pid_file = tmp_path / "grandchild"
    code = ("import subprocess,sys,time;"
            "p=subprocess.Popen([sys.executable,'-c','import time; time.sleep(300)'], start_new_session=True);"
            f"open({str(pid_file)!r},'w').write(str(p.pid)); time.sleep(300)")
    sup = Supervisor([ChildSpec("learner", [sys.executable, "-c", code], tmp_path / "l.log")],
                     primary="learner", grace_s=1.0)
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
