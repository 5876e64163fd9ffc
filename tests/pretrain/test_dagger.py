"""DAgger: expert labels on the visited states, an aggregate that grows by exactly the rollouts, beta = 1 is the
expert, kill -9 mid-round resumes, bad input is one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import InteractionType, set_interaction_type

from robot_rl import keys
from robot_rl.artefact_files import DAGGER_AGGREGATE as AGGREGATE
from robot_rl.checkpoints import policy_checkpoint
from robot_rl.cli import main
from robot_rl.configs import DAggerConfig
from robot_rl.dataset import DemoDataset
from robot_rl.envs.expert_policy import ExpertPolicy
from robot_rl.envs.task import TaskConfig
from robot_rl.policy_io import load_actor
from robot_rl.pretrain.dagger import dagger, ensure_trained, final_policy_run


def tiny(bc_run_dir, run_dir, **overrides) -> DAggerConfig:
    values = dict(init=str(bc_run_dir), run_dir=str(run_dir), rounds=1, episodes_per_round=3, epochs_per_round=1,
                  num_envs=1, eval_episodes=1, precision="fp32")
    values.update(overrides)
    return DAggerConfig(**values)


def round_frames(run_dir, demos_frames: int):
    """The aggregate and the frames its rounds added (after the demos)."""
    aggregate = DemoDataset.open(run_dir / AGGREGATE)
    return aggregate, aggregate.data[demos_frames:]


def test_labels_are_the_experts_actions_and_the_policy_acts(bc_run_dir, demos_dir, tmp_path):
    demos = DemoDataset.open(demos_dir)
    dagger(tiny(bc_run_dir, tmp_path / "dagger", beta=0.0), progress=False)
    aggregate, frames = round_frames(tmp_path / "dagger", demos.frames)
    assert frames.shape[0] > 0
    # The expert relabels the stored states: a stateless function of the privileged state.
    expert = ExpertPolicy(TaskConfig(image_size=demos.image_size), task=demos.meta["env"])
    states = TensorDict({key: frames.get(key).clone() for key in (keys.CAMERA_POSE, keys.BOARD_POSE, keys.DEFECTIVE,
                                                                  keys.JOINT_STATE)}, batch_size=frames.shape)
    relabelled = expert(states)
    torch.testing.assert_close(frames.get(keys.EXPERT_POSE), relabelled.get(keys.EXPERT_POSE))
    assert torch.equal(frames.get(keys.EXPERT_VERDICT), relabelled.get(keys.EXPERT_VERDICT))
    # beta = 0: every executed action is the init policy's deterministic one.
    actor, _, _ = load_actor(bc_run_dir)
    with torch.no_grad(), set_interaction_type(InteractionType.DETERMINISTIC):
        acted = actor(frames.select(keys.PIXELS, keys.JOINT_STATE).clone())
    torch.testing.assert_close(frames.get(keys.POSE), acted.get(keys.POSE), atol=1e-4, rtol=1e-4)
    assert torch.equal(frames.get(keys.VERDICT), acted.get(keys.VERDICT))


def test_the_aggregate_grows_by_exactly_the_rollouts_frames(bc_run_dir, demos_dir, tmp_path, capsys):
    demos = DemoDataset.open(demos_dir)
    args = ["dagger", "--policy", str(bc_run_dir), "--out", str(tmp_path / "dagger"), "--rounds", "2",
            "--episodes-per-round", "2", "--epochs-per-round", "1", "--num-envs", "1", "--eval-episodes", "1"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "aggregate frames" in out and "round-02" in out
    aggregate = DemoDataset.open(tmp_path / "dagger" / AGGREGATE)
    rounds = [r for r in aggregate.meta["runs"] if r["round"] >= 1]
    assert [r["round"] for r in rounds] == [1, 2] and all(r["complete"] and r["episodes"] == 2 for r in rounds)
    assert len(aggregate.episodes) == len(demos.episodes) + 4
    added = sum(e.length for e in aggregate.episodes[len(demos.episodes):])
    assert aggregate.frames == demos.frames + added
    # The demos are copied as they were (DAgger's D0).
    assert torch.equal(aggregate.data[: demos.frames].get(keys.PIXELS), demos.data.get(keys.PIXELS))
    summary = json.loads((tmp_path / "dagger" / "summary.json").read_text())
    assert [r["round"] for r in summary["rounds"]] == [0, 1, 2]
    assert summary["rounds"][-1]["aggregate_frames"] == aggregate.frames
    assert summary["rounds"][1]["beta"] == 0.5 and summary["rounds"][2]["beta"] == 0.25
    log = tmp_path / "dagger" / "logs" / "scalars" / "dagger" / "success_rate.csv"
    assert [int(line.split(",")[0]) for line in log.read_text().split()] == [0, 1, 2]
    # Resuming the finished run: nothing redone.
    assert main(["dagger", "--resume", str(tmp_path / "dagger")]) == 0
    assert DemoDataset.open(tmp_path / "dagger" / AGGREGATE).frames == aggregate.frames


def test_beta_one_reproduces_expert_demos(bc_run_dir, demos_dir, tmp_path):
    demos = DemoDataset.open(demos_dir)
    dagger(tiny(bc_run_dir, tmp_path / "dagger", beta=1.0, beta_decay=1.0, include_demos=False), progress=False)
    aggregate, frames = round_frames(tmp_path / "dagger", 0)
    assert len(aggregate.episodes) == 3
    torch.testing.assert_close(frames.get(keys.POSE), frames.get(keys.EXPERT_POSE))
    assert torch.equal(frames.get(keys.VERDICT), frames.get(keys.EXPERT_VERDICT))
    expert_success = sum(e.success for e in demos.episodes) / len(demos.episodes)
    assert expert_success == 1.0 and all(e.success for e in aggregate.episodes)
    # A finished run is read back, not redone, and its last round is a BC run folder PPO can start from.
    summary = ensure_trained(tiny(bc_run_dir, tmp_path / "dagger", beta=1.0, beta_decay=1.0, include_demos=False),
                             progress=False)
    assert DemoDataset.open(tmp_path / "dagger" / AGGREGATE).frames == aggregate.frames
    start = final_policy_run(summary)
    assert start == tmp_path / "dagger" / "rounds" / "round-01" and (start / "checkpoints" / "last.pt").is_file()
    assert load_actor(start)[1].task == demos.meta["env"]


@pytest.mark.slow  # tests/test_stop.py stops and resumes DAgger in the fast suite
def test_kill_9_mid_round_resumes_with_the_frames_recorded_so_far(bc_run_dir, tmp_path):
    run_dir = tmp_path / "dagger"
    command = [sys.executable, "-m", "robot_rl.cli", "dagger", "--policy", str(bc_run_dir), "--out", str(run_dir),
               "--rounds", "1", "--episodes-per-round", "16", "--epochs-per-round", "1", "--num-envs", "1",
               "--eval-episodes", "1", "--no-include-demos"]
    meta = run_dir / AGGREGATE / "meta.json"
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env={**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")})
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        if meta.is_file() and json.loads(meta.read_text())["num_episodes"] >= 8:
            break
        time.sleep(0.05)
    assert process.poll() is None, "the run ended before it could be killed"
    process.send_signal(signal.SIGKILL)
    process.wait()
    before = DemoDataset.open(run_dir / AGGREGATE)
    kept = before.frames
    assert 8 <= len(before.episodes) < 16
    kept_pixels = before.data.get(keys.PIXELS).clone()

    subprocess.run(command, check=True, capture_output=True)
    after = DemoDataset.open(run_dir / AGGREGATE)
    assert len(after.episodes) == 16
    assert after.frames == sum(e.length for e in after.episodes)
    assert torch.equal(after.data[:kept].get(keys.PIXELS), kept_pixels)  # what was recorded stays as it was
    assert (run_dir / "summary.json").is_file()


@pytest.mark.parametrize("successes, rounds_wanted", [
    ([], 4), ([0.9], 0), ([0.5], 4), ([0.5, 0.6], 4), ([0.5, 0.5], 1), ([0.5, 0.7, 0.6], 2), ([0.5, 0.85], 1),
])
def test_rounds_stop_at_the_success_wanted_or_when_a_round_does_not_improve(successes, rounds_wanted):
    config = DAggerConfig(rounds=4, until_success=0.8, until_flat=True)
    assert config.rounds_wanted(successes) == rounds_wanted
    assert DAggerConfig(rounds=4).rounds_wanted(successes) == 4  # no stop rule: every round


def scripted_checks(monkeypatch, rates):
    """Every closed-loop check (DAgger's of the init policy, each round's BC check) reports the next of ``rates``
    as its success rate; the rest of its metrics are real."""
    from robot_rl.pretrain import bc as bc_module
    from robot_rl.pretrain import dagger as dagger_module

    real, rates = dagger_module.evaluate_policy, iter(rates)

    def check(*args, **kwargs):
        metrics, episodes = real(*args, **kwargs)
        return {**metrics, "success_rate": next(rates)}, episodes

    monkeypatch.setattr(dagger_module, "evaluate_policy", check)
    monkeypatch.setattr(bc_module, "evaluate_policy", check)


def test_until_flat_ends_the_run_after_a_round_that_does_not_improve(bc_run_dir, tmp_path, monkeypatch):
    scripted_checks(monkeypatch, [0.25, 0.5, 0.5])
    run_dir = tmp_path / "dagger"
    summary = ensure_trained(tiny(bc_run_dir, run_dir, rounds=4, episodes_per_round=2, until_flat=True))
    assert [r["round"] for r in summary["rounds"]] == [0, 1, 2] and summary["finished"]
    assert not (run_dir / "rounds" / "round-03").exists()
    # round 2 did not beat round 1: the run ends with round 1's policy, wherever a policy is read
    assert summary["final_round"] == 1 and final_policy_run(summary) == run_dir / "rounds" / "round-01"
    assert policy_checkpoint(run_dir) == run_dir / "rounds" / "round-01" / "checkpoints" / "last.pt"
    assert main(["info", str(run_dir)]) == 0


def test_a_start_that_checks_at_until_success_runs_no_round(bc_run_dir, demos_dir, tmp_path, monkeypatch, capsys):
    scripted_checks(monkeypatch, [0.9])
    run_dir = tmp_path / "dagger"
    summary = ensure_trained(tiny(bc_run_dir, run_dir, rounds=2, until_success=0.8))
    assert [r["round"] for r in summary["rounds"]] == [0] and summary["finished"]
    assert final_policy_run(summary) == bc_run_dir  # fine-tuning starts from the BC run itself
    assert policy_checkpoint(run_dir) == policy_checkpoint(bc_run_dir)  # so does --policy RUN_DIR
    assert len(DemoDataset.open(run_dir / AGGREGATE).episodes) == len(DemoDataset.open(demos_dir).episodes)
    capsys.readouterr()
    assert main(["info", str(run_dir)]) == 0
    assert "round 0 of 2; finished early" in capsys.readouterr().out


@pytest.mark.parametrize("args, culprit", [
    (["--rounds", "0"], "--rounds"),
    (["--beta", "1.5"], "--beta"),
    (["--precision", "fp16"], "--precision"),
    (["--until-success", "1.5"], "--until-success"),
])
def test_bad_options_are_one_line_and_exit_2(bc_run_dir, tmp_path, capsys, args, culprit):
    assert main(["dagger", "--policy", str(bc_run_dir), "--out", str(tmp_path / "d"), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and culprit in err
    assert not (tmp_path / "d").exists()


def test_an_init_that_is_not_a_bc_run_is_refused(demos_dir, tmp_path, capsys):
    assert main(["dagger", "--policy", str(demos_dir), "--out", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "not a BC run folder" in err


@pytest.mark.slow  # every stage end to end; tests/test_evaluate.py runs the pipeline without DAgger
def test_the_pipeline_runs_dagger_between_pretrain_and_finetune(tmp_path):
    from robot_rl.checkpoints import load_checkpoint
    from robot_rl.pipeline import PRESETS, run_pipeline

    tiny = PRESETS["quick"].updated(
        collect={"episodes": 4, "num_envs": 1},
        pretrain={"epochs": 1, "batch_size": 8, "steps_per_epoch": 2, "eval_episodes": 1, "eval_envs": 1,
                  "hidden": 16, "threads": 2},
        dagger={"rounds": 1, "episodes_per_round": 2, "epochs_per_round": 1, "num_envs": 1, "eval_episodes": 1},
        finetune={"total_frames": 32, "frames_per_batch": 32, "num_envs": 2, "minibatch_size": 16, "ppo_epochs": 1,
                  "eval_every": 0, "eval_episodes": 1, "threads": 2},
        evaluate={"episodes": 1, "num_envs": 1, "videos": 0, "failure_videos": 0})
    lines = []
    result = run_pipeline(tiny, tmp_path / "pipe", progress=False, log=lines.append)
    assert any(line.startswith("[3b/5] dagger") for line in lines)
    assert "dagger" in result["seconds"]
    ppo = load_checkpoint(tmp_path / "pipe" / "ppo" / "checkpoints" / "last.pt")
    assert ppo["config"]["init"] == str(tmp_path / "pipe" / "dagger" / "rounds" / "round-01")
    # DAgger's policy is evaluated on the same boards as BC's and PPO's: a row of the closing table
    assert any(line.startswith("[3c/5] evaluate DAgger") for line in lines)
    assert result["after_dagger"]["episodes"] == result["after_bc"]["episodes"] == 1
    from robot_rl.pipeline import result_table

    assert [row.split("|")[1].strip() for row in result_table(result).splitlines()[2:5]] == [
        "after BC", "after DAgger", "after PPO (last.pt)"]
