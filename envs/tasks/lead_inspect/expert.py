"""Scripted expert of the lead-inspection task: fly to the viewpoint on the connector's open side while turning
to look at the pin row (a look-at target computed from the board pose), then judge once there and at rest.

Stateless, like the PCB expert: every call recomputes the action from where the camera is. It never reads the
scene; the task decides whether the pins are in sight (``LeadInspectTask.localized`` casts a ray with
``mj_ray``), and the viewpoint is chosen so that they are (a test checks it on many boards).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial.transform import Rotation

from robot_rl.envs.task import TaskConfig, Verdict
from robot_rl.envs.tasks.lead_inspect.view import LeadView, at_viewpoint, lead_view


@dataclass(frozen=True)
class LeadExpertConfig:
    rest_speed: float = 0.12  # rad/s: joint speed (norm) below which the camera counts as at rest
    decide_margin: float = 0.5  # decide well inside the view's tolerances


class LeadExpert:
    """``act`` maps batched privileged state and joint state to batched (pose, verdict) actions."""

    def __init__(self, task_config: TaskConfig | None = None, config: LeadExpertConfig | None = None,
                 view: LeadView | None = None):
        self.task_config = task_config or TaskConfig()
        self.config = config or LeadExpertConfig()
        self.view = view or LeadView()

    def act(self, camera_pose: np.ndarray, board_pose: np.ndarray, defective: np.ndarray,
            joint_state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Actions for a batch; arguments and results as ``ScriptedExpert.act`` (the PCB task's expert)."""
        tc, c = self.task_config, self.config
        batch = camera_pose.shape[:-1]
        cam = camera_pose.reshape(-1, 7).astype(np.float64)
        board = board_pose.reshape(-1, 4).astype(np.float64)
        pos, rot = cam[:, :3], Rotation.from_quat(cam[:, 3:], scalar_first=True)
        target, viewpoint, goal_rot = lead_view(board, self.view)
        translation = (viewpoint - pos) / tc.max_translation
        rotation = (Rotation.from_matrix(goal_rot) * rot.inv()).as_rotvec() / tc.max_rotation
        pose = np.clip(np.concatenate([translation, rotation], axis=1), -1.0, 1.0)

        joints = joint_state.shape[-1] // 2
        speed = np.linalg.norm(joint_state.reshape(-1, 2 * joints)[:, joints:], axis=1)
        there = at_viewpoint(pos, rot.as_matrix(), target, viewpoint, self.view, margin=c.decide_margin)
        decide = there & (speed <= c.rest_speed)
        verdict = np.where(decide, np.where(defective.reshape(-1), Verdict.REWORK, Verdict.PASS), Verdict.CONTINUE)
        pose[decide] = 0.0
        return pose.reshape(*batch, 6).astype(np.float32), verdict.reshape(batch).astype(np.int64)
