"""``robot-rl pretrain``: behaviour cloning of the vision policy on a demonstration dataset.

Reads top to bottom like TorchRL's recipes: data, models, loss, optimizer, logger, then one loop. Every
``eval_every`` epochs the policy runs closed-loop on held-out boards. The run folder (``robot_rl.run_folder``)
gets ``last.pt`` every epoch and on Ctrl-C, ``best.pt`` at the best closed-loop success; ``--resume RUN_DIR``
continues a run exactly (model, optimizer, scheduler, epoch, step within it, RNG states, logger step).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import asdict

import torch
from tensordict import TensorDictBase
from torchrl.data import SamplerWithoutReplacement, TensorDictReplayBuffer, TensorStorage
from tqdm import tqdm

from robot_rl import keys
from robot_rl.checkpoints import rng_state, set_rng_state
from robot_rl.closed_loop import evaluate_policy, held_out_seeds
from robot_rl.configs import BCConfig
from robot_rl.dataset import META_FILE
from robot_rl.encoder import set_encoder_precision
from robot_rl.envs.tasks import get_task
from robot_rl.episodes import check_scalars
from robot_rl.errors import UsageError
from robot_rl.policy import PolicyConfig, actor_network, make_actor
from robot_rl.policy_io import load_actor
from robot_rl.pretrain.augment import exposure, random_shift, recolour, zoom
from robot_rl.pretrain.bc_loss import BATCH_KEYS, BehaviourCloningLoss, total_loss
from robot_rl.pretrain.encoder_pretrain import check_encoder_cell
from robot_rl.pretrain.lerobot_import import open_demos
from robot_rl.provenance import Provenance
from robot_rl.run_folder import IMPORTED_DEMOS
from robot_rl.run_logs import RunLogger
from robot_rl.training_run import TrainingRun, due, gradient_step, improves


def _to_device(batch: TensorDictBase, device: torch.device, shift_pad: int, recolour_classes: tuple[str, ...] = (),
               recolour_prob: float = 0.0, exposure_spread: float = 0.0, zoom_spread: float = 0.0) -> TensorDictBase:
    batch = batch.select(*BATCH_KEYS, *((keys.SEGMENTATION,) if recolour_classes else ())).to(device,
                                                                                              non_blocking=True)
    if recolour_classes:  # before the shift: the mask is aligned with the stored frame
        masks = batch.pop(keys.SEGMENTATION)
        batch.set(keys.PIXELS, recolour(batch.get(keys.PIXELS), masks, recolour_classes, recolour_prob))
    if exposure_spread:
        batch.set(keys.PIXELS, exposure(batch.get(keys.PIXELS), exposure_spread))
    if zoom_spread:
        batch.set(keys.PIXELS, zoom(batch.get(keys.PIXELS), zoom_spread))
    if shift_pad:
        batch.set(keys.PIXELS, random_shift(batch.get(keys.PIXELS), shift_pad))
    return batch


def _replay_buffer(frames: TensorDictBase, batch_size: int) -> TensorDictReplayBuffer:
    # A TorchRL storage over the memmapped frames: sampled rows are read from disk, nothing else is loaded.
    return TensorDictReplayBuffer(storage=TensorStorage(frames),
                                  sampler=SamplerWithoutReplacement(drop_last=True), batch_size=batch_size)


class BCRun(TrainingRun):
    """One behaviour-cloning run folder: its config, models, optimizer state and loop (the lifecycle is
    ``TrainingRun``'s)."""

    command, config_cls = "pretrain", BCConfig
    steps_option, counter = "epochs", "epoch"

    def build(self, resume: bool) -> None:
        config = self.config
        self.precision = self.compute.precision  # device and threads: TrainingRun's context

        # Create data
        self.dataset = open_demos(config.data, import_dir=self.run_dir / IMPORTED_DEMOS, resuming=resume,
                                  trust_code=config.trust_code)
        # The demos' env; the closed-loop checks see what the demos saw. An arm file edited since the demos were
        # recorded is refused (before any env is built on it).
        meta_path = self.dataset.root / META_FILE
        self.provenance = Provenance.of_dataset(self.dataset.meta, meta_path).inherit(
            f"the demos in {config.data}", image_size=config.image_size, randomization=config.randomization)
        self.provenance = self.provenance.verified(meta_path, trust_code=config.trust_code)
        self.task = get_task(self.provenance.task, trust_code=config.trust_code, source=str(meta_path))
        if config.recolour and not self.dataset.has_masks:
            raise UsageError(f"--recolour {config.recolour}: the demos in {config.data} have no segmentation masks "
                             f"(collect them with collect-demos --masks)")
        recolouring = ({"recolour_classes": config.recolour_classes(), "recolour_prob": config.recolour_prob}
                       if config.recolour else {})
        self.augmentation = {**recolouring, "exposure_spread": config.exposure, "zoom_spread": config.zoom}
        train, val = self.dataset.split(config.val_fraction)
        if train.shape[0] < config.batch_size:
            raise UsageError(f"--batch-size {config.batch_size} is larger than the {train.shape[0]} training frames")
        self.train_buffer = _replay_buffer(train, config.batch_size)
        self.val_buffer = _replay_buffer(val, min(config.batch_size, val.shape[0]))
        self.steps_per_epoch = train.shape[0] // config.batch_size
        if config.steps_per_epoch:
            self.steps_per_epoch = min(self.steps_per_epoch, config.steps_per_epoch)
        self.val_steps = max(1, val.shape[0] // min(config.batch_size, val.shape[0]))
        self.eval_seeds = held_out_seeds(config.eval_seed, config.eval_episodes, self.dataset.episode_seeds())

        # Create models (an encoder pretrained on another cell than the demos' is refused first)
        if config.encoder_weights:
            check_encoder_cell(config.encoder_weights, self.provenance)
        torch.manual_seed(config.seed)
        env = self.provenance.proof_env()
        self.actor = make_actor(env.observation_spec, env.full_action_spec, PolicyConfig.of(config))
        if config.joint_scaling == "demos":  # on resume the checkpoint's buffers replace these
            actor_network(self.actor).encoder.scale_joints_like(train[keys.JOINT_STATE])
        if config.init and not resume:  # on resume the checkpoint holds the weights
            self._start_from(config.init)
        self.actor = self.actor.to(self.device)
        set_encoder_precision(self.actor, self.precision)

        # Create loss and optimizer
        self.loss = BehaviourCloningLoss(self.actor, decision_weight=config.decision_weight,
                                         verdict_weight=config.verdict_weight,
                                         locate_weight=config.locate_weight,
                                         mode_weight=config.mode_weight,
                                         timing_weight=config.timing_weight,
                                         near_view=self.task.near_view).to(self.device)
        if self.compute.compile:  # in place (nn.Module.compile): the state dict keeps its keys, loads anywhere
            actor_network(self.actor).encoder.compile()
        # The actor's parameters and the loss's training-only ones (the auxiliary locator head).
        self.optimizer = torch.optim.AdamW(self.loss.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        self.scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(
            self.optimizer, T_max=config.epochs * self.steps_per_epoch)

        # Create logger
        self.epoch, self.step, self.best_success = 0, 0, -1.0
        self.epoch_sums: dict[str, float] = {}  # loss sums of the current epoch's steps so far
        self.logger = RunLogger(self.run_dir, backend=config.logger)
        self.last_eval: dict | None = None  # the latest closed-loop check of this process

    def _start_from(self, source: str) -> None:
        """Loads the actor weights (joint scaling included) of the policy at ``source``, which must have been
        trained for the same task, arm and image size with the same architecture."""
        actor, provenance, path = load_actor(source, trust_code=self.config.trust_code,
                                             checkpoint_kind=self.config.checkpoint_kind)
        for name in ("task", "arm", "image_size"):
            if getattr(provenance, name) != getattr(self.provenance, name):
                raise UsageError(f"--policy {path}: a policy for {name} {getattr(provenance, name)!r}, the demos "
                                 f"have {getattr(self.provenance, name)!r}")
        try:
            self.actor.load_state_dict(actor.state_dict())
        except RuntimeError:
            raise UsageError(f"--policy {path}: its architecture differs from this run's options (use the options "
                             f"it was trained with)") from None

    # -- checkpoints ------------------------------------------------------------------------------------------
    def checkpoint(self) -> dict:
        return {
            "kind": "bc", "config": asdict(self.config), "policy_config": asdict(PolicyConfig.of(self.config)),
            "env": self.provenance.record(), "actor": self.actor.state_dict(), "optimizer": self.optimizer.state_dict(),
            "locator": self.loss.locator.state_dict() if self.loss.locator is not None else None,
            "scheduler": self.scheduler.state_dict(), "epoch": self.epoch, "step": self.step,
            "best_success": self.best_success, "rng": rng_state(), "epoch_sums": dict(self.epoch_sums),
            # Where the samplers are in their current permutations (an epoch can stop before a full pass).
            "samplers": {"train": dict(self.train_buffer.sampler.state_dict()),
                         "val": dict(self.val_buffer.sampler.state_dict())},
        }

    def restore(self, state: dict) -> None:
        self.actor.load_state_dict(state["actor"])
        if self.loss.locator is not None:
            self.loss.locator.load_state_dict(state["locator"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.epoch, self.step, self.best_success = state["epoch"], state["step"], state["best_success"]
        self.epoch_sums = dict(state.get("epoch_sums", {}))
        self.train_buffer.sampler.load_state_dict(state["samplers"]["train"])
        self.val_buffer.sampler.load_state_dict(state["samplers"]["val"])
        set_rng_state(state["rng"])
        self.logger.truncate_after(self.step)

    # -- loop -------------------------------------------------------------------------------------------------
    def train_epoch(self, progress: bool) -> dict | None:
        """The rest of the current epoch; its mean losses, or None when Ctrl-C stopped it part-way."""
        self.actor.train()
        done_before = self.step - self.epoch * self.steps_per_epoch  # > 0 after a Ctrl-C in this epoch
        bar = tqdm(range(done_before, self.steps_per_epoch), desc=f"epoch {self.epoch + 1}/{self.config.epochs}",
                   disable=not progress, leave=False)
        # The loss sums so far are checkpointed, so a resumed epoch's means cover all of its steps.
        sums = self.epoch_sums = self.epoch_sums if done_before else {}
        start = time.perf_counter()
        for _ in bar:
            if self.stop.requested:
                return None
            batch = _to_device(self.train_buffer.sample(), self.device, self.config.shift_pad, **self.augmentation)
            losses = self.loss(batch)  # the encoder runs in self.precision, the rest in fp32
            loss = total_loss(losses)
            # What the optimizer steps: the actor and the loss's locator head.
            gradient_step(loss, self.optimizer, self.loss.parameters(), self.config.grad_clip, "BC", terms=losses)
            self.scheduler.step()
            self.step += 1
            for name, value in losses.detach().items():
                if not math.isnan(float(value)):
                    sums[name] = sums.get(name, 0.0) + float(value)
            samples_per_s = (bar.n + 1) * self.config.batch_size / (time.perf_counter() - start)
            bar.set_postfix(loss=f"{loss.item():.3f}", samples_per_s=f"{samples_per_s:.0f}")
        metrics = {f"train/{k}": v / self.steps_per_epoch for k, v in sums.items()}
        metrics["train/lr"] = self.scheduler.get_last_lr()[0]
        steps = self.steps_per_epoch - done_before  # timed in this process
        metrics["train/samples_per_s"] = steps * self.config.batch_size / (time.perf_counter() - start)
        return metrics

    @torch.no_grad()
    def validate(self) -> dict:
        self.actor.eval()
        sums: dict[str, float] = {}
        for _ in range(self.val_steps):
            batch = _to_device(self.val_buffer.sample(), self.device, shift_pad=0)
            losses = self.loss(batch)
            for name, value in losses.items():
                if not math.isnan(float(value)):
                    sums[name] = sums.get(name, 0.0) + float(value)
        return {f"val/{k}": v / self.val_steps for k, v in sums.items()}

    def closed_loop(self) -> dict:
        self.actor.eval()
        num_envs = self.config.eval_envs or os.cpu_count() or 1
        metrics, _ = evaluate_policy(self.actor, self.eval_seeds, num_envs=num_envs, device=self.device,
                                     **self.provenance.env_kwargs())
        return metrics

    # -- the loop's parts (the loop is TrainingRun's): an epoch is a step -------------------------------------
    def position(self) -> str:
        return f"epoch {self.epoch + 1}, step {self.step + 1}"

    def train_step(self, progress: bool) -> dict | None:
        return self.train_epoch(progress)

    def summary(self) -> dict:
        return {"epochs": self.epoch, "steps": self.step, "best_success": self.best_success,
                "final_eval": self.last_eval, "eval_seeds": [self.eval_seeds[0], self.eval_seeds[-1]],
                "demos": {"episodes": len(self.dataset.episodes), "frames": self.dataset.frames},
                "precision": self.precision,
                "finished": self.epoch == self.config.epochs}

    def end_step(self, metrics: dict, progress: bool, last: int) -> None:
        """Validation, the closed-loop check when due (at the run's last epoch, not at ``until``: a run stopped
        early and resumed checks where an uninterrupted one does), logs and checkpoints."""
        config, check = self.config, None
        metrics.update(self.validate())
        self.epoch += 1
        if due(self.epoch, config.eval_every, config.epochs):
            check = self.last_eval = self.closed_loop()
            metrics.update(check_scalars(check, ("success_rate", "verdict_accuracy", "guesses",
                                                 "collisions_per_episode", "episode_length")))
        metrics["train/epoch"] = self.epoch
        self.logger.log(metrics, step=self.step)
        checkpoint = self.checkpoint()
        # The policy's own check where one ran this epoch (fine-tuning's --exploration auto reads it from last.pt).
        checkpoint["check_success"] = check["success_rate"] if check is not None else None
        improved = check is not None and improves(check["success_rate"], self.best_success)  # -1.0: none yet
        if improved:
            self.best_success = checkpoint["best_success"] = check["success_rate"]
        self.folder.save(checkpoint, best=improved, last_too=True)
        if progress:
            shown = {k: round(v, 4) for k, v in metrics.items()
                     if k.startswith(("val/loss", "eval/")) and v is not None}
            tqdm.write(f"epoch {self.epoch}: {shown}")


# The commands: a new run (or the same command again after a kill), --resume, and the finished run for scripts.
pretrain, resume, ensure_trained = BCRun.start, BCRun.resume, BCRun.ensure_trained
