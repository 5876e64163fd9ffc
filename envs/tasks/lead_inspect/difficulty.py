"""Difficulty levels of the lead-inspection task: how far the connector turns, where the board lies, how small
the defects are. The turn is what the view must follow: within 30 degrees the open side always faces the arm's
base; at hard, any side."""

from __future__ import annotations

import math

from robot_rl.envs.difficulty import Difficulty

EASY = Difficulty(
    name="easy",
    board_x=(0.40, 0.50),
    board_y=(-0.08, 0.08),
    board_max_yaw=math.radians(30),
    num_posts=0,
    post_height=0.06,
    post_gap=0.045,
    defect_scale=1.2,
    light_variation=0.0,
    init_joint_noise=0.02,
)
DEFAULT = Difficulty(
    name="default",
    board_x=(0.35, 0.55),
    board_y=(-0.15, 0.15),
    board_max_yaw=math.radians(90),
    num_posts=0,
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
    num_posts=2,
    post_height=0.06,
    post_gap=0.045,
    defect_scale=0.8,
    light_variation=0.4,
    init_joint_noise=0.05,
)
DIFFICULTIES = {d.name: d for d in (EASY, DEFAULT, HARD)}
