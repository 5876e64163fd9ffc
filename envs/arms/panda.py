"""A Franka Emika Panda written by others: the model gymnasium-robotics ships for its Franka Kitchen tasks.

``pip install 'robot-rl[panda]'`` installs gymnasium-robotics. Its ``kitchen_franka/franka_assets/`` folder holds
the arm as MJCF fragments (``chain.xml``: the bodies; ``assets.xml``: meshes and defaults, with a mesh folder
relative to the including file; ``actuator.xml``: 9 position servos). A small wrapper that includes them is
written once per process into a scratch folder beside a link to that folder, so neither the package's files nor
ours are edited. Seven joints are controlled (IK takes the redundancy, a posture task keeps the elbow near home);
the two finger joints are welded closed.
"""

from __future__ import annotations

import atexit
import functools
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

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


PANDA = ArmSpec(
    name="panda",
    mjcf="gymnasium_robotics:envs/assets/kitchen_franka/franka_assets (wrapped)",
    mjcf_builder=panda_mjcf,
    joints=tuple(f"robot:panda0_joint{i}" for i in range(1, 8)),
    # Beside the fingers at their tips, looking along the flange axis: nothing of the hand is in view. The hand
    # (and the camera) are turned -45 deg about the flange axis, as Franka mounts it.
    camera_body="panda0_link7", camera_pos=(0.0318, -0.0318, 0.21), camera_quat=(0.0, 0.92388, -0.382683, 0.0),
    camera_fovy=50.0,
    max_joint_speed=2.61 * 2,  # twice Franka's fastest joint speed limit (2.61 rad/s)
    posture_cost=1e-2,
)
