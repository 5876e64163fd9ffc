"""robot_rl: teach a robot arm to inspect circuit boards from camera images, on TorchRL and TensorDict.

Importing it registers the environment with Gymnasium (``gym.make(robot_rl.GYM_ID)``), as Gymnasium plug-ins do;
the entry point is a string, so MuJoCo and torch load only when an env is made. In a worker process that
multiprocessing started, importing it first makes the worker end with its parent (``robot_rl.processes``).
"""

from robot_rl.processes import die_with_parent

die_with_parent()  # before anything slow: a worker must not outlive a parent killed while it was still importing

import gymnasium as gym  # noqa: E402

__version__ = "0.1.0"

TASK_NAME = "pcb-inspect"
# Bump when dynamics, rendering, rewards or flags change: datasets record it and refuse a mismatch.
# 1: success is a correct verdict given while the board is localized (0 counted any correct verdict).
# 2: pixels are uint8 [H, W, 3], as Gymnasium renders and TorchRL's pixel transforms expect (1 had [3, H, W]).
ENV_VERSION = 2
GYM_ID = f"robot_rl/PcbInspect-v{ENV_VERSION}"

# The same task with another built-in arm (any arm also goes as ``gym.make(GYM_ID, arm=...)``). Names kept in step
# with robot_rl.envs.arms.ARMS by a test: importing it here would load MuJoCo.
ARM_GYM_IDS = {"panda": f"robot_rl/PcbInspectPanda-v{ENV_VERSION}"}

for _id, _kwargs in ((GYM_ID, {}), *((i, {"arm": arm}) for arm, i in ARM_GYM_IDS.items())):
    if _id not in gym.registry:
        gym.register(id=_id, entry_point="robot_rl.envs.gym_env:PcbInspectGymEnv", kwargs=_kwargs)
