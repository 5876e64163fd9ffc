"""A Franka Emika Panda written by others: the model gymnasium-robotics ships for its Franka Kitchen tasks.

``pip install 'robot-rl[panda]'`` installs gymnasium-robotics. Its ``kitchen_franka/franka_assets/`` folder holds
the arm as MJCF fragments (``chain.xml``: the bodies; ``assets.xml``: meshes and defaults, with a mesh folder
relative to the including file; ``actuator.xml``: 9 position servos). A small wrapper that includes them is
written once per process into a scratch folder beside a link to that folder, so neither the package's files nor
ours are edited. Seven joints are controlled (IK takes the redundancy, a posture task keeps the elbow near home);
the two finger joints are welded closed.

The wrist camera sits on a bracket (``camera_mount``) that holds it just past the fingertips, its view tilted off the
flange axis. A camera looking along the flange, beside the fingers, failed the lead-inspection task's view (40 deg
above the board, from the connector's open side): the wrist had to bend 50 deg off straight down, which near the base
folds the Panda into its joint limits (joint 6 at its upper one, joint 4 fully folded), and the fingers, reaching
5 cm past the camera, hit the connector, the posts and the table first (figures in the README's arms section).
"""

from __future__ import annotations

import atexit
import functools
import importlib.util
import math
import os
import shutil
import tempfile
from pathlib import Path

import mujoco
import numpy as np

from robot_rl.envs.arms.spec import ArmError, ArmSpec

_WRAPPER = """<mujoco model="panda">
  <include file="franka_assets/assets.xml"/>
  <worldbody>
    <include file="franka_assets/chain.xml"/>
  </worldbody>
  <include file="franka_assets/actuator.xml"/>
</mujoco>
"""
_ASSETS = Path("envs", "assets", "kitchen_franka", "franka_assets")


@functools.cache
def panda_mjcf() -> str:
    """Writes the wrapper MJCF (once per process) and returns its path."""
    found = importlib.util.find_spec("gymnasium_robotics")  # located, not imported: its import prints notices
    if found is None or not found.submodule_search_locations:
        raise ArmError("arm 'panda' needs gymnasium-robotics: pip install 'robot-rl[panda]'")
    assets = Path(found.submodule_search_locations[0]) / _ASSETS
    if not (assets / "chain.xml").is_file():
        raise ArmError(f"arm 'panda': {assets / 'chain.xml'} is missing (gymnasium-robotics 1.4 ships it)")
    scratch = Path(tempfile.mkdtemp(prefix="robot_rl-panda-"))
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    os.symlink(assets, scratch / "franka_assets")
    (scratch / "panda.xml").write_text(_WRAPPER)
    return str(scratch / "panda.xml")


def camera_mount(reach: float, tilt: float, turn: float) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Pose of the wrist camera in link 7's frame: (position (m), orientation (wxyz)).

    Without tilt and turn the camera looks along the flange axis (link 7's +z) from ``reach`` m out along it, 45 mm
    off the axis beside the fingers (square to the line they close along), its image turned -45 deg as Franka
    mounts the hand. ``tilt`` (rad) turns the view off the flange axis about the image's x axis; ``turn`` (rad)
    turns the whole mount about the flange axis.
    """
    along_flange = np.array([0.0, 0.92388, -0.382683, 0.0])  # 180 deg about an axis -22.5 deg off link 7's x
    tilted, turned = np.empty(4), np.empty(4)
    mujoco.mju_axisAngle2Quat(tilted, [1.0, 0.0, 0.0], tilt)
    mujoco.mju_mulQuat(tilted, along_flange, tilted)  # about the camera's own x: applied on the right
    about_flange = np.empty(4)
    mujoco.mju_axisAngle2Quat(about_flange, [0.0, 0.0, 1.0], turn)
    mujoco.mju_mulQuat(turned, about_flange, tilted)  # about link 7's z: applied on the left
    position = np.empty(3)
    mujoco.mju_rotVecQuat(position, [0.0318, -0.0318, reach], about_flange)
    return tuple(float(v) for v in position), tuple(float(v) for v in turned)


# The fingertips reach 0.262 m along the flange axis: from 8 mm past them the camera sees the board before a finger
# can touch anything. The 50 deg tilt is the lead view's angle from straight down, so the flange points straight
# down there; for the PCB task's view (straight down) the flange tilts instead, high above the board, where the
# Panda has room. The 15 deg turn centres joint 7's range (332 deg) on the camera headings the lead views ask for:
# without it the wrist ran into its limit where the open side faces +y (turns of 5-25 deg measured alike).
_CAMERA_POS, _CAMERA_QUAT = camera_mount(reach=0.27, tilt=math.radians(50), turn=math.radians(15))

PANDA = ArmSpec(
    name="panda",
    mjcf="gymnasium_robotics:envs/assets/kitchen_franka/franka_assets (wrapped)",
    mjcf_builder=panda_mjcf,
    joints=tuple(f"robot:panda0_joint{i}" for i in range(1, 8)),
    camera_body="panda0_link7", camera_pos=_CAMERA_POS, camera_quat=_CAMERA_QUAT, camera_fovy=50.0,
    max_joint_speed=2.61 * 2,  # twice Franka's fastest joint speed limit (2.61 rad/s)
    posture_cost=1e-2,
    revision=2,  # the camera moved past the fingertips and tilted: images of revision 1 are another arm's
)
