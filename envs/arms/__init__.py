"""Arms (robot_rl.envs.arms): ``ArmSpec`` and the registry of arms the CLI and the env front-ends know by name.

``get_arm`` takes a registered name (``ur5e_like``, the default; ``panda``, with the ``[panda]`` extra) or the
path of a JSON file holding an ``ArmSpec``'s fields (a user's own arm; its ``mjcf`` is read from beside the JSON
file, and it and every file it names must lie in that folder: ``confine``).

Datasets, checkpoints and exports record an arm by its name or path and by ``arm_digest``, a hash of its content, so
an arm changed since (a camera or base pose moved) is refused where the recorded artefact is loaded (``check_arm``).
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import asdict
from pathlib import Path

from robot_rl.envs.arms.confine import check_confined
from robot_rl.envs.arms.panda import PANDA
from robot_rl.envs.arms.spec import (
    ARM_PREFIX,
    CAMERA_SITE,
    HOME_CAMERA_POS,
    WRIST_CAMERA,
    ArmError,
    ArmSpec,
    is_package_resource,
    mjcf_path,
    package_folder_of,
    package_resource_path,
)
from robot_rl.envs.arms.ur5e_like import UR5E_LIKE
from robot_rl.envs.defaults import DEFAULT_ARM
from robot_rl.envs.errors import file_problem

ARMS: dict[str, ArmSpec] = {arm.name: arm for arm in (UR5E_LIKE, PANDA)}

__all__ = ["ARMS", "ARM_PREFIX", "CAMERA_SITE", "DEFAULT_ARM", "DIGEST_KEY", "HOME_CAMERA_POS", "WRIST_CAMERA",
           "ArmError", "ArmSpec", "arm_digest", "check_arm", "get_arm", "register_arm"]
DIGEST_KEY = "arm_sha256"  # the field of a dataset's meta.json and a checkpoint's or export's env that records it


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
        return _arm_file(Path(arm))
    raise ArmError(f"unknown arm {arm!r}; choose one of {', '.join(ARMS)} or give an ArmSpec .json file")


def _arm_file(path: Path) -> ArmSpec:
    """The ArmSpec in a JSON file. It is data: its MJCF, and every file that MJCF names, must lie inside the JSON
    file's folder (a ``package:resource`` MJCF: inside that package's folder), reached without symlinks."""
    problem = file_problem(path)
    if problem:
        raise ArmError(f"{path}: cannot read an ArmSpec: {problem}")
    try:
        values = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ArmError(f"{path}: cannot read an ArmSpec: {err}") from None
    if not isinstance(values, dict):
        raise ArmError(f"{path}: an ArmSpec file holds one JSON object of its fields")
    mjcf = values.get("mjcf")
    if "mjcf" in values and not isinstance(mjcf, str):
        raise ArmError(f"{path}: mjcf must be a file name, got {mjcf!r}")
    if isinstance(mjcf, str) and not is_package_resource(mjcf):
        check_confined(mjcf, path.parent, str(path))
        values = {**values, "mjcf": str(path.parent / mjcf)}
    try:
        spec = ArmSpec.from_dict(values, source=str(path))
    except ArmError:
        raise
    except (TypeError, ValueError) as err:  # a field of the wrong type
        raise ArmError(f"{path}: not an ArmSpec ({err})") from None
    if is_package_resource(spec.mjcf):
        folder = package_folder_of(spec)
        check_confined(str(package_resource_path(spec).relative_to(folder)), folder, str(path))
    return spec


def arm_digest(arm: str) -> str:
    """sha256 (hex) of an arm's content: its ArmSpec fields as canonical JSON (the ``mjcf`` location and builder
    left out), then, for an arm file, the bytes of the MJCF file it names.

    Why these bytes: the fields hold what an edit moves (camera pose, base pose, joints, gains, home, revision) and
    the MJCF the kinematics; canonical JSON ignores formatting and key order, and leaving the location out lets a
    dataset and its arm move to another folder or machine together. A registered arm's MJCF is code of this
    install (or of the package that ships it) and is not hashed; nor are files an MJCF includes (meshes)."""
    spec = get_arm(arm)
    fields = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(spec).items()
              if k not in ("mjcf", "mjcf_builder")}
    if fields["revision"] == 1:
        del fields["revision"]  # the digests recorded before arms had a revision stay valid
    digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode())
    if arm not in ARMS:
        digest.update(mjcf_path(spec).read_bytes())
    return digest.hexdigest()


def check_arm(arm: str, recorded: str | None, source: str) -> str:
    """The arm's digest now, checked against the one ``source`` (an artefact) recorded: a mismatch is an ArmError
    naming both. An artefact from before digests were recorded loads (an arm file's with a one-line warning on
    stderr), unless it names a registered arm whose ``revision`` has been raised since: then ArmError."""
    current = arm_digest(arm)
    if recorded == current:
        return current
    if recorded is None:
        if arm in ARMS:
            if ARMS[arm].revision > 1:
                raise ArmError(f"{source}: recorded with arm {arm} before its revision {ARMS[arm].revision} "
                               f"(no {DIGEST_KEY}); collect and train again with this arm")
            return current
        print(f"warning: {source}: records arm {arm} by path only (no {DIGEST_KEY}); using the file as it is now",
              file=sys.stderr)
        return current
    raise ArmError(f"{source}: arm {arm} changed since it was recorded ({DIGEST_KEY} {recorded} recorded, "
                   f"{current} now)")
