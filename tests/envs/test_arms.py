"""Arms as specs: the built-in arm unchanged, an arm that exists only in this test through the env contract, and
one-line errors for arm files that cannot work."""

from __future__ import annotations

import dataclasses
import json

import gymnasium as gym
import mujoco
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from torchrl.envs.utils import check_env_specs

from robot_rl import GYM_IDS
from robot_rl.envs.arms import ARM_PREFIX, ARMS, CAMERA_SITE, HOME_CAMERA_POS, ArmError, ArmSpec, get_arm
from robot_rl.envs.gym_env import InspectionGymEnv
from robot_rl.envs.scene import ArmScene
from robot_rl.envs.task import TaskConfig
from robot_rl.envs.tasks.lead_inspect import LeadInspectTask
from robot_rl.envs.tasks.pcb_inspect import PcbInspectTask
from robot_rl.envs.tasks.pcb_inspect.expert import ScriptedExpert
from robot_rl.envs.torchrl_env import InspectionEnv
from tests.envs.expert_runs import expert_inspects_without_collisions

# A 6-joint arm with its own link lengths (shoulder 0.15 m up, links 0.40 and 0.34 m), no actuators, and a
# gripper finger on a slide joint that the spec does not control (welded).
TEST_ARM_XML = """
<mujoco model="test_arm">
  <compiler angle="radian" autolimits="true"/>
  <default>
    <joint axis="0 1 0" range="-3.1416 3.1416" damping="2" armature="0.1"/>
    <geom type="capsule" size="0.03" mass="1" rgba="0.7 0.4 0.2 1"/>
  </default>
  <worldbody>
    <body name="link1" pos="0 0 0.15">
      <joint name="j1" axis="0 0 1"/>
      <geom fromto="0 0 -0.1 0 0 0"/>
      <body name="link2" pos="0 0.12 0" quat="1 0 1 0">
        <joint name="j2"/>
        <geom fromto="0 0 0 0 0 0.40"/>
        <body name="link3" pos="0 -0.11 0.40">
          <joint name="j3" range="-3 3"/>
          <geom fromto="0 0 0 0 0 0.34"/>
          <body name="link4" pos="0 0 0.34" quat="1 0 1 0">
            <joint name="j4"/>
            <geom fromto="0 0 0 0 0.1 0" size="0.025"/>
            <body name="link5" pos="0 0.11 0">
              <joint name="j5" axis="0 0 1"/>
              <geom fromto="0 0 0 0 0 0.08" size="0.025"/>
              <body name="link6" pos="0 0 0.09">
                <joint name="j6"/>
                <geom fromto="0 0 0 0 0.06 0" size="0.025"/>
                <body name="tool" pos="0 0.08 0" quat="-1 1 0 0">
                  <geom name="tool_box" type="box" size="0.02 0.02 0.015" pos="0 0 0.015"/>
                  <body name="finger" pos="0.025 0 0.01">
                    <joint name="finger_slide" type="slide" axis="1 0 0" range="0 0.02"/>
                    <geom type="box" size="0.004 0.01 0.01" mass="0.05"/>
                  </body>
                </body>
              </body>
            </body>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


@pytest.fixture(scope="module")
def test_arm(tmp_path_factory) -> ArmSpec:
    path = tmp_path_factory.mktemp("arm") / "test_arm.xml"
    path.write_text(TEST_ARM_XML)
    return ArmSpec(name="test_arm", mjcf=str(path), joints=("j1", "j2", "j3", "j4", "j5", "j6"),
                   camera_body="tool", camera_pos=(0.0, 0.0, 0.035), camera_quat=(0.0, 1.0, 0.0, 0.0),
                   servo_gains=(3000.0, 150.0))


def test_the_built_in_arm_rolls_out_as_before_arms_were_specs():
    # Pinned from the commit before the arm moved out of the cell's MJCF (the full pixel and state digests of four
    # difficulty x randomization rollouts were compared bit for bit then): joint angles every 10 steps, mean
    # pixel, reward and collisions of a noisy expert on a hard, randomized board.
    task = PcbInspectTask("hard", TaskConfig(image_size=48), "default")
    expert = ScriptedExpert(task.config)
    observation, rng = task.reset(5), np.random.default_rng(5)
    angles, pixels, reward, collisions = [], [], 0.0, 0
    for step in range(40):
        state = task.privileged()
        pose, _ = expert.act(state["camera_pose"], state["board_pose"], state["defective"],
                             observation["joint_state"])
        result = task.step(np.clip(pose + rng.normal(0, 0.3, 6), -1, 1), 0)
        observation, reward, collisions = result.observation, reward + result.reward, collisions + result.flags[
            "collision"]
        if step % 10 == 9:
            angles.append(observation["joint_state"][:6])
            pixels.append(observation["pixels"].mean())
    np.testing.assert_allclose(angles, [[-0.0003, -1.1863, 1.6952, -1.9794, -1.5504, -1.595],
                                        [-0.0035, -1.0991, 1.8357, -2.3204, -1.5234, -1.5897],
                                        [0.0102, -1.1466, 1.8616, -2.2912, -1.5475, -1.5562],
                                        [0.0048, -1.1141, 1.8195, -2.2917, -1.5485, -1.5354]], atol=2e-4)
    np.testing.assert_allclose(pixels, [124.55, 116.0, 115.33, 116.25], atol=0.05)
    assert (round(reward, 4), collisions) == (0.5, 0)


def test_an_arm_written_in_a_test_passes_the_env_contract(test_arm):
    gym_env = InspectionGymEnv(difficulty="easy", image_size=32, arm=test_arm)
    check_env(gym_env, skip_render_check=True)
    assert gym_env.observation_space["joint_state"].shape == (12,)
    low, high = gym_env.observation_space["joint_state"].low, gym_env.observation_space["joint_state"].high
    assert low[2] == pytest.approx(-3.0) and high[2] == pytest.approx(3.0)  # j3's own range, from the model
    assert np.all(high[6:] == pytest.approx(test_arm.max_joint_speed))
    env = InspectionEnv(difficulty="easy", image_size=32, arm=test_arm)
    check_env_specs(env)
    assert env.observation_spec["joint_state"].shape == (12,)
    gym.make("robot_rl/PcbInspect-v2", difficulty="easy", image_size=32, arm=test_arm).close()


def test_the_expert_inspects_boards_with_an_arm_written_in_a_test(test_arm):
    task = PcbInspectTask("easy", TaskConfig(image_size=32), arm=test_arm)
    model = task.scene.model
    assert ARM_PREFIX + "finger_slide" not in [model.joint(i).name for i in range(model.njnt)]  # welded
    assert model.nu == 6 and (model.actuator_gainprm[:, 0] == 3000.0).all()
    expert_inspects_without_collisions(task, range(3))


def test_the_panda_from_gymnasium_robotics_inspects_boards_with_seven_joints():
    pytest.importorskip("gymnasium_robotics", reason="the [panda] extra is not installed")
    gym_env = gym.make(GYM_IDS[("pcb-inspect", "panda")], image_size=32)
    assert gym_env.observation_space["joint_state"].shape == (14,)
    gym_env.close()
    env = InspectionEnv(difficulty="default", image_size=32, arm="panda")
    check_env_specs(env)
    assert env.observation_spec["joint_state"].shape == (14,)
    task = env.task
    model = task.scene.model
    assert model.njnt == 7 and model.nu == 7  # the fingers are welded, their servos gone
    expert_inspects_without_collisions(task, range(2))


def test_a_solved_home_puts_the_camera_at_the_home_pose_looking_down(test_arm):
    scene = ArmScene(0, test_arm)
    scene.reset(scene.home)
    scene.forward()
    position, rotation = scene.camera_pose()
    np.testing.assert_allclose(position, HOME_CAMERA_POS, atol=1e-3)
    np.testing.assert_allclose(rotation, np.eye(3), atol=1e-2)
    assert scene.model.site(CAMERA_SITE).id == scene.camera_site_id


def test_an_arm_spec_file_is_read_with_its_mjcf_beside_it(tmp_path, test_arm):
    (tmp_path / "my_arm.xml").write_text(TEST_ARM_XML)
    values = {**test_arm.to_dict(), "mjcf": "my_arm.xml"}
    (tmp_path / "my_arm.json").write_text(json.dumps(values))
    arm = get_arm(str(tmp_path / "my_arm.json"))
    assert arm == dataclasses.replace(test_arm, mjcf=str(tmp_path / "my_arm.xml"))
    assert get_arm("ur5e_like") is ARMS["ur5e_like"]


def _arm_file(tmp_path, xml: str) -> str:
    path = tmp_path / "arm.xml"
    path.write_text(xml)
    return str(path)


def test_arms_that_cannot_work_get_one_line_errors_naming_the_culprit(tmp_path, test_arm):
    good = _arm_file(tmp_path, TEST_ARM_XML)
    cases = {
        "no joint named 'j7'": dict(joints=("j1", "j2", "j3", "j4", "j5", "j7")),
        "no body named 'wrist'": dict(camera_body="wrist"),
        "joint 'j1' has no actuator; give servo_gains": dict(servo_gains=None),
        "camera_quat must be a unit quaternion": dict(camera_quat=(1.0, 1.0, 0.0, 0.0)),
        "home has 2 values": dict(home=(0.0, 0.0)),
        "does not exist": dict(mjcf=str(tmp_path / "missing.xml")),
    }
    for message, change in cases.items():
        with pytest.raises(ArmError, match=message) as raised:
            ArmScene(0, dataclasses.replace(test_arm, **{"mjcf": good, **change}))
        assert "\n" not in str(raised.value)
    unlimited = _arm_file(tmp_path, TEST_ARM_XML.replace('<joint name="j3" range="-3 3"/>',
                                                        '<joint name="j3" limited="false"/>'))
    with pytest.raises(ArmError, match="joint 'j3' has no range"):
        ArmScene(0, dataclasses.replace(test_arm, mjcf=unlimited))
    motors = "".join(f'<motor joint="j{i}"/>' for i in range(1, 7))
    with_motors = _arm_file(tmp_path, TEST_ARM_XML.replace("</mujoco>", f"<actuator>{motors}</actuator></mujoco>"))
    with pytest.raises(ArmError, match="the actuator of joint 'j1' is not a position servo"):
        ArmScene(0, dataclasses.replace(test_arm, mjcf=with_motors, servo_gains=None))
    ArmScene(0, dataclasses.replace(test_arm, mjcf=with_motors))  # servo_gains replace them
    with pytest.raises(ArmError, match="unknown ArmSpec field 'joint'"):
        ArmSpec.from_dict({**test_arm.to_dict(), "joint": ["j1"]})
    with pytest.raises(ArmError, match="unknown arm 'ur6'"):
        get_arm("ur6")
    assert issubclass(ArmError, ValueError)


def test_every_stage_runs_from_the_cli_on_a_users_arm_file_and_its_checkpoint_refuses_another_arm(
        tmp_path, test_arm, capsys):
    from robot_rl.checkpoints import load_checkpoint
    from robot_rl.cli import main

    (tmp_path / "my_arm.xml").write_text(TEST_ARM_XML)
    arm_file = tmp_path / "my_arm.json"
    arm_file.write_text(json.dumps({**test_arm.to_dict(), "mjcf": "my_arm.xml"}))
    data, bc, ppo = tmp_path / "demos", tmp_path / "bc", tmp_path / "ppo"
    assert main(["collect-demos", "--out", str(data), "--episodes", "4", "--difficulty", "easy", "--image-size",
                 "32", "--num-envs", "1", "--arm", str(arm_file)]) == 0
    assert json.loads((data / "meta.json").read_text())["arm"] == str(arm_file)
    assert main(["pretrain", "--data", str(data), "--out", str(bc), "--epochs", "1", "--batch-size", "8",
                 "--steps-per-epoch", "2", "--eval-episodes", "1", "--num-envs", "1", "--hidden", "16"]) == 0
    assert load_checkpoint(bc / "checkpoints" / "best.pt")["env"]["arm"] == str(arm_file)
    assert main(["finetune", "--policy", str(bc), "--out", str(ppo), "--total-frames", "32", "--frames-per-batch",
                 "32", "--num-envs", "2", "--minibatch-size", "16", "--ppo-epochs", "1", "--eval-every", "0",
                 "--critic-warmup", "0", "--threads", "2", "--critic-hidden", "16"]) == 0
    assert main(["evaluate", "--policy", str(ppo), "--episodes", "2", "--videos", "0", "--failure-videos",
                 "0"]) == 0
    assert json.loads((ppo / "eval" / "report.json").read_text())["info"]["arm"] == str(arm_file)
    assert main(["export", "--policy", str(ppo), "--format", "torchscript"]) == 0
    capsys.readouterr()
    assert main(["evaluate", "--policy", str(ppo), "--arm", "ur5e_like"]) == 2
    assert f"(arm '{arm_file}')" in capsys.readouterr().err
    assert main(["collect-demos", "--out", str(data), "--episodes", "2", "--difficulty", "easy", "--image-size",
                 "32", "--num-envs", "1", "--arm", "ur5e_like"]) == 2  # the dataset holds demos of another arm
    assert f"dataset has arm='{arm_file}'" in capsys.readouterr().err
    assert main(["demo", "--arm", str(tmp_path / "missing.json"), "--out", str(tmp_path / "demo")]) == 2
    assert "missing.json: cannot read an ArmSpec" in capsys.readouterr().err


def test_an_arm_files_package_mjcf_is_located_without_importing_the_package(tmp_path, test_arm, monkeypatch):
    marker = tmp_path / "imported"
    package = tmp_path / "code" / "arm_pack"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (package / "arm.xml").write_text(TEST_ARM_XML)
    (tmp_path / "code" / "escape.xml").write_text(TEST_ARM_XML)
    monkeypatch.syspath_prepend(str(tmp_path / "code"))
    arm_file = tmp_path / "arm.json"
    arm_file.write_text(json.dumps({**test_arm.to_dict(), "mjcf": "arm_pack:arm.xml"}))
    scene = ArmScene(0, get_arm(str(arm_file)))
    assert scene.arm.mjcf == "arm_pack:arm.xml" and not marker.exists()
    arm_file.write_text(json.dumps({**test_arm.to_dict(), "mjcf": "arm_pack:../escape.xml"}))
    with pytest.raises(ArmError, match="leads outside the package 'arm_pack'"):
        ArmScene(0, get_arm(str(arm_file)))
    arm_file.write_text(json.dumps({**test_arm.to_dict(), "mjcf": "no_such_pack:arm.xml"}))
    with pytest.raises(ArmError, match="no package 'no_such_pack'"):
        ArmScene(0, get_arm(str(arm_file)))
    assert not marker.exists()


def test_the_pandas_camera_looks_from_past_its_fingertips():
    pytest.importorskip("gymnasium_robotics", reason="the [panda] extra is not installed")
    scene = ArmScene(0, "panda")
    scene.reset(scene.home)
    scene.forward()
    model, data = scene.model, scene.data
    flange = model.body(ARM_PREFIX + "panda0_link7").id
    origin, axis = data.xpos[flange], data.xmat[flange].reshape(3, 3)[:, 2]
    camera_reach = (scene.camera_pose()[0] - origin) @ axis
    fingers = [g for g in range(model.ngeom) if "finger" in model.body(model.geom_bodyid[g]).name
               and model.geom_conaffinity[g]]
    assert fingers
    for geom in fingers:
        # How far the geom reaches along the flange axis: its centre plus its half-extent along that axis.
        frame = data.geom_xmat[geom].reshape(3, 3)
        size = model.geom_size[geom]
        if model.geom_type[geom] == mujoco.mjtGeom.mjGEOM_CAPSULE:
            extent = size[0] + size[1] * abs(frame[:, 2] @ axis)
        else:
            extent = np.abs(frame.T @ axis) @ size
        assert (data.geom_xpos[geom] - origin) @ axis + extent < camera_reach, model.geom(geom).name
    # The view is tilted 50 degrees off the flange axis (the lead view's angle from straight down).
    view = -scene.camera_pose()[1][:, 2]
    assert np.degrees(np.arccos(view @ axis)) == pytest.approx(50.0, abs=1e-6)


@pytest.mark.parametrize("difficulty, seeds", [("easy", (0, 1, 2)), ("default", (0, 10, 20)), ("hard", (7, 17, 30))])
def test_the_panda_reaches_the_lead_view_where_its_flange_camera_did_not(difficulty, seeds):
    # Boards of the arms benchmark's first 40 (results/arms_lead_inspect.json) where the Panda's expert failed (or
    # collided) with the camera looking along the flange beside the fingers; easy ones have the connector's open side
    # facing the base.
    pytest.importorskip("gymnasium_robotics", reason="the [panda] extra is not installed")
    task = LeadInspectTask(difficulty, TaskConfig(image_size=32), arm="panda")
    expert_inspects_without_collisions(task, [40_000_000 + seed for seed in seeds])


def test_registered_arms_are_recorded_by_content_and_a_raised_revision_refuses_older_artefacts():
    from robot_rl.envs.arms import ARMS, ArmError, arm_digest, check_arm

    ur5e = arm_digest("ur5e_like")
    assert len(ur5e) == 64 and ur5e != arm_digest("panda")
    assert check_arm("ur5e_like", ur5e, "data.json") == ur5e
    # Artefacts from before registered arms were hashed name the arm only: revision 1 loads them as it always did.
    assert ARMS["ur5e_like"].revision == 1 and check_arm("ur5e_like", None, "old.json") == ur5e
    # The Panda's camera moved (revision 2): its older artefacts hold another arm's images.
    with pytest.raises(ArmError, match=r"old\.pt: recorded with arm panda before its revision 2"):
        check_arm("panda", None, "old.pt")
    with pytest.raises(ArmError, match="arm ur5e_like changed since it was recorded"):
        check_arm("ur5e_like", "0" * 64, "edited.json")
