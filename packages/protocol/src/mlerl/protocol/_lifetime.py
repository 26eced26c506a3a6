"""A process that dies with its parent: every process mlerl starts ends with the run.

``die_with_parent()`` asks Linux to SIGKILL the calling process when its parent ends, however
the parent ends (SIGKILL included): ``prctl(PR_SET_PDEATHSIG)``. ``mlerl train`` starts its
children so (``preexec_fn``); torchrun's ranks and the actors' grading processes call it
themselves; bubblewrap sandboxes get the same from ``--die-with-parent``. A chain of such
links takes the whole tree down from its root. Where the call is unavailable (not Linux) it
returns False and nothing changes.

The kernel ties the signal to the *thread* that forked the child: start children from a
thread that lives as long as they should (the main thread, or a pool thread that is not
retired while its children are needed).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGKILL, *, expected_parent: int | None = None) -> bool:
    """Have ``sig`` sent to this process when its parent exits; True when armed.

    ``expected_parent``: the parent's pid when known (call from the child): if the parent is
    already gone (the race before the call), exit at once instead of living on as an orphan."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if expected_parent is not None and os.getppid() != expected_parent:
        os._exit(1)
    return True
