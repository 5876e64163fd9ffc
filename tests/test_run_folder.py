"""Run folders, one semantics for behaviour cloning and PPO: which checkpoint a folder means, refusing to
overwrite, Ctrl-C = finish the step, checkpoint, stop unfinished; and resuming from there."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from robot_rl.checkpoints import load_checkpoint, policy_checkpoint, run_folder_of, save_checkpoint
from robot_rl.errors import UsageError
from robot_rl.finetune import trainer
from robot_rl.pretrain import bc
from robot_rl.run_folder import RunFolder
from robot_rl.stop import StopOnInterrupt, clear_stop_request
from tests.finetune.test_trainer import tiny
from tests.pretrain.test_bc import small_config


def test_a_folder_means_its_last_checkpoint_or_with_kind_best_its_best(tmp_path):
    folder = RunFolder(tmp_path / "run")
    save_checkpoint(folder.checkpoint("last"), {"which": "last"})
    assert policy_checkpoint(folder.path) == policy_checkpoint(folder.path, "best") == folder.checkpoint("last")
    save_checkpoint(folder.checkpoint("best"), {"which": "best"})
    assert policy_checkpoint(folder.path) == folder.checkpoint("last")
    assert policy_checkpoint(folder.path, "best") == folder.checkpoint("best")
    assert policy_checkpoint(folder.checkpoint("last"), "best") == folder.checkpoint("last")  # a file means itself
    dagger = tmp_path / "dagger"  # a DAgger run folder means its last round's run folder
    for round_dir in ("round-01", "round-02"):
        save_checkpoint(dagger / "rounds" / round_dir / "checkpoints" / "last.pt", {"which": round_dir})
    assert policy_checkpoint(dagger) == dagger / "rounds" / "round-02" / "checkpoints" / "last.pt"
    with pytest.raises(UsageError, match="--checkpoint-kind must be one of last, best"):
        policy_checkpoint(folder.path, "first")
    assert run_folder_of(folder.checkpoint("best")) == folder.path
    assert run_folder_of(tmp_path / "elsewhere" / "policy.pt") == tmp_path / "elsewhere"
    with pytest.raises(UsageError, match="no such checkpoint"):
        load_checkpoint(tmp_path / "missing" / "checkpoints" / "last.pt")


def test_a_folder_holding_a_run_is_never_overwritten(demos_dir, tmp_path):
    other = small_config(demos_dir, tmp_path / "run", epochs=3)
    RunFolder(other.run_dir).start(other, {"which": "last"})
    with pytest.raises(UsageError, match="already holds a different run; use --resume"):
        bc.pretrain(small_config(demos_dir, tmp_path / "run", epochs=1), progress=False)
    assert load_checkpoint(RunFolder(other.run_dir).checkpoint()) == {"which": "last"}


def test_a_config_stored_before_an_option_existed_keeps_the_behaviour_of_its_time(tmp_path):
    from dataclasses import asdict

    from robot_rl.checkpoints import load_config
    from robot_rl.configs import FinetuneConfig

    older = {k: v for k, v in asdict(tiny(tmp_path / "ppo")).items() if k not in ("guess_penalty", "target_kl")}
    (tmp_path / "config.json").write_text(json.dumps(older))
    loaded = load_config(tmp_path / "config.json", FinetuneConfig)
    assert loaded.guess_penalty == 0.0 and loaded.target_kl == 0.0  # not today's defaults (1.0, 0.02)
    assert loaded.lr == older["lr"]


def test_a_config_stored_under_an_old_option_name_loads_under_the_new_one(tmp_path):
    from dataclasses import asdict

    from robot_rl.checkpoints import load_config
    from robot_rl.configs import FinetuneConfig

    older = asdict(tiny(tmp_path / "ppo"))
    older["hidden"] = older.pop("critic_hidden")  # the critic's width was --hidden before
    (tmp_path / "config.json").write_text(json.dumps(older))
    assert load_config(tmp_path / "config.json", FinetuneConfig).critic_hidden == older["hidden"]


def test_the_actor_architecture_has_one_home():
    from dataclasses import fields

    from robot_rl.configs import ActorArchitecture, BCConfig, FinetuneConfig
    from robot_rl.finetune.models import starting_point
    from robot_rl.policy import PolicyConfig

    home = ActorArchitecture().architecture()
    assert BCConfig().architecture() == PolicyConfig().architecture() == home
    assert PolicyConfig.of(BCConfig(hidden=64)).hidden == 64
    scratch = starting_point(FinetuneConfig(from_scratch=True, anchor_weight=0.0, pose_min_scale=0.0))[1]
    assert scratch.architecture() == home  # --from-scratch builds the defaults, as pretrain does
    assert "hidden" not in {f.name for f in fields(FinetuneConfig)}  # the critic's width is critic_hidden


def _killed_before_its_first_checkpoint(argv: list[str], run_dir: Path) -> None:
    """Starts ``robot-rl argv`` and kill -9s it as soon as it has claimed ``run_dir``."""
    process = subprocess.Popen([sys.executable, "-m", "robot_rl.cli", *argv], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while not (run_dir / "config.json").exists():
        assert process.poll() is None and time.monotonic() < deadline, "the command never claimed its folder"
        time.sleep(0.002)
    process.kill()
    process.wait()
    assert not (run_dir / "summary.json").exists()


def test_a_pretrain_killed_before_its_first_checkpoint_comes_back_with_the_same_command(demos_dir, tmp_path):
    run_dir = tmp_path / "run"
    argv = ["pretrain", "--data", str(demos_dir), "--out", str(run_dir), "--epochs", "1", "--batch-size", "8",
            "--steps-per-epoch", "40", "--eval-episodes", "1", "--num-envs", "1", "--hidden", "16"]
    _killed_before_its_first_checkpoint(argv, run_dir)
    assert load_checkpoint(run_dir / "checkpoints" / "last.pt")["step"] == 0  # written before the first step
    result = subprocess.run([sys.executable, "-m", "robot_rl.cli", *argv], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    assert "continuing its unfinished run" in result.stdout
    assert json.loads((run_dir / "summary.json").read_text())["finished"]


def test_a_finetune_killed_before_its_first_checkpoint_comes_back_with_resume(bc_run_dir, tmp_path):
    run_dir = tmp_path / "ppo"
    argv = ["finetune", "--policy", str(bc_run_dir), "--out", str(run_dir), "--total-frames", "64",
            "--frames-per-batch", "32", "--num-envs", "2", "--minibatch-size", "16", "--ppo-epochs", "1",
            "--eval-every", "0", "--eval-episodes", "1", "--checkpoint-every", "5", "--critic-hidden", "16"]
    _killed_before_its_first_checkpoint(argv, run_dir)
    assert load_checkpoint(run_dir / "checkpoints" / "last.pt")["frames"] == 0
    result = subprocess.run([sys.executable, "-m", "robot_rl.cli", "finetune", "--resume", str(run_dir)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["finished"] and summary["frames"] == 64


def test_the_same_options_continue_an_unfinished_run_and_other_options_are_refused(demos_dir, tmp_path):
    config = small_config(demos_dir, tmp_path / "run", epochs=2)
    bc.BCRun(config).run(progress=False, until=1)  # stands for a run killed after epoch 1
    with pytest.raises(UsageError, match="already holds a different run"):
        bc.pretrain(small_config(demos_dir, tmp_path / "run", epochs=3), progress=False)
    assert bc.pretrain(config, progress=False)["epochs"] == 2
    assert bc.pretrain(config, progress=False)["epochs"] == 2  # the same command again: finished, nothing to do
    with pytest.raises(UsageError, match="already holds a finished run"):
        bc.pretrain(small_config(demos_dir, tmp_path / "run", epochs=3), progress=False)


def test_the_first_ctrl_c_asks_to_stop_and_the_second_aborts():
    before = signal.getsignal(signal.SIGINT)  # Python's handler; SIG_IGN in a shell's background job
    with StopOnInterrupt() as stop:
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.requested
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is before  # the previous handler is back


class _InterruptAfter:
    """Wraps a sampler-like ``sample`` callable: sends this process a SIGINT after ``calls`` calls."""

    def __init__(self, sample, calls: int):
        self.sample, self.calls = sample, calls

    def __call__(self, *args, **kwargs):
        self.calls -= 1
        if self.calls == 0:
            os.kill(os.getpid(), signal.SIGINT)
        return self.sample(*args, **kwargs)


def test_ctrl_c_in_bc_checkpoints_mid_epoch_and_resume_matches_an_uninterrupted_run(demos_dir, tmp_path):
    bc.pretrain(small_config(demos_dir, tmp_path / "whole", epochs=1), progress=False)

    run = bc.BCRun(small_config(demos_dir, tmp_path / "stopped", epochs=1))
    run.train_buffer.sample = _InterruptAfter(run.train_buffer.sample, calls=2)
    summary = run.run(progress=False)
    assert not summary["finished"] and summary["steps"] == 2 and summary["epochs"] == 0
    folder = RunFolder(tmp_path / "stopped")
    assert folder.checkpoint("last").is_file() and not folder.finished
    del run

    clear_stop_request()  # the same command again: a new process, which nobody has asked to stop
    assert bc.resume(folder.path, progress=False)["finished"] and folder.finished
    a = load_checkpoint(tmp_path / "whole" / "checkpoints" / "last.pt")
    b = load_checkpoint(folder.checkpoint("last"))
    assert a["step"] == b["step"] == 4
    for name, tensor in a["actor"].items():
        assert torch.equal(tensor, b["actor"][name]), name


def test_ctrl_c_in_ppo_finishes_the_iteration_checkpoints_and_stops_unfinished(tmp_path):
    run = trainer.PPORun(tiny(tmp_path / "ppo"))
    try:
        run.update = _InterruptAfter(run.update, calls=2)
        summary = run.run(progress=False)
    finally:
        run.close()
    folder = RunFolder(tmp_path / "ppo")
    assert not summary["finished"] and summary["iterations"] == 2 and not folder.finished
    assert load_checkpoint(folder.checkpoint("last"))["iteration"] == 2
    clear_stop_request()  # the same command again: a new process
    assert trainer.resume(folder.path, progress=False)["iterations"] == 3 and folder.finished


def test_whoever_needs_a_finished_run_gets_it_reused_resumed_or_started_and_a_stop_stops_them(tmp_path):
    from robot_rl.errors import RunStopped
    from robot_rl.run_folder import ensure_finished

    calls = []

    def start():
        calls.append("start")
        return {"finished": False}

    def resume(path):
        calls.append("resume")
        RunFolder(path).finish({"finished": True, "by": "resume"})
        return {"finished": True, "by": "resume"}

    folder = RunFolder(tmp_path / "run")
    with pytest.raises(RunStopped, match="stopped, checkpoint saved"):  # Ctrl-C'd: nobody goes on with it
        ensure_finished(folder.path, "pretrain", start, resume)
    save_checkpoint(folder.checkpoint(), {})
    (folder.path / "config.json").write_text("{}")  # a started, unfinished run
    assert ensure_finished(folder.path, "pretrain", start, resume)["by"] == "resume"
    assert ensure_finished(folder.path, "pretrain", start, resume)["by"] == "resume"  # finished: reused
    assert calls == ["start", "resume"]


def test_a_stopped_command_exits_130_with_the_resume_command(tmp_path, monkeypatch, capsys):
    from robot_rl.cli import main

    monkeypatch.setattr(bc, "pretrain", lambda config: {"finished": False})
    assert main(["pretrain", "--out", str(tmp_path / "run")]) == 130
    assert f"continue with robot-rl pretrain --resume {tmp_path / 'run'}" in capsys.readouterr().err


SPAWN_A_SLEEPER_THEN_DIE = """
import multiprocessing, os, signal, sys, time
import robot_rl  # noqa: F401 - the spawned child imports this file, so robot_rl, as a CLI's workers do

