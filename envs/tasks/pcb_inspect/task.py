"""The PCB inspection task: look straight down at the board from the inspection height and judge its components."""

from __future__ import annotations

import mujoco
import numpy as np

from robot_rl.envs.scene import BOARD_TOP
from robot_rl.envs.task import InspectionTask, TaskConfig
from robot_rl.envs.tasks.pcb_inspect.board import DEFECT_TYPES, BoardGeoms, add_component_pool, sample_layout
from robot_rl.envs.tasks.pcb_inspect.difficulty import DIFFICULTIES
from robot_rl.envs.tasks.pcb_inspect.expert import ScriptedExpert
from robot_rl.envs.tasks.pcb_inspect.view import is_localized


class PcbInspectTask(InspectionTask):
    """Inspect a board of chips, capacitors and resistors from straight above: is a part missing, rotated,
    shifted, or is there a solder blob or a burn mark?

    Localized: the camera over the board centre at ``TaskConfig.inspection_height``, looking down within
    ``max_tilt``. ``layout`` is the episode's board (``board.BoardLayout``).
    """

    name = "pcb-inspect"
    version = 2  # robot_rl.ENV_VERSION: the PCB task was the only one when datasets started recording it
    difficulties = DIFFICULTIES
    defect_types = DEFECT_TYPES
    expert_class = ScriptedExpert
    inspection_offset = (0.0, 0.0, TaskConfig.inspection_height)

    @classmethod
    def near_view(cls, camera_pose, board_pose, view_height: float = 0.2, view_offset: float = 0.03):
        """Frames [B] whose camera is within ``view_height`` (m) above the board and ``view_offset`` (m) of its
        centre (torch tensors, as ``InspectionTask.near_view``)."""
        height = camera_pose[..., 2] - board_pose[..., 2]
        offset = (camera_pose[..., :2] - board_pose[..., :2]).norm(dim=-1)
        return (height < view_height) & (offset < view_offset)

    def add_props(self, spec: mujoco.MjSpec) -> None:
        add_component_pool(spec)

    def bind_props(self, model: mujoco.MjModel) -> None:
        self.board_geoms = BoardGeoms(model)
        self.layout = None

    def set_up_props(self, seed: int, defect: str | None) -> None:
        self.layout = sample_layout(seed, self.difficulty, defect)
        self.board_geoms.apply(self.layout)

    @property
    def defect(self) -> str:
        return self.layout.defect

    def localized(self) -> bool:
        """Camera over the board centre, at inspection height, looking down (within the config's tolerances)."""
        pos, rot = self.scene.camera_pose()
        return bool(is_localized(pos, rot, np.array([*self.board_xy, BOARD_TOP]), self.config))

    def inspection_point(self) -> np.ndarray:
        return np.array([*self.board_xy, BOARD_TOP + self.config.inspection_height])
