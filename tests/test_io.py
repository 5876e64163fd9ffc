"""Atomic writes: a reader sees the old file or the new one, never a half-written one."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from robot_rl.io import atomic_path, remove_orphaned_temporaries, write_json


def test_atomic_path_replaces_the_target_on_success(tmp_path):
    target = tmp_path / "sub" / "file.txt"
    with atomic_path(target) as tmp:
        tmp.write_text("new")
        assert not target.exists()
    assert target.read_text() == "new"
    assert (target.stat().st_mode & 0o777) == 0o644
    assert [p.name for p in target.parent.iterdir()] == ["file.txt"]


def test_atomic_path_keeps_the_old_file_on_error(tmp_path):
    target = tmp_path / "file.json"
    write_json(target, {"a": 1})
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed mid-write")
    assert target.read_text().strip() == '{\n  "a": 1\n}'
    assert [p.name for p in tmp_path.iterdir()] == ["file.json"]


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_a_killed_writers_temporary_files_are_removed_and_live_ones_kept(tmp_path):
    dead, live = _dead_pid(), os.getpid()
    target = tmp_path / "last.pt"
    orphan, in_flight = tmp_path / f".last.pt.{dead}.ab12cd34.tmp", tmp_path / f".last.pt.{live}.ef56gh78.tmp"
    deep = tmp_path / "checkpoints" / f".best.pt.{dead}.ij90kl12.tmp"
    for path in (orphan, in_flight, deep):
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"half")
    write_json(target, {"a": 1})  # the next write of a file cleans up after a killed write of it
    assert not orphan.exists() and in_flight.exists() and deep.exists()
    remove_orphaned_temporaries(tmp_path)  # a resumed run folder: every file in it
    assert not deep.exists() and in_flight.exists()
