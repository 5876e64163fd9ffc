"""The image encoder of the policy: ResNet18 (random or local weights) on the wrist image, spatial-softmax keypoints
on its layer2, concatenated with the normalized joint state.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

import torch
import torchvision
from torch import nn
from torchvision.models.feature_extraction import create_feature_extractor

# What ``robot-rl pretrain-encoder`` writes in its run folder.
from robot_rl.artefact_files import ENCODER_WEIGHTS as ENCODER_WEIGHTS_FILE
from robot_rl.checkpoints import CONFIG_FILE, load_config, read_tensor_file
from robot_rl.configs import EncoderPretrainConfig
from robot_rl.errors import UsageError
from robot_rl.precision import autocast
from robot_rl.provenance import Provenance

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class WeightsError(UsageError, ValueError):
    """Encoder weights that are not a plain ResNet18 state dict (the message names the file); the CLI exits 2."""


KEYPOINTS_PREFIX = "keypoints."  # keys of the keypoint layer in a pretrained encoder's state dict


def encoder_weights_path(path: str | Path) -> Path:
    """The weights file ``path`` stands for: itself, or a pretrain-encoder run folder's ``encoder.pt``."""
    path = Path(path)
    if path.is_dir():
        if not (path / ENCODER_WEIGHTS_FILE).is_file():
            raise WeightsError(f"{path}: no {ENCODER_WEIGHTS_FILE} (not a finished pretrain-encoder run folder)")
        return path / ENCODER_WEIGHTS_FILE
    return path


# What pretrain-encoder's encoder.pt says it is: the weights with the cell their views came from, as a policy
# checkpoint records its env, so the file carries its provenance wherever it is copied.
ENCODER_WEIGHTS_KIND = "encoder-weights"


def encoder_weights_file(state_dict: dict[str, torch.Tensor], provenance: Provenance) -> dict:
    """``encoder.pt``'s content: ``state_dict`` (``encoder_state_dict``) with the record of the cell it learnt."""
    return {"kind": ENCODER_WEIGHTS_KIND, "env": provenance.record(), "state_dict": state_dict}


def read_encoder_weights(path: str | Path) -> tuple[dict[str, torch.Tensor], Provenance | None]:
    """The encoder weights at ``path`` (a file or a pretrain-encoder run folder) and the cell they record: a
    pretrain-encoder ``encoder.pt`` (one written before it recorded its cell: the cell its run folder's config
    names), or a plain state dict of tensors (ImageNet's ResNet18), which records none. Read with torch's
    ``weights_only``; anything else is a one-line WeightsError naming the file."""
    path = encoder_weights_path(path)
    state = read_tensor_file(path, "tensor file", WeightsError)
    provenance = None
    if isinstance(state, dict) and state.get("kind") == ENCODER_WEIGHTS_KIND:
        try:
            provenance = Provenance.from_record(state.get("env"), path)
        except UsageError as err:
            raise WeightsError(str(err)) from None
        state = state.get("state_dict")
    elif path.name == ENCODER_WEIGHTS_FILE and (path.parent / CONFIG_FILE).is_file():
        # An encoder.pt written before the file recorded its cell: its run folder's config names it.
        provenance = Provenance.of_options(asdict(load_config(path.parent / CONFIG_FILE, EncoderPretrainConfig)))
    if not isinstance(state, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                              for k, v in state.items()):
        raise WeightsError(f"{path}: not a ResNet18 state dict (holds a {type(state).__name__})")
    return state, provenance


