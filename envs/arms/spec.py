"""``ArmSpec``: what the cell needs to know about an arm, and how its MJCF is compiled into the cell.

The user's MJCF is never edited: it is loaded with ``mujoco.MjSpec``, the uncontrolled joints are welded, servos,
gravity compensation, collision filtering and the wrist camera (a camera and a site at the same pose: mink has no
camera frame type) are added to the loaded spec, and the result is attached to the cell under ``ARM_PREFIX``.
robosuite's ``RobotModel`` and dm_control's composer ``Entity`` play this role in their frameworks; neither can
take a plain MJCF file and a few names, which is what a user with their own arm has.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import mujoco
import numpy as np

from robot_rl.envs.errors import UsageError, file_problem

ARM_PREFIX = "arm/"  # every element of the arm's file is renamed "arm/<name>" in the cell: no clash with its names
WRIST_CAMERA = "wrist_cam"
CAMERA_SITE = "wrist_cam_site"
# Where every arm starts an episode: the wrist camera 0.45 m above the table at (0.40, 0, 0.45), looking straight
# down with its image x axis along the world's x (the identity orientation of a MuJoCo camera frame).
HOME_CAMERA_POS = (0.40, 0.0, 0.45)
HOME_CAMERA_QUAT = (1.0, 0.0, 0.0, 0.0)
_SUPPORTED_JOINTS = (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE)


class ArmError(UsageError, ValueError):
    """An arm that cannot work in the cell (the message names the arm and the culprit); the CLI exits 2."""


@dataclass(frozen=True)
class ArmSpec:
    """An arm carrying the wrist camera. Lengths in metres, angles in radians unless named otherwise.

    ``mjcf``: a file path, or ``"package:resource"`` for a file shipped inside a Python package. ``joints``: the
    controlled joints, base to tip (hinge or slide, each with limits: IK keeps inside them); any other joint of the
    file is welded at its reference position (e.g. a gripper's fingers). ``camera_body`` carries the camera at
    ``camera_pos`` / ``camera_quat`` (wxyz, in the body frame; MuJoCo cameras look along their local -z).
    ``home``: joint angles that put the camera at ``HOME_CAMERA_POS`` looking down; None solves them with IK once
    per process. ``servo_gains`` (kp, kv): position servos added on every controlled joint (replacing the file's
    actuators on them); None uses the file's actuators, which must then drive every controlled joint.
    ``collision_geoms``: the geoms that count as the arm in collisions; None takes every geom of the arm that
    collides in the file, except those fixed to the world (a base resting on the table). The arm's geoms touch
    the cell's fixtures only, never each other. ``mjcf_builder``: for an MJCF that has to be assembled (e.g. from
    another package's fragments), called once per process, returns the path of the file to load; ``mjcf`` then
    only names the source. ``posture_cost``: weight of a posture task in the control IK pulling towards home (a
    redundant arm needs it to keep its elbow sane). ``geom_group``: MuJoCo group given to every arm geom (the wrist
    camera skips group 1: the arm is behind its image plane, and software GL is faster without it); None keeps
    the file's groups. ``revision``: raised when a registered arm changes what its artefacts hold (a moved camera
    changes every image): artefacts recorded before content hashes were, which name the arm only, are then
    refused instead of loading with the new arm.
    """

    name: str
    mjcf: str
    joints: tuple[str, ...]
    camera_body: str
    camera_pos: tuple[float, float, float] = (0.0, 0.0, 0.0)
    camera_quat: tuple[float, float, float, float] = (1.0, 0.0, 0.0, 0.0)
    camera_fovy: float = 50.0  # degrees, vertical
    home: tuple[float, ...] | None = None
    base_pos: tuple[float, float, float] = (0.0, 0.0, 0.0)  # where the file's world origin sits in the cell
    servo_gains: tuple[float, float] | None = None
    collision_geoms: tuple[str, ...] | None = None
    max_joint_speed: float = 2 * math.pi  # rad/s (m/s for slides); joint-velocity readings are clipped to it
    gravity_compensation: bool = True  # the servos hold the arm without sagging, as a real arm's controller does
    posture_cost: float = 0.0
    geom_group: int | None = 1
    mjcf_builder: Callable[[], str] | None = None
    revision: int = 1

    def __post_init__(self) -> None:
        culprit = f"arm {self.name!r}"
        if not self.name or not self.joints:
            raise ArmError(f"{culprit}: needs a name and at least one controlled joint")
        if len(set(self.joints)) != len(self.joints):
            raise ArmError(f"{culprit}: joints listed twice in {list(self.joints)}")
        if self.home is not None and len(self.home) != len(self.joints):
            raise ArmError(f"{culprit}: home has {len(self.home)} values for {len(self.joints)} joints")
        if len(self.camera_pos) != 3 or len(self.base_pos) != 3:
            raise ArmError(f"{culprit}: camera_pos and base_pos need 3 values")
        if len(self.camera_quat) != 4 or not math.isclose(float(np.linalg.norm(self.camera_quat)), 1.0, abs_tol=1e-6):
            raise ArmError(f"{culprit}: camera_quat must be a unit quaternion (w, x, y, z), got {self.camera_quat}")
        if not 0 < self.camera_fovy < 180:
            raise ArmError(f"{culprit}: camera_fovy must be in (0, 180) degrees, got {self.camera_fovy}")
        if self.servo_gains is not None and (len(self.servo_gains) != 2 or min(self.servo_gains) <= 0):
            raise ArmError(f"{culprit}: servo_gains must be (kp, kv), both > 0, got {self.servo_gains}")
        if self.max_joint_speed <= 0:
            raise ArmError(f"{culprit}: max_joint_speed must be > 0, got {self.max_joint_speed}")
        if self.posture_cost < 0:
            raise ArmError(f"{culprit}: posture_cost must be >= 0, got {self.posture_cost}")

    @property
    def joint_state_dim(self) -> int:
        """Size of the joint-state observation: angles then velocities of the controlled joints."""
        return 2 * len(self.joints)

    def to_dict(self) -> dict:
        """JSON-ready fields (``from_dict`` reads them back): how datasets and checkpoints record a file arm."""
        if self.mjcf_builder is not None:
            raise ArmError(f"arm {self.name!r}: an arm built by a function is registered in Python, not in a file")
        values = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}
        del values["mjcf_builder"]
        return values

    @classmethod
    def from_dict(cls, values: dict, source: str = "arm") -> ArmSpec:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ArmError(f"{source}: unknown ArmSpec field {unknown[0]!r}; fields: {', '.join(sorted(known))}")
        missing = sorted({"name", "mjcf", "joints", "camera_body"} - set(values))
        if missing:
            raise ArmError(f"{source}: missing ArmSpec field {missing[0]!r}")
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})


def package_folder(name: str) -> Path | None:
    """The folder of the installed package ``name`` (dotted names too), found without importing it or its parents:
    the import system's finders only locate files. None when no such package is installed."""
    module = sys.modules.get(name)
    if module is not None:  # imported already (robot_rl itself): nothing runs by looking at it
        locations = list(getattr(module, "__path__", []) or [])
        return Path(locations[0]) if locations else None
    parent, _, _ = name.rpartition(".")
    search = None
    if parent:
        parent_folder = package_folder(parent)
        if parent_folder is None:
            return None
        search = [str(parent_folder)]
    for finder in sys.meta_path:
        find_spec = getattr(finder, "find_spec", None)
        spec = find_spec(name, search) if find_spec is not None else None
        if spec is not None:
            locations = list(spec.submodule_search_locations or [])
            return Path(locations[0]) if locations else None
    return None


