"""The local backend's filesystem view: an allowlist of read-only mounts, built for bubblewrap.

A program sees, and nothing else:
- system directories read-only (``/usr`` and the ``/bin``, ``/lib*``, ``/sbin`` links or dirs),
  a handful of ``/etc`` files the dynamic loader and libc read, ``/dev`` minimal (null, zero,
  random, urandom, tty, pts, a private ``/dev/shm``), a fresh ``/proc`` of its own pid
  namespace, a private ``/tmp``;
- the Python environment it runs under read-only (the prefixes of this interpreter, e.g. the
  project venv and the base interpreter it links to), at their host paths (venvs record
  absolute paths);
- its own work dir at :data:`INNER_WORK` (writable) and its task's public inputs at
  ``INNER_WORK/input`` (read-only), staged first as a tree of hard links
  (:func:`mlerl.sandbox._workdir.stage_inputs`) so that ``/proc/self/mountinfo`` shows only
  the stage's path, never the data root.
Nothing of ``$HOME``, the data root (``private/`` of any task), caches, run dirs, the checkout
(except a venv inside it) or other processes is mounted. As root, the program runs as the
host's ``sandbox_uid`` (``setpriv`` after the mounts, no capabilities, no_new_privs): answers
kept in a 0700 directory stay unreadable even if a path leaked. As a non-root executor, a user
namespace maps the sandbox uid to the executor's own uid: only the allowlist protects then.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from pathlib import Path

INNER_WORK = "/workspace"
"""The program's cwd inside the sandbox (its work dir)."""

_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/localtime",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/fonts",
)
# Runs inside the sandbox after its mounts are made: says "started" on the status pipe, closes
# it (the program never holds a descriptor of it), then execs the program (via setpriv as root).
STARTED = 'printf started >&"$1" || exit 126; fd=$1; exec {fd}>&-; shift; exec "$@"'
# The same for a sandbox started ahead of its program (``SandboxConfig.prewarm``): it says
# "started", blocks until the host writes "go" on a second pipe (the program is in place by
# then), says "running", closes both pipes and execs; any other word, or the go pipe closed,
# exits unused. "running" is what tells a program that ran from a sandbox that died waiting.
STARTED_THEN_WAIT = (
    'printf started >&"$1" || exit 126; read -r go <&"$2"; '
    '[ "$go" = go ] || exit 126; printf running >&"$1" || exit 126; '
    'fd=$1; exec {fd}>&-; fd=$2; exec {fd}<&-; shift 2; exec "$@"'
)
# Or it hands both pipes to the waiting interpreter (``_prewarm.LAUNCHER``), which does the same.
STARTED_KEEP_PIPES = 'printf started >&"$1" || exit 126; shift 2; exec "$@"'


def interpreter_roots() -> list[str]:
    """The outermost directories this interpreter needs: its prefixes (venv and base)."""
    candidates = {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        sys.base_exec_prefix,
        os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))),
    }
    return _outermost(os.path.realpath(p) for p in candidates if os.path.isdir(p))


def _outermost(paths: Iterable[str]) -> list[str]:
    roots: list[str] = []
    for path in sorted(set(paths)):
        if not any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots):
            roots.append(path)
    return roots


def _under(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _parents(path: str) -> list[str]:
    parts = Path(path).parts[1:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def mount_args(work_host: str, input_host: str | None, roots: list[str]) -> list[str]:
    """bubblewrap arguments for the allowlisted view (see the module docstring)."""
    # /tmp first: a venv under /tmp (a CI clone) is bound on top of the private tmpfs
    # a private writable /dev/shm: Python's multiprocessing (joblib's n_jobs) needs semaphores
    args = [
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
    ]
    made = {"/tmp", "/dev", "/dev/shm", "/proc"}

    def ensure_parents(dest: str) -> None:
        for parent in _parents(dest):
            if parent not in made and not _under(parent, list(_SYSTEM)):
                args.extend(["--perms", "0755", "--dir", parent])
                made.add(parent)

    for path in _SYSTEM:
        if os.path.islink(path):
            args.extend(["--symlink", os.readlink(path), path])
        elif os.path.isdir(path):
            args.extend(["--ro-bind", path, path])
    for path in _ETC:
        if os.path.exists(path):
            ensure_parents(path)
            args.extend(["--ro-bind", path, path])
    for root in roots:
        if not _under(root, ["/usr"]):
            ensure_parents(root)
            args.extend(["--ro-bind", root, root])
    args.extend(["--bind", work_host, INNER_WORK])
    if input_host is not None:
        args.extend(["--ro-bind", input_host, f"{INNER_WORK}/input"])
    args.extend(["--chdir", INNER_WORK])
    return args