def load_resnet_weights(resnet: nn.Module, path: str | Path, keypoints: nn.Module | None = None) -> None:
    """Loads local encoder weights into ``resnet`` (and ``keypoints``): a ResNet18 state dict (``fc.*`` may be
    missing), optionally with the keypoint layer under ``keypoints.``, alone or in a pretrain-encoder ``encoder.pt``
    (``path`` may be its run folder): ``read_encoder_weights``. Weights of another shape are a one-line WeightsError
    naming the file."""
    path = encoder_weights_path(path)
    state, _ = read_encoder_weights(path)
    keypoint_state = {k[len(KEYPOINTS_PREFIX):]: v for k, v in state.items() if k.startswith(KEYPOINTS_PREFIX)}
    state = {k: v for k, v in state.items() if not k.startswith(KEYPOINTS_PREFIX)}
    expected = resnet.state_dict()
    wrong = [k for k, v in state.items() if k in expected and v.shape != expected[k].shape]
    missing = [k for k in expected if k not in state and not k.startswith("fc.")]
    unexpected = [k for k in state if k not in expected]
    if wrong or missing or unexpected:
        culprit = (f"{wrong[0]!r} has shape {list(state[wrong[0]].shape)}" if wrong
                   else f"{len(missing)} tensors missing, e.g. {missing[0]!r}" if missing
                   else f"unexpected tensor {unexpected[0]!r}")
        raise WeightsError(f"{path}: not a ResNet18 state dict ({culprit})")
    if keypoint_state:
        _check_keypoints(keypoints, keypoint_state, path)
    try:
        if keypoint_state:
            keypoints.load_state_dict(keypoint_state)
        resnet.load_state_dict(state, strict=False)
    except RuntimeError as err:  # right names and shapes, but tensors that do not copy (another layout or dtype)
        raise WeightsError(f"{path}: not a ResNet18 state dict ({str(err).strip().splitlines()[-1][:200]})") from None


def _check_keypoints(keypoints: nn.Module | None, state: dict, path: Path) -> None:
    trained = state.get("project.bias", torch.empty(0)).numel()
    if keypoints is None:
        raise WeightsError(f"{path}: holds a {trained}-keypoint layer, this policy has none (use --keypoints "
                           f"{trained})")
    expected = keypoints.state_dict()
    if set(state) != set(expected) or any(state[k].shape != expected[k].shape for k in expected):
        raise WeightsError(f"{path}: holds a {trained}-keypoint layer, this policy has "
                           f"{expected['project.bias'].numel()} (use --keypoints {trained})")


def encoder_state_dict(encoder: ImageEncoder) -> dict[str, torch.Tensor]:
    """The weights ``--encoder-weights`` loads: the ResNet18 trunk under torchvision's names, and the keypoint
    layer under ``keypoints.`` (fp32 copies on the CPU)."""
    state = {k: v.detach().float().cpu().clone() if v.is_floating_point() else v.detach().cpu().clone()
             for k, v in encoder.trunk.state_dict().items()}
    if encoder.keypoints is not None:
        state.update({KEYPOINTS_PREFIX + k: v.detach().float().cpu().clone()
                      for k, v in encoder.keypoints.state_dict().items()})
    return state


class SpatialSoftmax(nn.Module):
    """Feature maps [B, C, H, W] -> the expected image coordinates of K learned keypoints [B, 2K], in [-1, 1].

    Levine et al. (2016); robomimic's and LeRobot's ResNet18 encoders use it. Written here because torchvision
    has none (kornia's would add a dependency for a dozen lines). A 1x1 convolution makes K maps; each is
    softmax-normalized over positions and its mean (x, y) position is the keypoint.
    """

    def __init__(self, channels: int, keypoints: int):
        super().__init__()
        self.project = nn.Conv2d(channels, keypoints, kernel_size=1)
        self.log_temperature = nn.Parameter(torch.zeros(()))

    def forward(self, maps: torch.Tensor) -> torch.Tensor:
        maps = self.project(maps)
        height, width = maps.shape[-2:]
        attention = torch.softmax(maps.flatten(2).float() / self.log_temperature.exp(), dim=-1)  # [B, K, H*W]
        ys = torch.linspace(-1, 1, height, device=maps.device)
        xs = torch.linspace(-1, 1, width, device=maps.device)
        grid_y, grid_x = torch.meshgrid(ys, xs, indexing="ij")
        x = (attention * grid_x.reshape(1, 1, -1)).sum(-1)
        y = (attention * grid_y.reshape(1, 1, -1)).sum(-1)
        return torch.cat([x, y], dim=-1)