def is_package_resource(mjcf: str) -> bool:
    """Whether an ``mjcf`` value names a ``package:resource`` (a package name before the colon, no path)."""
    package, sep, _ = mjcf.partition(":")
    return bool(sep) and "/" not in package


def mjcf_path(arm: ArmSpec) -> Path:
    """The arm's MJCF file. A ``package:resource`` is the file ``resource`` inside the installed package's folder,
    which is located, never imported: an arm file may name any package, and importing one would run its code.
    So an arm's package needs no trust; the resource must lie inside the package's folder (after symlinks)."""
    if arm.mjcf_builder is not None:
        return Path(arm.mjcf_builder())
    if is_package_resource(arm.mjcf) and not Path(arm.mjcf).exists():
        path = package_resource_path(arm)
    else:
        path = Path(arm.mjcf).expanduser()
    problem = file_problem(path, follow_symlinks=True)
    if problem == "no such file":
        raise ArmError(f"arm {arm.name!r}: mjcf file {str(path)!r} does not exist")
    if problem:
        raise ArmError(f"arm {arm.name!r}: mjcf file {str(path)!r} is {problem}")
    return path


def package_folder_of(arm: ArmSpec) -> Path:
    """The folder of the package an arm's ``package:resource`` MJCF names (located, never imported)."""
    package = arm.mjcf.partition(":")[0]
    folder = package_folder(package) if package.replace(".", "").replace("_", "").isalnum() else None
    if folder is None:
        raise ArmError(f"arm {arm.name!r}: no package {package!r} for mjcf {arm.mjcf!r}")
    return folder


