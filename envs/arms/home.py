"""The home configuration of an arm: where every episode starts (plus the difficulty's joint noise)."""

from __future__ import annotations

import functools

import mink
import mujoco
import numpy as np

from robot_rl.envs.arms.spec import (
    ARM_PREFIX,
    CAMERA_SITE,
    HOME_CAMERA_POS,
    HOME_CAMERA_QUAT,
    ArmError,
    ArmSpec,
    attach_arm,
)

_TOLERANCE = (1e-3, 1e-2)  # m, rad: how close to the home camera pose a solved home must land
_STARTS = 24  # IK starts tried before an arm is declared unable to reach home
_MIN_LINK_HEIGHT = 0.02  # m: every body of a solved home stays this far above the table top (z = 0)


def home_qpos(arm: ArmSpec) -> np.ndarray:
    """The arm's home joint angles: ``arm.home``, or solved with IK (once per process) when it has none."""
    return np.array(arm.home, np.float64) if arm.home is not None else _solved_home(arm).copy()


@functools.cache
def _solved_home(arm: ArmSpec) -> np.ndarray:
    """Joint angles putting the camera at ``HOME_CAMERA_POS`` looking down, with every link above the table.

    Differential IK stalls at joint limits from a bad start, so it starts from the middle of the joint ranges and
    then from seeded random configurations until one converges; ArmError if none does (out of reach).
    """
    spec = mujoco.MjSpec()
    attach_arm(spec, arm)
    model = spec.compile()
    data = mujoco.MjData(model)
    joint_ids = [model.joint(ARM_PREFIX + name).id for name in arm.joints]
    low, high = np.maximum(model.jnt_range[:, 0], -np.pi), np.minimum(model.jnt_range[:, 1], np.pi)
    rng = np.random.default_rng(0)
    starts = [(low + high) / 2, *(rng.uniform(low, high) for _ in range(_STARTS - 1))]
    best = np.inf
    for start in starts:
        q, error = _solve(model, start)
        data.qpos[:] = q
        mujoco.mj_kinematics(model, data)
        moving = model.body_weldid != 0  # not the world, nor a base fixed to it (it may rest on the table)
        above_table = data.xpos[moving, 2].min() > _MIN_LINK_HEIGHT
        if above_table and error[0] <= _TOLERANCE[0] and error[1] <= _TOLERANCE[1]:
            return q[model.jnt_qposadr[joint_ids]].copy()
        best = min(best, error[0])
    raise ArmError(f"arm {arm.name!r}: no IK solution puts the camera at {HOME_CAMERA_POS} looking down with the "
                   f"arm above the table (closest: {best * 1000:.0f} mm off); move base_pos or give home")


def _solve(model: mujoco.MjModel, start: np.ndarray) -> tuple[np.ndarray, tuple[float, float]]:
    configuration = mink.Configuration(model, q=start)
    camera = mink.FrameTask(CAMERA_SITE, "site", position_cost=1.0, orientation_cost=1.0)
    camera.set_target(mink.SE3(wxyz_xyz=np.array([*HOME_CAMERA_QUAT, *HOME_CAMERA_POS])))
    limits = [mink.ConfigurationLimit(model)]
    for _ in range(200):
        velocity = mink.solve_ik(configuration, [camera], 0.1, "daqp", damping=1e-3, limits=limits)
        configuration.integrate_inplace(velocity, 0.1)
    error = camera.compute_error(configuration)
    return configuration.q.copy(), (float(np.linalg.norm(error[:3])), float(np.linalg.norm(error[3:])))
