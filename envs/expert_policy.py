"""The scripted expert as a TensorDict policy, for TorchRL rollouts and collectors."""

from __future__ import annotations

import numpy as np
import torch
from tensordict import TensorDictBase

from robot_rl.envs import keys
from robot_rl.envs.defaults import DEFAULT_TASK
from robot_rl.envs.task import InspectionTask, TaskConfig
from robot_rl.envs.tasks import get_task


class ExpertPolicy:
    """Reads ``task/...`` and ``joint_state`` from a TensorDict of any batch shape, writes the expert's action.

    The expert is the task's own (``task``: a registered name or class; ``config``: its expert's config).

    With ``pose_noise > 0`` the executed pose gets Gaussian noise (clipped to [-1, 1]) while the clean expert
    pose is kept under ``keys.EXPERT_POSE`` (and the verdict under ``keys.EXPERT_VERDICT``) as the label to
    clone, so demonstrations cover the recovery states the noise leads to.
    """

    def __init__(self, task_config: TaskConfig | None = None, config=None, pose_noise: float = 0.0,
                 seed: int | None = None, task: str | type[InspectionTask] = DEFAULT_TASK):
        if pose_noise < 0:
            raise ValueError(f"ExpertPolicy: pose_noise must be >= 0, got {pose_noise}")
        self.expert = get_task(task).expert_class(task_config, config)
        self.pose_noise = pose_noise
        self._rng = np.random.default_rng(seed)

    def __call__(self, tensordict: TensorDictBase) -> TensorDictBase:
        pose, verdict = self.expert.act(
            tensordict.get(keys.CAMERA_POSE).cpu().numpy(),
            tensordict.get(keys.BOARD_POSE).cpu().numpy(),
            tensordict.get(keys.DEFECTIVE).cpu().numpy(),
            tensordict.get(keys.JOINT_STATE).cpu().numpy(),
        )
        device = tensordict.device
        tensordict.set(keys.EXPERT_POSE, torch.from_numpy(pose).to(device))
        tensordict.set(keys.EXPERT_VERDICT, torch.from_numpy(verdict).to(device))
        if self.pose_noise:
            pose = np.clip(pose + self._rng.normal(0.0, self.pose_noise, pose.shape), -1.0, 1.0).astype(np.float32)
        tensordict.set(keys.POSE, torch.from_numpy(pose).to(device))
        tensordict.set(keys.VERDICT, torch.from_numpy(verdict).to(device))
        return tensordict