class ImageEncoder(nn.Module):
    """torchvision ResNet18 trunk: uint8 images [B, H, W, 3] (the env's layout) -> features [B, 512 + 2 keypoints].

    The globally pooled 512-d feature says what is in view (the defect verdict); global pooling discards where it
    is, so ``keypoints`` spatial-softmax keypoints on layer2's maps (stride 8) carry positions in the image, which
    the pose needs (robomimic's and LeRobot's encoders do the same; no benchmark here isolates their effect).
    Conversion to float and ImageNet normalization happen inside, so uint8 pixels travel to the device and are
    converted there; the input goes to the convolutions channels-last (the env's own layout, which measured 1.3-1.5x
    faster than NCHW at 84x84 on CPU as on GPU). ``precision`` (``robot_rl.precision``) runs the trunk under bf16
    autocast; its outputs are fp32 either way. It keeps ResNet18's BatchNorm: with GroupNorm the same
    network did not learn the defect verdict in an early trial (an observation, not a benchmark). PPO runs it in
    eval mode (fixed statistics, see ``calibrate_batchnorm``) so that a batch never changes what the policy
    computes.
    """

    def __init__(self, weights: str | None, keypoints: int):  # no defaults here: ActorArchitecture holds them
        super().__init__()
        resnet = torchvision.models.resnet18(weights=None)
        keypoint_layer = SpatialSoftmax(resnet.layer2[-1].conv2.out_channels, keypoints) if keypoints else None
        if weights:
            load_resnet_weights(resnet, weights, keypoint_layer)
        # The trunk as torchvision's feature extractor: the pooled feature, and layer2's maps for the keypoints. Its
        # state dict is the ResNet's own (fc left out), so checkpoints and local weights keep their keys.
        nodes = {"flatten": "pooled", **({"layer2": "mid"} if keypoints else {})}
        self.trunk = create_feature_extractor(resnet, return_nodes=nodes)
        self.keypoints = keypoint_layer
        self.register_buffer("mean", torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1) * 255)
        self.register_buffer("std", torch.tensor(IMAGENET_STD).view(1, 3, 1, 1) * 255)
        self.precision = "fp32"  # a run-time setting, not state: checkpoints and exports are fp32

    def set_precision(self, precision: str) -> None:
        """``fp32`` or ``bf16`` (resolve ``auto`` first with ``robot_rl.precision.resolve_precision``)."""
        if precision not in ("fp32", "bf16"):
            raise ValueError(f"ImageEncoder: precision must be fp32 or bf16, got {precision!r}")
        self.precision = precision

    def output_shape(self) -> tuple[int]:
        return (512 + (2 * self.keypoints.project.out_channels if self.keypoints is not None else 0),)

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        return self.features_and_maps(pixels)[0]

    def features_and_maps(self, pixels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``forward``'s features and layer2's maps [B, 128, H/8, W/8] (None without keypoints), which dense heads
        (encoder pretraining's segmentation) read."""
        batch = pixels.shape[:-3]
        x = pixels.reshape(-1, *pixels.shape[-3:]).permute(0, 3, 1, 2).float()  # NCHW view of channels-last data
        x = (x - self.mean) / self.std
        # Channels-last input picks the NHWC kernels (oneDNN's on CPU, cuDNN's tensor-core ones on CUDA); a no-op
        # for the env's own layout. The weights stay in the default layout, which weight transfers to collector
        # workers require (contiguous tensors).
        x = x.contiguous(memory_format=torch.channels_last)
        with autocast(self.precision, x.device):
            maps = self.trunk(x)
            features = maps["pooled"].float()
            if self.keypoints is not None:
                features = torch.cat([features, self.keypoints(maps["mid"]).float()], dim=-1)
        return features.reshape(*batch, features.shape[-1]), maps.get("mid")


class ObservationEncoder(nn.Module):
    """Image features concatenated with the joint angles (and, with ``joint_velocities``, velocities) scaled to
    [-1, 1] by their spec bounds.

    Why not the velocities by default: the expert's actions change slowly, so a joint velocity nearly gives away
    the previous action, and behaviour cloning can learn to continue the current motion from it instead of
    reading the image (the "copycat" failure of BC with proprioceptive history, Wen et al. 2020).
    ``benchmarks/results/bc_loss_ablation.json`` holds a 1,000-demo policy measured with and without them.
    """

    def __init__(self, joint_low: torch.Tensor, joint_high: torch.Tensor, weights: str | None, keypoints: int,
                 joint_velocities: bool):  # no defaults here: ActorArchitecture holds them
        super().__init__()
        self.image = ImageEncoder(weights, keypoints)
        read = joint_low.numel() if joint_velocities else joint_low.numel() // 2  # angles come first
        self.register_buffer("joint_centre", ((joint_high + joint_low) / 2)[:read])
        self.register_buffer("joint_half_range", ((joint_high - joint_low) / 2)[:read])

    def output_shape(self) -> tuple[int]:
        return (self.image.output_shape()[0] + self.joint_centre.numel(),)

    @torch.no_grad()
    def scale_joints_like(self, joint_states: torch.Tensor, min_std: float = 0.01) -> None:
        """Scales the joint inputs by the mean and std of ``joint_states`` [N, 2 x joints] (e.g. the demos')
        instead of the spec bounds; the std is floored at ``min_std`` (rad, rad/s). Kept as buffers, so
        checkpoints, fine-tuning and exports carry it.

        Why: a velocity bound is the clip limit (2.6-6.3 rad/s here) while what BC must tell apart is tenths of
        rad/s (an arm still settling against one at rest), so scaled by the bounds those readings reach the MLP
        as inputs of about 0.02."""
        read = self.joint_centre.numel()
        states = joint_states[:, :read].double()
        self.joint_centre.copy_(states.mean(0))
        self.joint_half_range.copy_(states.std(0).clamp_min(min_std))

    def forward(self, pixels: torch.Tensor, joint_state: torch.Tensor) -> torch.Tensor:
        joints = (joint_state[..., : self.joint_centre.numel()] - self.joint_centre) / self.joint_half_range
        return torch.cat([self.image(pixels), joints], dim=-1)


@torch.no_grad()
def calibrate_batchnorm(module: nn.Module, *inputs: torch.Tensor) -> None:
    """Sets every BatchNorm's running statistics to those of ``inputs`` (one forward in train mode, cumulative
    averages), then leaves the module in eval mode. For networks that start RL without BC statistics."""
    norms = [m for m in module.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None
    module.train()
    module(*inputs)
    module.eval()
    for norm in norms:
        norm.momentum = 0.1


def set_encoder_precision(module: nn.Module, precision: str) -> None:
    """Runs every ``ImageEncoder`` inside ``module`` (an actor, a collection policy) in ``precision``."""
    for submodule in module.modules():
        if isinstance(submodule, ImageEncoder):
            submodule.set_precision(precision)


@contextlib.contextmanager
def encoder_precision(module: nn.Module, precision: str) -> Iterator[None]:
    """Within ``with``: every ``ImageEncoder`` inside ``module`` runs in ``precision``; restored afterwards."""
    encoders = [m for m in module.modules() if isinstance(m, ImageEncoder)]
    before = [encoder.precision for encoder in encoders]
    set_encoder_precision(module, precision)
    try:
        yield
    finally:
        for encoder, previous in zip(encoders, before):
            encoder.set_precision(previous)