if __name__ == "__main__":
    child = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(600,))
    child.start()
    print(child.pid, flush=True)
    time.sleep(float(sys.argv[1]))
    os.kill(os.getpid(), signal.SIGKILL)
"""


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
@pytest.mark.parametrize("kill_after", [0.0, 4.0], ids=["while-the-worker-starts", "once-it-runs"])
def test_a_worker_process_dies_with_a_parent_killed_by_sigkill(tmp_path, kill_after):
    script = tmp_path / "parent.py"
    script.write_text(SPAWN_A_SLEEPER_THEN_DIE)
    parent = subprocess.run([sys.executable, str(script), str(kill_after)], capture_output=True, text=True,
                            timeout=120)
    assert parent.returncode == -signal.SIGKILL
    child = int(parent.stdout.split()[0])
    deadline = time.monotonic() + 30
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = _alive(child)
    if alive:
        os.kill(child, signal.SIGKILL)
    assert not alive, "the worker outlived its parent"


def _snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``folder``: its bytes and modification time."""
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_resuming_a_copied_unfinished_run_writes_only_in_the_copy(demos_dir, tmp_path):
    import shutil

    original = tmp_path / "original"
    bc.BCRun(small_config(demos_dir, original, epochs=2)).run(progress=False, until=1)  # killed after epoch 1
    before = _snapshot(original)
    copy = tmp_path / "copy"
    shutil.copytree(original, copy)
    assert bc.resume(copy, progress=False)["finished"]
    assert _snapshot(original) == before  # nothing written where the copy came from
    assert RunFolder(copy).finished and not RunFolder(original).finished
    assert load_checkpoint(RunFolder(copy).checkpoint())["config"]["run_dir"] == str(copy)


