"""Labelled wrist-camera views for encoder pretraining: camera poses around a task's approach, each view with a
fresh appearance under a randomization preset, labelled from privileged state.

One *chunk* is one board (an episode seed): the task's expert flies its approach with Gaussian noise on every
pose action (a view per control step), then the camera is put at poses drawn in the workspace, half near the
inspection point (where localized and not-quite-localized views are told apart) and half anywhere above the
board looking roughly at it. Before every view the lights and the randomized appearance (colours, camera mount,
noise) are drawn again, so no two views share a look. A chunk is a pure function of (seed, chunk index): a cache
rendered in pieces equals one rendered at once.
"""

from __future__ import annotations

import math

import mujoco
import numpy as np

from robot_rl.envs.defaults import DEFAULT_ARM
from robot_rl.envs.ik import camera_ik
from robot_rl.envs.perception import PERCEPTION_TARGETS
from robot_rl.envs.tasks import build_task


class ViewRenderer:
    """Renders chunks of labelled views of ``task`` (a registered name or class) on ``arm``.

    ``pose_noise``: std of the noise on the expert's pose actions (in action units, [-1, 1]); ``workspace_views``:
    views at sampled poses per board, after the expert's.
    """

    def __init__(self, task, difficulty: str, image_size: int, randomization: str, arm=DEFAULT_ARM,
                 pose_noise: float = 0.3, workspace_views: int = 16):
        self.task = build_task(task, difficulty, image_size, None, {}, randomization, arm)
        self.expert = self.task.expert_class(self.task.config)
        self.pose_noise, self.workspace_views = pose_noise, workspace_views
        # Many Gauss-Newton steps: a sampled pose is far from the arm's current one (an action's IK needs one).
        self.ik = camera_ik(self.task.scene, iterations=25)

    def chunk(self, seed: int, index: int) -> dict[str, np.ndarray]:
        """The views of chunk ``index``: ``pixels`` uint8 [N, H, W, 3], ``segmentation`` uint8 [N, H, W], and one
        [N, ...] array per ``PERCEPTION_TARGETS`` entry."""
        rng = np.random.default_rng([int(seed), int(index), 0x71E3])
        task = self.task
        board_seed = int(rng.integers(2**31 - 1))
        observation = task.reset(board_seed)
        views = []
        for _ in range(task.config.max_steps):
            self._fresh_appearance(rng)
            views.append(self._view())
            state = task.privileged()
            pose, verdict = self.expert.act(state["camera_pose"], state["board_pose"], state["defective"],
                                            observation["joint_state"])
            if verdict != 0:
                break
            pose = np.clip(pose + rng.normal(0.0, self.pose_noise, pose.shape), -1, 1)
            result = task.step(pose, 0)
            if result.truncated:
                break
            observation = result.observation
        for view in range(self.workspace_views):
            self._place_camera(rng, near=view % 2 == 0)
            self._fresh_appearance(rng)
            views.append(self._view())
        return {name: np.stack([v[name] for v in views]) for name in views[0]}

    def _fresh_appearance(self, rng: np.random.Generator) -> None:
        task = self.task
        if task.randomization.is_nominal:
            return
        # Lights first: the appearance scales them (scene.set_appearance).
        task.scene.set_lighting(rng, task.difficulty.light_variation)
        task.apply_appearance(task.randomization.sample(rng))
        task.scene.forward()  # the randomized camera mount moves the rendered camera
        task.settle_exposure()  # a still view: the camera's exposure loop at its steady state there

    def _view(self) -> dict[str, np.ndarray]:
        return {"pixels": self.task.camera_image(), "segmentation": self.task.segmentation(),
                **self.task.perception_targets()}

    def _place_camera(self, rng: np.random.Generator, near: bool) -> None:
        """Puts the arm (kinematically, at rest) where IK brings the camera towards a sampled pose: near the
        inspection point aimed at the target with a few degrees of error, or anywhere above the board looking
        roughly at it."""
        task = self.task
        viewpoint, target = np.asarray(task.inspection_point(), np.float64), task.inspection_target()
        if near:
            position = viewpoint + rng.normal(0.0, 0.025, 3)
            aim = target + np.append(rng.normal(0.0, 0.01, 2), 0.0)
        else:
            radius, angle = 0.15 * math.sqrt(rng.random()), rng.uniform(0, 2 * math.pi)
            position = np.array([viewpoint[0] + radius * math.cos(angle), viewpoint[1] + radius * math.sin(angle),
                                 target[2] + rng.uniform(0.06, 0.45)])
            aim = target + np.append(rng.normal(0.0, 0.05, 2), 0.0)
        quat = _look_at(position, aim, roll=rng.normal(0.0, 0.2))
        scene = task.scene
        q = self.ik.solve(scene.qpos.copy(), position, quat)
        scene.data.qpos[scene.joint_qpos_ids] = q
        scene.data.qvel[scene.joint_dof_ids] = 0.0
        scene.data.ctrl[scene.actuator_ids] = q
        scene.forward()


def _look_at(position: np.ndarray, aim: np.ndarray, roll: float) -> np.ndarray:
    """The orientation (wxyz) of a camera at ``position`` looking at ``aim`` (along its -z), its image x axis
    level (as the home view's), turned by ``roll`` (rad) about the optical axis."""
    z_axis = position - aim
    z_axis /= np.linalg.norm(z_axis)
    x_axis = np.cross([0.0, 1.0, 0.0], z_axis) if abs(z_axis[1]) < 0.99 else np.array([1.0, 0.0, 0.0])
    x_axis /= np.linalg.norm(x_axis)
    y_axis = np.cross(z_axis, x_axis)
    c, s = math.cos(roll), math.sin(roll)
    x_axis, y_axis = c * x_axis + s * y_axis, -s * x_axis + c * y_axis
    quat = np.empty(4)
    mujoco.mju_mat2Quat(quat, np.stack([x_axis, y_axis, z_axis], -1).ravel())
    return quat


VIEW_ENTRIES = ("pixels", "segmentation", *PERCEPTION_TARGETS)
