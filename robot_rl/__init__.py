"""robot_rl: teach a robot arm to inspect circuit boards from camera images, on TorchRL and TensorDict.

Importing it registers the environments with Gymnasium (``gym.make(robot_rl.GYM_ID)``, every id in
``robot_rl.GYM_IDS``), as Gymnasium plug-ins do (``robot_rl.envs.registration``); the entry point is a string, so
MuJoCo and torch load only when an env is made. In a worker process that multiprocessing started, importing it first
makes the worker end with its parent (``robot_rl.processes``).

Python runs this file before any module of the package, ``robot_rl.envs`` included, so it imports only
``robot_rl.envs`` and modules that import nothing of ours (``tests/test_layers.py`` holds it to that).
"""

from robot_rl.processes import die_with_parent

die_with_parent()  # before anything slow: a worker must not outlive a parent killed while it was still importing

# Importing robot_rl.envs registers its Gymnasium ids (light: no MuJoCo, no torch).
from robot_rl.envs.registration import ENV_VERSION, FLAT_GYM_IDS, GYM_ID, GYM_IDS, TASK_NAME  # noqa: E402

__version__ = "0.1.0"

__all__ = ["ENV_VERSION", "FLAT_GYM_IDS", "GYM_ID", "GYM_IDS", "TASK_NAME", "__version__"]
