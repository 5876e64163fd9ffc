"""One stop request per process: a signal answered by a nested run is never dropped by the run around it."""

from __future__ import annotations

import json
import os
import signal

import pytest

from robot_rl.artefact_files import DAGGER_AGGREGATE as AGGREGATE
from robot_rl.cli import main
from robot_rl.dataset import DemoDataset
from robot_rl.pretrain import bc
from robot_rl.stop import StopOnInterrupt, stop_requested


def test_a_request_made_inside_a_nested_loop_holds_for_the_outer_one():
    with StopOnInterrupt() as outer:
        with StopOnInterrupt() as inner:
            os.kill(os.getpid(), signal.SIGTERM)
            assert inner.requested
        assert outer.requested and outer.signum == signal.SIGTERM  # the inner loop returned; the request stays
        with pytest.raises(KeyboardInterrupt):  # and a second signal still aborts
            os.kill(os.getpid(), signal.SIGTERM)
    assert stop_requested() == signal.SIGTERM


def test_a_loop_entered_after_the_request_sees_it():
    with StopOnInterrupt():
        os.kill(os.getpid(), signal.SIGINT)
    with StopOnInterrupt() as later:
        assert later.requested and later.signum == signal.SIGINT


def _signal_after_bc_trains(monkeypatch, signum=signal.SIGTERM):
    """The signal reaches the process as a round's BC ends its last epoch (inside BC's stop handler): the case
    where a nested run used to answer it and then forget it."""
    train = bc.BCRun.train

    def train_then_signal(self, progress, until):
        train(self, progress, until)
        os.kill(os.getpid(), signum)

    monkeypatch.setattr(bc.BCRun, "train", train_then_signal)


def test_dagger_stops_after_the_round_whose_bc_took_the_signal_and_the_same_command_finishes(
        bc_run_dir, demos_dir, tmp_path, monkeypatch, capsys):
    out = tmp_path / "dagger"
    args = ["dagger", "--policy", str(bc_run_dir), "--out", str(out), "--rounds", "2", "--episodes-per-round", "2",
            "--epochs-per-round", "1", "--num-envs", "1", "--eval-episodes", "1", "--precision", "fp32"]
    with monkeypatch.context() as patch:
        _signal_after_bc_trains(patch)
        assert main(args) == 128 + signal.SIGTERM
    err = capsys.readouterr().err
    assert f"continue with robot-rl dagger --resume {out}" in err
    assert not (out / "summary.json").exists()
    assert (out / "rounds" / "round-01.json").is_file() and not (out / "rounds" / "round-02").exists()

    assert main(args) == 0  # the same command: round 2 only
    demos = DemoDataset.open(demos_dir)
    aggregate = DemoDataset.open(out / AGGREGATE)
    assert len(aggregate.episodes) == len(demos.episodes) + 4
    summary = json.loads((out / "summary.json").read_text())
    assert [r["round"] for r in summary["rounds"]] == [0, 1, 2]
    assert "next: robot-rl finetune --policy" in capsys.readouterr().out


def test_a_signal_during_rollouts_stops_dagger_before_its_bc(bc_run_dir, tmp_path, monkeypatch):
    from robot_rl.pretrain import dagger

    rollouts = dagger.DAggerRun._rollouts

    def rollouts_then_signal(self, aggregate, round_index):
        rollouts(self, aggregate, round_index)
        os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(dagger.DAggerRun, "_rollouts", rollouts_then_signal)
    out = tmp_path / "dagger"
    args = ["dagger", "--policy", str(bc_run_dir), "--out", str(out), "--rounds", "1", "--episodes-per-round", "2",
            "--epochs-per-round", "1", "--num-envs", "1", "--eval-episodes", "1", "--precision", "fp32"]
    assert main(args) == 128 + signal.SIGINT
    assert not (out / "rounds" / "round-01").exists()  # the round's BC never started
    entry = next(r for r in DemoDataset.open(out / AGGREGATE).meta["runs"] if r.get("round") == 1)
    assert entry["complete"] and entry["episodes"] == 2


