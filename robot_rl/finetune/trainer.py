"""``robot-rl finetune``: PPO on the inspection task, from a behaviour-cloning checkpoint or from scratch.

One screen of structure, like TorchRL's PPO recipes: ``PPORun.build`` creates the models (the actor from its
starting point, the critic), the collector, the loss with its advantage and optimizers (``learner.py``) and the
logger; ``PPORun.train`` is the loop (collect, update, push the weights, log, check, checkpoint). What lets PPO lift
an imperfect behaviour-cloned policy without collapsing it (README, "Fine-tuning design" and "Fine-tuning that lifts
and stays up", has the measurements):

- small, bounded policy steps: actor lr 3e-5 and a per-iteration KL target that stops the actor's epochs
  (``learner.py``);
- the factored verdict (``policy.factored_verdict_logits``): sampled episodes answer where the deterministic
  policy would, instead of ending early by chance;
- a frozen image encoder by default (``encoder_lr 0``): the BC features stay intact, PPO trains the heads on
  features cached at collection, and 2 CPU cores can afford the frames;
- an asymmetric critic that reads the privileged task state (``critic.py``), warmed up alone for the first
  ``critic_warmup`` iterations, so the first policy gradients use advantages from a critic that knows the task;
- less pose noise than BC's scale floor (``pose_min_scale``), so sampled episodes succeed more often;
- the loss terms of ``loss.py``: pose log-prob masked on verdict steps, the verdict cross-entropy that the verdict
  reward labels, an optional KL anchor to the BC policy (off by default: it capped the lift near the BC start).

Every iteration starts its envs from fresh boards seeded by (seed, iteration), so a resumed run collects exactly
what the uninterrupted one would have; checkpoints hold every state needed to continue the curve. The run's
lifecycle (run folder, resume, checkpoint on Ctrl-C, summary) is ``robot_rl.training_run``'s; several learners are
``distributed.py``'s.
"""

from __future__ import annotations

import copy
import functools
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import NamedTuple

import torch
from tensordict import TensorDictBase
from torchrl.modules import ProbabilisticActor, ValueOperator
from tqdm import tqdm

from robot_rl import keys
from robot_rl.checkpoints import load_checkpoint, policy_checkpoint, rng_state, set_rng_state
from robot_rl.closed_loop import evaluate_policy, held_out_seeds
from robot_rl.compute import ComputeContext
from robot_rl.configs import FinetuneConfig
from robot_rl.encoder import calibrate_batchnorm, encoder_precision, set_encoder_precision
from robot_rl.envs import make_env
from robot_rl.envs.tasks import get_task
from robot_rl.episodes import aggregate, check_scalars, finished_episodes
from robot_rl.errors import CollectionFailed, TrainingDiverged, UsageError
from robot_rl.finetune import distributed
from robot_rl.finetune.collection import make_collector, push_weights
from robot_rl.finetune.critic import make_privileged_critic
from robot_rl.finetune.learner import PPOLearner
from robot_rl.finetune.loss import FinetunePPOLoss
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
from robot_rl.run_logs import RunLogger
from robot_rl.training_run import TrainingRun, due, improves

# What each closed-loop check records in the learning curve (and the logs, as eval/<name>).
CURVE_METRICS = ("success_rate", "success_ci95", "guess_rate", "verdict_accuracy", "collisions_per_episode",
                 "episode_length", "timed_out_rate")
__all__ = ["CollectionFailed", "FinetunePPOLoss", "PPORun", "TrainingDiverged", "finetune", "resume"]


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
                            continue_floor=config.continue_floor, residual_scale=config.residual_scale)
    return StartingPoint(provenance, policy_config, pretrained_state)


