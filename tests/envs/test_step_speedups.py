"""The env step's fast paths change nothing: the QP-direct IK returns mink's joint angles bit for bit, and the
one-call physics period ends where the substep loop ends (state, collision and instability flags), so whole
rollouts (pixels, joint angles, rewards, flags) equal those of the reference path for several arms, tasks and
seeds."""

from __future__ import annotations

import copy

import mujoco
import numpy as np
import pytest

from robot_rl.envs.arms import ARMS
from robot_rl.envs.ik import CameraPoseIK, MinkCameraPoseIK, camera_ik
from robot_rl.envs.scene import CAMERA_SITE, CONTROL_PERIOD, ArmScene
from robot_rl.envs.tasks import build_task

DEFAULT_ARM = "ur5e_like"


def _arms() -> list:
    arms = [DEFAULT_ARM]
    if "panda" in ARMS:
        arms.append(pytest.param("panda", marks=pytest.mark.skipif(
            not _has_gymnasium_robotics(), reason="the [panda] extra is not installed")))
    return arms


def _has_gymnasium_robotics() -> bool:
    import importlib.util

    return importlib.util.find_spec("gymnasium_robotics") is not None


def _ik_pair(scene: ArmScene, model: mujoco.MjModel | None = None, iterations: int = 1):
    """The fast IK and mink's, set up as the task sets up its own (posture towards home)."""
    return camera_ik(scene, iterations, model), camera_ik(scene, iterations, model, reference=True)


def _random_requests(scene: ArmScene, rng: np.random.Generator, count: int):
    """(q, target position, target orientation): joints up to 0.2 rad past their limits or exactly at one,
    targets from a control step's reach to a metre away (out of reach), any orientation."""
    low, high = scene.joint_limits[:, 0], scene.joint_limits[:, 1]
    data = mujoco.MjData(scene.model)
    for i in range(count):
        q = rng.uniform(low - 0.2, high + 0.2)
        if i % 5 == 0:
            joint = rng.integers(len(q))
            q[joint] = low[joint] if i % 2 else high[joint]
        data.qpos[scene.joint_qpos_ids] = np.clip(q, low, high)
        mujoco.mj_kinematics(scene.model, data)
        reach = (0.01, 0.05, 0.3, 1.0)[i % 4]
        position = data.site_xpos[scene.camera_site_id] + rng.normal(scale=reach, size=3)
        quat = rng.normal(size=4)
        yield q, position, quat / np.linalg.norm(quat)


@pytest.mark.parametrize("arm", _arms())
def test_the_qp_ik_returns_minks_joint_angles_bit_for_bit(arm):
    scene = ArmScene(2, arm)
    fast, reference = _ik_pair(scene)
    assert fast._mirrored, "the fast IK fell back to mink: this test would compare mink with itself"
    rng = np.random.default_rng(7)
    moved = 0
    for q, position, quat in _random_requests(scene, rng, 2000):
        answer, expected = fast.solve(q, position, quat), reference.solve(q, position, quat)
        np.testing.assert_array_equal(answer, expected)
        moved += not np.array_equal(expected, np.clip(q, *scene.joint_limits.T))
    assert moved > 1900  # the requests move the arm (not a comparison of unchanged inputs)


def test_several_gauss_newton_steps_match_mink_bit_for_bit():
    scene = ArmScene(0)
    fast, reference = _ik_pair(scene, iterations=25)  # the view generator's setting
    for q, position, quat in _random_requests(scene, np.random.default_rng(3), 60):
        np.testing.assert_array_equal(fast.solve(q, position, quat), reference.solve(q, position, quat))


def test_an_infeasible_qp_returns_the_clipped_start_as_mink_does():
    scene = ArmScene(0)
    model = copy.deepcopy(scene.model)
    model.jnt_range[2] = (0.5, 0.2)  # an empty range: no step satisfies both of its limit rows
    fast, reference = _ik_pair(scene, model)
    low, high = model.jnt_range[:, 0], model.jnt_range[:, 1]
    for q, position, quat in _random_requests(scene, np.random.default_rng(5), 50):
        answer, expected = fast.solve(q, position, quat), reference.solve(q, position, quat)
        np.testing.assert_array_equal(answer, expected)
        np.testing.assert_array_equal(answer, np.clip(q, low, high))


def test_unusual_targets_give_what_mink_gives():
    scene = ArmScene(0)
    fast, reference = _ik_pair(scene)
    q, (position, _), quat = scene.home, scene.camera_pose(), np.array([1.0, 0.0, 0.0, 0.0])
    for target_position, target_quat in [(position + np.nan, quat), (position, np.zeros(4)),
                                         (position.astype(np.float32), quat.astype(np.float32)),
                                         (position + 1e200, quat)]:
        with np.errstate(over="ignore", invalid="ignore"):
            answer, expected = fast.solve(q, target_position, target_quat), reference.solve(q, target_position,
                                                                                             target_quat)
        np.testing.assert_array_equal(answer, expected)


