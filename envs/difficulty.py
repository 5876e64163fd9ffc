"""Difficulty levels: small presets of constants. Each task names its own (``easy``, ``default``, ``hard``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Difficulty:
    """Randomization ranges of one difficulty level. Lengths in metres, angles in radians."""

    name: str
    board_x: tuple[float, float]  # range of the board centre, robot base frame
    board_y: tuple[float, float]
    board_max_yaw: float  # board yaw is uniform in [-board_max_yaw, board_max_yaw]
    num_posts: int  # clamp posts around the board (0 to 4)
    post_height: float  # top of the post rod above the table
    post_gap: float  # distance from the board edge to the post axis
    defect_scale: float  # multiplies defect sizes and offsets; smaller is harder to see
    light_variation: float  # relative jitter of light intensity and direction (0 = fixed lighting)
    init_joint_noise: float  # uniform noise on the home joint angles at reset

    def __post_init__(self) -> None:
        if not 0 <= self.num_posts <= 4:
            raise ValueError(f"Difficulty.num_posts must be in [0, 4], got {self.num_posts}")
        if self.defect_scale <= 0:
            raise ValueError(f"Difficulty.defect_scale must be > 0, got {self.defect_scale}")
        if not 0 <= self.light_variation < 1:
            raise ValueError(f"Difficulty.light_variation must be in [0, 1), got {self.light_variation}")


DIFFICULTY_NAMES = ("easy", "default", "hard")  # every task has these three presets


def pick_difficulty(difficulty: str | Difficulty, presets: Mapping[str, Difficulty], task: str,
                    **overrides) -> Difficulty:
    """A task's preset by name (one of ``presets``) or a given Difficulty, with fields overridden."""
    if isinstance(difficulty, str):
        if difficulty not in presets:
            raise ValueError(f"unknown difficulty {difficulty!r} for task {task}; choose one of {', '.join(presets)}")
        difficulty = presets[difficulty]
    return replace(difficulty, **overrides) if overrides else difficulty
