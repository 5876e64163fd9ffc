"""The lead-inspection task: tilt the camera to look under a connector's roof at its pins, from the open side."""

from __future__ import annotations

import mujoco
import numpy as np

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
        self._view = None
        camera_body = model.site_bodyid[self.scene.camera_site_id]
        self._ray_exclude = int(camera_body)
        self._ray_geom = np.zeros(1, np.int32)

    def set_up_props(self, seed: int, defect: str | None) -> None:
        self.part = sample_defect(seed, self.difficulty.defect_scale, defect)
        self.connector.apply(self.part)
        self._view = None  # the board is placed after this: the view is computed on first use

    def _episode_view(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(pin-row centre, viewpoint, sight-line target) of this episode's board, computed once per episode."""
        if self._view is None:
            board = self.board_pose()
            target, viewpoint, _ = lead_view(board, self.view)
            self._view = target, viewpoint, sight_target(board)
        return self._view

    @property
    def defect(self) -> str:
        return self.part.defect

    def localized(self) -> bool:
        pos, rot = self.scene.camera_pose()
        target, viewpoint, _ = self._episode_view()
        return bool(at_viewpoint(pos, rot, target, viewpoint, self.view)) and self.leads_in_sight()

    def leads_in_sight(self) -> bool:
        """A ray from the camera to the middle pad first meets a pin, pad or bridge (``mj_ray``)."""
        pos, _ = self.scene.camera_pose()
        target = self._episode_view()[2]
        distance = mujoco.mj_ray(self.scene.model, self.scene.data, pos, target - pos, _RAY_GROUPS, 1,
                                 self._ray_exclude, self._ray_geom)
        return distance >= 0 and int(self._ray_geom[0]) in self.connector.lead_ids

    def inspection_point(self) -> np.ndarray:
        return self._episode_view()[1]

    def inspection_target(self) -> np.ndarray:
        """The pin row's centre: what the tilted view looks at."""
        return self._episode_view()[0]
