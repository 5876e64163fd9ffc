"""PPO fine-tuning: a tiny run logs every metric; warm-up freezes the actor; resume is exact; NaN is caught."""

from __future__ import annotations

import pytest
import torch

from robot_rl import keys
from robot_rl.checkpoints import load_checkpoint
from robot_rl.cli import main
from robot_rl.configs import FinetuneConfig
from robot_rl.finetune import trainer


def tiny(run_dir, init="", **overrides) -> FinetuneConfig:
    values = dict(run_dir=str(run_dir), init=str(init), from_scratch=not init, total_frames=96, frames_per_batch=32,
                  num_envs=2, minibatch_size=16, ppo_epochs=1, eval_every=0, eval_episodes=2, critic_warmup=1,
                  checkpoint_every=1, threads=2, critic_hidden=16, anchor_weight=1.0 if init else 0.0)
    if not init:
        values.update(difficulty="easy", image_size=48)
    values.update(overrides)
    return FinetuneConfig(**values)


def csv_steps(run_dir, name) -> list[int]:
    path = run_dir / "logs" / "scalars" / f"{name}.csv"
    return [int(line.split(",")[0]) for line in path.read_text().split()]


LOGGED = ["train/loss_objective", "train/loss_critic", "train/loss_entropy", "train/entropy", "train/kl_approx",
          "train/clip_fraction", "train/loss_anchor", "train/anchor_kl", "train/success_rate",
          "train/collisions_per_episode", "train/episode_length", "train/frames_per_s", "train/guess_rate",
          "train/loss_verdict_ce", "train/explained_variance", "train/max_ratio", "eval/success_rate",
          "eval/guess_rate", "eval/verdict_accuracy", "eval/collisions_per_episode", "eval/episode_length",
          "eval/success_ci95_low", "eval/success_ci95_high"] + [
          f"reward/{term}" for term in keys.REWARD_TERM_NAMES]


def test_a_tiny_run_from_bc_logs_every_metric(bc_run_dir, tmp_path, capsys):
    run_dir = tmp_path / "ppo"
    args = ["finetune", "--policy", str(bc_run_dir), "--out", str(run_dir), "--total-frames", "96",
            "--frames-per-batch", "32", "--num-envs", "2", "--minibatch-size", "16", "--ppo-epochs", "1",
            "--eval-every", "1", "--eval-episodes", "2", "--critic-warmup", "1", "--threads", "2",
            "--anchor-weight", "1"]  # (off by default; on here, so its terms are logged too)
    assert main(args) == 0
    assert "96 frames, 3 iterations" in capsys.readouterr().out
    for name in LOGGED:
        assert (run_dir / "logs" / "scalars" / f"{name}.csv").is_file(), name
    assert csv_steps(run_dir, "eval/success_rate") == [0, 32, 64, 96]
    state = load_checkpoint(run_dir / "checkpoints" / "last.pt")
    assert state["frames"] == 96 and state["iteration"] == 3 and state["kind"] == "ppo"
    # best.pt: the first check with the highest held-out success (iteration 0 is the BC start).
    curve = state["curve"]
    first_best = max(range(len(curve)), key=lambda i: (curve[i]["success_rate"], -i))
    best = load_checkpoint(run_dir / "checkpoints" / "best.pt")
    assert best["iteration"] == curve[first_best]["iteration"] == state["best"]["iteration"]
    # info reads where the checks stop rising as the PPO benchmarks read their seeds' curves
    from robot_rl.learning_curves import stop_text, where_it_stops

    assert main(["info", str(run_dir)]) == 0
    reading = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("curve:"))
    assert reading.split(":", 1)[1].strip() == stop_text(where_it_stops([curve], 2))


def test_critic_warmup_leaves_the_actor_unchanged(bc_run_dir, tmp_path):
    run = trainer.PPORun(tiny(tmp_path / "ppo", init=bc_run_dir, critic_warmup=2))
    try:
        before = {k: v.clone() for k, v in run.actor.state_dict().items()}
        critic_before = {k: v.clone() for k, v in run.critic.state_dict().items()}
        run.run(progress=False, until=2)
        for name, tensor in run.actor.state_dict().items():
            assert torch.equal(tensor, before[name]), name
        assert any(not torch.equal(t, critic_before[k]) for k, t in run.critic.state_dict().items())
    finally:
        run.close()


