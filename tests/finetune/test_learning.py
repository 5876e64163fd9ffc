"""The project's PPO update learns: a toy TensorDict env with the inspection task's composite action, no rendering.

The toy board is a feature vector whose first entry's sign says whether it needs rework; any verdict ends the
episode with +1 (right) or -1 (wrong); "continue" for 4 steps times out. The policy starts wrong but confident.
"""

from __future__ import annotations

import copy

import pytest
import torch
from tensordict import TensorDict, TensorDictBase
from torch import nn
from torchrl.collectors import Collector
from torchrl.data import Bounded, Categorical, Composite, Unbounded
from torchrl.envs import EnvBase
from torchrl.modules import ValueOperator

from robot_rl import keys
from robot_rl.configs import FinetuneConfig
from robot_rl.finetune.trainer import PPOLearner
from robot_rl.policy import PolicyConfig, make_feature_actor

FEATURES = 8
MAX_STEPS = 4


class ToyInspectionEnv(EnvBase):
    """One board per episode: features ~ N(0, 1); defective iff features[0] > 0. Verdicts 1 pass, 2 rework."""

    def __init__(self, seed: int = 0):
        super().__init__(batch_size=torch.Size([]))
        self.observation_spec = Composite({keys.FEATURES: Unbounded((FEATURES,)),
                                           keys.SUCCESS: Unbounded((1,), dtype=torch.bool),
                                           keys.REWARD_TERMS: Composite(verdict=Unbounded((1,)))})
        self.action_spec = Composite({keys.ACTION: Composite(pose=Bounded(-1.0, 1.0, (6,)),
                                                             verdict=Categorical(3, shape=(), dtype=torch.int64))})
        self.reward_spec = Unbounded((1,))
        self._generator = torch.Generator().manual_seed(seed)

    def _observation(self, reward: float, success: bool) -> TensorDict:
        return TensorDict({keys.FEATURES: self._features, keys.SUCCESS: torch.tensor([success]),
                           keys.REWARD_TERMS: {"verdict": torch.tensor([reward])}})

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        self._features = torch.randn(FEATURES, generator=self._generator)
        self._steps = 0
        return self._observation(0.0, False).update({keys.DONE: torch.tensor([False]),
                                                     keys.TERMINATED: torch.tensor([False])})

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        verdict = int(tensordict.get(keys.VERDICT))
        self._steps += 1
        reward = 0.0
        if verdict:
            reward = 1.0 if (verdict == 2) == bool(self._features[0] > 0) else -1.0
        terminated = verdict != 0
        done = terminated or self._steps >= MAX_STEPS
        return self._observation(reward, reward > 0).update({
            keys.REWARD: torch.tensor([reward]), keys.DONE: torch.tensor([done]),
            keys.TERMINATED: torch.tensor([terminated])})

    def _set_seed(self, seed: int | None) -> None:
        self._generator.manual_seed(seed or 0)


def toy_models(env: ToyInspectionEnv):
    torch.manual_seed(0)
    actor = make_feature_actor(FEATURES, env.full_action_spec, PolicyConfig(hidden=32))
    critic = ValueOperator(nn.Sequential(nn.Linear(FEATURES, 32), nn.Tanh(), nn.Linear(32, 1)),
                           in_keys=[keys.FEATURES], out_keys=[keys.STATE_VALUE])
    return actor, critic


def make_wrong_and_confident(actor) -> None:
    """Supervised steps toward the wrong answer, given at once: 'pass' on defective boards and vice versa."""
    optimizer = torch.optim.Adam(actor.parameters(), lr=1e-2)
    for _ in range(200):
        x = torch.randn(256, FEATURES)
        wrong = torch.where(x[:, 0] > 0, 1, 2)
        logits = actor.module[0](TensorDict({keys.FEATURES: x}, [256])).get((*keys.VERDICT_PARAMS, "logits"))
        loss = nn.functional.cross_entropy(logits, wrong)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def toy_config(**overrides) -> FinetuneConfig:
    # The toy's own scale: a large learning rate, no KL stop (test_stability tests it), the plain verdict.
    values = dict(from_scratch=True, anchor_weight=0.0, total_frames=256 * 12, frames_per_batch=256,
                  minibatch_size=64, ppo_epochs=4, critic_warmup=0, lr=3e-3, critic_lr=1e-3, target_kl=0.0)
    return FinetuneConfig(**{**values, **overrides})


def success_rate(batch: TensorDictBase) -> float:
    done = batch.get((keys.NEXT, keys.DONE)).reshape(-1)
    return float(batch.get((keys.NEXT, keys.SUCCESS)).reshape(-1)[done].float().mean())


def test_ppo_turns_a_confidently_wrong_verdict_into_a_right_one():
    env = ToyInspectionEnv()
    actor, critic = toy_models(env)
    make_wrong_and_confident(actor)
    config = toy_config()
    learner = PPOLearner(config, actor, critic, [{"params": list(actor.parameters()), "lr": config.lr}])
    collector = Collector(env, actor, frames_per_batch=config.frames_per_batch, total_frames=config.total_frames,
                          auto_register_policy_transforms=False)
    rates = []
    for iteration, batch in enumerate(collector):
        rates.append(success_rate(batch))
        learner.update(batch, iteration)
        collector.update_policy_weights_()
    collector.shutdown()
    assert rates[0] <= 0.5, rates
    assert max(rates[-3:]) >= 0.9, rates


@pytest.mark.parametrize("autocast", [False, True], ids=["fp32", "bf16-autocast"])
def test_first_minibatch_has_ratio_one_and_no_anchor_kl(autocast):
    env = ToyInspectionEnv(seed=1)
    actor, critic = toy_models(env)
    make_wrong_and_confident(actor)
    start = copy.deepcopy(actor).requires_grad_(False)
    config = toy_config(anchor_weight=1.0, from_scratch=False, init="unused")
    learner = PPOLearner(config, actor, critic, [{"params": list(actor.parameters()), "lr": config.lr}],
                         anchor_actor=start, autocast=autocast)
    collector = Collector(env, actor, frames_per_batch=config.frames_per_batch, total_frames=config.frames_per_batch,
                          auto_register_policy_transforms=False)
    batch = next(iter(collector))
    collector.shutdown()
    flat = learner.prepare(batch, iteration=0)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        out = learner.loss(flat[: config.minibatch_size])
    assert float(out["max_ratio"]) == pytest.approx(1.0, abs=1e-4)
    assert float(out["mean_ratio"]) == pytest.approx(1.0, abs=1e-4)
    assert float(out["anchor_kl"]) == pytest.approx(0.0, abs=1e-6)
    assert out["loss_verdict_ce"] > 0  # the wrong verdicts are labelled by their rewards
