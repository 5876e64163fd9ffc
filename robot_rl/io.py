"""Files written whole or not at all: write to a temporary name in the same folder, then rename over the target."""

from __future__ import annotations

import contextlib
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
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
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


def write_json(target: str | os.PathLike, data) -> None:
    """Writes ``data`` as indented JSON, atomically."""
    with atomic_path(target) as tmp:
        tmp.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")


def write_text(target: str | os.PathLike, text: str) -> None:
    """Writes ``text`` atomically."""
    with atomic_path(target) as tmp:
        tmp.write_text(text)
