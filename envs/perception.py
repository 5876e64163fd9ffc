"""Perception labels from the simulator's privileged state: where the inspection target is in the wrist image, and
which pixels show the table, the board, the task's parts and the arm.

``InspectionTask.perception_targets()`` and ``InspectionTask.segmentation()`` are the task hooks built on these
functions; this module holds the geometry (pinhole projection with the wrist camera's intrinsics) and the
geom-to-class table, so a task of one's own gets both from its ``inspection_point()`` and its props on the
``board`` body without writing any.
"""

from __future__ import annotations

import math

import mujoco
import numpy as np

# Segmentation classes (uint8 values of a mask). Everything not listed is background: the floor, the table legs,
# the clamp posts and pixels where nothing is drawn.
SEGMENTATION_CLASSES = ("background", "table", "board", "parts", "arm")
BACKGROUND, TABLE, BOARD, PARTS, ARM = range(len(SEGMENTATION_CLASSES))
TABLE_GEOMS = ("table",)  # plus the randomized marks lying on it (``table_mark_*``)
BOARD_BODY, BOARD_GEOM = "board", "board_plank"

# Names of the entries ``InspectionTask.perception_targets`` returns (robot_rl.envs.keys holds their nested keys):
# name -> (dtype, shape, meaning).
PERCEPTION_TARGETS = {
    "point_pixel": (np.float32, (2,), "inspection target in the image: column, row (pixels, 0 at the top-left "
                    "corner, the image centre at (W/2, H/2)); clipped to one image size outside the frame"),
    "point_in_view": (np.bool_, (1,), "the target projects inside the image, in front of the camera (in a "
                      "rectifying cell: inside the rectified image and on the sensor)"),
    "distance": (np.float32, (1,), "from the camera to the inspection target (m)"),
    "tilt": (np.float32, (1,), "angle between the optical axis and the inspection view's axis (rad)"),
    "viewpoint_offset": (np.float32, (3,), "from the camera to the inspection point, in the camera frame (m; x "
                         "right, y up in the image, z backwards)"),
    "localized": (np.bool_, (1,), "the camera is where a verdict counts (the task's localized())"),
    "defect_type": (np.int64, (1,), "the defect, an index into the task's defect_types"),
}


def geom_classes(model: mujoco.MjModel) -> np.ndarray:
    """The segmentation class of every geom of the cell's model, uint8 [ngeom + 1]; the last entry (index -1) is
    for pixels where no geom is drawn.

    Table: the ``table`` geom and the marks on it. Board: ``board_plank``. Parts: every other geom that moves
    with the board (a task's props are added to the ``board`` body). Arm: geoms of the arm's bodies (any body
    rooted at something other than the world, the board or a post). Background: the rest.
    """
    classes = np.full(model.ngeom + 1, BACKGROUND, np.uint8)
    board = model.body(BOARD_BODY).id
    for geom in range(model.ngeom):
        name = model.geom(geom).name
        body = int(model.geom_bodyid[geom])
        root = int(model.body_rootid[body])
        if name in TABLE_GEOMS or name.startswith("table_mark_"):
            classes[geom] = TABLE
        elif name == BOARD_GEOM:
            classes[geom] = BOARD
        elif root == board:
            classes[geom] = PARTS
        elif body != 0 and model.body_mocapid[root] < 0:
            classes[geom] = ARM  # mocap roots are the board and the posts; the arm's base is welded to the world
    return classes


def camera_projection(model: mujoco.MjModel, data: mujoco.MjData, camera_id: int, point: np.ndarray,
                      height: int, width: int, fovy: float | None = None) -> tuple[np.ndarray, bool]:
    """Where ``point`` (m, world) appears in the image of camera ``camera_id`` (as rendered now, its randomized
    mount and field of view included): ((column, row) in pixels, float64 [2]; whether it is in the image and in
    front of the camera). ``fovy`` (degrees) replaces the camera's field of view: the one a rectified image
    shows (``robot_rl.envs.lens``).

    Pinhole model of MuJoCo's camera: it looks along its local -z with y up in the image; ``fovy`` is the
    vertical field of view, pixels are square. Column 0 / row 0 is the top-left corner of the image, so the
    image centre is (W/2, H/2). A point behind the camera is out of view; its coordinates are clipped to one
    image size around the frame so they stay finite.
    """
    position = data.cam_xpos[camera_id]
    rotation = data.cam_xmat[camera_id].reshape(3, 3)
    local = rotation.T @ (np.asarray(point, np.float64) - position)
    depth = -local[2]
    focal = (height / 2) / math.tan(math.radians(model.cam_fovy[camera_id] if fovy is None else fovy) / 2)
    safe_depth = max(depth, 1e-6)
    column = width / 2 + focal * local[0] / safe_depth
    row = height / 2 - focal * local[1] / safe_depth
    in_view = depth > 0 and 0 <= column < width and 0 <= row < height
    pixel = np.array([np.clip(column, -width, 2 * width), np.clip(row, -height, 2 * height)])
    return pixel, bool(in_view)


def angle_between(a: np.ndarray, b: np.ndarray) -> float:
    """Angle (rad) between two 3-vectors."""
    cosine = float(np.dot(a, b) / max(np.linalg.norm(a) * np.linalg.norm(b), 1e-12))
    return math.acos(min(1.0, max(-1.0, cosine)))
