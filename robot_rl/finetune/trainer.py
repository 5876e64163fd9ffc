"""``robot-rl finetune``: PPO on the inspection task, from a behaviour-cloning checkpoint or from scratch.

The algorithm in one file, read top to bottom like TorchRL's PPO recipes: ``PPORun.build`` creates the models (the
actor from its starting point and the critic: ``models.py``), the collector (``collection.py``), the learner and
the logger; ``PPORun.train`` is the loop (collect, update, push the weights, log, check, checkpoint); ``PPOLearner``
is one update (GAE, then epochs of minibatches through the clipped loss of ``loss.py``, the actor's epochs stopped
by a KL target). What lets PPO lift an imperfect behaviour-cloned policy without collapsing it (README,
"Fine-tuning design" and "Fine-tuning that lifts and stays up", has the measurements):

- small, bounded policy steps: actor lr 3e-5 and a per-iteration KL target that stops the actor's epochs;
- the factored verdict (``policy.factored_verdict_logits``): sampled episodes answer where the deterministic
  policy would, instead of ending early by chance;
- a frozen image encoder by default (``encoder_lr 0``): the BC features stay intact, PPO trains the heads on
  features cached at collection (``models.py``), and 2 CPU cores can afford the frames;
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

import contextlib
import time
from dataclasses import asdict

import torch
from tensordict import TensorDictBase
from torchrl.data import LazyTensorStorage, SamplerWithoutReplacement, TensorDictReplayBuffer
from torchrl.modules import ProbabilisticActor, ValueOperator
from torchrl.objectives.value import GAE
from tqdm import tqdm

from robot_rl import keys
from robot_rl.checkpoints import rng_state, set_rng_state
from robot_rl.closed_loop import evaluate_policy, held_out_seeds
from robot_rl.configs import FinetuneConfig
from robot_rl.encoder import encoder_precision
from robot_rl.episodes import aggregate, check_scalars, finished_episodes
from robot_rl.errors import CollectionFailed, TrainingDiverged
from robot_rl.finetune import distributed, exploration
from robot_rl.finetune.collection import make_collector, push_weights
from robot_rl.finetune.loss import FinetunePPOLoss, anchor_parameters
from robot_rl.finetune.models import env_options, make_models, starting_point, training_views
from robot_rl.run_logs import RunLogger
from robot_rl.training_run import TrainingRun, due, gradient_step, improves

# What each closed-loop check records in the learning curve (and the logs, as eval/<name>).
CURVE_METRICS = ("success_rate", "success_ci95", "guess_rate", "verdict_accuracy", "collisions_per_episode",
                 "episode_length", "timed_out_rate")
__all__ = ["CollectionFailed", "FinetunePPOLoss", "PPOLearner", "PPORun", "TrainingDiverged", "finetune", "resume"]


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

    def __init__(self, config: FinetuneConfig, resume: bool = False):
        # --exploration resolved before the folder is checked or written: config.json then records the options the
        # run used, and the same command again (after a kill) resolves to the same config and resumes.
        config, chosen = exploration.resolve(config)
        if chosen:
            tqdm.write(chosen)
        super().__init__(config, resume)

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
        # Worker processes take the policy as it is when they start: in the asked precision, resolved on their own
        # device.
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
                "precision": self.precision, "exploration": self.config.exploration}

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


# -- one PPO update ---------------------------------------------------------------------------------------------
ANCHOR_OFF_BELOW = 1e-3  # anchor weights below this are treated as zero


class PPOLearner:
    """PPO on batches of ``[envs, T]`` (or flat) frames: apart from the run (envs, collectors, checks,
    checkpoints), so the same update runs on any TensorDict env with the composite action (the tests' toy env).

    Args:
        config: the fine-tuning options (lrs, clip, epochs, minibatch, loss terms); ``config.frozen_encoder`` says
            that the loss actor reads the features cached at collection (``keys.FEATURES``), not pixels.
        loss_actor: the actor the loss evaluates (features-reading with a frozen encoder).
        critic: the value network (the privileged critic in the trainer).
        actor_parameter_groups: the actor's optimizer groups (heads at ``lr``, encoder at ``encoder_lr``).
        anchor_actor: the frozen start policy, reading what ``loss_actor`` reads; None = no anchor, no KL log.
        autocast: run GAE and the losses under bf16 autocast on ``device`` (the heads stay fp32 regardless).
        check_finite: ``fn(tensor) -> bool``, agreed across ranks when several learners run.
        mean_over_ranks: ``fn(scalar) -> mean over ranks`` when several learners run (the KL stop agrees), or None.
    """

    def __init__(self, config: FinetuneConfig, loss_actor: ProbabilisticActor, critic: ValueOperator,
                 actor_parameter_groups: list[dict], anchor_actor: ProbabilisticActor | None = None,
                 device: torch.device | str = "cpu", autocast: bool = False, check_finite=None,
                 mean_over_ranks=None):
        self.config, self.device, self.anchor_actor = config, torch.device(device), anchor_actor
        self.autocast, self.mean_over_ranks = autocast, mean_over_ranks
        self.cached_features = config.frozen_encoder
        self.check_finite = check_finite  # None: gradient_step's own (every element finite)
        # vmap (GAE's default for evaluating root and next states together) cannot run channels-last convolutions.
        self.advantage = GAE(gamma=config.gamma, lmbda=config.gae_lambda, value_network=critic, average_gae=False,
                             deactivate_vmap=True)
        self.loss = FinetunePPOLoss(
            loss_actor, critic, clip_epsilon=config.clip_epsilon, entropy_coeff=config.entropy_coeff,
            critic_coeff=config.critic_coeff, clip_value=config.clip_value or None, normalize_advantage=True,
            mask_verdict_pose=config.mask_verdict_pose, verdict_ce_weight=config.verdict_ce_weight,
            guess_ce_weight=config.guess_ce_weight,
            anchor_verdict=not config.anchor_pose_only,
            functional=False)  # the networks run as modules, so a DDP wrapper sees every forward
        self.buffer = TensorDictReplayBuffer(
            storage=LazyTensorStorage(config.frames_per_batch, device=self.device),
            sampler=SamplerWithoutReplacement(drop_last=True), batch_size=config.minibatch_size)
        self.actor_parameters = [p for group in actor_parameter_groups for p in group["params"]]
        self.critic_parameters = list(critic.parameters())
        # Separate optimizers, so the critic warm-up cannot move the actor.
        self.actor_optimizer = torch.optim.Adam(actor_parameter_groups)
        self.critic_optimizer = torch.optim.Adam(self.critic_parameters, lr=config.critic_lr)
        # Optional linear annealing over each optimizer's own updates (the actor's start after the warm-up).
        actor_updates = max(1, config.iterations - config.critic_warmup)
        self.actor_scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.actor_optimizer, lambda it: max(0.0, 1.0 - it / actor_updates) if config.anneal_lr else 1.0)
        self.critic_scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.critic_optimizer, lambda it: max(0.0, 1.0 - it / config.iterations) if config.anneal_lr else 1.0)

    # -- state ------------------------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {"actor_optimizer": self.actor_optimizer.state_dict(),
                "critic_optimizer": self.critic_optimizer.state_dict(),
                "actor_scheduler": self.actor_scheduler.state_dict(),
                "critic_scheduler": self.critic_scheduler.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        for name, value in state.items():
            getattr(self, name).load_state_dict(value)

    def anchor_weight(self, iteration: int) -> float:
        """The KL anchor's weight at ``iteration`` (decays from the first actor update on, down to its floor)."""
        if self.anchor_actor is None or not self.config.anchor_weight:
            return 0.0
        updates_done = max(0, iteration - self.config.critic_warmup)
        weight = max(self.config.anchor_weight * self.config.anchor_decay**updates_done, self.config.anchor_floor)
        return weight if weight >= ANCHOR_OFF_BELOW else 0.0

    def _autocast(self):
        if not self.autocast:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=torch.bfloat16)

    # -- the update -------------------------------------------------------------------------------------------
    def prepare(self, batch: TensorDictBase, iteration: int) -> TensorDictBase:
        """Advantages and value targets on ``batch`` (in place), then the flat frames the minibatches come from,
        with the start policy's parameters where an anchor or its KL is wanted."""
        with torch.no_grad(), self._autocast():
            self.advantage(batch)
        flat = batch.exclude((keys.NEXT, keys.PIXELS)).reshape(-1)
        if self.cached_features:
            flat = flat.exclude(keys.PIXELS)  # the loss reads the cached features
        warmup = iteration < self.config.critic_warmup
        # On cached features the start policy costs two small matrix products, so its KL is logged even once the
        # anchor has decayed away; on pixels it costs a ResNet pass over the batch, only worth it while it counts.
        wanted = self.cached_features or self.anchor_weight(iteration) > 0
        if self.anchor_actor is not None and not warmup and wanted:
            flat.update(anchor_parameters(self.anchor_actor, flat))
            flat.set(keys.ANCHOR_WEIGHT, torch.full(flat.shape, self.anchor_weight(iteration), device=flat.device))
        return flat

    def update(self, batch: TensorDictBase, iteration: int) -> dict:
        """GAE, then ``ppo_epochs`` passes of minibatch updates (the actor's stopped early by ``target_kl``); returns
        the mean of each logged quantity."""
        config = self.config
        warmup = iteration < config.critic_warmup
        flat = self.prepare(batch, iteration)
        self.buffer.empty()
        self.buffer.extend(flat)
        sums: dict[str, float] = {}
        counts: dict[str, int] = {}
        planned = config.ppo_epochs * (flat.shape[0] // config.minibatch_size)
        actor_steps, actor_stopped = 0, warmup
        for _ in range(planned):
            minibatch = self.buffer.sample()
            with self._autocast():
                if actor_stopped:  # value-only update: the actor is neither run nor stepped
                    critic_loss, _, explained = self.loss.loss_critic(minibatch)
                    out = {"loss_critic": critic_loss.mean(), "explained_variance": explained}
                else:
                    out = dict(self.loss(minibatch).items())
                    if self._kl_exceeded(out["kl_approx"]):
                        # The policy has moved as far from the collecting one as this iteration may: this and the
                        # remaining minibatches train the critic only. The KL that stopped it is logged with the
                        # others (without it a run stopped after one step logs the first minibatch's, about 0).
                        actor_stopped = True
                        out = {"loss_critic": out["loss_critic"], "explained_variance": out["explained_variance"],
                               "kl_approx": out["kl_approx"]}
            if not actor_stopped:
                actor_total = sum(v for k, v in out.items() if k.startswith("loss_") and k != "loss_critic")
                out["grad_norm_actor"] = gradient_step(actor_total, self.actor_optimizer, self.actor_parameters,
                                                       self.config.grad_clip, "actor", check_finite=self.check_finite)
                actor_steps += 1
            out["grad_norm_critic"] = gradient_step(out["loss_critic"], self.critic_optimizer, self.critic_parameters,
                                                    self.config.grad_clip, "critic", check_finite=self.check_finite)
            for name, value in out.items():
                if value is not None and not isinstance(value, TensorDictBase):
                    sums[name] = sums.get(name, 0.0) + float(torch.as_tensor(value, dtype=torch.float32).detach()
                                                             .float().mean())
                    counts[name] = counts.get(name, 0) + 1
        if not warmup:
            self.actor_scheduler.step()
        self.critic_scheduler.step()
        metrics = {f"train/{k}": v / counts[k] for k, v in sums.items()}
        metrics.update({"train/anchor_weight": self.anchor_weight(iteration) if not warmup else 0.0,
                        "train/critic_warmup": float(warmup),
                        "train/lr_actor": self.actor_scheduler.get_last_lr()[0]})
        if not warmup:  # the share of planned actor steps taken (< 1: the KL target stopped the epochs)
            metrics["train/actor_update_fraction"] = actor_steps / max(planned, 1)
        return metrics

    def _kl_exceeded(self, kl_approx: torch.Tensor) -> bool:
        """True once a minibatch's approximate KL to the collecting policy passes 1.5 x ``target_kl`` (the rule of
        Stable-Baselines3's ``target_kl``; TorchRL's PPO losses have no such stop). Every learner rank decides
        on the mean over ranks, so all stop at the same step."""
        if not self.config.target_kl:
            return False
        kl = kl_approx.detach().float().mean()
        if self.mean_over_ranks is not None:
            kl = self.mean_over_ranks(kl)
        return bool(kl > 1.5 * self.config.target_kl)


# The commands: a new run (or the same command again after a kill), --resume, and the finished run for scripts.
finetune, resume, ensure_trained = PPORun.start, PPORun.resume, PPORun.ensure_trained
