"""``robot-rl export``: the trained actor as a plain program, for deployment without TorchRL.

Input: ``pixels`` uint8 [B, H, W, 3] and ``joint_state`` float32 [B, 2 x arm joints]. Output: the deterministic
action, ``pose`` float32 [B, 6] (tanh of the pose mean, mapped to the action bounds) and ``verdict`` int64 [B]
(0 continue, 1 pass, 2 rework). Formats: TorchScript (``policy.torchscript.pt``), ``torch.export``
(``policy.pt2``) and ONNX (``policy.onnx``, with the ``onnx`` extra: onnx, onnxscript, onnxruntime).
``policy.json`` describes the interface. ``safetensors`` writes the actor's weights (``model.safetensors``) and
``config.json`` (architecture and env), which ``load_actor`` reads without pickle.
"""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path

import torch
from torch import nn

from robot_rl.artefact_files import EXPORT_RECORD
from robot_rl.checkpoints import load_checkpoint, run_folder_of
from robot_rl.configs import ExportConfig
from robot_rl.envs.arms import get_arm
from robot_rl.envs.task import Verdict
from robot_rl.io import atomic_path, write_json
from robot_rl.locks import exclusive
from robot_rl.policy import actor_network
from robot_rl.policy_io import WEIGHTS_FILE, checkpoint_policy_config, load_actor, save_weights
from robot_rl.provenance import Provenance

FILES = {"torchscript": "policy.torchscript.pt", "export": "policy.pt2", "onnx": "policy.onnx",
         "safetensors": WEIGHTS_FILE}


class DeployedPolicy(nn.Module):
    """The actor network reduced to its deterministic action: (pixels, joint_state) -> (pose, verdict)."""

    def __init__(self, network: nn.Module, low: torch.Tensor, high: torch.Tensor):
        super().__init__()
        self.network = network
        self.register_buffer("low", low.float())
        self.register_buffer("high", high.float())

    def forward(self, pixels: torch.Tensor, joint_state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        loc, _, logits = self.network(pixels, joint_state)
        pose = self.low + (torch.tanh(loc) + 1) * (self.high - self.low) / 2
        return pose, logits.argmax(-1)


def deploy(actor) -> DeployedPolicy:
    """The deterministic plain-torch policy of a ``robot_rl.policy.make_actor`` actor (shares its weights)."""
    return DeployedPolicy(actor_network(actor), actor.pose_low.cpu(), actor.pose_high.cpu()).eval()


def deployed_policy(checkpoint: str | Path) -> tuple[DeployedPolicy, Provenance, Path]:
    """The deterministic plain-torch policy of a checkpoint, with the env it was trained in and its path."""
    actor, provenance, path = load_actor(checkpoint)
    return deploy(actor), provenance, path


def export_safetensors(actor, provenance: Provenance, checkpoint: Path, out_dir: Path) -> Path:
    """The actor's weights (``model.safetensors``) and its architecture and env (``config.json``): the stochastic
    actor itself, for ``load_actor`` or further training, without pickle."""
    policy_config = checkpoint_policy_config(load_checkpoint(checkpoint), checkpoint)
    return save_weights(actor, policy_config, provenance, out_dir, source=str(checkpoint))


def example_inputs(image_size: int, batch: int = 2, joint_state_dim: int = 12) -> tuple[torch.Tensor, torch.Tensor]:
    """Policy inputs of the right shapes: pixels uint8 [B, S, S, 3] and joint state float32 [B, 2 x joints]."""
    return (torch.randint(0, 256, (batch, image_size, image_size, 3), dtype=torch.uint8),
            torch.zeros(batch, joint_state_dim, dtype=torch.float32))


def export_torchscript(policy: DeployedPolicy, inputs, path: Path) -> None:
    with torch.no_grad():
        traced = torch.jit.trace(policy, inputs)
    with atomic_path(path) as tmp:
        torch.jit.save(traced, str(tmp))


def exported_program(policy: DeployedPolicy, inputs) -> torch.export.ExportedProgram:
    """``torch.export`` of the policy with a dynamic batch dimension."""
    batch = torch.export.Dim("batch", min=1, max=4096)
    return torch.export.export(policy, inputs, dynamic_shapes={"pixels": {0: batch}, "joint_state": {0: batch}})


def export_program(policy: DeployedPolicy, inputs, path: Path) -> None:
    with atomic_path(path) as tmp:
        torch.export.save(exported_program(policy, inputs), tmp)


def export_onnx(policy: DeployedPolicy, inputs, path: Path) -> None:
    # The torch.export-based exporter (onnxscript); the TorchScript-based one is deprecated.
    onnx_program = torch.onnx.export(exported_program(policy, inputs), input_names=["pixels", "joint_state"],
                                     output_names=["pose", "verdict"], dynamo=True, verbose=False)
    with atomic_path(path) as tmp:
        onnx_program.save(str(tmp))


def export(config: ExportConfig) -> dict:
    """Writes the requested formats and ``policy.json``; returns {format: path} of what was written."""
    actor, provenance, checkpoint = load_actor(config.checkpoint, trust_code=config.trust_code,
                                             checkpoint_kind=config.checkpoint_kind)
    policy = deploy(actor)
    run_dir = run_folder_of(checkpoint)
    out_dir = Path(config.out) if config.out else run_dir / "export"
    formats = list(FILES) if config.format == "all" else [config.format]
    joints = len(get_arm(provenance.arm).joints)
    inputs = example_inputs(provenance.image_size, joint_state_dim=2 * joints)
    with exclusive(out_dir, "export folder"):  # one writer of its files at a time
        return _write_exports(actor, policy, provenance, checkpoint, config, out_dir, formats, joints, inputs)


def _write_exports(actor, policy: DeployedPolicy, provenance: Provenance, checkpoint: Path, config: ExportConfig,
                   out_dir: Path, formats: list[str], joints: int, inputs) -> dict:
    """Writes each format in ``formats`` and ``policy.json`` into ``out_dir``; returns {format: path}."""
    written = {}
    for name in formats:
        if name == "onnx" and not all(importlib.util.find_spec(m) for m in ("onnx", "onnxscript")):
            message = "ONNX export needs the onnx and onnxscript packages (pip install 'robot_rl[onnx]')"
            if config.format == "onnx":
                from robot_rl.errors import UsageError

                raise UsageError(f"--format onnx: {message}")
            warnings.warn(f"{message}; skipped", stacklevel=2)
            continue
        path = out_dir / FILES[name]
        if name == "safetensors":
            export_safetensors(actor, provenance, checkpoint, out_dir)
        else:
            {"torchscript": export_torchscript, "export": export_program, "onnx": export_onnx}[name](policy, inputs,
                                                                                                    path)
        written[name] = str(path)
    size = provenance.image_size
    write_json(out_dir / EXPORT_RECORD, {
        "checkpoint": str(checkpoint), "checkpoint_kind": config.checkpoint_kind, "env": provenance.record(),
        "files": {k: Path(v).name for k, v in written.items()},
        "inputs": {"pixels": f"uint8 [B, {size}, {size}, 3], RGB, wrist camera",
                   "joint_state": f"float32 [B, {2 * joints}]: {joints} joint angles (rad), {joints} joint velocities "
                                  f"(rad/s), arm {provenance.arm}"},
        "outputs": {"pose": "float32 [B, 6] in [-1, 1]: camera translation (x 3 cm) and rotation (x 0.15 rad)",
                    "verdict": "int64 [B]: " + ", ".join(f"{v.value} {v.name.lower()}" for v in Verdict)},
    })
    return written