def test_resume_continues_the_frame_counter_and_reproduces_the_next_iteration(tmp_path):
    straight = trainer.PPORun(tiny(tmp_path / "straight"))
    try:
        straight.run(progress=False)
    finally:
        straight.close()
    interrupted = trainer.PPORun(tiny(tmp_path / "resumed"))
    try:
        interrupted.run(progress=False, until=2)  # stands for a run killed after iteration 2
    finally:
        interrupted.close()
    torch.manual_seed(99)  # whatever happened in between
    trainer.resume(tmp_path / "resumed", progress=False)
    assert csv_steps(tmp_path / "resumed", "train/loss_critic") == [32, 64, 96]
    for name in ("train/loss_objective", "train/loss_critic", "train/entropy"):
        a = (tmp_path / "straight" / "logs" / "scalars" / f"{name}.csv").read_text().split()[-1]
        b = (tmp_path / "resumed" / "logs" / "scalars" / f"{name}.csv").read_text().split()[-1]
        assert a == b, (name, a, b)
    sa = load_checkpoint(tmp_path / "straight" / "checkpoints" / "last.pt")
    sb = load_checkpoint(tmp_path / "resumed" / "checkpoints" / "last.pt")
    assert sa["frames"] == sb["frames"] == 96
    for name, tensor in sa["actor"].items():
        assert torch.equal(tensor, sb["actor"][name]), name


def test_a_nan_loss_stops_the_update_and_keeps_the_last_checkpoint(tmp_path, monkeypatch):
    run = trainer.PPORun(tiny(tmp_path / "ppo", critic_warmup=0))
    try:
        run.run(progress=False, until=1)
        saved = (tmp_path / "ppo" / "checkpoints" / "last.pt").read_bytes()
        original = trainer.FinetunePPOLoss.forward

        def poisoned(self, tensordict):
            out = original(self, tensordict)
            out.set("loss_objective", out.get("loss_objective") * float("nan"))
            return out

        monkeypatch.setattr(trainer.FinetunePPOLoss, "forward", poisoned)
        actor_before = {k: v.clone() for k, v in run.actor.state_dict().items()}
        with pytest.raises(trainer.TrainingDiverged, match="actor loss is nan"):
            run.run(progress=False, until=2)
        assert (tmp_path / "ppo" / "checkpoints" / "last.pt").read_bytes() == saved
        for name, tensor in run.actor.state_dict().items():
            assert torch.equal(tensor, actor_before[name]), name
    finally:
        run.close()


def test_a_nan_in_a_collected_batch_stops_ppo_with_exit_1_and_its_last_checkpoint_intact(tmp_path, monkeypatch,
                                                                                        capsys):
    run = trainer.PPORun(tiny(tmp_path / "ppo", critic_warmup=0))
    try:
        run.run(progress=False, until=1)
    finally:
        run.close()
    last = tmp_path / "ppo" / "checkpoints" / "last.pt"
    saved = last.read_bytes()
    original = trainer.PPORun._collect

    def poisoned(self, iterator):
        batch = original(self, iterator)
        batch.set(("next", "reward"), batch.get(("next", "reward")) * float("nan"))
        return batch

    monkeypatch.setattr(trainer.PPORun, "_collect", poisoned)
    assert main(["finetune", "--resume", str(tmp_path / "ppo")]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "robot-rl finetune: stopped: iteration 2:" in err and "is nan" in err
    assert f"last checkpoint kept ({last})" in err
    assert last.read_bytes() == saved


def test_resume_refuses_a_run_dir_with_another_config(tmp_path, capsys):
    config = tiny(tmp_path / "ppo", total_frames=32)
    trainer.finetune(config, progress=False)
    code = main(["finetune", "--resume", str(tmp_path / "ppo"), "--clip-epsilon", "0.3"])
    assert code == 2 and "--clip-epsilon 0.3 (run has 0.2)" in capsys.readouterr().err


@pytest.mark.parametrize("args, message", [
    (["--from-scratch", "--policy", "x"], "--policy must be a BC run folder, or '' with --from-scratch"),
    (["--policy", "/nonexistent"], "--policy /nonexistent: no such run folder or checkpoint"),
    (["--from-scratch", "--num-envs", "3", "--anchor-weight", "0"], "--num-envs must be >= 1 and divide"),
])
def test_bad_options_exit_2(tmp_path, capsys, args, message):
    assert main(["finetune", "--out", str(tmp_path / "ppo"), *args]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("encoder_lr", [0.0, 1e-3])
def test_the_encoder_learns_only_with_an_encoder_learning_rate_and_the_heads_learn_either_way(tmp_path, encoder_lr):
    from robot_rl.policy import actor_network

    run = trainer.PPORun(tiny(tmp_path / "ppo", encoder_lr=encoder_lr))
    try:
        network = actor_network(run.actor)
        encoder = {k: v.clone() for k, v in network.encoder.state_dict().items()}
        heads = {k: v.clone() for k, v in network.heads.state_dict().items()}
        run.run(progress=False, until=3)  # one critic warm-up iteration, then two actor updates
        moved = [k for k, v in network.encoder.state_dict().items() if not torch.equal(v, encoder[k])]
        assert bool(moved) == (encoder_lr > 0), moved[:3]
        assert any(not torch.equal(v, heads[k]) for k, v in network.heads.state_dict().items())
    finally:
        run.close()
