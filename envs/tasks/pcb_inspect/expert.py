"""Scripted inspection expert: reads the privileged task state, acts through the policy's action interface.

Stateless, so it works on any batch of envs and on perturbed states (demos with action noise): every call
recomputes its phase from where the camera is.

1. Away from the board: travel towards it at a height that clears the posts (rising first if too low).
2. Near the board: descend along a funnel to the inspection height over its centre, looking straight down.
3. Localized and nearly at rest (so the image is sharp, and the decision depends on what the policy can see):
   give the verdict, rework for a defective board and pass for a clean one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial.transform import Rotation

from robot_rl.envs.task import TaskConfig, Verdict
from robot_rl.envs.tasks.pcb_inspect.view import is_localized


@dataclass(frozen=True)
class ExpertConfig:
    travel_height: float = 0.22  # m above the board top while not over the board: clears every post
    over_radius: float = 0.01  # m: within this horizontal distance of the board centre, descend to inspect
    funnel_width: float = 0.04  # m: beyond over_radius + funnel_width, stay at the travel height
    rest_speed: float = 0.12  # rad/s: joint speed (norm) below which the camera counts as at rest


class ScriptedExpert:
    """``act`` maps batched privileged state and joint state to batched (pose, verdict) actions."""

    def __init__(self, task_config: TaskConfig | None = None, config: ExpertConfig | None = None):
        self.task_config = task_config or TaskConfig()
        self.config = config or ExpertConfig()

    def act(self, camera_pose: np.ndarray, board_pose: np.ndarray, defective: np.ndarray,
            joint_state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Actions for a batch.

        Args:
            camera_pose: [..., 7] camera position (m) and quaternion (wxyz).
            board_pose: [..., 4] board centre x, y, top z (m) and yaw (rad).
            defective: [...] or [..., 1] bool defect label.
            joint_state: [..., 2 x joints] joint angles, then joint velocities.
        Returns:
            pose float32 [..., 6] in [-1, 1] and verdict int64 [...].
        """
        tc, c = self.task_config, self.config
        batch = camera_pose.shape[:-1]
        cam = camera_pose.reshape(-1, 7).astype(np.float64)
        board = board_pose.reshape(-1, 4).astype(np.float64)
        pos, rot = cam[:, :3], Rotation.from_quat(cam[:, 3:], scalar_first=True)

        # A funnel: the target height is the travel height away from the board and the inspection height over
        # its centre, linear in between; far from the board and too low, rise straight up first.
        horizontal = np.linalg.norm(board[:, :2] - pos[:, :2], axis=1)
        closeness = np.clip((horizontal - c.over_radius) / c.funnel_width, 0.0, 1.0)
        inspect_z, travel_z = board[:, 2] + tc.inspection_height, board[:, 2] + c.travel_height
        too_low = (closeness >= 1.0) & (pos[:, 2] < travel_z - 0.03)
        target = np.empty_like(pos)
        target[:, :2] = np.where(too_low[:, None], pos[:, :2], board[:, :2])
        target[:, 2] = inspect_z + closeness * (travel_z - inspect_z)

        translation = (target - pos) / tc.max_translation
        # Look straight down with the camera's x axis along the world's x: the identity rotation.
        rotation = (rot.inv()).as_rotvec() / tc.max_rotation
        pose = np.clip(np.concatenate([translation, rotation], axis=1), -1.0, 1.0)

        joints = joint_state.shape[-1] // 2
        speed = np.linalg.norm(joint_state.reshape(-1, 2 * joints)[:, joints:], axis=1)
        # Decide well inside the task's tolerances, so small tracking errors cannot void the localization.
        localized = is_localized(pos, rot.as_matrix(), board[:, :3], tc, margin=0.5)
        decide = localized & (speed <= c.rest_speed)
        verdict = np.where(decide, np.where(defective.reshape(-1), Verdict.REWORK, Verdict.PASS), Verdict.CONTINUE)
        pose[decide] = 0.0
        return pose.reshape(*batch, 6).astype(np.float32), verdict.reshape(batch).astype(np.int64)
