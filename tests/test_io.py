"""Atomic writes: a reader sees the old file or the new one, never a half-written one."""

from __future__ import annotations

import pytest

from robot_rl.io import atomic_path, write_json


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
