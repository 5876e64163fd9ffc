"""The inspection environments (robot_rl.envs): MuJoCo arm + wrist camera, tasks, Gymnasium and TorchRL front-ends.

Pluggable: ``arms/`` (``ArmSpec`` and one module per arm) and ``tasks/`` (one package per task, ``InspectionTask``
subclasses and the registry); shared by every task: the scene, rendering, IK, randomization and the front-ends.

The bottom layer of robot_rl: it imports nothing of the rest of it (``tests/test_layers.py``). Importing it is light:
it registers the Gymnasium ids and picks the headless GL backend; MuJoCo, TorchRL and the names below load on first
use (``from robot_rl.envs import make_env``), so ``import robot_rl`` registers the envs without loading MuJoCo.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# gl_backend first: it picks the headless GL backend, which MuJoCo reads once when it is first imported.
from robot_rl.envs import gl_backend, keys  # noqa: F401
from robot_rl.envs.registration import ENV_VERSION, FLAT_GYM_IDS, GYM_ID, GYM_IDS, TASK_NAME, register_envs

register_envs()

if TYPE_CHECKING:
    from robot_rl.envs.defaults import DEFAULT_ARM, DEFAULT_TASK
    from robot_rl.envs.difficulty import DIFFICULTY_NAMES, Difficulty
    from robot_rl.envs.gym_env import InspectionGymEnv
    from robot_rl.envs.randomization import PERTURBATIONS, RANDOMIZATIONS, Randomization, get_randomization
    from robot_rl.envs.task import InspectionTask, RewardWeights, TaskConfig, Verdict
    from robot_rl.envs.tasks import TASKS, TaskError, get_task, register_task
    from robot_rl.envs.tasks.lead_inspect import LeadInspectTask
    from robot_rl.envs.tasks.pcb_inspect import PcbInspectTask
    from robot_rl.envs.tasks.pcb_inspect.board import DEFECT_TYPES
    from robot_rl.envs.tasks.pcb_inspect.difficulty import DIFFICULTIES
    from robot_rl.envs.tasks.pcb_inspect.expert import ExpertConfig, ScriptedExpert
    from robot_rl.envs.torchrl_env import InspectionEnv, make_env

# Where each name below is defined; ``__getattr__`` imports it on first use.
_HOMES = {
    "robot_rl.envs.difficulty": ("DIFFICULTY_NAMES", "Difficulty"),
    "robot_rl.envs.gym_env": ("InspectionGymEnv",),
    "robot_rl.envs.randomization": ("PERTURBATIONS", "RANDOMIZATIONS", "Randomization", "get_randomization"),
    "robot_rl.envs.task": ("InspectionTask", "RewardWeights", "TaskConfig", "Verdict"),
    "robot_rl.envs.defaults": ("DEFAULT_ARM", "DEFAULT_TASK"),
    "robot_rl.envs.tasks": ("TASKS", "TaskError", "get_task", "register_task"),
    "robot_rl.envs.tasks.lead_inspect": ("LeadInspectTask",),
    "robot_rl.envs.tasks.pcb_inspect": ("PcbInspectTask",),
    "robot_rl.envs.tasks.pcb_inspect.board": ("DEFECT_TYPES",),
    "robot_rl.envs.tasks.pcb_inspect.difficulty": ("DIFFICULTIES",),
    "robot_rl.envs.tasks.pcb_inspect.expert": ("ExpertConfig", "ScriptedExpert"),
    "robot_rl.envs.torchrl_env": ("InspectionEnv", "make_env"),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = [
    "DEFAULT_ARM", "DEFAULT_TASK", "DEFECT_TYPES", "DIFFICULTIES", "DIFFICULTY_NAMES", "ENV_VERSION", "FLAT_GYM_IDS",
    "GYM_ID",
    "GYM_IDS", "PERTURBATIONS", "RANDOMIZATIONS", "TASKS", "TASK_NAME", "Difficulty", "ExpertConfig", "InspectionEnv",
    "InspectionGymEnv", "InspectionTask", "LeadInspectTask", "PcbInspectTask", "Randomization", "RewardWeights",
    "ScriptedExpert", "TaskConfig", "TaskError", "Verdict", "get_randomization", "get_task", "keys", "make_env",
    "register_task",
]


def __getattr__(name: str):
    if name in _HOME_OF:
        value = getattr(importlib.import_module(_HOME_OF[name]), name)
        globals()[name] = value  # later look-ups skip this function
        return value
    raise AttributeError(f"module 'robot_rl.envs' has no attribute {name!r}")
