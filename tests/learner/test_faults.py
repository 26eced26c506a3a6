"""How a learner rank's failure is classified (mlerl.learner._faults): a restart that would
meet the same cause again ends the run with one line; a peer's death stays restartable."""

import errno
import subprocess
import sys

import pytest
import torch
import zmq

from mlerl.learner._checkpoint import CheckpointError
from mlerl.learner._faults import FATAL_FILE, RankFailed, lasting, leaves, reason
from mlerl.protocol import ConfigError


@pytest.mark.parametrize(
    "exc",
    [
        OSError(errno.ENOSPC, "No space left on device"),
        zmq.ZMQError(errno.EADDRINUSE),
        ConfigError("transport.samples_address", "bad"),
        CheckpointError("corrupt"),
    ],
)
def test_lasting_causes_end_the_run_at_any_time(exc):
    assert lasting(exc, starting=False) and lasting(exc, starting=True)


def test_start_up_failures_are_lasting_and_later_ones_are_not():
    assert lasting(ValueError("unloadable weights"), starting=True)
    assert not lasting(ValueError("a bug mid-run"), starting=False)


def test_a_peers_death_is_restartable_even_during_start_up():
    gloo = RuntimeError(
        "[gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:4040"
    )
    assert not lasting(gloo, starting=True)
    assert not lasting(torch.distributed.DistBackendError("NCCL watchdog"), starting=True)


def test_exception_groups_are_opened_and_the_lasting_leaf_is_the_reason():
    """The receiver's journal commit fails inside a TaskGroup: an ExceptionGroup reaches the top."""
    group = BaseExceptionGroup(
        "unhandled errors in a TaskGroup", [OSError(errno.ENOSPC, "No space left on device")]
    )
    assert [type(e) for e in leaves(group)] == [OSError]
    assert lasting(group, starting=False)
    assert reason(group) == "OSError: [Errno 28] No space left on device"


def test_reason_is_one_line_and_bounded():
    line = reason(ValueError("first line\nsecond line" + "x" * 1000))
    assert line == "ValueError: first line"
    assert len(reason(ValueError("y" * 2000))) == 500


def test_die_exits_at_once_with_the_reason_recorded(tmp_path):
    """The process entry point's path: no collective, exit 1, the lasting reason in the file."""
    code = (
        "import errno, pathlib; from mlerl.learner._faults import RankFailed, die\n"
        "try:\n"
        "    try:\n"
        "        raise OSError(errno.ENOSPC, 'No space left on device')\n"
        "    except OSError as exc:\n"
        f"        raise RankFailed(0, pathlib.Path({str(tmp_path)!r}), False) from exc\n"
        "except RankFailed as failed:\n"
        "    die(failed)\n"
        "print('not reached')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "not reached" not in proc.stdout
    assert "mlerl.learner: rank 0: OSError: [Errno 28] No space left on device" in proc.stderr
    assert (tmp_path / FATAL_FILE).read_text() == "OSError: [Errno 28] No space left on device\n"


def test_rank_failed_names_the_phase(tmp_path):
    assert "start-up" in str(RankFailed(1, tmp_path, True)) and "start-up" not in str(
        RankFailed(1, tmp_path, False)
    )