def env_options(config: FinetuneConfig, provenance: Provenance) -> dict:
    """``make_env``'s options for the run's collection and checks: the starting point's env, fine-tuning's reward."""
    return provenance.env_kwargs(reward_weights={"shaping": config.shaping, "guess": -config.guess_penalty},
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


def episode_metrics(batch: TensorDictBase, task: str) -> dict:
    """``train/...`` and ``reward/<term>`` of the episodes that ended in ``batch`` (sampled actions: exploration,
    next to the deterministic ``eval/`` figures); empty when none ended."""
    episodes = finished_episodes(batch.reshape(-1, batch.shape[-1]), task)
    if not episodes:
        return {}
    stats = aggregate(episodes)
    metrics = {f"train/{name}": stats[name] for name in (
        "success_rate", "guess_rate", "collisions_per_episode", "episode_length", "timed_out_rate")}
    metrics.update({"train/episode_return": stats["return"], "train/episodes": len(episodes)})
    metrics.update({f"reward/{k}": v for k, v in stats["reward_terms"].items()})
    return metrics


class PPORun(TrainingRun):
    """One fine-tuning run folder: ``build`` creates models, collector, learner and logger; ``train`` is the loop
    (the lifecycle is ``TrainingRun``'s)."""

    command, config_cls = "finetune", FinetuneConfig
    steps_option, counter = "iterations", "iteration"

    def build(self, resume: bool) -> None:
        config = self.config
        # One learner, or one rank of several started by torchrun (its device is the compute context's): its
        # collection seed
        self.dist, self.seed = distributed.setup(config.seed)
        self.is_main = self.dist is None or self.dist.is_main
        self.precision = self.compute.precision
        torch.manual_seed(config.seed)  # the same initial weights on every rank

        # Create models: the actor from its starting point (BC weights or fresh), its frozen copy, the critic
        start = starting_point(config)
        self.provenance, self.policy_config = start.provenance, start.policy_config
        self.env_kwargs = env_options(config, self.provenance)
        self.actor, self.pretrained, self.critic = make_models(config, start, self.env_kwargs, self.compute)
        views = training_views(config, self.actor, self.critic, self.pretrained, self.dist)
        self.collection_policy = views.collection_policy
        torch.manual_seed(self.seed)

        # Create collector: envs on the CPU (here, in env workers, in collector processes or Ray actors)
        self.iteration, self.frames = 0, 0  # (the collector's per-iteration seeding reads the iteration)
        self.seconds = 0.0  # wall time of the iterations and checks so far, across resumes
        self.best: dict | None = None  # iteration, frames and success of best.pt (the best held-out check)
        if self.is_main:  # the envs and workers start now: tens of seconds on a small machine
            tqdm.write(f"finetune: starting {config.num_envs} envs ({config.collector} collector), learner on "
                       f"{self.device.type}, {self.precision}")
        # Worker processes take the policy as it is when they start: in the precision of their own device.
        with encoder_precision(self.collection_policy, self.compute.worker_precision):
            self.collector, self.env = make_collector(config, self.collection_policy, self.env_kwargs, self.compute,
                                                      self.seed, pre_collect_hook=self._seed_iteration)
        if config.collector != "direct":
            push_weights(self.collector, self.collection_policy)  # workers start from the learner's weights

        # Create loss, advantage and optimizers: FinetunePPOLoss (a ClipPPOLoss), GAE, Adam for actor and critic
        self.learner = PPOLearner(config, views.loss_actor, views.loss_critic, views.actor_groups,
                                  anchor_actor=views.anchor_actor, device=self.device,
                                  autocast=self.precision == "bf16", check_finite=distributed.all_finite(self.dist),
                                  mean_over_ranks=distributed.mean_over_ranks(self.dist))

        # Create logger (rank 0) and the held-out boards of the checks
        self.logger = RunLogger(self.run_dir, backend=config.logger) if self.is_main else None
        self.eval_seeds = held_out_seeds(config.eval_seed, config.eval_episodes, set())
        self.curve: list[dict] = []  # closed-loop success against frames

    # -- the loop's parts (the loop is TrainingRun's): an iteration is a step ---------------------------------
    def position(self) -> str:
        return f"iteration {self.iteration + 1}"

    def begin(self, progress: bool, last: int) -> bool:
        """The starting policy's check (the learning curve's first point) on a new run, and the collector's
        iterator."""
        config = self.config
        self.bar = tqdm(total=last, initial=self.iteration, desc="finetune", unit="it", disable=not progress)
        if self.iteration == 0 and not self.curve and self.is_main:
            if progress:
                tqdm.write(f"finetune: the starting policy on {config.eval_episodes} held-out boards (the "
                           f"curve's first point), then {last} iterations of {config.frames_per_batch} frames")
            start = time.perf_counter()
            self._log(self._check())
            self.seconds += time.perf_counter() - start
        self.iterator = iter(self.collector)
        return True

    def train_step(self, progress: bool) -> dict:
        """Collect a batch, one PPO update (GAE, then epochs of minibatches), weights to the collector."""
        start = time.perf_counter()
        batch = self._collect(self.iterator)
        collect_seconds = time.perf_counter() - start
        metrics = self.update(batch)
        self.iteration += 1
        self.frames += batch.numel() * (self.dist.world_size if self.dist else 1)
        push_weights(self.collector, self.collection_policy)
        metrics.update(episode_metrics(batch, self.provenance.task))
        metrics["train/frames_per_s"] = batch.numel() / collect_seconds
        metrics["train/iteration_seconds"] = time.perf_counter() - start
        self.step_started = start
        return metrics

    def end_step(self, metrics: dict, progress: bool, last: int) -> None:
        """A check when due (and at ``last``: a run fine-tuned in parts has a point where each part ends), logs,
        a checkpoint when due."""
        config = self.config
        if due(self.iteration, config.eval_every, last) and self.is_main:
            metrics.update(self._check())
        self.seconds += time.perf_counter() - self.step_started
        self._log(metrics)
        if due(self.iteration, config.checkpoint_every, last):
            self.save()
        self.bar.update(1)
        self.bar.set_postfix(frames=self.frames, success=metrics.get("train/success_rate"))

    def end(self) -> None:
        if getattr(self, "bar", None) is not None:
            self.bar.close()

    def summary(self) -> dict:
        return {"iterations": self.iteration, "frames": self.frames, "curve": self.curve, "best": self.best,
                "init": self.config.init or "scratch", "env": self.provenance.record(),
                "seconds": round(self.seconds, 1), "finished": self.iteration == self.config.iterations,
                "precision": self.precision}

    # -- checkpoints ------------------------------------------------------------------------------------------
    def checkpoint(self) -> dict:
        return {
            "kind": "ppo", "config": asdict(self.config), "env": self.provenance.record(),
            "policy_config": asdict(self.policy_config), "actor": self.actor.state_dict(),
            "critic": self.critic.state_dict(), "learner": self.learner.state_dict(), "iteration": self.iteration,
            "frames": self.frames, "curve": self.curve, "best": self.best, "seconds": self.seconds,
            "rng": rng_state(),
        }

    def restore(self, state: dict) -> None:
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        self.learner.load_state_dict(state["learner"])
        self.iteration, self.frames, self.curve = state["iteration"], state["frames"], list(state["curve"])
        self.best = state.get("best")
        self.seconds = state.get("seconds", 0.0)
        set_rng_state(state["rng"])
        if self.logger is not None:
            self.logger.truncate_after(self.frames)

    # -- the loop's parts -------------------------------------------------------------------------------------
    def _seed_iteration(self) -> None:
        # Fresh, reproducible boards each iteration: a resumed run collects what the uninterrupted one would.
        # (Direct backend only: process and Ray workers run ahead of the learner.)
        self.env.set_seed(self.seed * 1_000_003 + self.iteration * 7919)

    def _collect(self, iterator) -> TensorDictBase:
        try:
            return next(iterator)
        except Exception as err:  # noqa: BLE001 - a dying worker surfaces as many exception types
            if self.config.collector == "direct" and self.config.workers == 0:
                raise  # no workers: a genuine error of this process
            raise CollectionFailed(
                f"iteration {self.iteration + 1}: a {self.config.collector} collection worker failed "
                f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else 'no message'}); run stopped, "
                f"last checkpoint kept ({self.folder.checkpoint()})") from err

    def update(self, batch: TensorDictBase) -> dict:
        """One PPO update on a collected batch (``PPOLearner.update``; the benchmarks time it alone)."""
        return self.learner.update(batch, self.iteration)

    def closed_loop(self) -> dict:
        """The deterministic policy on the held-out boards; appended to the learning curve."""
        metrics, _ = evaluate_policy(self.actor, self.eval_seeds, num_envs=min(8, len(self.eval_seeds)),
                                     device=self.device, **self.env_kwargs)
        self.curve.append({"frames": self.frames, "iteration": self.iteration, **{
            k: metrics[k] for k in CURVE_METRICS}, "failures": metrics["failures"]})
        return metrics

    def _check(self) -> dict:
        stats = self.closed_loop()
        metrics = check_scalars(stats, [name for name in CURVE_METRICS if name != "success_ci95"])
        if improves(stats["success_rate"], self.best and self.best["success_rate"]):
            # best.pt, as in BC: the policy with the best held-out check so far (iteration 0 is the start
            # policy, so a run that never beats it keeps it). Run folders resolve to best.pt for evaluation.
            self.best = {"iteration": self.iteration, "frames": self.frames, "success_rate": stats["success_rate"]}
            if self.is_main:
                self.folder.save(self.checkpoint(), best=True)
        return metrics

    def _log(self, metrics: dict) -> None:
        if self.logger is not None:
            self.logger.log(metrics, step=self.frames)

    def close(self) -> None:
        """Shuts the collector down and leaves the learners' process group (torchrun)."""
        try:
            self.collector.shutdown(timeout=20)
        except TypeError:  # backends whose shutdown takes no timeout
            self.collector.shutdown()
        except Exception as err:  # noqa: BLE001 - a dead worker can make shutdown complain; the run is over
            tqdm.write(f"collector shutdown: {type(err).__name__}: {err}")
        finally:
            if self.dist is not None:
                self.dist.close()


# The commands: a new run (or the same command again after a kill), --resume, and the finished run for scripts.
finetune, resume, ensure_trained = PPORun.start, PPORun.resume, PPORun.ensure_trained
