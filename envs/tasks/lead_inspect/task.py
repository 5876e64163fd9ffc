"""The lead-inspection task: tilt the camera to look under a connector's roof at its pins, from the open side."""

from __future__ import annotations

import mujoco
import numpy as np

from robot_rl.envs.scene import BOARD_TOP
from robot_rl.envs.task import InspectionTask
from robot_rl.envs.tasks.lead_inspect.difficulty import DIFFICULTIES
from robot_rl.envs.tasks.lead_inspect.expert import LeadExpert
from robot_rl.envs.tasks.lead_inspect.part import DEFECT_TYPES, ConnectorGeoms, add_connector, sample_defect
from robot_rl.envs.tasks.lead_inspect.view import (
    LeadView,
    at_viewpoint,
    board_frame_viewpoint,
    lead_view,
    sight_target,
)

# mj_ray sees geom groups 0-2 (what the cameras draw), not the hidden group of unused props.
_RAY_GROUPS = np.array([1, 1, 1, 0, 0, 0], np.uint8)


class LeadInspectTask(InspectionTask):
    """Inspect a through-hole connector's pins for a solder bridge or a bent pin. The pins sit under the
    housing's roof, so only a tilted view from the open side (which turns with the board) shows them.

    Localized: the camera within ``LeadView.position_tolerance`` of the viewpoint, aimed at the pin row within
    ``aim_tolerance``, and the first thing a ray from the camera to the middle pad meets is a pin, a pad or a
    bridge (``mj_ray``): the pins are in sight, not hidden by the roof or a wall.
    """

    name = "lead-inspect"
    version = 1
    difficulties = DIFFICULTIES
    defect_types = DEFECT_TYPES
    expert_class = LeadExpert
    view = LeadView()
    inspection_offset = board_frame_viewpoint(view)

    def add_props(self, spec: mujoco.MjSpec) -> None:
        add_connector(spec)

    def bind_props(self, model: mujoco.MjModel) -> None:
        self.connector = ConnectorGeoms(model)
        self.part = None
        camera_body = model.site_bodyid[self.scene.camera_site_id]
        self._ray_exclude = int(camera_body)
        self._ray_geom = np.zeros(1, np.int32)

    def set_up_props(self, seed: int, defect: str | None) -> None:
        self.part = sample_defect(seed, self.difficulty.defect_scale, defect)
        self.connector.apply(self.part)

    @property
    def defective(self) -> bool:
        return self.part.defective

    @property
    def defect_index(self) -> int:
        return self.part.defect_index

    def _board_pose(self) -> np.ndarray:
        return np.array([*self.board_xy, BOARD_TOP, self.board_yaw])

    def localized(self) -> bool:
        pos, rot = self.scene.camera_pose()
        board = self._board_pose()
        return bool(at_viewpoint(pos, rot, board, self.view)) and self.leads_in_sight()

    def leads_in_sight(self) -> bool:
        """A ray from the camera to the middle pad first meets a pin, pad or bridge (``mj_ray``)."""
        pos, _ = self.scene.camera_pose()
        target = sight_target(self._board_pose())
        distance = mujoco.mj_ray(self.scene.model, self.scene.data, pos, target - pos, _RAY_GROUPS, 1,
                                 self._ray_exclude, self._ray_geom)
        return distance >= 0 and int(self._ray_geom[0]) in self.connector.lead_ids

    def inspection_point(self) -> np.ndarray:
        return lead_view(self._board_pose(), self.view)[1]


