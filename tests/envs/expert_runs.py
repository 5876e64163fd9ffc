"""Running a task's own scripted expert over boards, for the arm and task tests."""

from __future__ import annotations

from collections.abc import Iterable

from robot_rl.envs.task import InspectionTask


def expert_inspects_without_collisions(task: InspectionTask, seeds: Iterable[int]) -> None:
    """The task's scripted expert succeeds on every board of ``seeds`` without touching anything."""
    expert = task.expert_class(task.config)
    for seed in seeds:
        observation = task.reset(seed)
        for _ in range(task.config.max_steps):
            state = task.privileged()
            result = task.step(*expert.act(state["camera_pose"], state["board_pose"], state["defective"],
                                           observation["joint_state"]))
            observation = result.observation
            assert not result.flags["collision"], f"board {seed}, step {task.step_count}"
            if result.terminated or result.truncated:
                break
        assert result.flags["success"], f"board {seed}"
