"""Behaviour cloning: the loss learns, resumption is exact, the commands run end to end and reject bad input."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from robot_rl import keys
from robot_rl.checkpoints import load_checkpoint
from robot_rl.cli import main
from robot_rl.configs import BCConfig
from robot_rl.errors import UsageError
from robot_rl.pretrain import bc


def small_config(data, run_dir, **overrides) -> BCConfig:
    values = dict(data=str(data), run_dir=str(run_dir), epochs=2, batch_size=8, steps_per_epoch=4, eval_every=0,
                  eval_episodes=1, eval_envs=1, hidden=32, val_fraction=0.2, threads=2)
    values.update(overrides)
    return BCConfig(**values)


def test_bc_loss_decreases_on_real_demos(demos_dir, tmp_path):
    torch.manual_seed(0)
    run = bc.BCRun(small_config(demos_dir, tmp_path / "run", epochs=1, lr=1e-3, shift_pad=0))
    batch = bc._to_device(run.train_buffer.sample(), run.device, shift_pad=0)  # one fixed batch, fitted
    losses = []
    for _ in range(25):
        loss = bc.total_loss(run.loss(batch.clone()))
        run.optimizer.zero_grad()
        loss.backward()
        run.optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 1.0, losses


def test_the_auxiliary_locator_learns_where_the_board_is_and_stays_out_of_the_policy(demos_dir, tmp_path):
    torch.manual_seed(0)
    run = bc.BCRun(small_config(demos_dir, tmp_path / "run", epochs=1, lr=1e-3, shift_pad=0))
    batch = bc._to_device(run.train_buffer.sample(), run.device, shift_pad=0)
    errors = []
    for _ in range(25):
        losses = run.loss(batch.clone())
        run.optimizer.zero_grad()
        bc.total_loss(losses).backward()
        run.optimizer.step()
        errors.append(float(losses["locate_error_cm"]))
    assert errors[-1] < 0.5 * errors[0], errors  # fits the board's offset from the camera on a fixed batch
    assert not any("locator" in name for name in run.actor.state_dict())  # training-only: not in the policy
    assert run.loss._features is None  # nothing kept between calls (closed-loop checks run the same encoder)
    run.actor.eval()
    with torch.no_grad():
        run.actor(batch.clone())
    assert run.loss._features is None


def test_the_timing_loss_weighs_answered_and_waiting_frames_equally():
    from robot_rl.pretrain.bc_loss import _balanced_timing_terms

    # One answered frame among four waiting ones; continue, pass, rework logits.
    logits = torch.tensor([[0.0, 2.0, -1.0]] + [[1.0, -0.5, -0.5]] * 4, requires_grad=True)
    verdict = torch.tensor([1, 0, 0, 0, 0])
    terms = _balanced_timing_terms(logits, verdict, weight=3.0)
    answer_now = logits[:, 1:].logsumexp(-1) - logits[:, 0]
    answered = torch.nn.functional.softplus(-answer_now[0])  # -log sigmoid
    waiting = torch.nn.functional.softplus(answer_now[1:]).mean()  # -log(1 - sigmoid)
    torch.testing.assert_close(terms["loss_timing"], 3.0 * 0.5 * (answered + waiting))
    assert terms["timing_accuracy"] == 1.0  # answers on the first frame only
    terms["loss_timing"].backward()
    assert logits.grad.abs().sum() > 0
    empty = _balanced_timing_terms(logits[:0], verdict[:0], weight=3.0)
    assert empty["loss_timing"] == 0 and torch.isnan(empty["timing_accuracy"])


def test_the_timing_loss_is_off_by_default_and_joins_the_sum_when_weighted(demos_dir, tmp_path):
    default = bc.BCRun(small_config(demos_dir, tmp_path / "default"))
    batch = bc._to_device(default.train_buffer.sample(), default.device, shift_pad=0)
    assert "loss_timing" not in default.loss(batch.clone()).keys()
    weighted = bc.BCRun(small_config(demos_dir, tmp_path / "weighted", timing_weight=2.0))
    losses = weighted.loss(batch.clone())
    assert "loss_timing" in losses.keys() and torch.isfinite(bc.total_loss(losses))


def test_resume_reproduces_an_uninterrupted_run_exactly(demos_dir, tmp_path):
    straight = bc.BCRun(small_config(demos_dir, tmp_path / "straight"))
    straight.run(progress=False)

    interrupted = bc.BCRun(small_config(demos_dir, tmp_path / "resumed"))
    interrupted.run(progress=False, until=1)  # stands for a run killed after epoch 1's checkpoint
    del interrupted
    torch.manual_seed(1234)  # whatever the process did in between
    bc.resume(tmp_path / "resumed", progress=False)

    a = load_checkpoint(tmp_path / "straight" / "checkpoints" / "last.pt")
    b = load_checkpoint(tmp_path / "resumed" / "checkpoints" / "last.pt")
    assert a["epoch"] == b["epoch"] == 2 and a["step"] == b["step"] == 8
    for name, tensor in a["actor"].items():
        assert torch.equal(tensor, b["actor"][name]), name
    for sa, sb in zip(a["optimizer"]["state"].values(), b["optimizer"]["state"].values()):
        assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert torch.equal(a["rng"]["torch"], b["rng"]["torch"])
    assert a["scheduler"] == b["scheduler"]
    rows = (tmp_path / "resumed" / "logs" / "scalars" / "train" / "loss_pose.csv").read_text().split()
    assert [int(r.split(",")[0]) for r in rows] == [4, 8]


def test_checkpoints_are_complete(demos_dir, tmp_path):
    bc.pretrain(small_config(demos_dir, tmp_path / "run", epochs=1), progress=False)
    for name in ("last.pt", "best.pt"):
        state = load_checkpoint(tmp_path / "run" / "checkpoints" / name)
        assert {"actor", "optimizer", "scheduler", "epoch", "rng", "config", "env", "policy_config"} <= set(state)
        assert state["env"]["image_size"] == 64 and state["kind"] == "bc"
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["final_eval"]["episodes"] == 1


def test_best_and_last_are_one_file_until_a_later_epoch_falls_behind(demos_dir, tmp_path, monkeypatch):
    """Where the latest check is the best, best.pt and last.pt are one file on disk (no second copy of the
    weights); a later, worse epoch's last.pt leaves best.pt as it was."""
    successes, real = iter([0.5, 0.0]), bc.BCRun.closed_loop
    monkeypatch.setattr(bc.BCRun, "closed_loop", lambda self: {**real(self), "success_rate": next(successes)})
    run_dir = tmp_path / "run"
    best, last = run_dir / "checkpoints" / "best.pt", run_dir / "checkpoints" / "last.pt"
    bc.BCRun(small_config(demos_dir, run_dir, eval_every=1)).run(progress=False, until=1)
    assert best.samefile(last) and load_checkpoint(best)["best_success"] == 0.5
    bc.resume(run_dir, progress=False)
    assert not best.samefile(last)
    assert load_checkpoint(best)["epoch"] == 1 and load_checkpoint(last)["epoch"] == 2
    assert load_checkpoint(last)["best_success"] == 0.5


