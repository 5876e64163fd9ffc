"""The PCB inspection environment (robot_rl.envs): MuJoCo arm + wrist camera, Gymnasium and TorchRL front-ends.

``make_env`` (TorchRL) and ``PcbInspectEnv`` import TorchRL on first use, so the Gymnasium env stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from robot_rl import ENV_VERSION, GYM_ID, TASK_NAME  # defined (and registered with Gymnasium) at the top level

# First: picks the headless GL backend, which MuJoCo reads once when it is first imported.
from robot_rl.envs import (
    keys,
    rendering,  # noqa: F401, I001
)
from robot_rl.envs.board import DEFECT_TYPES
from robot_rl.envs.difficulty import DIFFICULTIES, Difficulty, get_difficulty
from robot_rl.envs.expert import ExpertConfig, ScriptedExpert
from robot_rl.envs.gym_env import PcbInspectGymEnv
from robot_rl.envs.randomization import PERTURBATIONS, RANDOMIZATIONS, Randomization, get_randomization
from robot_rl.envs.task import PcbInspectTask, RewardWeights, TaskConfig, Verdict

if TYPE_CHECKING:
    from robot_rl.envs.torchrl_env import PcbInspectEnv, make_env

__all__ = [
    "DEFECT_TYPES", "DIFFICULTIES", "ENV_VERSION", "GYM_ID", "PERTURBATIONS", "RANDOMIZATIONS", "TASK_NAME",
    "Difficulty", "ExpertConfig", "PcbInspectEnv", "PcbInspectGymEnv", "PcbInspectTask", "Randomization",
    "RewardWeights", "ScriptedExpert", "TaskConfig", "Verdict", "get_difficulty", "get_randomization", "keys",
    "make_env",
]


def __getattr__(name: str):
    if name in ("make_env", "PcbInspectEnv"):
        from robot_rl.envs import torchrl_env

        return getattr(torchrl_env, name)
    raise AttributeError(f"module 'robot_rl.envs' has no attribute {name!r}")
