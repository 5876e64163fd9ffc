"""The built-in tasks' Gymnasium ids, and their registration (``robot_rl.envs`` registers them when imported, as
Gymnasium plug-ins do). The entry points are strings, so MuJoCo and torch load only when an env is made."""

from __future__ import annotations

import gymnasium as gym

from robot_rl.envs.defaults import DEFAULT_ARM, DEFAULT_TASK

TASK_NAME = DEFAULT_TASK  # the name robot_rl exported before the defaults had a module of their own
# The PCB task's version. Bump when dynamics, rendering, rewards or flags change: datasets record it and refuse a
# mismatch. 1: success is a correct verdict given while the board is localized (0 counted any correct verdict).
# 2: pixels are uint8 [H, W, 3], as Gymnasium renders and TorchRL's pixel transforms expect (1 had [3, H, W]).
ENV_VERSION = 2
GYM_ID = f"robot_rl/PcbInspect-v{ENV_VERSION}"

# Every built-in (task, arm) pair, versioned by its task (any task and arm also go as ``gym.make(GYM_ID, task=...,
# arm=...)``). Kept in step with robot_rl.envs.tasks.TASKS and robot_rl.envs.arms.ARMS by a test: importing them
# here would load MuJoCo.
GYM_IDS = {
    (DEFAULT_TASK, DEFAULT_ARM): GYM_ID,
    ("pcb-inspect", "panda"): f"robot_rl/PcbInspectPanda-v{ENV_VERSION}",
    ("lead-inspect", "ur5e_like"): "robot_rl/LeadInspect-v1",
    ("lead-inspect", "panda"): "robot_rl/LeadInspectPanda-v1",
}

# The same tasks with one Box action (pose + a verdict score), for Stable-Baselines3 and the like (robot_rl.envs.flat);
# any arm goes as ``gym.make(FLAT_GYM_IDS[task], arm=...)``.
FLAT_GYM_IDS = {"pcb-inspect": f"robot_rl/PcbInspectFlat-v{ENV_VERSION}", "lead-inspect": "robot_rl/LeadInspectFlat-v1"}


def register_envs() -> None:
    """Registers every id above with Gymnasium; an id already registered is left as it is."""
    for (task, arm), env_id in GYM_IDS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point="robot_rl.envs.gym_env:InspectionGymEnv",
                         kwargs={"task": task, "arm": arm})
    for task, env_id in FLAT_GYM_IDS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point="robot_rl.envs.flat:make_flat_env", kwargs={"task": task})
