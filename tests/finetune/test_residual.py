"""PPO's residual on a frozen BC policy: starts as the BC policy, trains the residual alone, loads and exports."""

from __future__ import annotations

import pytest
import torch

from robot_rl import keys
from robot_rl.checkpoints import load_checkpoint
from robot_rl.cli import main
from robot_rl.policy import PolicyConfig, ResidualActorHeads, actor_network, load_pretrained_weights, make_actor
from robot_rl.policy_io import load_actor


def _actors(residual_scale: float):
    from robot_rl.envs.torchrl_env import proof_env

    env = proof_env("easy", 32)
    torch.manual_seed(0)
    plain = make_actor(env.observation_spec, env.full_action_spec, PolicyConfig(hidden=16, keypoints=0))
    residual = make_actor(env.observation_spec, env.full_action_spec,
                          PolicyConfig(hidden=16, keypoints=0, residual_scale=residual_scale))
    return env, plain, residual


def test_a_residual_actor_starts_as_the_policy_it_corrects_and_trains_the_residual_only():
    env, plain, residual = _actors(0.1)
    load_pretrained_weights(residual, plain.state_dict())
    heads = actor_network(residual).heads
    assert isinstance(heads, ResidualActorHeads)
    trained = {name for name, p in residual.named_parameters() if p.requires_grad}
    assert trained and all(".heads.residual." in name for name in trained)
    td = env.reset()
    plain.eval(), residual.eval()
    with torch.no_grad():
        assert torch.equal(actor_network(plain)(td[keys.PIXELS], td[keys.JOINT_STATE])[0],
                           actor_network(residual)(td[keys.PIXELS], td[keys.JOINT_STATE])[0])
        heads.residual[-1].bias.fill_(100.0)  # the correction is bounded by the scale, whatever the MLP says
        base_loc = actor_network(plain)(td[keys.PIXELS], td[keys.JOINT_STATE])[0]
        loc = actor_network(residual)(td[keys.PIXELS], td[keys.JOINT_STATE])[0]
    assert torch.allclose(loc - base_loc, torch.full_like(loc, 0.1))


def test_weights_of_another_architecture_are_refused():
    _, plain, residual = _actors(0.1)
    with pytest.raises(RuntimeError, match="do not fit"):
        load_pretrained_weights(plain, residual.state_dict())


def test_finetune_with_a_residual_keeps_the_bc_heads_and_its_checkpoint_loads(bc_run_dir, tmp_path):
    ppo = tmp_path / "ppo"
    assert main(["finetune", "--policy", str(bc_run_dir), "--out", str(ppo), "--residual-scale", "0.2",
                 "--total-frames", "64", "--frames-per-batch", "32", "--num-envs", "2", "--minibatch-size", "16",
                 "--ppo-epochs", "1", "--eval-every", "0", "--critic-warmup", "0", "--threads", "2",
                 "--critic-hidden", "16"]) == 0
    bc_state = load_checkpoint(bc_run_dir / "checkpoints" / "last.pt")["actor"]
    state = load_checkpoint(ppo / "checkpoints" / "last.pt")
    assert state["policy_config"]["residual_scale"] == 0.2
    for name, value in bc_state.items():
        assert torch.equal(state["actor"][name], value), name  # the BC policy itself is untouched
    assert any(".heads.residual." in name and value.abs().sum() > 0 for name, value in state["actor"].items())
    actor, _, _ = load_actor(ppo)
    assert isinstance(actor_network(actor).heads, ResidualActorHeads)
    assert main(["export", "--policy", str(ppo), "--format", "safetensors"]) == 0
    exported, _, _ = load_actor(ppo / "export")
    assert all(torch.equal(exported.state_dict()[k], v) for k, v in actor.state_dict().items())


def test_a_residual_needs_a_policy_to_correct(tmp_path, capsys):
    assert main(["finetune", "--from-scratch", "--residual-scale", "0.1", "--out", str(tmp_path / "ppo")]) == 2
    assert "--residual-scale" in capsys.readouterr().err