def test_resuming_a_moved_run_does_not_recreate_its_old_path(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    run = trainer.PPORun(tiny(old, total_frames=64))
    try:
        run.run(progress=False, until=1)
    finally:
        run.close()
    old.rename(new)
    assert trainer.resume(new, progress=False)["finished"]
    assert not old.exists() and RunFolder(new).finished


def test_resuming_a_finished_run_changes_nothing_and_says_so(bc_run_dir, tmp_path, capsys):
    import shutil

    from robot_rl.cli import main

    copy = tmp_path / "copy"
    shutil.copytree(bc_run_dir, copy)
    before, original = _snapshot(copy), _snapshot(bc_run_dir)
    assert main(["pretrain", "--resume", str(copy)]) == 0
    assert "the run has finished; nothing to resume" in capsys.readouterr().out
    assert _snapshot(copy) == before  # summary.json byte for byte, final_eval included
    assert _snapshot(bc_run_dir) == original


def test_sigterm_stops_like_ctrl_c_and_the_stop_records_it():
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    with StopOnInterrupt() as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.requested and stop.signum == signal.SIGTERM
        assert stop.stopped({"finished": False})["stopped_by_signal"] == signal.SIGTERM
        with pytest.raises(KeyboardInterrupt):  # a second one aborts
            os.kill(os.getpid(), signal.SIGTERM)
    assert {sig: signal.getsignal(sig) for sig in before} == before


def _stopped_by_sigterm(argv: list[str], ready: Path, after: float) -> subprocess.CompletedProcess:
    """Starts ``robot-rl argv`` in its own process group, sends SIGTERM to the whole group (as Slurm and systemd
    do) ``after`` seconds after the file ``ready`` appeared; returns how it ended."""
    process = subprocess.Popen([sys.executable, "-m", "robot_rl.cli", *argv], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 240
    while not ready.exists():
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.01)
    time.sleep(after)
    os.killpg(process.pid, signal.SIGTERM)
    out, err = process.communicate(timeout=300)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def _check_stopped_then_resumed(stopped: subprocess.CompletedProcess, command: str, run_dir: Path) -> None:
    assert stopped.returncode == 143, stopped.stderr
    resume_lines = [line for line in stopped.stderr.splitlines() if "--resume" in line]
    assert resume_lines == [f"robot-rl {command}: {run_dir}: stopped, checkpoint saved (SIGTERM); continue with "
                            f"robot-rl {command} --resume {run_dir}"], stopped.stderr
    assert not (run_dir / "summary.json").exists() and (run_dir / "checkpoints" / "last.pt").is_file()
    resumed = subprocess.run([sys.executable, "-m", "robot_rl.cli", command, "--resume", str(run_dir)],
                             capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads((run_dir / "summary.json").read_text())["finished"]


def test_sigterm_stops_a_pretrain_mid_epoch_with_exit_143_and_resume_finishes_it(demos_dir, tmp_path):
    run_dir = tmp_path / "run"
    argv = ["pretrain", "--data", str(demos_dir), "--out", str(run_dir), "--epochs", "2", "--batch-size", "8",
            "--steps-per-epoch", "30", "--eval-episodes", "1", "--num-envs", "1", "--hidden", "16"]
    stopped = _stopped_by_sigterm(argv, run_dir / "config.json", after=1.0)
    _check_stopped_then_resumed(stopped, "pretrain", run_dir)


# The direct collector's stop is the learner's own (tests/test_stop.py, the Ctrl-C tests above); the process
# collector's workers are what a group-wide SIGTERM can break.
@pytest.mark.parametrize("collector", [pytest.param("direct", marks=pytest.mark.slow), "process"])
def test_sigterm_to_the_group_stops_a_finetune_with_exit_143_and_resume_finishes_it(bc_run_dir, tmp_path,
                                                                                    collector):
    run_dir = tmp_path / "ppo"
    argv = ["finetune", "--policy", str(bc_run_dir), "--out", str(run_dir), "--total-frames", "512",
            "--frames-per-batch", "32", "--num-envs", "2", "--minibatch-size", "16", "--ppo-epochs", "1",
            "--eval-every", "0", "--eval-episodes", "1", "--checkpoint-every", "5", "--critic-hidden", "16",
            "--collector", collector, "--workers", "2" if collector == "process" else "0"]
    # Once the first of its 16 iterations is logged: the next ones are under way.
    stopped = _stopped_by_sigterm(argv, run_dir / "logs" / "scalars" / "train" / "frames_per_s.csv", after=0.2)
    _check_stopped_then_resumed(stopped, "finetune", run_dir)


def test_a_disk_that_fills_up_mid_run_stops_pretrain_in_one_line_and_resume_finishes(demos_dir, tmp_path,
                                                                                  monkeypatch, capsys):
    import shutil
    from collections import namedtuple

    from robot_rl.cli import main

    run_dir = tmp_path / "run"
    real, usage = shutil.disk_usage, namedtuple("usage", "total used free")
    checks = []

    def filling_up(path):  # room for the checkpoint written before the first step, none after
        checks.append(path)
        return real(path) if len(checks) == 1 else usage(2**30, 2**30 - 4096, 4096)

    argv = ["pretrain", "--data", str(demos_dir), "--out", str(run_dir), "--epochs", "2", "--batch-size", "8",
            "--steps-per-epoch", "2", "--eval-every", "0", "--eval-episodes", "1", "--num-envs", "1",
            "--hidden", "16"]
    with monkeypatch.context() as patch:
        patch.setattr(shutil, "disk_usage", filling_up)
        assert main(argv) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("robot-rl")]
    assert err == [f"robot-rl pretrain: error: no space left on device writing {run_dir / 'checkpoints'} (needs ~"
                   f"{err[0].split('(needs ~')[1]}"] and "Traceback" not in "".join(err)
    assert load_checkpoint(run_dir / "checkpoints" / "last.pt")["step"] == 0  # intact: the run before its steps
    assert not list(run_dir.rglob(".*.tmp"))
    assert main(["pretrain", "--resume", str(run_dir)]) == 0
    assert json.loads((run_dir / "summary.json").read_text())["epochs"] == 2
