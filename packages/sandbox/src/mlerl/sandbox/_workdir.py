"""Per-run work directories and the safe copy-out of requested files.

Guarantees:
- Each run gets a fresh directory ``<work_root>/<owner>/<run_id>/work`` holding only
  ``main.py`` (and the ``input`` mount point or link). As root it is a tmpfs of ``disk_mb``
  (a full disk is ENOSPC inside the run and touches nothing else; its pages are charged to
  the writer's memory cgroup); otherwise a plain directory (disk then bounded only by
  RLIMIT_FSIZE per file in the local backend).
- :func:`collect` copies requested files into a fresh host directory the caller owns: it opens
  each name relative to the work dir with ``O_NOFOLLOW``, accepts only a regular file with one
  link and at most ``max_bytes`` bytes, and never follows a symlink, FIFO or device.
- ``<owner>`` is ``<pid>-<start time>`` of the executor, so :func:`reap_workdirs` can tell the
  leftovers of a dead executor from a live one's.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import stat
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

_MS_NOSUID, _MS_NODEV = 2, 4
_MNT_DETACH = 2
_libc = ctypes.CDLL(None, use_errno=True)


def _start_time(pid: int) -> str:
    with open(f"/proc/{pid}/stat", "rb") as f:
        data = f.read()
    return data[data.rindex(b")") + 2 :].split()[19].decode()


def owner_tag(pid: int | None = None) -> str:
    """``<pid>-<start time>``: names this executor process unambiguously (no pid reuse)."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}-{_start_time(pid)}"


def owner_alive(tag: str) -> bool:
    """Whether the process named by :func:`owner_tag` still runs."""
    try:
        pid_text, start = tag.split("-", 1)
        return _start_time(int(pid_text)) == start
    except (OSError, ValueError, IndexError):
        return False


def _mount_tmpfs(path: Path, size_mb: int) -> bool:
    opts = f"size={size_mb}m,mode=0755".encode()
    ok = _libc.mount(b"tmpfs", str(path).encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, opts) == 0
    return ok


def _umount(path: Path) -> None:
    _libc.umount2(str(path).encode(), _MNT_DETACH)


@dataclass
class WorkDir:
    """One run's directories. ``path`` is the program's cwd."""

    run_dir: Path
    path: Path
    tmpfs: bool

    @property
    def input_path(self) -> Path:
        return self.path / "input"

    def remove(self) -> None:
        """Unmount and delete everything of the run (collected files live elsewhere)."""
        if self.tmpfs:
            _umount(self.path)
        shutil.rmtree(self.run_dir, ignore_errors=True)


def create_workdir(
    work_root: str,
    program: str,
    disk_mb: int,
    use_tmpfs: bool,
    owner_uid: int | None,
    data_link: Path | None = None,
    input_mountpoint: bool = False,
) -> WorkDir:
    """A fresh work dir with ``main.py``; ``owner_uid`` gets ownership (the sandbox user)."""
    run_dir = Path(work_root) / owner_tag() / uuid.uuid4().hex[:16]
    path = run_dir / "work"
    path.mkdir(parents=True, mode=0o700)
    os.chmod(run_dir, 0o755)
    tmpfs = use_tmpfs and os.geteuid() == 0 and _mount_tmpfs(path, disk_mb)
    wd = WorkDir(run_dir=run_dir, path=path, tmpfs=tmpfs)
    try:
        (path / "main.py").write_text(program)
        if data_link is not None:
            (path / "input").symlink_to(data_link.resolve(), target_is_directory=True)
        elif input_mountpoint:
            (path / "input").mkdir()
        if owner_uid is not None and os.geteuid() == 0:
            os.chown(path, owner_uid, owner_uid)
            os.chown(path / "main.py", owner_uid, owner_uid)
        os.chmod(path, 0o755)
    except BaseException:
        wd.remove()
        raise
    return wd


