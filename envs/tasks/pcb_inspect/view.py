"""The PCB task's inspection view: over the board centre, at the inspection height, looking straight down."""

from __future__ import annotations

import numpy as np

from robot_rl.envs.task import TaskConfig


def inspection_geometry(camera_pos: np.ndarray, camera_rot: np.ndarray,
                        board_centre: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(tilt from straight down (rad), height above the board (m), distance of the board centre from the optical
    axis (m)); batched over leading dimensions.

    Args: camera position [..., 3] (m), camera rotation matrix [..., 3, 3] (looks along its -z column), board
    top-surface centre [..., 3] (m).
    """
    view = -camera_rot[..., :, 2]
    tilt = np.arccos(np.clip(-view[..., 2], -1.0, 1.0))
    height = camera_pos[..., 2] - board_centre[..., 2]
    to_board = board_centre - camera_pos
    off_axis = np.linalg.norm(to_board - (to_board * view).sum(-1, keepdims=True) * view, axis=-1)
    return tilt, height, off_axis


def is_localized(camera_pos: np.ndarray, camera_rot: np.ndarray, board_centre: np.ndarray, config: TaskConfig,
                 margin: float = 1.0) -> np.ndarray:
    """Camera over the board centre, at inspection height, looking down; batched over leading dimensions.

    Arguments as ``inspection_geometry``; ``margin`` scales every tolerance (the expert uses 0.5 to decide well
    inside).
    """
    tilt, height, off_axis = inspection_geometry(camera_pos, camera_rot, board_centre)
    return ((tilt <= margin * config.max_tilt)
            & (np.abs(height - config.inspection_height) <= margin * config.height_tolerance)
            & (off_axis <= margin * config.centre_tolerance))
