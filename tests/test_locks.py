"""One writer per folder: a second writer of a dataset or run folder is refused with one line naming the holder's
pid (exit 2) or waits with --wait-lock, and a holder killed with SIGKILL leaves no stale lock."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from robot_rl.cli import main
from robot_rl.errors import UsageError
from robot_rl.locks import exclusive, holder, lock_file, waiting_for_locks

HOLD = """
import sys, time
from robot_rl.locks import exclusive

with exclusive(sys.argv[1]):
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def _holding(folder: Path, seconds: float = 600) -> subprocess.Popen:
    """A process that holds ``folder``'s lock for ``seconds`` (started, and holding, when this returns)."""
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(folder), str(seconds)], stdout=subprocess.PIPE,
                               text=True)
    assert process.stdout.readline().strip() == "locked"
    return process


def test_a_second_collect_demos_on_a_dataset_being_written_is_refused_naming_the_holder(demos_copy, capsys):
    # A real collect-demos takes the lock before it reads the dataset; a process holding it stands for one.
    before = (demos_copy / "meta.json").read_bytes()
    first = _holding(demos_copy)
    try:
        code = main(["collect-demos", "--out", str(demos_copy), "--episodes", "2", "--difficulty", "easy",
                     "--image-size", "64", "--num-envs", "1"])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2
        assert len(err) == 1 and f"pid {first.pid}" in err[0] and str(demos_copy) in err[0], err
        assert holder(demos_copy) == first.pid
    finally:
        first.kill()  # SIGKILL: the kernel releases the lock, nothing is left to clean up
        first.wait()
    assert (demos_copy / "meta.json").read_bytes() == before  # the refused writer touched nothing
    with exclusive(demos_copy):  # free at once, although the lock file is still there
        assert lock_file(demos_copy).is_file() and holder(demos_copy) == os.getpid()


def test_two_collect_demos_started_together_on_one_new_dataset_one_writes_and_the_other_is_refused(tmp_path):
    out, episodes = tmp_path / "demos", 12
    argv = [sys.executable, "-m", "robot_rl.cli", "collect-demos", "--out", str(out), "--episodes", str(episodes),
            "--difficulty", "easy", "--image-size", "48", "--num-envs", "1", "--seed", "3"]
    both = [subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [(p.pid, p.wait(timeout=600), p.stderr.read()) for p in both]
    (winner, code, _), (loser, refused, err) = sorted(results, key=lambda r: r[1])
    assert (code, refused) == (0, 2), results
    assert err.strip().splitlines() == [
        f"robot-rl collect-demos: error: {out}: dataset in use by another robot-rl process (pid {winner}; "
        f"lock {lock_file(out)}); wait for it to end, or use --wait-lock"]
    from robot_rl.dataset import DemoDataset

    dataset = DemoDataset.open(out)
    assert len(dataset.episodes) == episodes and dataset.meta["runs"][0]["episodes"] == episodes
    assert not list(tmp_path.glob(".demos.*.tmp"))


def test_a_pretrain_on_a_run_folder_in_use_is_refused_before_any_work(demos_dir, tmp_path, capsys):
    run_dir = tmp_path / "run"
    first = _holding(run_dir)
    try:
        assert main(["pretrain", "--data", str(demos_dir), "--out", str(run_dir)]) == 2
    finally:
        first.kill()
        first.wait()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"run folder in use by another robot-rl process (pid {first.pid}" in err[0]
    assert not run_dir.exists()


def test_wait_lock_waits_for_the_holder_to_end(tmp_path):
    first = _holding(tmp_path / "data", seconds=1.5)
    start = time.monotonic()
    with waiting_for_locks(), exclusive(tmp_path / "data"):
        assert time.monotonic() - start > 0.5  # it waited for the holder to let go
    first.wait()


def test_the_lock_is_exclusive_between_threads_too(tmp_path):
    errors = []
    entered = threading.Event()
    release = threading.Event()

    def hold():
        with exclusive(tmp_path / "data"):
            entered.set()
            release.wait(30)

    thread = threading.Thread(target=hold)
    thread.start()
    entered.wait(30)
    try:
        with exclusive(tmp_path / "data"):
            errors.append("acquired twice")
    except UsageError as err:
        assert f"pid {os.getpid()}" in str(err)
    release.set()
    thread.join()
    assert not errors


def test_a_folder_whose_parent_cannot_be_written_is_one_line(tmp_path, monkeypatch):
    def refuse(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr("robot_rl.locks.os.open", refuse)
    with pytest.raises(UsageError, match=r"data: cannot write there \(Permission denied\)$"):
        with exclusive(tmp_path / "data"):
            pass


@pytest.mark.parametrize("sig", [signal.SIGKILL])
def test_a_holder_killed_with_sigkill_leaves_the_lock_free(tmp_path, sig):
    first = _holding(tmp_path / "data")
    with pytest.raises(UsageError, match=f"pid {first.pid}"):
        with exclusive(tmp_path / "data"):
            pass
    os.kill(first.pid, sig)
    first.wait()
    with exclusive(tmp_path / "data"):
        pass


@pytest.mark.parametrize("command", ["export", "export-dataset"])
def test_an_export_into_a_folder_in_use_is_refused_naming_the_holder(bc_run_dir, demos_dir, tmp_path, capsys,
                                                                     command):
    out = tmp_path / "out"
    argv = (["export", "--policy", str(bc_run_dir), "--format", "safetensors", "--out", str(out)]
            if command == "export" else ["export-dataset", "--data", str(demos_dir), "--out", str(out)])
    first = _holding(out)
    try:
        assert main(argv) == 2
    finally:
        first.kill()
        first.wait()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"in use by another robot-rl process (pid {first.pid}" in err[0], err
    assert not out.exists() and not list(tmp_path.glob(".out.*.tmp"))
