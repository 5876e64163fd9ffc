"""Perception targets and segmentation masks agree with the scene's geometry."""

from __future__ import annotations

import numpy as np
import pytest

from robot_rl.envs.arms import ARM_PREFIX
from robot_rl.envs.perception import (
    ARM,
    BACKGROUND,
    BOARD,
    PARTS,
    PERCEPTION_TARGETS,
    TABLE,
    camera_projection,
    geom_classes,
)
from robot_rl.envs.scene import BOARD_HALF_SIZE, BOARD_TOP
from robot_rl.envs.tasks import build_task

SIZE = 64


def _task(name: str = "pcb-inspect", randomization: str = "none"):
    return build_task(name, "easy", SIZE, None, {}, randomization, "ur5e_like")


def _expert_final_frame(task, seed: int) -> None:
    """Runs the task's expert on board ``seed`` until it would give its verdict (the arm at the inspection view)."""
    expert = task.expert_class(task.config)
    observation = task.reset(seed)
    for _ in range(task.config.max_steps):
        state = task.privileged()
        pose, verdict = expert.act(state["camera_pose"], state["board_pose"], state["defective"],
                                   observation["joint_state"])
        if verdict != 0:
            return
        observation = task.step(pose, verdict).observation
    raise AssertionError(f"the expert gave no verdict on board {seed}")


def _check_entries(targets: dict) -> None:
    assert set(targets) == set(PERCEPTION_TARGETS)
    for name, (dtype, shape, _) in PERCEPTION_TARGETS.items():
        assert targets[name].dtype == dtype and targets[name].shape == shape, name
        assert np.isfinite(targets[name].astype(np.float64)).all(), name


@pytest.mark.parametrize("task_name", ["pcb-inspect", "lead-inspect"])
def test_the_experts_final_view_has_the_target_at_the_image_centre_and_is_localized(task_name):
    task = _task(task_name)
    for seed in (3, 11):
        _expert_final_frame(task, seed)
        targets = task.perception_targets()
        _check_entries(targets)
        assert targets["point_in_view"][0] and targets["localized"][0]
        assert np.abs(targets["point_pixel"] - SIZE / 2).max() < 0.08 * SIZE, targets["point_pixel"]
        assert targets["tilt"][0] < np.radians(5)
        assert np.linalg.norm(targets["viewpoint_offset"]) < 0.02
        assert targets["defect_type"][0] == task.defect_index
    if task_name == "pcb-inspect":  # straight above the board at the inspection height
        assert abs(targets["distance"][0] - task.config.inspection_height) < 0.01


def test_the_start_view_is_far_untilted_and_not_localized_and_a_view_away_is_out_of_view():
    task = _task()
    task.reset(5)
    targets = task.perception_targets()
    _check_entries(targets)
    assert not targets["localized"][0] and targets["distance"][0] > 0.3
    assert targets["tilt"][0] < np.radians(10)  # home looks straight down, as the PCB view does
    # Move the board far out of the camera's field: the same camera no longer sees its centre.
    task.scene.place_board(task.board_xy[0] + 0.5, task.board_xy[1], task.board_yaw)
    task.board_xy = task.board_xy + np.array([0.5, 0.0])
    task.scene.forward()
    away = task.perception_targets()
    _check_entries(away)
    assert not away["point_in_view"][0]
    assert not (0 <= away["point_pixel"][0] < SIZE and 0 <= away["point_pixel"][1] < SIZE)


def test_the_projection_lands_on_the_board_pixels_of_the_mask():
    task = _task(randomization="surfaces")  # a randomized camera mount and field of view, too
    for seed in range(4):
        task.reset(seed)
        pixel = task.perception_targets()["point_pixel"]
        mask = task.segmentation()
        column, row = int(pixel[0]), int(pixel[1])
        assert mask[row, column] in (BOARD, PARTS), (seed, pixel)


def test_the_mask_marks_the_board_where_the_board_is_and_the_table_around_it():
    task = _task()
    _expert_final_frame(task, 7)
    mask = task.segmentation()
    assert mask.shape == (SIZE, SIZE) and mask.dtype == np.uint8
    # Project a grid of board-frame points (inside the board, and just outside it on the table).
    yaw = task.board_yaw
    rotation = np.array([[np.cos(yaw), -np.sin(yaw)], [np.sin(yaw), np.cos(yaw)]])
    half = np.array(BOARD_HALF_SIZE)

    def classes_at(scale: float) -> list[int]:
        found = []
        for u in np.linspace(-1, 1, 9):
            for v in np.linspace(-1, 1, 9):
                if scale > 1 and max(abs(u), abs(v)) < 1:
                    continue  # outside the board: only the ring at ``scale``
                xy = task.board_xy + rotation @ (half * scale * np.array([u, v]))
                pixel, in_view = camera_projection(task.scene.model, task.scene.data, task.scene.wrist_camera_id,
                                                   np.array([*xy, BOARD_TOP if scale < 1 else 0.0]), SIZE, SIZE)
                if in_view:
                    found.append(int(mask[int(pixel[1]), int(pixel[0])]))
        return found

    inside, outside = classes_at(0.85), classes_at(1.25)
    assert inside and all(c in (BOARD, PARTS) for c in inside)
    assert (np.array(inside) == BOARD).mean() > 0.6  # the plank, where no part stands
    assert outside and all(c == TABLE for c in outside)


def test_the_classes_follow_the_geom_names_and_bodies():
    task = _task("lead-inspect")
    model = task.scene.model
    classes = geom_classes(model)
    assert classes[model.geom("table").id] == TABLE and classes[model.geom("board_plank").id] == BOARD
    assert classes[model.geom("floor").id] == BACKGROUND and classes[-1] == BACKGROUND
    assert classes[model.geom("table_mark_0").id] == TABLE
    assert all(classes[i] == PARTS for i in task.connector.lead_ids)
    arm_geoms = [g for g in range(model.ngeom) if model.body(model.geom_bodyid[g]).name.startswith(ARM_PREFIX)]
    assert arm_geoms and all(classes[g] == ARM for g in arm_geoms)


def test_observations_carry_the_mask_only_when_asked():
    from robot_rl import keys
    from robot_rl.envs.torchrl_env import InspectionEnv

    plain = InspectionEnv(difficulty="easy", image_size=SIZE)
    assert keys.SEGMENTATION not in plain.reset().keys()
    env = InspectionEnv(difficulty="easy", image_size=SIZE, segmentation=True, seed=0)
    data = env.rollout(3, break_when_any_done=False)
    masks = data[keys.SEGMENTATION]
    assert masks.shape == (3, SIZE, SIZE) and masks.dtype.is_floating_point is False
    assert env.observation_spec[keys.SEGMENTATION].is_in(masks[0])
    assert (masks == BOARD).any() and (masks == TABLE).any()
