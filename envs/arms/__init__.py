"""Arms (robot_rl.envs.arms): ``ArmSpec`` and the registry of arms the CLI and the env front-ends know by name.

``get_arm`` takes a registered name (``ur5e_like``, the default; ``panda``, with the ``[panda]`` extra) or the
path of a JSON file holding an ``ArmSpec``'s fields (a user's own arm; a relative ``mjcf`` is read from beside the
JSON file).
"""

from __future__ import annotations

import json
from pathlib import Path

from robot_rl.envs.arms.panda import PANDA
from robot_rl.envs.arms.spec import ARM_PREFIX, CAMERA_SITE, HOME_CAMERA_POS, WRIST_CAMERA, ArmError, ArmSpec
from robot_rl.envs.arms.ur5e_like import UR5E_LIKE

DEFAULT_ARM = UR5E_LIKE.name
ARMS: dict[str, ArmSpec] = {arm.name: arm for arm in (UR5E_LIKE, PANDA)}

__all__ = ["ARMS", "ARM_PREFIX", "CAMERA_SITE", "DEFAULT_ARM", "HOME_CAMERA_POS", "WRIST_CAMERA", "ArmError",
           "ArmSpec", "get_arm", "register_arm"]


def register_arm(arm: ArmSpec) -> ArmSpec:
    """Makes ``arm`` known by its name in this process (a name taken by another spec is refused)."""
    if ARMS.get(arm.name, arm) != arm:
        raise ArmError(f"arm {arm.name!r} is registered already, with another spec")
    ARMS[arm.name] = arm
    return arm


def get_arm(arm: str | ArmSpec) -> ArmSpec:
    """A registered arm by name, an ``ArmSpec`` as given, or the ArmSpec in a ``.json`` file."""
    if isinstance(arm, ArmSpec):
        return arm
    if arm in ARMS:
        return ARMS[arm]
    if arm.endswith(".json"):
        path = Path(arm)
        try:
            values = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise ArmError(f"{arm}: cannot read an ArmSpec: {err}") from None
        if not isinstance(values, dict):
            raise ArmError(f"{arm}: an ArmSpec file holds one JSON object of its fields")
        mjcf = values.get("mjcf")
        if isinstance(mjcf, str) and ":" not in mjcf and not Path(mjcf).is_absolute():
            values["mjcf"] = str(path.parent / mjcf)
        return ArmSpec.from_dict(values, source=arm)
    raise ArmError(f"unknown arm {arm!r}; choose one of {', '.join(ARMS)} or give an ArmSpec .json file")
