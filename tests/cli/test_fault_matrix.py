"""The fault matrix: faults injected into real `mlerl train` runs (docs/faults.md).

Each cell kills or breaks one part of a running system and checks that the run recovers
(resumes training) or exits non-zero with a one-line reason, that nothing it started is left
running, and that no acknowledged sample is lost or stored twice. The processes are watched
from the outside: every descendant of `mlerl train` seen while the run lives (learner ranks,
actors, grading processes, sandboxes) must be gone at the end, whichever way it ended.

``MLERL_FAULT_MATRIX=path.jsonl`` appends one row per cell (outcome, seconds to recover or
fail, processes left) for docs/faults.md.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from .test_distributed_e2e import (
    ENV,
    _assert_exactly_once,
    _checkpointed,
    _journal,
    _learner_rank,
    _steps,
)

pytestmark = [pytest.mark.slow, pytest.mark.faults]

RECOVER_S = 240.0
"""How long a cell may take before the test fails (generous for a loaded 2-core CI machine);
the seconds each cell took are recorded, and the target (60 s) is judged from them."""


def _fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2 :].split()


def _stat(pid: int) -> tuple[int, int] | None:
    """(ppid, start time) of a live, non-zombie process."""
    fields = _fields(pid)
    if fields is None or fields[0] == "Z":
        return None
    return int(fields[1]), int(fields[19])


def _state(pid: int) -> str:
    """What a process left behind is doing: its state, parent, kernel wait channel and age."""
    fields = _fields(pid)
    try:
        if fields is None:
            return "gone"
        wchan = Path(f"/proc/{pid}/wchan").read_text() or "-"
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except OSError:
        return "gone"
    age = uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK")
    return f"state {fields[0]}, ppid {fields[1]}, wchan {wchan}, {age:.0f} s old"


def _cmdline(pid: int) -> str:
    try:
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""


class Watch:
    """Every process descended from ``root`` while it lives, remembered by (pid, start time)."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.seen: dict[int, tuple[int, str]] = {root: ((_stat(root) or (0, 0))[1], _cmdline(root))}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.scan()
            time.sleep(0.2)

    def scan(self) -> None:
        children: dict[int, list[int]] = {}
        starts: dict[int, int] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and (st := _stat(int(entry.name))) is not None:
                children.setdefault(st[0], []).append(int(entry.name))
                starts[int(entry.name)] = st[1]
        todo = list(self.seen)
        while todo:
            pid = todo.pop()
            for child in children.get(pid, []):
                if child not in self.seen:
                    self.seen[child] = (starts[child], _cmdline(child))
                    todo.append(child)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def left(self, wait_s: float = 30.0) -> list[str]:
        """Processes seen that are still alive after up to ``wait_s`` seconds."""
        end = time.monotonic() + wait_s
        while True:
            alive = [
                f"{pid} ({_state(pid)}): {cmd[:160]}"
                for pid, (start, cmd) in self.seen.items()
                if (st := _stat(pid)) is not None and st[1] == start
            ]
            if not alive or time.monotonic() > end:
                return alive
            time.sleep(0.5)

    def descendants(self, marker: str) -> list[int]:
        """Live watched processes whose command line, read now, holds ``marker``.

        The command line is read again rather than taken from the first sighting: a child seen
        between its fork and its exec still shows its parent's command line under the pid and
        start time it keeps after the exec."""
        self.scan()
        return [
            pid
            for pid, (start, _) in list(self.seen.items())
            if (st := _stat(pid)) is not None and st[1] == start and marker in _cmdline(pid)
        ]


def _record(cell: str, **row: object) -> None:
    out = os.environ.get("MLERL_FAULT_MATRIX")
    if out:
        with open(out, "a") as f:
            f.write(json.dumps({"cell": cell, **row}) + "\n")


def _wait(
    predicate, what: str, proc: subprocess.Popen | None = None, timeout: float = RECOVER_S
) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if predicate():
            return time.monotonic() - start
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the run exited ({proc.returncode}) while waiting for {what}")
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def _stored(run_dir: Path) -> int:
    return len(_journal(run_dir))


def _start(argv: list[str]) -> tuple[subprocess.Popen, Watch]:
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV
    )
    return proc, Watch(proc.pid)


def _finish(
    proc: subprocess.Popen, watch: Watch, timeout: float = 600
) -> tuple[int, str, list[str]]:
    try:
        out, _ = proc.communicate(timeout=timeout)
    finally:
        proc.kill()
        watch.stop()
    return proc.returncode, out, watch.left()


def _one_line_reason(out: str) -> str:
    lines = [ln for ln in out.splitlines() if ln.startswith("mlerl train: ")]
    assert lines, out[-3000:]
    return lines[-1]


