"""The fine-tuning loss terms, the privileged critic and the scratch verdict bias, on the toy env of test_learning."""

from __future__ import annotations

import copy

import pytest
import torch
from tensordict import TensorDict
from torchrl.collectors import Collector

from robot_rl import keys
from robot_rl.envs.torchrl_env import InspectionEnv
from robot_rl.finetune.critic import make_privileged_critic
from robot_rl.finetune.loss import anchor_parameters, verdict_targets
from robot_rl.finetune.trainer import PPOLearner
from robot_rl.policy import PolicyConfig, make_actor, set_continue_probability

from .test_learning import ToyInspectionEnv, toy_config, toy_models


def prepared_batch(**overrides):
    env = ToyInspectionEnv(seed=3)
    actor, critic = toy_models(env)
    config = toy_config(**overrides)
    learner = PPOLearner(config, actor, critic, [{"params": list(actor.parameters()), "lr": config.lr}])
    collector = Collector(env, actor, frames_per_batch=256, total_frames=256, auto_register_policy_transforms=False)
    batch = next(iter(collector))
    collector.shutdown()
    return learner, learner.prepare(batch, iteration=0)


def test_verdict_targets_follow_the_reward():
    verdict = torch.tensor([1, 1, 2, 2])
    reward = torch.tensor([1.0, -1.0, 1.0, -1.0])
    assert verdict_targets(verdict, reward).tolist() == [0, 1, 1, 0]  # indices into (pass, rework)


@pytest.mark.parametrize("masked", [True, False])
def test_the_pose_of_a_verdict_step_leaves_the_ratio_alone_when_masked(masked):
    learner, flat = prepared_batch(mask_verdict_pose=masked)
    answered = flat[flat.get(keys.VERDICT) != 0][:64]
    assert answered.shape[0] > 10
    reference = learner.loss(answered)
    moved = answered.clone()
    moved.set(keys.POSE, (moved.get(keys.POSE) * 0.5).detach())  # another pose, same stored log-prob
    changed = learner.loss(moved)
    same = torch.allclose(reference["loss_objective"], changed["loss_objective"])
    assert same is masked


def test_with_its_additions_off_the_loss_is_torchrls_clip_ppo_loss():
    # Pins what FinetunePPOLoss overrides (_get_cur_log_prob, forward) to ClipPPOLoss's own terms.
    from torchrl.objectives import ClipPPOLoss

    learner, flat = prepared_batch(mask_verdict_pose=False, verdict_ce_weight=0.0)
    minibatch = flat[:128].exclude(keys.ANCHOR)
    torch.manual_seed(0)  # the TanhNormal's entropy is a Monte-Carlo estimate: the same draws for both
    ours = learner.loss(minibatch.clone())
    torch.manual_seed(0)
    reference = ClipPPOLoss(learner.loss.actor_network, learner.loss.critic_network,
                            clip_epsilon=learner.config.clip_epsilon,
                            entropy_coeff=learner.config.entropy_coeff, critic_coeff=learner.config.critic_coeff,
                            normalize_advantage=True, functional=False)(minibatch.clone())
    for name in ("loss_objective", "loss_critic", "loss_entropy", "kl_approx", "clip_fraction"):
        torch.testing.assert_close(ours[name], reference[name], msg=name)
    assert not {"loss_anchor", "loss_verdict_ce"} & set(ours.keys())


def test_verdict_cross_entropy_pulls_towards_the_rewarded_class():
    learner, flat = prepared_batch(verdict_ce_weight=1.0)
    out = learner.loss(flat[:128])
    assert out["loss_verdict_ce"] > 0
    off = prepared_batch(verdict_ce_weight=0.0)[0].loss(flat[:128])
    assert "loss_verdict_ce" not in off.keys()


def with_localized(batch, localized: torch.Tensor):
    """``batch`` with the env's per-frame ``localized`` flag set (the toy env has no view)."""
    batch = batch.clone()
    batch.set(keys.LOCALIZED, localized.reshape(*batch.shape, 1))
    return batch


def continue_probability(learner, batch) -> torch.Tensor:
    params = learner.loss.actor_network.get_dist_params(batch.clone())
    return params.get((*keys.VERDICT_PARAMS, "logits")).softmax(-1)[..., 0]