@pytest.mark.parametrize("arm", _arms())
def test_camera_ik_is_the_ik_the_task_and_view_renderer_set_up_by_hand(arm):
    # The one factory of the task, the view renderer, the benchmark and these tests: posture towards home at the
    # arm's posture cost, on the arm's joints only.
    scene = ArmScene(0, arm)
    posture = np.zeros(scene.model.nq)
    posture[scene.joint_qpos_ids] = scene.home
    rng = np.random.default_rng(11)
    for iterations in (1, 25):
        for reference, kind in ((False, CameraPoseIK), (True, MinkCameraPoseIK)):
            made = camera_ik(scene, iterations, reference=reference)
            by_hand = kind(scene.model, CAMERA_SITE, iterations=iterations, posture=posture,
                           posture_cost=scene.arm.posture_cost)
            assert type(made) is kind and made.iterations == iterations
            for q, position, quat in _random_requests(scene, rng, 10):
                np.testing.assert_array_equal(made.solve(q, position, quat), by_hand.solve(q, position, quat))
    assert build_task("pcb-inspect", "default", 32, None, {}, arm=arm).ik.iterations == 1


def _reference_path(task):
    """``task`` stepping as before the fast paths: mink's IK and one MuJoCo call per substep."""
    scene = task.scene
    task.ik = _ik_pair(scene)[1]
    scene.step = scene.step_substeps
    return task


@pytest.mark.parametrize("arm", _arms())
@pytest.mark.parametrize("task_name", ["pcb-inspect", "lead-inspect"])
def test_rollouts_equal_the_reference_paths_bit_for_bit(task_name, arm):
    fast = build_task(task_name, "hard", 32, None, {}, "default", arm)
    reference = _reference_path(build_task(task_name, "hard", 32, None, {}, "default", arm))
    collisions = 0
    for seed in range(3):
        rng = np.random.default_rng(seed)
        first, expected_first = fast.reset(seed), reference.reset(seed)
        np.testing.assert_array_equal(first["pixels"], expected_first["pixels"])
        for step in range(60):
            pose = rng.uniform(-1, 1, 6)
            pose[2] = -1.0 if step % 4 else pose[2]  # mostly down, into the board, posts and table
            result, expected = fast.step(pose, 0), reference.step(pose, 0)
            for key in expected.observation:
                np.testing.assert_array_equal(result.observation[key], expected.observation[key], err_msg=key)
            assert (result.reward, result.terms, result.flags) == (expected.reward, expected.terms, expected.flags)
            assert (result.terminated, result.truncated) == (expected.terminated, expected.truncated)
            np.testing.assert_array_equal(fast.scene.data.qvel, reference.scene.data.qvel)
            collisions += expected.flags["collision"]
            if expected.truncated:
                break
    assert collisions > 0  # the collision flag was compared where it is set, not only where it is clear


@pytest.mark.parametrize("autoreset", [True, False])
def test_an_unstable_period_ends_as_the_substep_loop_ends_it(autoreset):
    outcomes = []
    for seed in range(4):
        fast, reference = ArmScene(2), ArmScene(2)
        for scene in (fast, reference):
            if not autoreset:
                scene.model.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_AUTORESET
            scene.reset(scene.home)
            scene.place_board(0.45, 0.0, 0.1)
            scene.forward()
        rng = np.random.default_rng(seed)
        for period in range(4):
            targets = fast.home + rng.normal(scale=0.5, size=fast.home.shape)
            if period == 1:
                kick = rng.normal(scale=10.0 ** (3 + 2 * seed), size=fast.home.shape)  # from a knock to a blow-up
                fast.data.qvel[:] += kick
                reference.data.qvel[:] += kick
            outcome, expected = fast.step(targets), reference.step_substeps(targets)
            assert outcome == expected
            for field in ("qpos", "qvel", "qacc_warmstart", "time", "maxuse_con"):
                np.testing.assert_array_equal(getattr(fast.data, field), getattr(reference.data, field), err_msg=field)
            np.testing.assert_array_equal(fast.data.warning.number, reference.data.warning.number)
            outcomes.append(expected)
    assert any(o.unstable for o in outcomes) and any(o.collision for o in outcomes)


def test_a_substep_observer_still_sees_every_substep():
    scene = ArmScene(0)
    scene.reset(scene.home)
    scene.forward()
    times = []
    scene.substep_observer = lambda: times.append(scene.data.time)
    scene.step(scene.home + 0.1)
    np.testing.assert_allclose(np.diff([0.0, *times]), scene.model.opt.timestep)


def test_another_physics_timestep_keeps_the_control_period_and_one_that_does_not_divide_it_is_refused():
    task = build_task("pcb-inspect", "default", 32, None, {}, arm=DEFAULT_ARM)
    scene = task.scene
    assert scene.substeps * scene.model.opt.timestep == pytest.approx(CONTROL_PERIOD)
    task.reset(0)
    scene.set_physics_timestep(0.01)
    start = scene.data.time
    scene.step(scene.qpos.copy())
    assert scene.substeps == 10 and scene.data.time - start == pytest.approx(CONTROL_PERIOD)
    for timestep in (0.003, 0.0, -0.01):
        with pytest.raises(ValueError, match="control period"):
            scene.set_physics_timestep(timestep)
    assert scene.substeps == 10 and scene.model.opt.timestep == 0.01
