"""The vision policy: shapes and keys from the env specs, log-probs, deterministic mode, critic."""

from __future__ import annotations

import pytest
import torch
from tensordict.nn import InteractionType, set_interaction_type

from robot_rl import keys
from robot_rl.envs.torchrl_env import InspectionEnv
from robot_rl.policy import PolicyConfig, actor_encoder, make_actor


@pytest.fixture(scope="module")
def env():
    return InspectionEnv(difficulty="easy", image_size=64, num_envs=3, seed=0)


def test_actor_outputs_actions_and_log_probs_for_a_batch(env):
    actor = make_actor(env.observation_spec, env.full_action_spec)
    td = env.reset()
    with torch.no_grad():
        td = actor(td)
    assert td[keys.POSE].shape == (3, 6) and td[keys.POSE].dtype == torch.float32
    assert (td[keys.POSE].abs() < 1).all()
    assert td[keys.VERDICT].shape == (3,) and td[keys.VERDICT].dtype == torch.int64
    assert td[keys.POSE_LOG_PROB].shape == (3,) and td[keys.VERDICT_LOG_PROB].shape == (3,)
    recomputed = actor.get_dist(td).log_prob(td.select(keys.POSE, keys.VERDICT))
    torch.testing.assert_close(recomputed[keys.POSE_LOG_PROB], td[keys.POSE_LOG_PROB])
    torch.testing.assert_close(recomputed[keys.VERDICT_LOG_PROB], td[keys.VERDICT_LOG_PROB])
    assert env.action_spec_unbatched[keys.POSE].is_in(td[keys.POSE][0])
    # The policy never reads the privileged task state.
    assert not any(key[0] == keys.TASK for key in actor.in_keys if isinstance(key, tuple))


def test_deterministic_mode_is_tanh_of_the_mean_and_the_most_likely_verdict(env):
    actor = make_actor(env.observation_spec, env.full_action_spec)
    td = env.reset()
    with torch.no_grad(), set_interaction_type(InteractionType.DETERMINISTIC):
        out = actor(td.clone())
        again = actor(td.clone())
    torch.testing.assert_close(out[keys.POSE], torch.tanh(out[(*keys.POSE_PARAMS, "loc")]))
    assert torch.equal(out[keys.VERDICT], out[(*keys.VERDICT_PARAMS, "logits")].argmax(-1))
    assert torch.equal(out[keys.POSE], again[keys.POSE])


def test_pose_scale_is_bounded_below(env):
    actor = make_actor(env.observation_spec, env.full_action_spec, PolicyConfig(min_scale=0.2))
    with torch.no_grad():
        td = actor(env.reset())
    assert (td[(*keys.POSE_PARAMS, "scale")] >= 0.2).all()


def test_the_pose_scale_factor_keeps_a_share_of_the_learned_scale_and_leaves_the_mean_alone(env):
    from robot_rl.configs import FinetuneConfig
    from robot_rl.finetune.models import starting_point

    full = make_actor(env.observation_spec, env.full_action_spec, PolicyConfig(min_scale=0.05))
    tenth = make_actor(env.observation_spec, env.full_action_spec, PolicyConfig(min_scale=0.05, pose_scale_factor=0.1))
    tenth.load_state_dict(full.state_dict())
    td = env.reset()
    with torch.no_grad():
        a, b = full(td.clone()), tenth(td.clone())
    loc, scale = (*keys.POSE_PARAMS, "loc"), (*keys.POSE_PARAMS, "scale")
    torch.testing.assert_close(b[loc], a[loc])
    torch.testing.assert_close(b[scale] - 0.05, 0.1 * (a[scale] - 0.05))
    assert (a[scale] - 0.05 > 1e-3).all()  # a learned part there was to scale
    # Fine-tuning's option reaches the policy it builds; BC's policies keep all of it.
    assert starting_point(FinetuneConfig(from_scratch=True, pose_scale_factor=0.2))[1].pose_scale_factor == 0.2
    assert PolicyConfig().pose_scale_factor == 1.0
    with pytest.raises(ValueError, match="pose_scale_factor"):
        PolicyConfig(pose_scale_factor=0.0)


def test_encoder_weights_load_from_a_local_file(env, tmp_path):
    import torchvision

    reference = torchvision.models.resnet18(weights=None)
    torch.save(reference.state_dict(), tmp_path / "resnet18.pt")
    actor = make_actor(env.observation_spec, env.full_action_spec,
                       PolicyConfig(encoder_weights=str(tmp_path / "resnet18.pt")))
    loaded = actor_encoder(actor).image.trunk
    torch.testing.assert_close(loaded.conv1.weight, reference.conv1.weight)
    torch.save({"not": torch.zeros(1)}, tmp_path / "bad.pt")
    with pytest.raises(ValueError, match="not a ResNet18 state dict"):
        make_actor(env.observation_spec, env.full_action_spec, PolicyConfig(encoder_weights=str(tmp_path / "bad.pt")))


def test_a_continue_head_decides_when_to_answer_alone_and_takes_the_continue_bias(env):
    from robot_rl.policy import actor_network, set_continue_probability
    from robot_rl.policy_io import checkpoint_policy_config

    actor = make_actor(env.observation_spec, env.full_action_spec, PolicyConfig(continue_head=True))
    heads = actor_network(actor).heads
    assert heads.net[-1].out_features == 12 + 2 and heads.answer_now_net[-1].out_features == 1
    td = env.reset()
    with torch.no_grad():
        before = actor(td.clone())
        heads.answer_now_net[-1].bias += 2.0  # answers now more often; pose and which answer unchanged
        after = actor(td.clone())
        heads.net[-1].bias[12:] += torch.tensor([3.0, -3.0])  # which answer moves; when to answer does not
        tilted = actor(td.clone())
    torch.testing.assert_close(after[(*keys.POSE_PARAMS, "loc")], before[(*keys.POSE_PARAMS, "loc")])
    p_before, p_after, p_tilted = (out[(*keys.VERDICT_PARAMS, "logits")].softmax(-1) for out in (before, after, tilted))
    answer_now = (1 - p_before[:, 0]).logit()
    torch.testing.assert_close((1 - p_after[:, 0]).logit(), answer_now + 2.0)
    torch.testing.assert_close(p_after[:, 1] / p_after[:, 2], p_before[:, 1] / p_before[:, 2])
    torch.testing.assert_close(p_tilted[:, 0], p_after[:, 0])
    assert (p_tilted[:, 1] / p_tilted[:, 2] > p_after[:, 1] / p_after[:, 2]).all()
    set_continue_probability(actor, 0.97)
    with torch.no_grad():
        logits = actor(td.clone())[(*keys.VERDICT_PARAMS, "logits")]
    torch.testing.assert_close(logits.softmax(-1)[:, 0], torch.full((3,), 0.97), atol=0.01, rtol=0)
    # A checkpoint's architecture without the option (written before it existed) builds the shared head.
    stored = {k: v for k, v in PolicyConfig().__dict__.items() if k != "continue_head"}
    assert checkpoint_policy_config({"policy_config": stored}).continue_head is False
