"""The asymmetric critic: a value network that reads the privileged task state, never used by the actor.

The actor must infer the board pose and the defect from pixels; the critic is only a baseline for advantages and
is discarded after training, so it may read what the simulator knows (Pinto et al., "Asymmetric Actor Critic for
Image-Based Robot Learning", 2017). Its input is the true state: joint state, camera pose, board pose, the camera's
offset from the task's inspection point (``InspectionTask.inspection_offset``, in the board frame), and the defect
label. That makes it (1) accurate from its first updates, where
an image critic starts from features that know nothing about value, and (2) cheap: a small MLP, no ResNet, so GAE
over a batch costs nothing next to collection.
"""

from __future__ import annotations

import torch
from torch import nn
from torchrl.data import Composite
from torchrl.modules import ValueOperator

from robot_rl import keys
from robot_rl.policy import spec_leaf

CRITIC_KEYS = [keys.JOINT_STATE, keys.CAMERA_POSE, keys.BOARD_POSE, keys.DEFECTIVE]


class PrivilegedValueNetwork(nn.Module):
    """Joint state [*B, 12], camera pose [*B, 7], board pose [*B, 4], defective [*B, 1] -> value [*B, 1]."""

    def __init__(self, joint_low: torch.Tensor, joint_high: torch.Tensor, hidden: int = 256,
                 inspection_offset: tuple[float, float, float] = (0.0, 0.0, 0.12)):
        super().__init__()
        self.register_buffer("joint_centre", (joint_high + joint_low) / 2)
        self.register_buffer("joint_half_range", (joint_high - joint_low) / 2)
        self.inspection_offset = inspection_offset
        inputs = joint_low.numel() + 7 + 5 + 3 + 1 + 1  # joints, camera, board, offset, distance, label
        self.net = nn.Sequential(nn.Linear(inputs, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
                                 nn.Linear(hidden, 1))

    def forward(self, joint_state, camera_pose, board_pose, defective) -> torch.Tensor:
        with torch.autocast(joint_state.device.type, enabled=False):  # small MLP: fp32 keeps value targets exact
            joints = (joint_state.float() - self.joint_centre) / self.joint_half_range
            ox, oy, oz = self.inspection_offset
            cos, sin = board_pose[..., 3:].float().cos(), board_pose[..., 3:].float().sin()
            goal = board_pose[..., :3].float() + torch.cat([cos * ox - sin * oy, sin * ox + cos * oy,
                                                            torch.full_like(cos, oz)], -1)
            offset = (camera_pose[..., :3].float() - goal) * 10  # decimetres: O(1) inputs
            board = torch.cat([board_pose[..., :3] * 2, torch.sin(board_pose[..., 3:]), torch.cos(board_pose[..., 3:])],
                              -1).float()
            distance = offset.norm(dim=-1, keepdim=True)
            x = torch.cat([joints, camera_pose.float(), board, offset, distance, defective.float() * 2 - 1],
                          -1)
            return self.net(x)


def make_privileged_critic(observation_spec: Composite, hidden: int = 256,
                           inspection_offset: tuple[float, float, float] = (0.0, 0.0, 0.12)) -> ValueOperator:
    """The asymmetric critic as a TorchRL ``ValueOperator`` writing ``keys.STATE_VALUE``; ``inspection_offset``: the
    task's (``InspectionTask.inspection_offset``)."""
    joints = spec_leaf(observation_spec, keys.JOINT_STATE)
    network = PrivilegedValueNetwork(joints.space.low.float(), joints.space.high.float(), hidden, inspection_offset)
    return ValueOperator(network, in_keys=CRITIC_KEYS, out_keys=[keys.STATE_VALUE])
