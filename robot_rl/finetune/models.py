"""Where a fine-tuning run starts and the networks it trains: the BC checkpoint (or none: from scratch) with its
env and architecture, the actor and its frozen start copy and the privileged critic on the run's compute context,
and the views of them that collection and the loss use.

With a frozen encoder (``config.frozen_encoder``: ``encoder_lr == 0``, the CPU default) the collection policy writes
each frame's encoder output under ``keys.FEATURES`` and the loss trains the actor's heads on those cached features,
so every PPO epoch costs a few small matrix products instead of a ResNet forward and backward per frame (end-to-end
PPO with an image critic ran ~20 frames/s on 2 cores; collection-bound PPO on cached features runs several times
faster, see ``benchmarks/ppo_throughput.py``). TorchRL has no such option: its losses always re-run the actor on
observations. The encoder stays in the collection policy, on the collection policy's device (the learner's, or the
workers' own copies with the process and Ray collectors), rather than in an env transform: a transform runs where
the envs step (CPU worker processes), which is what a GPU run must avoid.
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NamedTuple

from torchrl.modules import ProbabilisticActor, ValueOperator

from robot_rl import keys
from robot_rl.checkpoints import load_checkpoint, policy_checkpoint
from robot_rl.compute import ComputeContext
from robot_rl.configs import FinetuneConfig
from robot_rl.encoder import calibrate_batchnorm, set_encoder_precision
from robot_rl.envs import make_env
from robot_rl.envs.tasks import get_task
from robot_rl.errors import UsageError
from robot_rl.finetune import distributed
from robot_rl.finetune.critic import make_privileged_critic
from robot_rl.policy import (
    PolicyConfig,
    actor_network,
    feature_writing_actor,
    heads_actor,
    load_pretrained_weights,
    make_actor,
    rewrap_actor,
    set_continue_probability,
)
from robot_rl.policy_io import checkpoint_policy_config
from robot_rl.provenance import Provenance


def load_pretrained(run_dir: str | Path, checkpoint_kind: str = "last") -> dict:
    """The checkpoint a behaviour-cloning run folder (or file) means under ``checkpoints.policy_checkpoint``'s rule."""
    path = policy_checkpoint(run_dir, checkpoint_kind)
    if not path.is_file():
        missing = (f"no {path.relative_to(run_dir)} (not a pretrain run folder?)" if Path(run_dir).is_dir()
                   else "no such run folder or checkpoint")
        raise UsageError(f"--policy {run_dir}: {missing}")
    state = load_checkpoint(path)
    if state.get("kind") != "bc":
        raise UsageError(f"{path}: not a behaviour-cloning checkpoint (kind={state.get('kind')!r})")
    return state


class StartingPoint(NamedTuple):
    """Where a run starts: the env it trains on, the actor's architecture and the BC checkpoint (None: scratch)."""

    provenance: Provenance
    policy_config: PolicyConfig
    pretrained: dict | None


def starting_point(config: FinetuneConfig) -> StartingPoint:
    """The BC run's env, architecture and checkpoint, or fresh ones for --from-scratch. Env options given next to
    --policy must agree with the BC run's."""
    pretrained_state = load_pretrained(config.init, config.checkpoint_kind) if config.init else None
    options = {name: getattr(config, name) for name in ("task", "difficulty", "image_size", "randomization", "arm")}
    if pretrained_state is not None:
        source = f"--policy {config.init}"
        provenance = Provenance.of_checkpoint(pretrained_state, source).inherit(f"the BC run {config.init}",
                                                                                **options)
        provenance = provenance.verified(source, trust_code=config.trust_code or config.task == provenance.task)
        policy_config = checkpoint_policy_config(pretrained_state, source)
    else:
        provenance = Provenance.new(**options)
        policy_config = PolicyConfig()  # the architecture defaults, as BC's
    if config.pose_min_scale:
        # Less pose noise than BC's floor: sampled episodes then succeed about as often as the deterministic
        # policy, so PPO sees successes to reinforce. The deterministic policy (tanh of the mean) is unchanged.
        policy_config = replace(policy_config, min_scale=config.pose_min_scale)
    # The same for the verdict: answer where the policy is sure, not by chance on any step (policy.py).
    policy_config = replace(policy_config, answer_temperature=config.answer_temperature,
                            continue_floor=config.continue_floor, residual_scale=config.residual_scale,
                            pose_scale_factor=config.pose_scale_factor)
    return StartingPoint(provenance, policy_config, pretrained_state)


