"""One writer per dataset, run folder, evaluation folder or pipeline root: an exclusive OS lock, held for the
writer's whole lifetime.

Two commands writing one folder at once interleave their commits: two collect-demos appending to one dataset
lose episodes and mislabel others, two pretrains in one run folder log every row twice. So every writer holds
``fcntl.flock(LOCK_EX | LOCK_NB)`` on the folder's lock file while it writes; a second writer is refused with
one line naming the holder's pid (``UsageError``: exit 2), or waits for it (``waiting_for_locks``, the CLI's
``--wait-lock``). The kernel drops the lock when its holder ends in any way, ``kill -9`` included, so a lock is
never stale and nothing has to clean up after a crash. Readers of a finished artefact take no lock.

Where the lock file lives: beside the folder, as ``.NAME.lock`` next to ``NAME``. A dataset is built under a
temporary name and renamed into place on its first commit, and a run folder may not exist yet when its writer
starts: a file inside the folder would not be one file for two writers racing to create it, while the sibling
path is the same before and after the rename (and survives a ``--resume`` of a moved folder, whose new place
gets its own). The file is never removed: removing it would let a third writer lock a new file while the second
still waits on the old one. It holds the pid of its last holder.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from robot_rl.errors import UsageError

_WAIT = contextvars.ContextVar("robot_rl_wait_for_locks", default=False)
WAIT_ADVICE = "wait for it to end, or use --wait-lock"  # how a refusal ends, for a command that has --wait-lock
# Errors of creating the lock file that mean "this folder cannot be written here", said in one line.
_UNWRITABLE = {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENAMETOOLONG, errno.ENOTDIR}


@contextlib.contextmanager
def waiting_for_locks(wait: bool = True) -> Iterator[None]:
    """Within ``with``: ``exclusive`` waits for a held lock instead of refusing (``--wait-lock``)."""
    token = _WAIT.set(wait)
    try:
        yield
    finally:
        _WAIT.reset(token)


def lock_file(folder: str | os.PathLike) -> Path:
    """The lock file of ``folder``: ``.NAME.lock`` beside it."""
    folder = Path(os.path.abspath(folder))
    return folder.parent / f".{folder.name}.lock"


@contextlib.contextmanager
def exclusive(folder: str | os.PathLike, what: str = "folder", advice: str = WAIT_ADVICE) -> Iterator[None]:
    """Holds ``folder``'s lock within ``with`` (``what`` names the folder's kind in the refusal: "dataset", "run
    folder"; ``advice`` ends it). Raises UsageError naming the holder's pid when another process holds it (unless
    waiting), or naming the folder when its parent cannot be written."""
    path = lock_file(folder)
    fd = _open(path, Path(folder))
    try:
        _acquire(fd, path, Path(folder), what, advice)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock; the file stays (see the module docstring)


def refuse_if_locked(folder: str | os.PathLike, what: str = "folder") -> None:
    """Raises ``exclusive``'s refusal at once when another process holds ``folder``'s lock, and does nothing
    otherwise (nothing is created): a command checks this before its slow start-up, then takes the lock itself."""
    path = lock_file(folder)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # no lock file (never written) or unreadable: the real attempt later says why
        return
    try:
        _acquire(fd, path, Path(folder), what)
    finally:
        os.close(fd)  # releases the lock if it was free


def holder(folder: str | os.PathLike) -> int | None:
    """The pid written in ``folder``'s lock file (its holder while the lock is held), or None."""
    try:
        text = lock_file(folder).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _open(path: Path, folder: Path) -> int:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Non-inheritable (Python's default): spawned workers do not carry the lock past their parent.
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        if err.errno in _UNWRITABLE:
            raise UsageError(f"{folder}: cannot write there ({err.strerror})") from None
        raise


def _acquire(fd: int, path: Path, folder: Path, what: str, advice: str = WAIT_ADVICE) -> None:
    if _WAIT.get():
        fcntl.flock(fd, fcntl.LOCK_EX)
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = _holder_pid(path)
        who = f"pid {pid}" if pid is not None else "another process"
        raise UsageError(f"{folder}: {what} in use by another robot-rl process ({who}; lock {path}); {advice}"
                         ) from None


def _holder_pid(path: Path, patience: float = 1.0) -> int | None:
    """The live pid in a held lock file; a holder that has just locked may not have written its pid yet."""
    deadline = time.monotonic() + patience
    while True:
        text = path.read_text().strip() if path.is_file() else ""
        if (text.isdigit() and _alive(int(text))) or time.monotonic() > deadline:
            return int(text) if text.isdigit() else None
        time.sleep(0.02)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