def _copy_one(dir_fd: int, name: str, dest: Path, max_bytes: int) -> str:
    """Copy ``name`` to ``dest``; returns '' or why the file was refused."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except FileNotFoundError:
        return "missing"
    except OSError as exc:  # ELOOP: a symlink
        return f"refused ({os.strerror(exc.errno or 0)})"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return "refused (not a regular file)"
        if st.st_nlink != 1:
            return "refused (hard link)"
        if st.st_size > max_bytes:
            return f"refused ({st.st_size} bytes > cap {max_bytes})"
        out_fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        with os.fdopen(out_fd, "wb") as out:
            copied = 0
            while chunk := os.read(fd, 1 << 20):
                copied += len(chunk)
                if copied > max_bytes:  # grew while copying
                    out.close()
                    dest.unlink()
                    return "refused (grew past the cap)"
                out.write(chunk)
        return ""
    finally:
        os.close(fd)


def collect(
    workdir: Path, names: tuple[str, ...], out_root: str, max_bytes: int
) -> tuple[dict[str, Path], list[str]]:
    """Copy ``names`` out of ``workdir``; returns (name -> host path, problems)."""
    files: dict[str, Path] = {}
    problems: list[str] = []
    if not names:
        return files, problems
    dir_fd = os.open(workdir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    out_dir: Path | None = None
    try:
        for name in names:
            if out_dir is None:
                Path(out_root).mkdir(parents=True, exist_ok=True)
                out_dir = Path(tempfile.mkdtemp(prefix="collected-", dir=out_root))
            why = _copy_one(dir_fd, name, out_dir / name, max_bytes)
            if why == "":
                files[name] = out_dir / name
            elif why != "missing":
                problems.append(f"{name}: {why}")
    finally:
        os.close(dir_fd)
    if out_dir is not None and not files:
        shutil.rmtree(out_dir, ignore_errors=True)
    return files, problems


def reap_workdirs(work_root: str, everything: bool = False) -> int:
    """Remove run dirs of dead executors (all when ``everything``); returns how many."""
    root = Path(work_root)
    removed = 0
    if not root.is_dir():
        return 0
    for owner in root.iterdir():
        if not owner.is_dir() or owner.name.startswith("collected") or not owner.name[0].isdigit():
            continue
        if not everything and owner_alive(owner.name):
            continue
        for run in owner.iterdir():
            WorkDir(run_dir=run, path=run / "work", tmpfs=os.path.ismount(run / "work")).remove()
            removed += 1
        shutil.rmtree(owner, ignore_errors=True)
    return removed


def _signature(root: Path) -> str:
    digest = hashlib.sha256(str(root).encode())
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            try:
                st = os.stat(os.path.join(dirpath, name), follow_symlinks=False)
            except OSError:
                continue
            rel = os.path.relpath(os.path.join(dirpath, name), root)
            digest.update(f"{rel}\0{st.st_ino}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:24]


def stage_inputs(data_dir: Path, stage_root: Path) -> Path:
    """A read-only copy of ``data_dir`` made of hard links under ``stage_root``.

    The stage's name is a digest of the source's listing, so an unchanged input is staged once
    and a changed one gets a fresh stage. Symbolic links are not followed (a link is recreated
    as is, and inside the sandbox it resolves within the sandbox's own view). Files on another
    filesystem are copied. Returns the stage directory.
    """
    source = data_dir.resolve()
    stage = stage_root / _signature(source)
    if stage.is_dir():
        return stage
    stage_root.mkdir(parents=True, exist_ok=True)
    os.chmod(stage_root, 0o755)
    tmp = stage_root / f".{stage.name}.{os.getpid()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)

    def link_or_copy(src: str, dst: str) -> None:
        try:
            os.link(src, dst, follow_symlinks=False)
        except OSError:
            shutil.copy2(src, dst, follow_symlinks=False)

    shutil.copytree(source, tmp, symlinks=True, copy_function=link_or_copy)
    os.chmod(tmp, 0o755)
    try:
        os.rename(tmp, stage)
    except OSError:  # another executor staged it meanwhile
        shutil.rmtree(tmp, ignore_errors=True)
    return stage
