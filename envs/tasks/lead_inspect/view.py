"""The lead-inspection view: from the connector's open side, tilted down at the pin row, far enough to see it all."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from robot_rl.envs.tasks.lead_inspect.part import LEAD_NORMAL, LEAD_TARGET, SIGHT_TARGET


@dataclass(frozen=True)
class LeadView:
    """Where the camera inspects from. Lengths in metres, angles in radians."""

    elevation: float = math.radians(40)  # of the line of sight above the board, seen from the pin row
    standoff: float = 0.08  # from the pin row's centre to the camera
    position_tolerance: float = 0.025  # of the camera from the viewpoint
    aim_tolerance: float = math.radians(10)  # between the optical axis and the line to the pin row's centre


def board_to_world(board_pose: np.ndarray, point: tuple[float, float, float]) -> np.ndarray:
    """A board-frame point (z from the board's top) in the world frame, for board poses [..., 4]; batched."""
    board_pose = np.asarray(board_pose, np.float64)
    c, s = np.cos(board_pose[..., 3]), np.sin(board_pose[..., 3])
    x, y, z = point
    return np.stack([board_pose[..., 0] + c * x - s * y, board_pose[..., 1] + s * x + c * y, board_pose[..., 2] + z],
                    -1)


def sight_target(board_pose: np.ndarray) -> np.ndarray:
    """The world point a sight line is cast to (the middle pad), for board poses [..., 4]."""
    return board_to_world(board_pose, SIGHT_TARGET)


def board_frame_viewpoint(view: LeadView) -> tuple[float, float, float]:
    """The viewpoint in the board frame (z from the board's top)."""
    point = lead_view(np.zeros(4), view)[1]
    return float(point[0]), float(point[1]), float(point[2])


def lead_view(board_pose: np.ndarray, view: LeadView) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(pin-row centre [..., 3], viewpoint [..., 3], camera rotation there [..., 3, 3]) in the world frame, for
    board poses [..., 4] (centre x, y, top z, yaw). The camera looks along its -z column with its x axis level, so
    the image is upright."""
    board_pose = np.asarray(board_pose, np.float64)
    c, s = np.cos(board_pose[..., 3]), np.sin(board_pose[..., 3])
    nx, ny, _ = LEAD_NORMAL
    target = board_to_world(board_pose, LEAD_TARGET)
    outward = np.stack([c * nx - s * ny, s * nx + c * ny], -1)  # the open side's normal, level
    back = np.concatenate([outward * math.cos(view.elevation),
                           np.full((*outward.shape[:-1], 1), math.sin(view.elevation))], -1)
    viewpoint = target + view.standoff * back
    z_axis = back  # the camera looks along -z: towards the target
    x_axis = np.cross(-z_axis, [0.0, 0.0, 1.0])
    x_axis /= np.linalg.norm(x_axis, axis=-1, keepdims=True)
    y_axis = np.cross(z_axis, x_axis)
    return target, viewpoint, np.stack([x_axis, y_axis, z_axis], -1)


def aim_error(camera_pos: np.ndarray, camera_rot: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Angle (rad) between the optical axis and the line from the camera to ``target``; batched."""
    view = -camera_rot[..., :, 2]
    to_target = target - camera_pos
    cosine = (view * to_target).sum(-1) / np.linalg.norm(to_target, axis=-1)
    return np.arccos(np.clip(cosine, -1.0, 1.0))


def at_viewpoint(camera_pos: np.ndarray, camera_rot: np.ndarray, target: np.ndarray, viewpoint: np.ndarray,
                 view: LeadView, margin: float = 1.0) -> np.ndarray:
    """The camera near ``viewpoint`` and aimed at ``target`` (as ``lead_view`` gives them; ``margin`` scales both
    tolerances); batched."""
    near = np.linalg.norm(camera_pos - viewpoint, axis=-1) <= margin * view.position_tolerance
    return near & (aim_error(camera_pos, camera_rot, target) <= margin * view.aim_tolerance)
