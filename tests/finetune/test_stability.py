"""What keeps fine-tuning stable and makes its lift fast: the factored verdict, the KL stop, the anchor floor."""

from __future__ import annotations

from unittest.mock import patch

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import InteractionType, set_interaction_type
from torch.distributions import Categorical
from torchrl.collectors import Collector

from robot_rl import keys
from robot_rl.finetune import trainer
from robot_rl.finetune.trainer import PPOLearner
from robot_rl.policy import PolicyConfig, factored_verdict_logits, make_feature_actor
from robot_rl.training_run import gradient_step

from .test_learning import FEATURES, ToyInspectionEnv, make_wrong_and_confident, toy_config, toy_models


def test_factored_verdict_at_temperature_one_is_the_plain_softmax():
    logits = torch.randn(64, 3) * 3
    assert torch.allclose(factored_verdict_logits(logits, 1.0), logits.log_softmax(-1), atol=1e-6)


def test_a_low_answer_temperature_sharpens_when_to_answer_not_which_answer():
    logits = torch.randn(256, 3) * 2
    plain, sharp = logits.softmax(-1), factored_verdict_logits(logits, 0.25).exp()
    assert torch.allclose(sharp.sum(-1), torch.ones(256), atol=1e-5)
    answer_logit = (plain[:, 1:].sum(-1) / plain[:, 0]).log()
    assert torch.allclose(1 - sharp[:, 0], torch.sigmoid(answer_logit / 0.25), atol=1e-5)
    # Which answer, given one: unchanged.
    assert torch.allclose(sharp[:, 1] / sharp[:, 1:].sum(-1), plain[:, 1] / plain[:, 1:].sum(-1), atol=1e-5)
    # Unsure heads stay unsure; sure ones become surer, on the side they were already on.
    sure = answer_logit.abs() > 1
    assert ((sharp[sure, 0] - 0.5).abs() > (plain[sure, 0] - 0.5).abs()).all()


def test_sampled_verdicts_carry_the_exact_log_prob_of_the_factored_head():
    torch.manual_seed(0)
    actor = make_feature_actor(FEATURES, ToyInspectionEnv().full_action_spec,
                               PolicyConfig(hidden=16, answer_temperature=0.3, continue_floor=0.1))
    td = TensorDict({keys.FEATURES: torch.randn(512, FEATURES)}, [512])
    with torch.no_grad(), set_interaction_type(InteractionType.RANDOM):
        out = actor(td)
    raw = actor.module[0].module.net(td.get(keys.FEATURES))[:, -3:]
    expected = Categorical(logits=factored_verdict_logits(raw, 0.3, 0.1)).log_prob(out.get(keys.VERDICT))
    assert torch.allclose(out.get(keys.VERDICT_LOG_PROB), expected, atol=1e-5)


def _update(target_kl: float) -> tuple[dict, dict]:
    """One update of a confidently wrong toy policy at a large learning rate; (metrics, optimizer steps taken)."""
    env = ToyInspectionEnv(seed=5)
    actor, critic = toy_models(env)
    make_wrong_and_confident(actor)
    config = toy_config(lr=3e-2, ppo_epochs=8, target_kl=target_kl)
    learner = PPOLearner(config, actor, critic, [{"params": list(actor.parameters()), "lr": config.lr}])
    collector = Collector(env, actor, frames_per_batch=256, total_frames=256, auto_register_policy_transforms=False)
    batch = next(iter(collector))
    collector.shutdown()
    steps = {"actor": 0, "critic": 0}

    def counting_step(loss, optimizer, parameters, grad_clip, what, **kwargs):
        steps[what] += 1
        return gradient_step(loss, optimizer, parameters, grad_clip, what, **kwargs)

    with patch.object(trainer, "gradient_step", counting_step):
        return learner.update(batch, iteration=0), steps


def test_the_kl_target_stops_the_actors_epochs_once_the_policy_has_moved():
    metrics, steps = _update(target_kl=0.0)
    planned = 8 * 256 // 64
    assert metrics["train/actor_update_fraction"] == 1.0 and steps == {"actor": planned, "critic": planned}
    metrics, steps = _update(target_kl=1e-3)
    # The first step always runs (ratio 1, KL 0); a later one stops the actor. The critic goes on.
    assert 1 <= steps["actor"] < planned and steps["critic"] == planned
    assert metrics["train/actor_update_fraction"] == steps["actor"] / planned


def test_the_anchor_weight_decays_to_its_floor_and_stays_there():
    env = ToyInspectionEnv()
    actor, critic = toy_models(env)
    config = toy_config(anchor_weight=1.0, anchor_decay=0.9, anchor_floor=0.2, critic_warmup=2, from_scratch=False,
                        init="unused")
    learner = PPOLearner(config, actor, critic, [{"params": list(actor.parameters()), "lr": config.lr}],
                         anchor_actor=actor)
    assert learner.anchor_weight(iteration=3) == pytest.approx(0.9)
    assert learner.anchor_weight(iteration=30) == learner.anchor_weight(iteration=3000) == pytest.approx(0.2)


@pytest.mark.parametrize("option, value", [("anchor_floor", 2.0), ("target_kl", -1.0), ("answer_temperature", 0.0)])
def test_stability_options_are_validated(option, value):
    with pytest.raises(ValueError, match="--" + option.replace("_", "-")):
        toy_config(anchor_weight=1.0, from_scratch=False, init="unused", **{option: value})


def test_the_continue_floor_keeps_sure_answers_questioned():
    logits = torch.tensor([[-9.0, 4.0, 0.0], [9.0, -4.0, -4.0]])  # a sure answer; a sure "continue"
    probs = factored_verdict_logits(logits, 0.25, continue_floor=0.1).exp()
    assert torch.allclose(probs.sum(-1), torch.ones(2), atol=1e-6)
    assert probs[0, 0] == pytest.approx(0.1, abs=1e-4) and probs[1, 0] == pytest.approx(1.0, abs=1e-4)
