"""Files written whole or not at all: write to a temporary name in the same folder, then rename over the target."""

from __future__ import annotations

import contextlib
import glob
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


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