def env_options(config: FinetuneConfig, provenance: Provenance) -> dict:
    """``make_env``'s options for the run's collection and checks: the starting point's env, fine-tuning's reward."""
    return provenance.env_kwargs(reward_weights={"shaping": config.shaping, "guess": -config.guess_penalty,
                                                 "dwell": -config.dwell_penalty},
                                 shaping_gamma=config.gamma)


def make_models(config: FinetuneConfig, start: StartingPoint, env_kwargs: dict, compute: ComputeContext
                ) -> tuple[ProbabilisticActor, ProbabilisticActor | None, ValueOperator]:
    """(actor, its frozen start copy or None from scratch, privileged critic), on the context's device with its
    encoder precision (and compiled when it says so), in eval mode:
    BatchNorm uses fixed statistics, so the policy that collected a batch is the policy whose log-probs the loss
    evaluates, whatever minibatch it sits in (gradients still flow)."""
    device, precision = compute.torch_device, compute.precision
    proof = start.provenance.proof_env()
    actor = make_actor(proof.observation_spec, proof.full_action_spec, start.policy_config)
    pretrained = None
    if start.pretrained is not None:
        load_pretrained_weights(actor, start.pretrained["actor"])
        pretrained = copy.deepcopy(actor).requires_grad_(False).eval().to(device)
    else:
        # A network trained from scratch has no BatchNorm statistics yet: take them from random-action frames.
        env = make_env(num_envs=8, parallel=False, seed=config.seed + 10_007, **env_kwargs)
        frames = env.rollout(16, break_when_any_done=False).reshape(-1)
        calibrate_batchnorm(actor_network(actor).encoder, frames.get(keys.PIXELS), frames.get(keys.JOINT_STATE))
        if config.continue_prob:
            set_continue_probability(actor, config.continue_prob)
    critic = make_privileged_critic(proof.observation_spec, config.critic_hidden,
                                    get_task(start.provenance.task).inspection_offset)
    actor.to(device).eval()
    critic.to(device).eval()
    for policy in (actor, pretrained):
        if policy is not None:
            set_encoder_precision(policy, precision)
    network = actor_network(actor)
    if config.frozen_encoder:
        network.encoder.requires_grad_(False)
    if compute.compile:  # in place (nn.Module.compile): the state dict keeps its keys, checkpoints load anywhere
        network.encoder.compile()
    return actor, pretrained, critic


@dataclass
class TrainingViews:
    """The networks as collection and the loss see them. With a frozen encoder the collector writes the
    encoder's features and the loss trains the heads on them. With several learners the loss runs DDP-wrapped
    copies of the trained networks (same parameters); everything else (collection, advantages, evaluation,
    checkpoints) the plain ones."""

    collection_policy: ProbabilisticActor
    loss_actor: ProbabilisticActor
    loss_critic: ValueOperator
    actor_groups: list[dict]  # the actor's optimizer groups: heads at lr, the encoder at encoder_lr when trained
    anchor_actor: ProbabilisticActor | None  # the frozen start policy reading what loss_actor reads, or None


def training_views(config: FinetuneConfig, actor: ProbabilisticActor, critic: ValueOperator,
                   pretrained: ProbabilisticActor | None, dist: distributed.Distributed | None) -> TrainingViews:
    """What collects and what the loss trains (see ``TrainingViews``)."""
    network, wrap = actor_network(actor), functools.partial(distributed.wrap, dist)
    heads = [{"params": list(network.heads.parameters()), "lr": config.lr}]
    if config.frozen_encoder:
        anchor = heads_actor(pretrained) if pretrained is not None else None
        collection_policy, loss_actor = feature_writing_actor(actor), heads_actor(actor, wrap(network.heads))
        return TrainingViews(collection_policy, loss_actor, distributed.wrap_critic(dist, critic), heads, anchor)
    loss_actor = rewrap_actor(actor, wrap(network)) if dist is not None else actor
    # The image anchor runs a ResNet over the batch: only worth it while its weight counts.
    anchor = pretrained if config.anchor_weight else None
    groups = heads + [{"params": list(network.encoder.parameters()), "lr": config.encoder_lr}]
    return TrainingViews(actor, loss_actor, distributed.wrap_critic(dist, critic), groups, anchor)