def test_a_run_folder_is_not_overwritten_and_the_same_command_again_finds_its_run_finished(demos_dir, tmp_path):
    summary = bc.pretrain(small_config(demos_dir, tmp_path / "run", epochs=1), progress=False)
    before = (tmp_path / "run" / "summary.json").read_bytes()
    assert bc.pretrain(small_config(demos_dir, tmp_path / "run", epochs=1), progress=False) == \
        json.loads(json.dumps(summary))
    assert (tmp_path / "run" / "summary.json").read_bytes() == before
    with pytest.raises(UsageError, match="already holds a finished run"):
        bc.pretrain(small_config(demos_dir, tmp_path / "run", epochs=2), progress=False)


def test_a_nan_in_a_batch_stops_bc_with_exit_1_and_its_last_checkpoint_intact(demos_dir, tmp_path, monkeypatch,
                                                                             capsys):
    run_dir = tmp_path / "run"
    bc.BCRun(small_config(demos_dir, run_dir)).run(progress=False, until=1)
    saved = (run_dir / "checkpoints" / "last.pt").read_bytes()
    original = bc._to_device

    def poisoned(batch, device, shift_pad, **augmentation):
        batch = original(batch, device, shift_pad, **augmentation)
        batch.set(keys.JOINT_STATE, batch.get(keys.JOINT_STATE) * float("nan"))
        return batch

    monkeypatch.setattr(bc, "_to_device", poisoned)
    assert main(["pretrain", "--resume", str(run_dir)]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]  # after the progress bar
    assert "robot-rl pretrain: stopped: epoch 2, step 5: BC loss is nan" in err
    assert f"last checkpoint kept ({run_dir / 'checkpoints' / 'last.pt'})" in err
    assert (run_dir / "checkpoints" / "last.pt").read_bytes() == saved


