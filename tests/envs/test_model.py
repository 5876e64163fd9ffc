"""The MJCF cell: named elements, collision filtering, joint limits (dm_control-style property checks)."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from robot_rl.envs.arms import ARM_PREFIX, ARMS
from robot_rl.envs.scene import ArmScene
from robot_rl.envs.tasks.pcb_inspect.difficulty import DIFFICULTIES

JOINT_NAMES = ARMS["ur5e_like"].joints

OBJECT_KINDS = [
    (mujoco.mjtObj.mjOBJ_BODY, "nbody"), (mujoco.mjtObj.mjOBJ_GEOM, "ngeom"), (mujoco.mjtObj.mjOBJ_JOINT, "njnt"),
    (mujoco.mjtObj.mjOBJ_ACTUATOR, "nu"), (mujoco.mjtObj.mjOBJ_CAMERA, "ncam"), (mujoco.mjtObj.mjOBJ_SITE, "nsite"),
    (mujoco.mjtObj.mjOBJ_LIGHT, "nlight"), (mujoco.mjtObj.mjOBJ_MATERIAL, "nmat"),
]


@pytest.mark.parametrize("difficulty", list(DIFFICULTIES.values()), ids=list(DIFFICULTIES))
def test_every_element_is_named(difficulty):
    model = ArmScene(difficulty.num_posts).model
    for obj, count in OBJECT_KINDS:
        first = 1 if obj == mujoco.mjtObj.mjOBJ_BODY else 0  # the world body has no name
        unnamed = [i for i in range(first, getattr(model, count)) if not mujoco.mj_id2name(model, obj, i)]
        assert not unnamed, f"unnamed {obj.name} ids {unnamed}"


def test_arm_has_six_revolute_joints_with_position_servos():
    model = ArmScene(0).model
    assert [model.joint(i).name for i in range(model.njnt)] == [ARM_PREFIX + name for name in JOINT_NAMES]
    assert all(model.jnt_type == mujoco.mjtJoint.mjJNT_HINGE)
    assert [model.actuator(i).name for i in range(model.nu)] == [ARM_PREFIX + name for name in JOINT_NAMES]
    assert (model.actuator_gainprm[:, 0] > 0).all() and (model.actuator_biasprm[:, 1] < 0).all()


def test_posts_follow_the_difficulty():
    assert {name: ArmScene(d.num_posts).num_posts for name, d in DIFFICULTIES.items()} == {
        name: d.num_posts for name, d in DIFFICULTIES.items()}
    assert "post_0" not in [ArmScene(0).model.body(i).name for i in range(ArmScene(0).model.nbody)]


def test_only_arm_versus_fixture_contacts_are_possible():
    model = ArmScene(4).model
    arm_bodies = {model.body(ARM_PREFIX + name).id for name in (
        "shoulder_link", "upper_arm_link", "forearm_link", "wrist_1_link", "wrist_2_link", "wrist_3_link",
        "camera_mount")}
    for i in range(model.ngeom):
        for j in range(i + 1, model.ngeom):
            collides = bool(model.geom_contype[i] & model.geom_conaffinity[j]) or bool(
                model.geom_contype[j] & model.geom_conaffinity[i])
            if collides:
                in_arm = (model.geom_bodyid[i] in arm_bodies, model.geom_bodyid[j] in arm_bodies)
                assert sum(in_arm) == 1, (model.geom(i).name, model.geom(j).name)


def test_home_pose_rests_without_drift():
    scene = ArmScene(0)
    scene.reset(scene.home)
    scene.forward()
    for _ in range(20):
        outcome = scene.step(scene.home)
    assert not outcome.collision and not outcome.unstable
    np.testing.assert_allclose(scene.qpos, scene.home, atol=1e-3)
    assert np.abs(scene.qvel).max() < 1e-3
