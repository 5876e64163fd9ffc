"""Tasks as plug-ins: the registry, the lead-inspection task through the env contract, its expert, a defect
that only a tilted view shows, and every CLI stage with --task."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from torchrl.envs.utils import check_env_specs

from robot_rl import GYM_IDS
from robot_rl.envs import keys
from robot_rl.envs.arms import ARMS
from robot_rl.envs.defaults import DEFAULT_TASK
from robot_rl.envs.difficulty import DIFFICULTY_NAMES
from robot_rl.envs.task import TaskConfig
from robot_rl.envs.tasks import TASKS, TaskError, get_task, register_task
from robot_rl.envs.tasks.lead_inspect import LeadInspectTask
from robot_rl.envs.tasks.lead_inspect.part import DEFECT_TYPES
from robot_rl.envs.tasks.pcb_inspect import PcbInspectTask
from robot_rl.envs.tasks.pcb_inspect.expert import ScriptedExpert
from robot_rl.envs.torchrl_env import InspectionEnv
from tests.envs.expert_runs import expert_inspects_without_collisions


def _run_expert(task, expert, seed: int, defect: str | None = None, max_steps: int = 80):
    """Steps ``expert`` on board ``seed`` until it would give its verdict (not given); returns the task there."""
    task.reset(seed, defect=defect)
    for _ in range(max_steps):
        p = task.privileged()
        pose, verdict = expert.act(p["camera_pose"], p["board_pose"], p["defective"], task.scene.joint_state())
        if verdict != 0:
            return task
        task.step(pose, 0)
    raise AssertionError(f"the expert never decided on board {seed}")


def test_the_registry_names_every_built_in_task_and_gym_ids_cover_each_task_and_arm():
    from robot_rl import configs

    assert set(TASKS) == {"pcb-inspect", "lead-inspect"} and configs.DEFAULT_TASK == DEFAULT_TASK
    assert all(name in configs.TASK_HELP for name in TASKS)
    assert set(GYM_IDS) == {(task, arm) for task in TASKS for arm in ARMS}
    for task in TASKS.values():
        assert tuple(task.difficulties) == DIFFICULTY_NAMES and task.defect_types[0] == "none"
    genv = gym.make(GYM_IDS[("lead-inspect", "ur5e_like")], image_size=32)
    assert isinstance(genv.unwrapped.task, LeadInspectTask)
    genv.close()
    with pytest.raises(TaskError, match="unknown task 'pcb'; choose one of pcb-inspect, lead-inspect"):
        get_task("pcb")
    with pytest.raises(TaskError, match="registered already"):
        register_task(type("Other", (PcbInspectTask,), {"name": "lead-inspect"}))
    with pytest.raises(TaskError, match="not an InspectionTask subclass"):
        register_task(dict)


def test_a_task_registered_by_a_user_is_built_by_name_by_both_front_ends():
    class NightShiftInspect(PcbInspectTask):  # the same boards under dimmer, varying light: its own presets
        name = "pcb-inspect-night"
        version = 1
        difficulties = {n: d.__class__(**{**d.__dict__, "light_variation": 0.5}) for n, d in
                        PcbInspectTask.difficulties.items()}

    register_task(NightShiftInspect)
    try:
        env = InspectionEnv(difficulty="easy", image_size=32, task="pcb-inspect-night")
        assert isinstance(env.task, NightShiftInspect) and env.task.difficulty.light_variation == 0.5
        check_env_specs(env)
    finally:
        TASKS.pop("pcb-inspect-night")


def test_the_lead_task_passes_the_gymnasium_checker_and_torchrl_specs():
    genv = gym.make("robot_rl/LeadInspect-v1", image_size=32).unwrapped
    check_env(genv, skip_render_check=True)
    env = InspectionEnv(difficulty="easy", image_size=32, task="lead-inspect")
    check_env_specs(env)
    assert env.observation_spec[keys.DEFECT_TYPE].space.n == len(DEFECT_TYPES) == 3
    rollout = env.rollout(3)
    assert rollout.get(keys.PIXELS).shape[1:] == (32, 32, 3)  # random verdicts may end it early


def test_the_lead_expert_inspects_every_difficulty_without_collisions():
    for difficulty, boards in (("easy", 3), ("default", 4), ("hard", 3)):
        expert_inspects_without_collisions(LeadInspectTask(difficulty, TaskConfig(image_size=32)),
                                           range(100, 100 + boards))


def test_the_pins_are_in_sight_from_the_lead_view_and_hidden_from_straight_above():
    task = LeadInspectTask("default", TaskConfig(image_size=64))
    for seed in range(4):
        _run_expert(task, task.expert_class(task.config), seed)
        assert task.leads_in_sight() and task.localized()
        _run_expert(task, ScriptedExpert(task.config), seed)  # the PCB task's view: over the board, looking down
        assert not task.leads_in_sight() and not task.localized()


@pytest.mark.parametrize("defect", ["solder_bridge", "bent_pin"])
def test_a_defect_shows_in_the_lead_view_and_not_from_straight_above(defect):
    task = LeadInspectTask("default", TaskConfig(image_size=84))
    images = {}
    for view, expert in (("above", ScriptedExpert(task.config)), ("lead", task.expert_class(task.config))):
        for label in ("none", defect):
            images[view, label] = _run_expert(task, expert, seed=7, defect=label).camera_image().astype(int)
    assert (images["above", "none"] == images["above", defect]).all()
    changed = np.abs(images["lead", "none"] - images["lead", defect]).max(-1) > 40
    assert changed.sum() >= 4, f"{defect}: {changed.sum()} pixels differ in the lead view"


def test_the_same_seed_gives_the_same_connector_and_defect_streams_are_independent_of_the_board():
    task = LeadInspectTask("default", TaskConfig(image_size=32))
    first = task.reset(11)["pixels"].copy(), task.part
    again = task.reset(11)["pixels"], task.part
    assert (first[0] == again[0]).all() and first[1] == again[1]
    forced = task.reset(11, defect="bent_pin")
    assert task.part.defect == "bent_pin" and task.board_yaw == pytest.approx(float(task.privileged()["board_pose"][3]))
    assert forced["pixels"].shape == (32, 32, 3)
    with pytest.raises(ValueError, match="unknown defect 'missing'"):
        task.reset(0, defect="missing")


def test_every_stage_runs_from_the_cli_with_the_lead_task_and_its_checkpoint_refuses_another_task(tmp_path, capsys):
    from robot_rl.checkpoints import load_checkpoint
    from robot_rl.cli import main

    data, bc, ppo = tmp_path / "demos", tmp_path / "bc", tmp_path / "ppo"
    assert main(["collect-demos", "--out", str(data), "--episodes", "4", "--difficulty", "easy", "--image-size",
                 "32", "--num-envs", "1", "--task", "lead-inspect"]) == 0
    meta = json.loads((data / "meta.json").read_text())
    assert (meta["env"], meta["env_version"]) == ("lead-inspect", 1)
    assert main(["pretrain", "--data", str(data), "--out", str(bc), "--epochs", "1", "--batch-size", "8",
                 "--steps-per-epoch", "2", "--eval-episodes", "1", "--num-envs", "1", "--hidden", "16"]) == 0
    assert load_checkpoint(bc / "checkpoints" / "best.pt")["env"]["env"] == "lead-inspect"
    assert main(["finetune", "--policy", str(bc), "--out", str(ppo), "--total-frames", "32", "--frames-per-batch",
                 "32", "--num-envs", "2", "--minibatch-size", "16", "--ppo-epochs", "1", "--eval-every", "0",
                 "--critic-warmup", "0", "--threads", "2", "--critic-hidden", "16"]) == 0
    assert main(["evaluate", "--policy", str(ppo), "--episodes", "2", "--videos", "0", "--failure-videos",
                 "0"]) == 0
    report = json.loads((ppo / "eval" / "report.json").read_text())
    assert report["info"]["task"] == "lead-inspect" and report["info"]["defect_types"] == list(DEFECT_TYPES)
    assert main(["export", "--policy", str(ppo), "--format", "torchscript"]) == 0
    assert json.loads((ppo / "export" / "policy.json").read_text())["env"]["env"] == "lead-inspect"
    capsys.readouterr()
    assert main(["evaluate", "--policy", str(ppo), "--task", "pcb-inspect"]) == 2
    assert "--task pcb-inspect does not match" in capsys.readouterr().err
    assert main(["finetune", "--policy", str(bc), "--out", str(tmp_path / "ppo2"), "--task", "pcb-inspect"]) == 2
    assert f"--task pcb-inspect does not match the BC run {bc} (task 'lead-inspect')" in capsys.readouterr().err
    assert main(["collect-demos", "--out", str(data), "--episodes", "2", "--difficulty", "easy", "--image-size",
                 "32", "--num-envs", "1", "--task", "pcb-inspect"]) == 2  # the dataset holds another task's demos
    assert "dataset has env='lead-inspect'" in capsys.readouterr().err
    assert main(["demo", "--task", "lead", "--out", str(tmp_path / "demo")]) == 2
    assert "unknown task 'lead'" in capsys.readouterr().err


USER_TASK_MODULE = '''
from robot_rl.envs.tasks.pcb_inspect import PcbInspectTask
from robot_rl.envs.tasks.pcb_inspect.difficulty import DIFFICULTIES


class DimBoards(PcbInspectTask):
    name = "dim-boards"
    version = 3
    difficulties = {n: d.__class__(**{**d.__dict__, "light_variation": 0.5}) for n, d in DIFFICULTIES.items()}
'''


@pytest.mark.slow  # every stage on a user task; tests/test_docs.py runs the own-task guide
def test_a_users_task_module_goes_to_the_cli_as_module_colon_class_and_is_recorded_so(tmp_path, monkeypatch,
                                                                                       capsys):
    from robot_rl.checkpoints import load_checkpoint
    from robot_rl.cli import main

    (tmp_path / "my_tasks.py").write_text(USER_TASK_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    data, bc = tmp_path / "demos", tmp_path / "bc"
    try:
        assert main(["collect-demos", "--out", str(data), "--episodes", "2", "--difficulty", "easy", "--image-size",
                     "32", "--num-envs", "1", "--task", "my_tasks:DimBoards"]) == 0
        meta = json.loads((data / "meta.json").read_text())
        assert (meta["env"], meta["env_version"]) == ("my_tasks:DimBoards", 3)
        TASKS.pop("my_tasks:DimBoards"), TASKS.pop("dim-boards")  # as a fresh process: found again from meta.json
        pretrain = ["pretrain", "--data", str(data), "--out", str(bc), "--epochs", "1", "--batch-size", "8",
                    "--steps-per-epoch", "1", "--eval-episodes", "1", "--num-envs", "1", "--hidden", "16"]
        capsys.readouterr()
        assert main(pretrain) == 2  # code a file names is imported only when the user says so
        assert "task 'my_tasks:DimBoards' is code to import" in capsys.readouterr().err
        assert "my_tasks:DimBoards" not in TASKS and not (bc / "config.json").exists()
        assert main([*pretrain, "--trust-code"]) == 0
        assert load_checkpoint(bc / "checkpoints" / "best.pt")["env"]["env"] == "my_tasks:DimBoards"
        capsys.readouterr()
        assert main(["demo", "--task", "my_tasks:Missing", "--out", str(tmp_path / "demo")]) == 2
        assert "--task my_tasks:Missing: cannot import it" in capsys.readouterr().err
    finally:
        for name in ("my_tasks:DimBoards", "dim-boards"):
            TASKS.pop(name, None)
