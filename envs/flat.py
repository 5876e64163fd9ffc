"""A flat-action Gymnasium variant, for RL libraries whose policies output one ``Box`` (Stable-Baselines3, CleanRL).

The inspection envs take a ``Dict`` action (a 6-d pose and a discrete verdict); most libraries' continuous-action
policies emit one vector. ``FlatActionWrapper`` takes ``Box(-1, 1, (7,), float32)``: the first six values are the
pose, the seventh a verdict score mapped to continue / pass / rework by two fixed thresholds:

    score < -VERDICT_THRESHOLD -> pass, score > VERDICT_THRESHOLD -> rework, otherwise continue.

So a policy near zero keeps moving, and a verdict takes a deliberate output. Observations stay the ``Dict`` of a
uint8 ``pixels`` image (H, W, 3) and the ``joint_state`` ``Box``: what SB3's ``MultiInputPolicy`` reads (it moves
the channels first itself). Registered as ``robot_rl.FLAT_GYM_IDS[task]`` (``robot_rl/PcbInspectFlat-v2``, ...).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from robot_rl.envs.gym_env import InspectionGymEnv
from robot_rl.envs.task import POSE_DIM, Verdict

VERDICT_THRESHOLD = 0.5


def verdict_of(score: float) -> int:
    """The verdict a score in [-1, 1] stands for (see the module docstring)."""
    if score > VERDICT_THRESHOLD:
        return int(Verdict.REWORK)
    if score < -VERDICT_THRESHOLD:
        return int(Verdict.PASS)
    return int(Verdict.CONTINUE)


class FlatActionWrapper(gym.ActionWrapper):
    """An inspection env with a ``Box(-1, 1, (7,))`` action: pose (6) then the verdict score."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.action_space = spaces.Box(-1.0, 1.0, (POSE_DIM + 1,), np.float32)

    def action(self, action) -> dict:
        action = np.asarray(action, np.float32)
        if action.shape != (POSE_DIM + 1,):
            raise ValueError(f"flat action must have shape ({POSE_DIM + 1},), got {action.shape}")
        if not np.isfinite(action).all():
            raise ValueError(f"flat action contains NaN or inf: {action.tolist()}")
        return {"pose": action[:POSE_DIM], "verdict": verdict_of(float(action[POSE_DIM]))}


def make_flat_env(**kwargs) -> gym.Env:
    """``InspectionGymEnv(**kwargs)`` behind ``FlatActionWrapper`` (the Gymnasium entry point of the flat ids)."""
    return FlatActionWrapper(InspectionGymEnv(**kwargs))