def test_the_guess_cross_entropy_teaches_continue_on_guesses_only():
    learner, flat = prepared_batch(guess_ce_weight=1.0, verdict_ce_weight=0.0)
    minibatch = flat[:128]
    answered = minibatch.get(keys.VERDICT) != 0
    assert 0 < answered.sum() < 128
    at_view = with_localized(minibatch, torch.ones(128, dtype=torch.bool))
    assert learner.loss(at_view)["loss_guess_ce"] == 0  # verdicts at the view are looks, not guesses
    kept_looking = with_localized(minibatch[~answered], torch.zeros(int((~answered).sum()), dtype=torch.bool))
    assert learner.loss(kept_looking)["loss_guess_ce"] == 0  # away from the view but no verdict: nothing to teach
    guesses = with_localized(minibatch[answered], torch.zeros(int(answered.sum()), dtype=torch.bool))
    assert learner.loss(guesses)["loss_guess_ce"] > 0
    before = continue_probability(learner, guesses)
    optimizer = torch.optim.SGD(learner.loss.actor_network.parameters(), lr=0.1)
    for _ in range(20):
        optimizer.zero_grad()
        learner.loss(guesses)["loss_guess_ce"].backward()
        optimizer.step()
    assert continue_probability(learner, guesses).mean() > before.mean() + 0.05


def test_the_guess_cross_entropy_is_off_by_default_and_needs_the_flag():
    learner, flat = prepared_batch()
    assert "loss_guess_ce" not in learner.loss(flat[:128]).keys()
    learner, flat = prepared_batch(guess_ce_weight=1.0)
    with pytest.raises(KeyError, match="localized"):
        learner.loss(flat[:128])


def test_anchor_is_zero_at_the_start_and_grows_as_the_policy_moves():
    env = ToyInspectionEnv(seed=4)
    actor, critic = toy_models(env)
    start = copy.deepcopy(actor).requires_grad_(False)
    config = toy_config(anchor_weight=1.0, from_scratch=False, init="unused", lr=1e-2)
    learner = PPOLearner(config, actor, critic, [{"params": list(actor.parameters()), "lr": config.lr}],
                         anchor_actor=start)
    collector = Collector(env, actor, frames_per_batch=256, total_frames=256, auto_register_policy_transforms=False)
    batch = next(iter(collector))
    collector.shutdown()
    first = learner.update(batch.clone(), iteration=0)
    assert first["train/anchor_weight"] == 1.0 and first["train/loss_anchor"] >= 0
    later = learner.update(batch.clone(), iteration=1)
    assert later["train/anchor_kl"] > 1e-4  # the policy moved away from its start
    assert learner.anchor_weight(iteration=3) == pytest.approx(config.anchor_decay**3)


def test_privileged_critic_reads_the_task_state_not_the_pixels():
    env = InspectionEnv(difficulty="easy", image_size=48)
    critic = make_privileged_critic(env.observation_spec, hidden=16)
    td = env.reset()
    value = critic(td.clone()).get(keys.STATE_VALUE)
    assert value.shape == (1,)
    other_pixels = td.clone()
    other_pixels.set(keys.PIXELS, torch.zeros_like(td.get(keys.PIXELS)))
    assert torch.equal(critic(other_pixels).get(keys.STATE_VALUE), value)
    moved_board = td.clone()
    moved_board.set(keys.BOARD_POSE, td.get(keys.BOARD_POSE) + 0.05)
    assert not torch.equal(critic(moved_board).get(keys.STATE_VALUE), value)


@pytest.mark.parametrize("temperature, floor", [(1.0, 0.0), (0.25, 0.1)], ids=["plain", "factored"])
def test_continue_bias_makes_a_fresh_head_keep_looking(temperature, floor):
    env = InspectionEnv(difficulty="easy", image_size=48)
    config = PolicyConfig(answer_temperature=temperature, continue_floor=floor)  # holds at the head's temperature
    actor = make_actor(env.observation_spec, env.full_action_spec, config).eval()
    set_continue_probability(actor, 0.97)
    batch = TensorDict({keys.PIXELS: torch.randint(0, 255, (16, 48, 48, 3), dtype=torch.uint8),
                        keys.JOINT_STATE: torch.randn(16, 12)}, [16])
    with torch.no_grad():
        logits = actor.module[0](batch).get((*keys.VERDICT_PARAMS, "logits"))
    continue_prob = logits.softmax(-1)[:, 0]
    assert torch.allclose(continue_prob, torch.full_like(continue_prob, 0.97), atol=0.02)


def test_anchor_parameters_run_in_chunks_with_the_same_result():
    learner, flat = prepared_batch()
    actor = learner.loss.actor_network
    whole = anchor_parameters(actor, flat[:40], chunk=1024)
    calls = []
    hook = actor.module[0].register_forward_hook(lambda module, args, out: calls.append(out.shape[0]))
    chunked = anchor_parameters(actor, flat[:40], chunk=16)
    hook.remove()
    assert calls == [16, 16, 8]
    assert (whole == chunked).all()
