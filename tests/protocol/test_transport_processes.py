"""Two real processes: an actor process and a receiver that is SIGKILLed twice mid-stream.

The receiver journals every stored sample (fsync per batch, ack after fsync) and restores its
dedupe state from the journal at start. The sender's high-water mark is 10, so ZeroMQ's queue
overflows constantly. Every (actor_id, seq) must be in the final journal exactly once, and the
order of storage per actor must be 0, 1, 2, ...
"""

import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

HERE = Path(__file__).parent
ACTORS, PER_ACTOR = 2, 5000
DIE_AT = (2500, 6000)  # journal lines at which the 1st and 2nd receiver kill themselves


def _spawn(script: str, *args: object) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(HERE / script), *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_file(path: Path, proc: subprocess.Popen, timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"receiver exited early: {proc.stderr.read()}")
        assert time.monotonic() < deadline, "receiver did not start"
        time.sleep(0.05)
    return path.read_text()


def _run_scenario(bind: str, workdir: Path) -> None:
    journal, endpoint_file = workdir / "journal.txt", workdir / "endpoint"
    receiver = _spawn("_receiver_proc.py", bind, journal, endpoint_file, DIE_AT[0])
    address = _wait_file(endpoint_file, receiver)
    sender = _spawn("_sender_proc.py", address, PER_ACTOR, ACTORS, 10, 0.5)
    try:
        for next_die in (DIE_AT[1], None):
            assert receiver.wait(timeout=90) == -signal.SIGKILL, receiver.stderr.read()
            assert sender.poll() is None, "the sender finished although samples were unstored"
            args = (address, journal, endpoint_file) + ((next_die,) if next_die else ())
            receiver = _spawn("_receiver_proc.py", *args)
        out, err = sender.communicate(timeout=90)
        assert sender.returncode == 0, err
    finally:
        for proc in (sender, receiver):
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    counters = json.loads(out)
    assert [c["unacked"] for c in counters] == [0] * ACTORS
    assert [c["acked_seq"] for c in counters] == [PER_ACTOR - 1] * ACTORS
    assert sum(c["hwm_full"] for c in counters) > 0, "the tiny HWM was never exceeded"
    assert sum(c["resent"] for c in counters) > 0, "the crashes caused no resend"

    lines = journal.read_text().splitlines()
    pairs = [(a, int(s)) for a, s in (line.split() for line in lines)]
    assert len(pairs) == ACTORS * PER_ACTOR  # exactly once: no duplicate, nothing lost
    for i in range(ACTORS):
        assert [s for a, s in pairs if a == f"a{i}"] == list(range(PER_ACTOR))  # per-actor order


@pytest.mark.timeout(240)
@pytest.mark.parametrize("transport", ["tcp", "ipc"])
def test_exactly_once_in_order_across_receiver_crashes(transport: str) -> None:
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="mlerl-") as tmp:
        workdir = Path(tmp)
        bind = "tcp://127.0.0.1:*" if transport == "tcp" else f"ipc://{workdir}/samples.sock"
        _run_scenario(bind, workdir)
