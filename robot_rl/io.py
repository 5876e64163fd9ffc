"""Files written whole or not at all: write to a temporary name in the same folder, then rename over the target.

A full disk (or quota) fails such a write with ``NoSpaceLeft`` naming the folder, before the target changes; big
writes check the free space first (``check_space``) and memmaps get their blocks allocated up front
(``preallocate``): a write into a sparse memmap on a full disk is a SIGBUS that no handler can turn into a message.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from robot_rl.envs.errors import file_problem
from robot_rl.errors import NoSpaceLeft, UsageError

DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike) -> Iterator[Path]:
    """Yields a temporary path beside ``target``; on success it is renamed onto ``target``, on error removed.

    A reader (or a resumed run after a kill) sees either the old file or the new one, never half of one.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_orphaned_temporaries(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.{os.getpid()}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp)
    try:
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; outputs are ordinary files
        os.replace(tmp, target)
    except OSError as err:
        if err.errno in DISK_FULL and not isinstance(err, NoSpaceLeft):
            raise NoSpaceLeft(target.parent, errno_value=err.errno) from None
        raise
    finally:
        tmp.unlink(missing_ok=True)


def _remove_orphaned_temporaries(target: Path) -> None:
    """Removes the temporary files of earlier writes of ``target`` whose writing process is gone (killed before
    its rename: kill -9, the out-of-memory killer). The writer's pid is in the name; live writers are left alone."""
    for path in target.parent.glob(f".{glob.escape(target.name)}.*.tmp"):
        _remove_if_orphaned(path)


def remove_orphaned_temporaries(folder: str | os.PathLike) -> None:
    """The same for every file under ``folder`` (a run folder being resumed: a write killed there may have no
    later write of the same file to clean up after it)."""
    for path in Path(folder).rglob(".*.tmp"):
        _remove_if_orphaned(path)


def _remove_if_orphaned(path: Path) -> None:
    # ".NAME.PID.XXXXXXXX.tmp": mkstemp's random part has no dots, NAME may.
    parts = path.name[1:-len(".tmp")].rsplit(".", 2)
    if len(parts) == 3 and parts[1].isdigit() and path.is_file() and not _alive(int(parts[1])):
        path.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def write_json(target: str | os.PathLike, data) -> None:
    """Writes ``data`` as indented JSON, atomically."""
    with atomic_path(target) as tmp:
        tmp.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")


def write_text(target: str | os.PathLike, text: str) -> None:
    """Writes ``text`` atomically."""
    with atomic_path(target) as tmp:
        tmp.write_text(text)


def check_space(folder: str | os.PathLike, needed: int) -> None:
    """Raises NoSpaceLeft when the file system of ``folder`` (or of its nearest existing parent) has fewer than
    ``needed`` bytes free: checked before a big write, so a full disk stops it before anything is written."""
    existing = Path(os.path.abspath(folder))
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if shutil.disk_usage(existing).free < needed:
        raise NoSpaceLeft(folder, needed)


def preallocate(folder: str | os.PathLike) -> None:
    """Allocates the disk blocks of every ``*.memmap`` file under ``folder`` (files are created sparse), so a full
    disk raises NoSpaceLeft here rather than SIGBUS at a later write into the mapping."""
    sparse = {p: p.stat().st_size - 512 * p.stat().st_blocks for p in Path(folder).rglob("*.memmap") if p.is_file()}
    sparse = {path: size for path, size in sparse.items() if size > 0}
    missing = sum(sparse.values())
    check_space(folder, missing)
    for path in sparse:
        fd = os.open(path, os.O_RDWR)
        try:
            size = os.fstat(fd).st_size
            if size:
                os.posix_fallocate(fd, 0, size)
        except OSError as err:
            if err.errno in DISK_FULL:
                raise NoSpaceLeft(folder, missing, errno_value=err.errno) from None
            if err.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):  # a file system without it
                raise
        finally:
            os.close(fd)


def read_json_object(path: Path) -> dict:
    """A JSON object robot_rl wrote, read as data; anything else (not a regular file, not JSON, not an object) is a
    UsageError naming the file."""
    problem = file_problem(path, follow_symlinks=True)
    if problem:
        raise UsageError(f"{path}: {problem}")
    try:
        value = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as err:
        raise UsageError(f"{path}: unreadable JSON ({err})") from None
    if not isinstance(value, dict):
        raise UsageError(f"{path}: not a JSON object")
    return value
