"""Running a task's own scripted expert over boards, for the arm and task tests."""

from __future__ import annotations

from collections.abc import Iterable

from robot_rl.envs.task import InspectionTask, expert_steps


def expert_inspects_without_collisions(task: InspectionTask, seeds: Iterable[int]) -> None:
    """The task's scripted expert succeeds on every board of ``seeds`` without touching anything."""
    for seed in seeds:
        for _, result in expert_steps(task, seed):
            assert not result.flags["collision"], f"board {seed}, step {task.step_count}"
        assert result.flags["success"], f"board {seed}"