UPDATES = 14
"""Updates of the kill run: the faults take about 5 (two learner restarts); the rest follow the
resume after `kill -9` of `mlerl train`."""


def test_kills_of_every_part_recover_and_lose_nothing(tmp_path, train_argv, processes):
    """One 2-rank run, faults one after another, each waited out before the next: SIGKILL of
    an actor, a grading process, the sandboxes, learner rank 1, learner rank 0; then SIGKILL of
    `mlerl train` itself (everything must die with it) and a resume that finishes the run."""
    run_dir = tmp_path / "run"
    argv = train_argv(
        run_dir,
        "learner_procs=2",
        f"learner.max_updates={UPDATES}",
        "learner.checkpoint_every=1",
        "learner.keep_checkpoints=3",
        "eval_samples=0",
        "actors.heartbeat_s=1",
    )
    proc, watch = _start(argv)
    try:
        _wait(lambda: max(_steps(run_dir), default=0) >= 1, "the first update", proc, timeout=900)

        def progress_after(kill) -> float:
            before = _stored(run_dir)
            t0 = time.monotonic()
            kill()
            _wait(lambda: _stored(run_dir) > before + 1, "new samples after the fault", proc)
            return time.monotonic() - t0

        def kill_all(marker: str) -> None:
            # the part may be between a death and its restart: wait for a live one
            _wait(lambda: bool(watch.descendants(marker)), f"a live {marker!r}", proc)
            pids = watch.descendants(marker)
            for pid in pids:
                os.kill(pid, signal.SIGKILL)

        actor = f"mlerl.actors --config {run_dir / 'config.yaml'}"
        seconds = progress_after(lambda: kill_all(actor))
        assert watch.descendants(actor), "the actor was not restarted"
        _record(
            "SIGKILL actor", outcome="restarted, resumed from its outbox", seconds=round(seconds, 1)
        )

        _wait(
            lambda: bool(watch.descendants("mlerl.bench._subprocess --serve")),
            "a grading process",
            proc,
        )
        seconds = progress_after(lambda: kill_all("mlerl.bench._subprocess --serve"))
        _record(
            "SIGKILL grading process",
            outcome="replaced; grading continues",
            seconds=round(seconds, 1),
        )

        _wait(lambda: bool(watch.descendants("bwrap")), "a sandbox", proc)
        seconds = progress_after(lambda: kill_all("bwrap"))
        _record(
            "SIGKILL sandboxes",
            outcome="runs recorded as failed or retried; new sandboxes",
            seconds=round(seconds, 1),
        )

        # a learner killed before its first committed checkpoint starts again from scratch
        _wait(lambda: bool(_checkpointed(run_dir)), "a committed checkpoint", proc)
        for rank in (1, 0):
            log = run_dir / "logs" / "learner.log"
            resumed = log.read_text().count("resumed from")
            step = max(_steps(run_dir))
            t0 = time.monotonic()
            os.kill(_learner_rank(run_dir, rank, processes), signal.SIGKILL)
            _wait(
                lambda: (
                    log.read_text().count("resumed from") > resumed and max(_steps(run_dir)) > step
                ),
                f"an update after learner rank {rank} was killed",
                proc,
            )
            _record(
                f"SIGKILL learner rank {rank}",
                outcome="torchrun group restarted, resumed from checkpoint",
                seconds=round(time.monotonic() - t0, 1),
            )

        t0 = time.monotonic()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        watch.stop()
        left = watch.left(wait_s=60)
        _record(
            "SIGKILL mlerl train",
            outcome="every process it started died with it",
            seconds=round(time.monotonic() - t0, 1),
            left=len(left),
        )
        assert left == [], left
    finally:
        proc.kill()
        watch.stop()

    # resume to the end: the journal and the outboxes account for every sample exactly once
    assert max(_steps(run_dir)) < UPDATES, "the faults took the whole run: raise UPDATES"
    proc, watch = _start(train_argv(tmp_path / "ignored", f"resume={run_dir}"))
    code, out, left = _finish(proc, watch)
    assert code == 0, out[-3000:]
    assert left == [], left
    steps = _steps(run_dir)
    assert steps == list(range(1, UPDATES + 1)), (
        steps
    )  # one record per update, redone ones replaced
    _assert_exactly_once(run_dir, [run_dir / "actors"])
    assert "restarting learner" in (run_dir / "supervisor.log").read_text()


