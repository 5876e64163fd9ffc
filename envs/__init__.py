"""The inspection environments (robot_rl.envs): MuJoCo arm + wrist camera, tasks, Gymnasium and TorchRL front-ends.

Pluggable: ``arms/`` (``ArmSpec`` and one module per arm) and ``tasks/`` (one package per task, ``InspectionTask``
subclasses and the registry); shared by every task: the scene, rendering, IK, randomization and the front-ends.

``make_env`` (TorchRL) and ``InspectionEnv`` import TorchRL on first use, so the Gymnasium env stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from robot_rl import ENV_VERSION, GYM_ID, GYM_IDS, TASK_NAME  # defined (and registered with Gymnasium) at the top

# First: picks the headless GL backend, which MuJoCo reads once when it is first imported.
from robot_rl.envs import (
    keys,
    rendering,  # noqa: F401, I001
)
from robot_rl.envs.difficulty import DIFFICULTY_NAMES, Difficulty
from robot_rl.envs.gym_env import InspectionGymEnv
from robot_rl.envs.randomization import PERTURBATIONS, RANDOMIZATIONS, Randomization, get_randomization
from robot_rl.envs.task import InspectionTask, RewardWeights, TaskConfig, Verdict
from robot_rl.envs.tasks import DEFAULT_TASK, TASKS, TaskError, get_task, register_task
from robot_rl.envs.tasks.lead_inspect import LeadInspectTask
from robot_rl.envs.tasks.pcb_inspect import PcbInspectTask
from robot_rl.envs.tasks.pcb_inspect.board import DEFECT_TYPES
from robot_rl.envs.tasks.pcb_inspect.difficulty import DIFFICULTIES
from robot_rl.envs.tasks.pcb_inspect.expert import ExpertConfig, ScriptedExpert

if TYPE_CHECKING:
    from robot_rl.envs.torchrl_env import InspectionEnv, make_env

__all__ = [
    "DEFAULT_TASK", "DEFECT_TYPES", "DIFFICULTIES", "DIFFICULTY_NAMES", "ENV_VERSION", "GYM_ID", "GYM_IDS",
    "PERTURBATIONS", "RANDOMIZATIONS", "TASKS", "TASK_NAME", "Difficulty", "ExpertConfig", "InspectionEnv",
    "InspectionGymEnv", "InspectionTask", "LeadInspectTask", "PcbInspectTask", "Randomization", "RewardWeights",
    "ScriptedExpert", "TaskConfig", "TaskError", "Verdict", "get_randomization", "get_task", "keys", "make_env",
    "register_task",
]


def __getattr__(name: str):
    if name in ("make_env", "InspectionEnv"):
        from robot_rl.envs import torchrl_env

        return getattr(torchrl_env, name)
    raise AttributeError(f"module 'robot_rl.envs' has no attribute {name!r}")
