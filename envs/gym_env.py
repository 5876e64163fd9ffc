"""Gymnasium front-end of the inspection tasks, registered as ``robot_rl.GYM_IDS`` (``robot_rl/PcbInspect-v2``, ...)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from robot_rl.envs.arms import ArmSpec
from robot_rl.envs.defaults import DEFAULT_ARM, DEFAULT_TASK
from robot_rl.envs.difficulty import Difficulty
from robot_rl.envs.randomization import Randomization
from robot_rl.envs.task import POSE_DIM, InspectionTask, RewardWeights, Verdict
from robot_rl.envs.tasks import build_task


class InspectionGymEnv(gym.Env):
    """An inspection task (``task``: a registered name) on an arm (``arm``), as a Gymnasium env.

    Observation ``{"pixels": uint8 [H, W, 3], "joint_state": float32 [2 x arm joints]}``; action ``{"pose": float32 [6]
    in [-1, 1], "verdict": 0 continue / 1 pass / 2 rework}``. Pose values outside [-1, 1] are clipped; NaN, inf,
    wrong shapes or dtypes raise. ``info`` holds the step flags, ``reward_terms`` and the privileged ``task`` state.

    ``reset(options={"episode_seed": s})`` inspects board ``s``; ``options={"defect": name}`` forces a defect.
    ``render()`` returns the third-person camera (with shadows) as uint8 [H, W, 3]. ``randomization`` (a name:
    none, default, strong, or a perturbation; or a ``Randomization``) varies what the camera sees per episode.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, difficulty: str | Difficulty = "default", image_size: int = 84,
                 reward_weights: RewardWeights | Mapping | None = None, render_mode: str | None = None,
                 render_size: tuple[int, int] = (360, 480), randomization: str | Randomization = "none",
                 arm: str | ArmSpec = DEFAULT_ARM, task: str | type[InspectionTask] = DEFAULT_TASK,
                 **task_overrides: Any):
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        self.task = build_task(task, difficulty, image_size, reward_weights, task_overrides, randomization, arm)
        self.render_mode, self.render_size = render_mode, render_size
        self.observation_space = spaces.Dict({
            "pixels": spaces.Box(0, 255, (image_size, image_size, 3), np.uint8),
            "joint_state": spaces.Box(*self.task.scene.joint_state_bounds(), (self.task.scene.arm.joint_state_dim,),
                                      np.float32),
        })
        self.action_space = spaces.Dict({
            "pose": spaces.Box(-1.0, 1.0, (POSE_DIM,), np.float32),
            "verdict": spaces.Discrete(len(Verdict)),
        })

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        options = options or {}
        episode_seed = options.get("episode_seed")
        if episode_seed is None:
            episode_seed = int(self.np_random.integers(2**31 - 1))
        observation = self.task.reset(int(episode_seed), defect=options.get("defect"))
        return observation, {"task": self.task.privileged()}

    def step(self, action: Mapping[str, Any]):
        if not isinstance(action, Mapping) or not {"pose", "verdict"} <= set(action):
            raise ValueError(f"action must be a dict with keys 'pose' and 'verdict', got {action!r}")
        result = self.task.step(action["pose"], action["verdict"])
        info = {**result.flags, "reward_terms": result.terms, "task": self.task.privileged()}
        return result.observation, result.reward, result.terminated, result.truncated, info

    def render(self):
        if self.render_mode == "rgb_array":
            return self.task.render_scene(*self.render_size)
        return None