def test_commands_run_end_to_end(tmp_path, capsys):
    data, run_dir = tmp_path / "demos", tmp_path / "run"
    assert main(["collect-demos", "--out", str(data), "--episodes", "4", "--difficulty", "easy", "--image-size",
                 "48", "--num-envs", "1"]) == 0
    assert "4 episodes" in capsys.readouterr().out
    assert main(["pretrain", "--data", str(data), "--out", str(run_dir), "--epochs", "1", "--batch-size", "8",
                 "--steps-per-epoch", "2", "--eval-episodes", "1", "--num-envs", "1", "--hidden", "16"]) == 0
    assert "closed-loop success" in capsys.readouterr().out
    assert (run_dir / "checkpoints" / "best.pt").is_file()


@pytest.mark.parametrize("args, message", [
    (["--epochs", "-1"], "--epochs must be >= 1, got -1"),
    (["--device", "tpu"], "--device: unknown device 'tpu'"),
    (["--image-size", "84"], "--image-size 84 does not match the demos"),
    (["--randomization", "strong"], "--randomization strong does not match the demos"),
    (["--data", "/nonexistent/demos"], "/nonexistent/demos: no such dataset folder"),
])
def test_bad_options_fail_before_any_work(demos_dir, tmp_path, args, message):
    argv = ["pretrain", "--data", str(demos_dir), "--out", str(tmp_path / "run"), *args]
    result = subprocess.run([sys.executable, "-m", "robot_rl.cli", *argv], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_resume_refuses_conflicting_options(demos_dir, tmp_path):
    bc.pretrain(small_config(demos_dir, tmp_path / "run", epochs=1), progress=False)
    result = subprocess.run([sys.executable, "-m", "robot_rl.cli", "pretrain", "--resume", str(tmp_path / "run"),
                             "--lr", "0.5"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 2 and "--lr 0.5 (run has 0.0003)" in result.stderr


def test_resume_refuses_an_option_given_at_its_default_that_the_run_does_not_have(demos_dir, tmp_path, capsys):
    bc.pretrain(small_config(demos_dir, tmp_path / "run", epochs=1, lr=1e-3), progress=False)
    assert main(["pretrain", "--resume", str(tmp_path / "run"), "--lr", str(BCConfig.lr)]) == 2
    assert f"--lr {BCConfig.lr} (run has 0.001)" in capsys.readouterr().err


def test_joint_scaling_by_the_demos_and_a_continue_head_reach_the_checkpoint_and_the_exports(demos_dir, tmp_path):
    from robot_rl.configs import ExportConfig
    from robot_rl.export import deployed_policy, export
    from robot_rl.policy import actor_network
    from robot_rl.policy_io import load_actor

    config = small_config(demos_dir, tmp_path / "run", epochs=1, joint_velocities=True, joint_scaling="demos",
                          continue_head=True)
    run = bc.BCRun(config)
    states = run.dataset.split(config.val_fraction)[0][keys.JOINT_STATE].double()
    encoder = actor_network(run.actor).encoder
    assert torch.allclose(encoder.joint_centre, states.mean(0).float())
    assert torch.allclose(encoder.joint_half_range, states.std(0).clamp_min(0.01).float())
    velocities = slice(states.shape[1] // 2, None)
    assert (encoder.joint_half_range[velocities] < 1.0).all()  # the spec bound would be 2 pi
    run.run(progress=False)
    loaded = actor_network(load_actor(tmp_path / "run")[0]).encoder
    assert torch.equal(loaded.joint_centre, encoder.joint_centre)
    assert torch.equal(loaded.joint_half_range, encoder.joint_half_range)
    assert actor_network(load_actor(tmp_path / "run")[0]).heads.answer_now_net is not None
    written = export(ExportConfig(checkpoint=str(tmp_path / "run"), out=str(tmp_path / "export"), format="torchscript"))
    policy = deployed_policy(tmp_path / "run")[0]
    frames = run.dataset.data[:5]
    pixels, joints = frames[keys.PIXELS], frames[keys.JOINT_STATE].float()
    with torch.no_grad():
        pose, verdict = torch.jit.load(written["torchscript"])(pixels, joints)
        reference_pose, reference_verdict = policy(pixels, joints)
    assert (pose - reference_pose).abs().max() < 1e-5 and torch.equal(verdict, reference_verdict)
