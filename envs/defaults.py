"""The task and the arm every entry point uses when none is named, and the names of a deployed camera's exposure,
written once. Light to import (no MuJoCo): ``robot_rl.configs`` builds the CLI's help from them."""

DEFAULT_TASK = "pcb-inspect"
DEFAULT_ARM = "ur5e_like"

# A deployed camera's exposure (robot-rl evaluate --camera-exposure), as (sets its own exposure, how it meters:
# robot_rl.envs.exposure.METERS): from the centre of its own image, from the highlights there, or fixed (frames
# as bright as the scene is lit).
CAMERA_EXPOSURES = {"auto": (True, "centre"), "highlights": (True, "highlights"), "fixed": (False, "centre")}
