"""``robot-rl pretrain-encoder``: the policy's image encoder trained on labelled views before behaviour cloning.

Views of the task's cell (``robot_rl.envs.views``: the expert's noisy approaches and poses drawn in the workspace,
each with a fresh appearance under a randomization preset) are rendered once into the run folder
(``pretrain.view_cache``), then the ResNet18 trunk and its keypoints (``robot_rl.encoder.ImageEncoder``, the
policy's own) learn, through small heads, what the simulator knows of every view: where the inspection target is
in the image and whether it is in view, the camera's distance and tilt, the way to the inspection point, whether
the view is localized, the defect (on localized views) and every pixel's class. The heads are thrown away;
``encoder.pt`` (trunk + keypoints, plain tensors, with the record of the cell its views came from) is what
``pretrain --encoder-weights RUN_DIR`` loads.

Cached rather than rendered by workers while the learner trains: on the 2-core machine this was built on, the
learner already uses both cores, rendering a view costs about as much as a training step spends on it, and a
cache lets every epoch reuse its views (``benchmarks/perception.py`` measures both rates).

A run folder like BC's (``robot_rl.run_folder``): ``config.json``, ``checkpoints/last.pt`` (written before the
first step, after every epoch and on Ctrl-C/SIGTERM), ``logs/``, ``summary.json`` when finished; the same command
again or ``--resume`` continues a killed run, the cache included.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from robot_rl.checkpoints import rng_state, set_rng_state
from robot_rl.configs import EncoderPretrainConfig
from robot_rl.encoder import (
    ENCODER_WEIGHTS_FILE,
    ImageEncoder,
    encoder_state_dict,
    encoder_weights_file,
    read_encoder_weights,
)
from robot_rl.envs.perception import SEGMENTATION_CLASSES
from robot_rl.envs.tasks import get_task
from robot_rl.errors import UsageError
from robot_rl.io import atomic_path
from robot_rl.pretrain.augment import random_shift
from robot_rl.pretrain.view_cache import VIEWS_DIR, ViewCache
from robot_rl.provenance import Provenance
from robot_rl.run_logs import RunLogger
from robot_rl.training_run import TrainingRun, gradient_step

DISTANCE_SCALE = 10.0  # metres -> decimetres: targets near 1
MASK_STRIDE = 4  # the class head predicts every 4th pixel in each direction


class PerceptionHeads(nn.Module):
    """The pretraining heads on an ``ImageEncoder``: an MLP on its features for the per-view targets, a 1x1
    convolution on its layer2 maps for the per-pixel classes (upsampled to the image)."""

    def __init__(self, encoder: ImageEncoder, defect_types: int, hidden: int = 256):
        super().__init__()
        self.encoder, self.defect_types = encoder, defect_types
        # pixel (2), in view, distance, tilt, viewpoint offset (3), localized, defect logits
        self.outputs = 2 + 1 + 1 + 1 + 3 + 1 + defect_types
        self.mlp = nn.Sequential(nn.Linear(encoder.output_shape()[0], hidden), nn.ReLU(),
                                 nn.Linear(hidden, self.outputs))
        self.segment = nn.Conv2d(encoder.keypoints.project.in_channels, len(SEGMENTATION_CLASSES), kernel_size=1)

    def forward(self, pixels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(per-view outputs [B, outputs], class logits [B, classes, H / 4, W / 4]) of uint8 or float pixels
        [B, H, W, 3]. A quarter of the image's resolution: the class loss at full resolution cost a third of the
        training step, and a part spans several pixels at H / 4."""
        features, maps = self.encoder.features_and_maps(pixels)
        logits = self.segment(maps.float())
        size = (pixels.shape[1] // MASK_STRIDE, pixels.shape[2] // MASK_STRIDE)
        logits = F.interpolate(logits, size=size, mode="bilinear", align_corners=False)
        return self.mlp(features), logits


def coarse_masks(masks: torch.Tensor) -> torch.Tensor:
    """The class at the centre of every MASK_STRIDE x MASK_STRIDE cell of masks [B, H, W]: [B, H / 4, W / 4]."""
    offset = MASK_STRIDE // 2
    height, width = masks.shape[1] // MASK_STRIDE, masks.shape[2] // MASK_STRIDE
    return masks[:, offset::MASK_STRIDE, offset::MASK_STRIDE][:, :height, :width]


def perception_losses(outputs: torch.Tensor, class_logits: torch.Tensor, batch: dict[str, torch.Tensor],
                      image_size: int, segmentation_weight: float) -> dict[str, torch.Tensor]:
    """The ``loss_*`` terms and detached metrics of one batch of views (targets as the view cache stores them)."""
    masks = coarse_masks(batch["segmentation"])
    pixel, in_view_logit, distance, tilt = outputs[:, :2], outputs[:, 2], outputs[:, 3], outputs[:, 4]
    offset, localized_logit, defect_logits = outputs[:, 5:8], outputs[:, 8], outputs[:, 9:]
    in_view = batch["point_in_view"].reshape(-1).float()
    localized = batch["localized"].reshape(-1).float()
    target_pixel = batch["point_pixel"] / (image_size / 2) - 1  # [-1, 1] inside the image
    pixel_error = (pixel - target_pixel).abs().sum(-1)
    seen = in_view.sum().clamp(min=1)
    losses = {
        "loss_pixel": (F.smooth_l1_loss(pixel, target_pixel, reduction="none", beta=0.05).sum(-1) * in_view).sum()
        / seen,
        "loss_in_view": F.binary_cross_entropy_with_logits(in_view_logit, in_view),
        "loss_distance": F.smooth_l1_loss(distance, batch["distance"].reshape(-1) * DISTANCE_SCALE, beta=0.1),
        "loss_tilt": F.smooth_l1_loss(tilt, batch["tilt"].reshape(-1), beta=0.1),
        "loss_offset": F.smooth_l1_loss(offset, batch["viewpoint_offset"] * DISTANCE_SCALE, beta=0.1),
        "loss_localized": F.binary_cross_entropy_with_logits(localized_logit, localized),
        "loss_segmentation": segmentation_weight * F.cross_entropy(class_logits, masks.long()),
    }
    defect = batch["defect_type"].reshape(-1)
    if localized.any():  # the defect shows only from the inspection view
        chosen = localized > 0
        losses["loss_defect"] = F.cross_entropy(defect_logits[chosen], defect[chosen])
        defect_accuracy = (defect_logits[chosen].argmax(-1) == defect[chosen]).float().mean()
    else:
        losses["loss_defect"] = defect_logits.sum() * 0.0
        defect_accuracy = torch.tensor(float("nan"))
    classes = class_logits.argmax(1)
    metrics = {
        "pixel_error_px": ((pixel_error * in_view).sum() / seen * image_size / 4),  # mean |dx| + |dy| / 2, pixels
        "in_view_accuracy": ((in_view_logit > 0).float() == in_view).float().mean(),
        "distance_error_cm": (distance / DISTANCE_SCALE - batch["distance"].reshape(-1)).abs().mean() * 100,
        "tilt_error_deg": (tilt - batch["tilt"].reshape(-1)).abs().mean() * 180 / math.pi,
        "localized_accuracy": ((localized_logit > 0).float() == localized).float().mean(),
        "defect_accuracy": defect_accuracy,
        "segmentation_accuracy": (classes == masks).float().mean(),  # at a quarter of the resolution
    }
    return {**losses, **{name: value.detach() for name, value in metrics.items()}}


def _shift_with_target(pixels: torch.Tensor, masks: torch.Tensor, point: torch.Tensor,
                       pad: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random shift of the images, their masks (as a fourth channel) and the projected point by the same offset."""
    if pad <= 0:
        return pixels.float(), masks, point
    stacked = torch.cat([pixels.float(), masks.float().unsqueeze(-1)], -1)
    offsets = torch.randint(0, 2 * pad + 1, (pixels.shape[0], 2))
    shifted = random_shift(stacked, pad, offsets)
    # random_shift reads row r + offset of the padded image: content moves by pad - offset.
    moved = point + torch.stack([pad - offsets[:, 1], pad - offsets[:, 0]], -1).float()
    return shifted[..., :3], shifted[..., 3].round().to(torch.uint8), moved


class EncoderRun(TrainingRun):
    """One encoder pretraining run folder: the view cache, the heads, the optimizer and the loop (the lifecycle is
    ``TrainingRun``'s)."""

    command, config_cls = "pretrain-encoder", EncoderPretrainConfig
    steps_option, counter = "epochs", "epoch"

    def build(self, resume: bool) -> None:
        config = self.config
        self.precision = self.compute.precision  # device and threads: TrainingRun's context
        task = get_task(config.task)
        render = {"task": task.name, "difficulty": config.difficulty, "image_size": config.image_size,
                  "randomization": config.randomization, "arm": config.arm, "pose_noise": config.pose_noise,
                  "workspace_views": config.workspace_views}
        self.cache = ViewCache(self.run_dir / VIEWS_DIR, config.views, config.image_size, render, config.seed)
        self.val_views = max(1, round(config.views * config.val_fraction))
        self.train_views = config.views - self.val_views
        self.steps_per_epoch = max(1, self.train_views // config.batch_size)

        # Create model
        torch.manual_seed(config.seed)
        self.model = PerceptionHeads(ImageEncoder(None, config.keypoints), len(task.defect_types)).to(self.device)
        self.model.encoder.set_precision(self.precision)

        # Create optimizer and logger
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        self.scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(self.optimizer,
                                                                    T_max=config.epochs * self.steps_per_epoch)
        self.epoch, self.step = 0, 0
        self.logger = RunLogger(self.run_dir)
        self.last_val: dict | None = None  # the latest validation of this process

    def checkpoint(self) -> dict:
        return {"kind": "encoder", "config": asdict(self.config), "model": self.model.state_dict(),
                "optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
                "epoch": self.epoch, "step": self.step, "rng": rng_state()}

    def restore(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.epoch, self.step = state["epoch"], state["step"]
        set_rng_state(state["rng"])
        self.logger.truncate_after(self.step)

    # -- data -------------------------------------------------------------------------------------------------
    def _batch(self, arrays: dict, rows: np.ndarray, shift_pad: int) -> dict[str, torch.Tensor]:
        rows = np.sort(rows)  # memmap reads in file order
        batch = {name: torch.from_numpy(np.ascontiguousarray(array[rows])) for name, array in arrays.items()}
        pixels, masks, point = _shift_with_target(batch["pixels"], batch["segmentation"], batch["point_pixel"],
                                                  shift_pad)
        batch.update(pixels=pixels, segmentation=masks, point_pixel=point)
        if shift_pad:  # a point shifted out of the frame is out of view
            size = self.config.image_size
            inside = ((point >= 0) & (point < size)).all(-1, keepdim=True)
            batch["point_in_view"] = batch["point_in_view"] & inside
        return {name: value.to(self.device, non_blocking=True) for name, value in batch.items()}

    def _permutation(self) -> np.ndarray:
        # Each epoch's order follows from (seed, epoch): a resumed epoch continues the same order.
        return np.random.default_rng([self.config.seed, self.epoch, 0xE1C]).permutation(self.train_views)

    # -- loop -------------------------------------------------------------------------------------------------
    def train_epoch(self, arrays: dict, progress: bool) -> dict | None:
        """The rest of the current epoch; its mean losses, or None when Ctrl-C stopped it part-way."""
        config = self.config
        self.model.train()
        order = self._permutation()
        done_before = self.step - self.epoch * self.steps_per_epoch
        sums: dict[str, float] = {}
        bar = tqdm(range(done_before, self.steps_per_epoch), desc=f"epoch {self.epoch + 1}/{config.epochs}",
                   disable=not progress, leave=False)
        start, trained = time.perf_counter(), 0
        for index in bar:
            if self.stop.requested:
                return None
            rows = order[index * config.batch_size:(index + 1) * config.batch_size]
            batch = self._batch(arrays, rows, config.shift_pad)
            outputs, class_logits = self.model(batch["pixels"])
            terms = perception_losses(outputs, class_logits, batch, config.image_size, config.segmentation_weight)
            loss = sum(value for name, value in terms.items() if name.startswith("loss_"))
            gradient_step(loss, self.optimizer, self.model.parameters(), config.grad_clip, "perception",
                          terms={name: value for name, value in terms.items() if name.startswith("loss_")})
            self.scheduler.step()
            self.step += 1
            trained += len(rows)
            for name, value in terms.items():
                value = float(value.detach())
                if not math.isnan(value):
                    sums[name] = sums.get(name, 0.0) + value
            bar.set_postfix(loss=f"{loss.item():.3f}", images_per_s=f"{trained / (time.perf_counter() - start):.0f}")
        steps = max(1, self.steps_per_epoch - done_before)
        metrics = {f"train/{name}": value / steps for name, value in sums.items()}
        metrics["train/images_per_s"] = trained / max(time.perf_counter() - start, 1e-9)
        metrics["train/lr"] = self.scheduler.get_last_lr()[0]
        return metrics

    @torch.no_grad()
    def validate(self, arrays: dict) -> dict:
        """Mean metrics over the held-out views (no augmentation)."""
        self.model.eval()
        sums: dict[str, float] = {}
        counts: dict[str, int] = {}
        rows = np.arange(self.train_views, self.config.views)
        for first in range(0, len(rows), self.config.batch_size):
            batch = self._batch(arrays, rows[first:first + self.config.batch_size], shift_pad=0)
            outputs, class_logits = self.model(batch["pixels"])
            terms = perception_losses(outputs, class_logits, batch, self.config.image_size,
                                      self.config.segmentation_weight)
            for name, value in terms.items():
                if not math.isnan(float(value)):
                    sums[name] = sums.get(name, 0.0) + float(value)
                    counts[name] = counts.get(name, 0) + 1
        return {f"val/{name}": sums[name] / counts[name] for name in sums}

    # -- the loop's parts (the loop is TrainingRun's): an epoch is a step -------------------------------------
    def position(self) -> str:
        return f"epoch {self.epoch + 1}, step {self.step + 1}"

    def begin(self, progress: bool, last: int) -> bool:
        """Renders the views the cache still lacks (all of them the first time); False when a stop request
        ended the rendering."""
        if not self.cache.complete:
            self.cache.allocate()  # before the progress bar: a refusal is then the only line
        bar = tqdm(total=self.config.views, initial=self.cache.meta["rendered"], unit="view", desc="render views",
                   disable=not progress or self.cache.complete, leave=False)
        with bar:
            rendered = self.cache.render(self.config.render_workers, lambda: self.stop.requested, bar.update)
        self.arrays = self.cache.arrays() if rendered else {}
        return rendered

    def train_step(self, progress: bool) -> dict | None:
        return self.train_epoch(self.arrays, progress)

    def end_step(self, metrics: dict, progress: bool, last: int) -> None:
        """Validation, logs and ``last.pt`` after every epoch."""
        self.epoch += 1
        self.last_val = self.validate(self.arrays)
        metrics.update(self.last_val)
        metrics["train/epoch"] = self.epoch
        self.logger.log(metrics, step=self.step)
        self.save()
        if progress:
            shown = {k: round(v, 3) for k, v in self.last_val.items() if not k.startswith("val/loss")}
            tqdm.write(f"epoch {self.epoch}: {shown}")

    def finish(self) -> None:
        """``encoder.pt``, before summary.json: a finished folder always holds its weights."""
        config = self.config
        cell = Provenance.new(config.task, config.difficulty, config.image_size, config.randomization, config.arm)
        with atomic_path(self.run_dir / ENCODER_WEIGHTS_FILE) as tmp:
            torch.save(encoder_weights_file(encoder_state_dict(self.model.encoder), cell), tmp)

    def summary(self) -> dict:
        meta = self.cache.meta
        return {"epochs": self.epoch, "steps": self.step, "views": meta["rendered"],
                "render_seconds": meta["seconds"], "views_per_s": meta["rendered"] / max(meta["seconds"], 1e-9),
                "final_val": self.last_val, "precision": self.precision, "finished": self.epoch == self.config.epochs}


def check_encoder_cell(weights: str, demos: Provenance) -> None:
    """Refuses encoder weights that a pretrain-encoder run learnt on views of another task or arm than ``demos``'
    (such a trunk saw other parts through another wrist): the cell ``read_encoder_weights`` finds; weights that
    record none (a plain ResNet18 state dict, e.g. ImageNet's) load as they are."""
    _, cell = read_encoder_weights(weights)
    if cell is not None and not cell.same_cell(demos):
        raise UsageError(f"--encoder-weights {weights}: pretrained on views of {cell.task} with the {cell.arm} arm, "
                         f"the demos are {demos.task} with {demos.arm}; pretrain an encoder on the demos' cell "
                         f"(robot-rl pretrain-encoder --task {demos.task} --arm {demos.arm})")


# The commands: a new run (or the same command again after a kill), --resume, and the finished run for scripts.
pretrain_encoder, resume, ensure_trained = EncoderRun.start, EncoderRun.resume, EncoderRun.ensure_trained
