"""Difficulty levels of the PCB inspection task: small presets that differ only in constants."""

from __future__ import annotations

import math
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


EASY = Difficulty(
    name="easy",
    board_x=(0.40, 0.50),
    board_y=(-0.08, 0.08),
    board_max_yaw=math.radians(15),
    num_posts=0,
    post_height=0.06,
    post_gap=0.03,
    defect_scale=1.5,
    light_variation=0.0,
    init_joint_noise=0.02,
)
DEFAULT = Difficulty(
    name="default",
    board_x=(0.35, 0.55),
    board_y=(-0.15, 0.15),
    board_max_yaw=math.radians(45),
    num_posts=2,
    post_height=0.06,
    post_gap=0.045,
    defect_scale=1.0,
    light_variation=0.2,
    init_joint_noise=0.03,
)
HARD = Difficulty(
    name="hard",
    board_x=(0.30, 0.60),
    board_y=(-0.22, 0.22),
    board_max_yaw=math.pi,
    num_posts=4,
    post_height=0.09,
    post_gap=0.035,
    defect_scale=0.65,
    light_variation=0.4,
    init_joint_noise=0.05,
)
DIFFICULTIES = {d.name: d for d in (EASY, DEFAULT, HARD)}


def get_difficulty(difficulty: str | Difficulty, **overrides) -> Difficulty:
    """Returns a preset by name (``easy``, ``default``, ``hard``) or a given Difficulty, with fields overridden."""
    if isinstance(difficulty, str):
        if difficulty not in DIFFICULTIES:
            raise ValueError(f"unknown difficulty {difficulty!r}; choose one of {', '.join(DIFFICULTIES)}")
        difficulty = DIFFICULTIES[difficulty]
    return replace(difficulty, **overrides) if overrides else difficulty