def package_resource_path(arm: ArmSpec) -> Path:
    """The file an arm's ``package:resource`` MJCF names, refused unless it lies inside the package's folder."""
    package, _, resource = arm.mjcf.partition(":")
    folder = package_folder_of(arm)
    path = folder / resource
    if not path.resolve().is_relative_to(folder.resolve()):
        raise ArmError(f"arm {arm.name!r}: mjcf {arm.mjcf!r} leads outside the package {package!r}")
    return path


def load_arm(arm: ArmSpec) -> mujoco.MjSpec:
    """The arm's file as an MjSpec, ready to attach: checked, uncontrolled joints welded, servos, gravity
    compensation and collision filtering applied (the camera is added after attaching, see ``attach_arm``)."""
    path = mjcf_path(arm)
    try:
        spec = mujoco.MjSpec.from_file(str(path))
    except ValueError as err:
        raise ArmError(f"arm {arm.name!r}: {path} does not load: {str(err).splitlines()[0]}") from None
    culprit = f"arm {arm.name!r} ({path.name})"
    spec.nuser_actuator = -1  # sized from the data, as the cell's is (a fixed size in the arm's file clashes)
    joints = {j.name: j for j in spec.joints}
    for name in arm.joints:
        joint = joints.get(name)
        if joint is None:
            raise ArmError(f"{culprit}: no joint named {name!r}; the file has {', '.join(joints) or 'no joints'}")
        if joint.type not in _SUPPORTED_JOINTS:
            raise ArmError(f"{culprit}: joint {name!r} is not a hinge or slide joint")
        if joint.limited == mujoco.mjtLimited.mjLIMITED_FALSE or (
                joint.limited == mujoco.mjtLimited.mjLIMITED_AUTO and joint.range[0] >= joint.range[1]):
            raise ArmError(f"{culprit}: joint {name!r} has no range; IK needs limits on every controlled joint")
    if spec.body(arm.camera_body) is None:
        raise ArmError(f"{culprit}: no body named {arm.camera_body!r} to carry the camera")
    for geom in arm.collision_geoms or ():
        if spec.geom(geom) is None:
            raise ArmError(f"{culprit}: no geom named {geom!r} in collision_geoms")
    _control(spec, arm, culprit)
    for body in spec.bodies:
        if arm.gravity_compensation and body.name != "world":
            body.gravcomp = 1.0
    colliders = set(arm.collision_geoms) if arm.collision_geoms is not None else None
    base = _bodies_fixed_to_the_world(spec)
    for geom in spec.geoms:
        if colliders is not None:
            collides = geom.name in colliders
        else:
            collides = bool(geom.contype or geom.conaffinity) and geom.parent.name not in base
        geom.contype, geom.conaffinity = 0, 1 if collides else 0
        if arm.geom_group is not None:
            geom.group = arm.geom_group
    return spec


