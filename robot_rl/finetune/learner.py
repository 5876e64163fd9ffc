"""One PPO update on a collected batch: GAE, anchor parameters, minibatch epochs, optimizer steps.

Separate from the trainer (which owns envs, collectors, evaluation and checkpoints) so the same update runs on any
TensorDict env with the composite action, including the toy env of the tests.

With a frozen encoder (``config.frozen_encoder``: ``encoder_lr == 0``, the CPU default) the collection policy writes
each frame's encoder output under ``keys.FEATURES``; the loss then runs the actor's heads on those cached features,
so every PPO epoch costs a few small matrix products instead of a ResNet forward and backward per frame (end-to-end
PPO with an image critic ran ~20 frames/s on 2 cores; collection-bound PPO on cached features runs several times
faster, see ``benchmarks/ppo_throughput.py``). TorchRL has no such option: its losses always re-run the actor on
observations. The mode comes from the config, never from the keys a batch happens to hold.
"""

from __future__ import annotations

import contextlib

import torch
from tensordict import TensorDictBase
from torchrl.data import LazyTensorStorage, SamplerWithoutReplacement, TensorDictReplayBuffer
from torchrl.modules import ProbabilisticActor, ValueOperator
from torchrl.objectives.value import GAE

from robot_rl import keys
from robot_rl.configs import FinetuneConfig
from robot_rl.finetune.loss import FinetunePPOLoss, anchor_parameters
from robot_rl.training_run import gradient_step

ANCHOR_OFF_BELOW = 1e-3  # anchor weights below this are treated as zero


class PPOLearner:
    """PPO on batches of ``[envs, T]`` (or flat) frames.

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
                        # remaining minibatches train the critic only.
                        actor_stopped = True
                        out = {"loss_critic": out["loss_critic"], "explained_variance": out["explained_variance"]}
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
