"""How a learner rank ends on an error: promptly, with the reason in the log, never in a
collective its peers are not in.

A rank that raises must not go on to a collective (its ``finally`` used to broadcast "stop"
while another rank sat in a different collective: both waited forever). It logs the
traceback, writes one line to stderr, and leaves with ``os._exit(1)``: torchrun sees the exit
and stops the other ranks, and the supervisor restarts the group or ends the run.

Whether a restart can help is decided here. It cannot when the cause will be there again
(bad config or keys, an unloadable model, a port held by another program, a full or read-only
disk), or when start-up itself failed: the rank then writes the reason to
``RUN_DIR/logs/learner.fatal`` and the supervisor ends the run with that line instead of
restarting. A peer's death (a distributed error) stays restartable.
"""

from __future__ import annotations

import errno
import logging
import os
import sys
from pathlib import Path

FATAL_FILE = "logs/learner.fatal"
"""Relative to the run dir: the one-line reason a restart cannot help (read by ``mlerl train``)."""

_LASTING_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EADDRINUSE, errno.EADDRNOTAVAIL}
)


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside ``exc`` (exception groups opened, ``__cause__`` followed)."""
    out: list[BaseException] = []
    todo = [exc]
    while todo:
        e = todo.pop()
        if isinstance(e, BaseExceptionGroup):
            todo.extend(e.exceptions)
            continue
        out.append(e)
        if e.__cause__ is not None:
            todo.append(e.__cause__)
    return out


def _distributed(exc: BaseException) -> bool:
    """A failure of the process group: a peer died or a collective timed out."""
    try:
        import torch.distributed as dist

        if isinstance(exc, dist.DistError):
            return True
    except (ImportError, AttributeError):
        pass
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and any(
        w in text for w in ("gloo", "nccl", "connection closed", "connection reset", "timed out")
    )


def lasting(exc: BaseException, *, starting: bool) -> bool:
    """Whether restarting the learner would meet ``exc`` again."""
    from mlerl.learner._checkpoint import CheckpointError
    from mlerl.protocol import ConfigError, CurveError

    found = leaves(exc)
    if any(_distributed(e) for e in found):
        return False
    for e in found:
        if isinstance(e, (ConfigError, CurveError, CheckpointError)):
            return True
        if getattr(e, "errno", None) in _LASTING_ERRNOS:  # OSError, zmq.ZMQError
            return True
    return starting


def reason(exc: BaseException) -> str:
    """One line: the innermost meaningful exception's type and first message line."""
    found = [e for e in leaves(exc) if not isinstance(e, (KeyboardInterrupt, SystemExit))] or [exc]
    e = next((x for x in found if getattr(x, "errno", None) in _LASTING_ERRNOS), found[0])
    first = (str(e).strip().splitlines() or [""])[0]
    return f"{type(e).__name__}: {first}"[:500]


class RankFailed(Exception):
    """A learner rank failed (the error is ``__cause__``); ``starting``: before serving."""

    def __init__(self, rank: int, run_dir: Path, starting: bool) -> None:
        super().__init__(f"learner rank {rank} failed" + (" during start-up" if starting else ""))
        self.rank, self.run_dir, self.starting = rank, run_dir, starting


def die(failed: RankFailed) -> None:
    """Log the failure, record it when lasting, and end this process now, with no collective:
    exit 2 for a config, keys or checkpoint error, 1 otherwise."""
    from mlerl.learner._checkpoint import CheckpointError
    from mlerl.protocol import ConfigError, CurveError

    exc = failed.__cause__ or failed
    rank, run_dir = failed.rank, failed.run_dir
    starting = failed.starting and not isinstance(exc, KeyboardInterrupt)
    line = reason(exc)
    logging.getLogger("mlerl.learner").error(
        "rank %d failed%s: %s", rank, " during start-up" if starting else "", line, exc_info=exc
    )
    if lasting(exc, starting=starting):
        try:
            path = run_dir / FATAL_FILE
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists():  # the first rank to fail tells why
                path.write_text(line + "\n")
        except OSError:
            pass  # a full disk may refuse this too: the log line below still says it
    print(f"mlerl.learner: rank {rank}: {line}", file=sys.stderr, flush=True)
    logging.shutdown()
    config_like = any(
        isinstance(e, (ConfigError, CurveError, CheckpointError)) for e in leaves(exc)
    )
    os._exit(2 if config_like else 1)