def _bodies_fixed_to_the_world(spec: mujoco.MjSpec) -> set[str]:
    """Names of the bodies with no joint between them and the world (after uncontrolled joints are welded)."""
    fixed, stack = set(), [spec.worldbody]
    while stack:
        body = stack.pop()
        if body.name == "world" or not body.joints:
            fixed.add(body.name)
            stack.extend(body.bodies)
    return fixed


def _control(spec: mujoco.MjSpec, arm: ArmSpec, culprit: str) -> None:
    """Welds the joints ``arm.joints`` leaves out and makes sure a position servo drives each one it lists."""
    driven = {}
    for actuator in list(spec.actuators):
        target = actuator.target
        if target not in arm.joints or arm.servo_gains is not None:
            spec.delete(actuator)  # drives a welded joint, or is replaced by the spec's servos
        else:
            driven[target] = actuator
    for joint in list(spec.joints):
        if joint.name not in arm.joints:
            spec.delete(joint)
    for tendon in list(spec.tendons):  # a gripper's coupling tendons lose their joints with the fingers
        spec.delete(tendon)
    for equality in list(spec.equalities):
        spec.delete(equality)
    if arm.servo_gains is not None:
        kp, kv = arm.servo_gains
        for name in arm.joints:
            joint = spec.joint(name)
            spec.add_actuator(name=name, target=name, trntype=mujoco.mjtTrn.mjTRN_JOINT,
                              gaintype=mujoco.mjtGain.mjGAIN_FIXED, gainprm=[kp] + [0] * 9,
                              biastype=mujoco.mjtBias.mjBIAS_AFFINE, biasprm=[0, -kp, -kv] + [0] * 7,
                              ctrlrange=list(joint.range), ctrllimited=mujoco.mjtLimited.mjLIMITED_TRUE)
        return
    missing = [name for name in arm.joints if name not in driven]
    if missing:
        raise ArmError(f"{culprit}: joint {missing[0]!r} has no actuator; give servo_gains=(kp, kv) to add servos")
    for name, actuator in driven.items():
        # The scene writes joint targets into ctrl: only a position servo (force = kp * (ctrl - q) - kv * qdot)
        # turns them into motion; a motor would read them as torques.
        servo = (actuator.gaintype == mujoco.mjtGain.mjGAIN_FIXED and actuator.biastype == mujoco.mjtBias.mjBIAS_AFFINE
                 and actuator.gainprm[0] > 0 and math.isclose(actuator.biasprm[1], -actuator.gainprm[0]))
        if not servo:
            raise ArmError(f"{culprit}: the actuator of joint {name!r} is not a position servo; give "
                           "servo_gains=(kp, kv) to replace it")


def attach_arm(cell: mujoco.MjSpec, arm: ArmSpec) -> None:
    """Compiles ``arm`` into ``cell`` at ``arm.base_pos`` and adds the wrist camera and its site."""
    frame = cell.worldbody.add_frame(pos=list(arm.base_pos))
    cell.attach(load_arm(arm), prefix=ARM_PREFIX, frame=frame)
    mount = cell.body(ARM_PREFIX + arm.camera_body)
    mount.add_camera(name=WRIST_CAMERA, pos=list(arm.camera_pos), quat=list(arm.camera_quat), fovy=arm.camera_fovy)
    mount.add_site(name=CAMERA_SITE, pos=list(arm.camera_pos), quat=list(arm.camera_quat), size=[0.005] * 3,
                   group=4)