@pytest.fixture(scope="module")
def policy(e2e_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cached tiny policy, built before the cells that time a run from its start."""
    from .conftest import train_args

    run_dir = tmp_path_factory.mktemp("warm")
    proc, watch = _start(train_args(e2e_root, run_dir, "prepare_only=true"))
    code, out, _ = _finish(proc, watch, timeout=1200)
    assert code == 0, out[-3000:]
    return Path(_model_path(run_dir / "config.yaml"))


def test_a_port_taken_by_another_program_ends_the_run_with_the_reason(tmp_path, train_argv, policy):
    """The learner (rank 0 of 2) cannot bind its sample port: it used to wait forever in a
    collective while rank 1 sat in another. Now the run exits non-zero, not restarted, saying why."""
    with socket.socket() as squatter:
        squatter.bind(("0.0.0.0", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        argv = train_argv(
            tmp_path / "run",
            "learner_procs=2",
            "learner.max_updates=2",
            "eval_samples=0",
            f"transport.samples_address=tcp://0.0.0.0:{port}",
        )
        t0 = time.monotonic()
        proc, watch = _start(argv)
        code, out, left = _finish(proc, watch)
    seconds = time.monotonic() - t0
    reason = _one_line_reason(out)
    _record(
        "port taken", outcome=f"exit {code}: {reason}", seconds=round(seconds, 1), left=len(left)
    )
    assert code != 0 and "learner failed" in reason and "Address already in use" in reason, out[
        -3000:
    ]
    assert "restarting learner" not in (tmp_path / "run" / "supervisor.log").read_text()
    assert left == [], left


def test_an_exception_at_learner_start_up_ends_the_run_with_the_reason(
    tmp_path, train_argv, policy
):
    """The 2 learner ranks raise while loading the policy (its weights file is corrupt): every rank
    ends, the run exits non-zero at once with the error, and nothing is left running."""
    model = policy
    broken = tmp_path / "broken-model"
    shutil.copytree(model, broken)
    (weights,) = broken.glob("*.safetensors")
    weights.write_bytes(b"not a safetensors file" * 100)
    t0 = time.monotonic()
    proc, watch = _start(
        train_argv(
            tmp_path / "run",
            "learner_procs=2",
            "learner.max_updates=2",
            "eval_samples=0",
            f"model.path={broken}",
        )
    )
    code, out, left = _finish(proc, watch)
    seconds = time.monotonic() - t0
    reason = _one_line_reason(out)
    _record(
        "exception at learner start-up",
        outcome=f"exit {code}: {reason}",
        seconds=round(seconds, 1),
        left=len(left),
    )
    assert code != 0 and "learner failed" in reason, out[-3000:]
    assert "restarting learner" not in (tmp_path / "run" / "supervisor.log").read_text()
    assert left == [], left


def _model_path(config: Path) -> str:
    import yaml

    return yaml.safe_load(config.read_text())["model"]["path"]


DISK_UPDATES = 6
"""More updates than 48 KiB of journal holds samples for (about 4 KiB a sample: 12 samples, 3
updates of 4), so the disk fills first; the resume then runs to it."""


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root (CI runs as root)")
def test_a_full_journal_disk_stops_the_run_and_a_resume_loses_nothing(tmp_path, train_argv):
    """The journal's filesystem fills up: the commit fails before any ack, the learner exits
    with the reason (no restart loop), the actors keep what was not acked; once there is room
    again a resume finishes the run with every sample stored exactly once."""
    run_dir = tmp_path / "run"
    buffer = run_dir / "buffer"
    buffer.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48k", "tmpfs", str(buffer)], check=True)
    try:
        t0 = time.monotonic()
        proc, watch = _start(
            train_argv(run_dir, f"learner.max_updates={DISK_UPDATES}", "eval_samples=0")
        )
        code, out, left = _finish(proc, watch, timeout=900)
        seconds = time.monotonic() - t0
        reason = _one_line_reason(out)
        assert code != 0 and "No space left on device" in reason, out[-3000:]
        assert max(_steps(run_dir), default=0) < DISK_UPDATES
        assert left == [], left
        kept = tmp_path / "kept"
        shutil.copytree(buffer, kept)
    finally:
        subprocess.run(["umount", str(buffer)], check=False)
    shutil.rmtree(buffer)
    shutil.copytree(kept, buffer)
    stored = _stored(run_dir)
    assert stored > 0
    _record(
        "journal disk full",
        outcome=f"exit {code}: {reason}",
        seconds=round(seconds, 1),
        left=len(left),
    )
    proc, watch = _start(train_argv(tmp_path / "ignored", f"resume={run_dir}"))
    code, out, left = _finish(proc, watch)
    assert code == 0, out[-3000:]
    assert left == [], left
    assert _stored(run_dir) > stored
    _assert_exactly_once(run_dir, [run_dir / "actors"])