def test_a_pipeline_stops_before_the_next_stage_when_a_stage_took_the_signal(tmp_path, monkeypatch):
    from robot_rl.errors import RunStopped
    from robot_rl.pipeline import BC, EVAL_BC, PPO, PRESETS, run_pipeline

    tiny = PRESETS["quick"].updated(
        collect={"episodes": 2, "num_envs": 1},
        pretrain={"epochs": 1, "batch_size": 8, "steps_per_epoch": 1, "eval_episodes": 1, "eval_envs": 1,
                  "hidden": 16, "threads": 2})
    root = tmp_path / "pipe"
    _signal_after_bc_trains(monkeypatch)
    with pytest.raises(RunStopped) as stopped:
        run_pipeline(tiny, root, progress=False, log=lambda line: None)
    assert stopped.value.signum == signal.SIGTERM
    assert (root / BC / "summary.json").is_file()  # BC finished its last step...
    assert not (root / EVAL_BC).exists() and not (root / PPO).exists()  # ...and no later stage started


def test_a_held_folder_is_refused_before_the_slow_start_up(tmp_path):
    """The refusal comes before torch is imported (it took 7-24 s after the imports and the task build)."""
    import fcntl
    import subprocess
    import sys

    from robot_rl.locks import lock_file

    out = tmp_path / "demos"
    with open(lock_file(out), "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        held.write("12345\n")
        held.flush()
        probe = ("import sys; from robot_rl.cli import main; code = main(sys.argv[1:]); "
                 "print('torch imported' if 'torch' in sys.modules else 'torch not imported'); sys.exit(code)")
        done = subprocess.run([sys.executable, "-c", probe, "collect-demos", "--out", str(out)], capture_output=True,
                              text=True, timeout=120)
    assert done.returncode == 2
    assert done.stdout.strip() == "torch not imported"
    assert done.stderr.strip().splitlines() == [
        f"robot-rl collect-demos: error: {out}: dataset in use by another robot-rl process (pid 12345; lock "
        f"{lock_file(out)}); wait for it to end, or use --wait-lock"]


def test_a_command_says_what_it_does_at_once_and_what_comes_next(tmp_path, capsys):
    from robot_rl.cli import build_parser

    out = tmp_path / "demos"
    assert main(["collect-demos", "--out", str(out), "--episodes", "2", "--image-size", "32", "--num-envs", "1",
                 "--difficulty", "easy"]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines()[0].startswith("robot-rl collect-demos: starting (record scripted-expert")
    nexts = [line.removeprefix("next: ") for line in captured.out.splitlines() if line.startswith("next: ")]
    assert nexts == [f"robot-rl pretrain --data {out} --out runs/bc"]
    build_parser().parse_args(nexts[0].split()[1:])  # a command line the parser takes


def test_collect_demos_commits_the_batch_under_way_then_stops_and_the_same_command_finishes(tmp_path, monkeypatch,
                                                                                           capsys):
    from robot_rl.dataset import DemoDataset as Dataset

    commit = Dataset.commit

    def commit_then_signal(self):
        commit(self)
        os.kill(os.getpid(), signal.SIGTERM)

    out = tmp_path / "demos"
    args = ["collect-demos", "--out", str(out), "--episodes", "4", "--episodes-per-commit", "2", "--image-size",
            "32", "--num-envs", "1", "--difficulty", "easy"]
    with monkeypatch.context() as patch:
        patch.setattr(Dataset, "commit", commit_then_signal)
        assert main(args) == 128 + signal.SIGTERM
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (f"robot-rl collect-demos: {out}: stopped, committed episodes kept (SIGTERM); continue with "
                       "the same command")
    assert not any("Traceback" in line for line in err)
    assert len(DemoDataset.open(out).episodes) == 2  # the first commit, and nothing after it
    assert main(args) == 0
    assert len(DemoDataset.open(out).episodes) == 4


def test_a_signal_during_the_start_up_imports_is_deferred_then_acted_on():
    """An import interrupted half way leaves a broken module and makes the interpreter die of SIGINT at exit; the
    start-up records the signal instead and the command stops once its imports are done."""
    from robot_rl.stop import stop_deferred

    with stop_deferred():
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)  # recorded, not raised, while the imports run
    assert stop_requested() == signal.SIGINT  # the first one is the request


def test_a_command_stopped_during_its_start_up_exits_as_the_signal_would(tmp_path, monkeypatch, capsys):
    import importlib

    from robot_rl import cli

    def import_then_signal(name):
        os.kill(os.getpid(), signal.SIGTERM)
        return importlib.import_module(name)

    monkeypatch.setattr(cli, "importlib", type("M", (), {"import_module": staticmethod(import_then_signal)}))
    assert main(["collect-demos", "--out", str(tmp_path / "demos")]) == 128 + signal.SIGTERM
    assert capsys.readouterr().err.strip().splitlines() == [
        "robot-rl collect-demos: terminated (SIGTERM); nothing half written; the same command continues it"]
    assert not (tmp_path / "demos").exists()
