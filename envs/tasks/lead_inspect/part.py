"""The connector of the lead-inspection task: a housing whose roof overhangs a row of pins, and its defects.

The pins stand in a cavity under the roof, open on one side only (the lead side, board-frame -x): walls close its
ends and the housing's base closes its back. So a view from straight above, or from any side but the lead side,
sees the roof and never the pins; a solder bridge between two pins or a bent pin shows only to a camera that
tilts down towards the open side. The connector sits at the board centre and turns with the board, so the side to
inspect from follows the board's yaw.

Geoms are added once at load time (``add_connector``); each episode writes its defect into them
(``ConnectorGeoms.apply``). Lengths in metres, in the board frame (z from the board's top surface).
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from robot_rl.envs.scene import BOARD_TOP, HIDDEN_GROUP

DEFECT_TYPES = ("none", "solder_bridge", "bent_pin")

PIN_COUNT = 5
PIN_PITCH = 0.006
PIN_X = -0.009  # the pin row, inside the roof's edge (-0.015) by 6 mm
PIN_HALF = (0.0011, 0.0011, 0.006)  # 12 mm tall, up to the roof
PIN_YS = tuple(PIN_PITCH * (i - (PIN_COUNT - 1) / 2) for i in range(PIN_COUNT))
# The point the inspection view looks at: the middle of the pin row, 5 mm up.
LEAD_TARGET = (PIN_X, 0.0, 0.005)
LEAD_NORMAL = (-1.0, 0.0, 0.0)  # the open side of the cavity
# What a sight line is cast to: the middle pad, at the foot of the middle pin (a bent pin still stands on it).
SIGHT_TARGET = (PIN_X, 0.0, 0.0002)

# Fixed parts: (name, board-frame centre, half-extents). The housing collides with the arm, as the board does.
HOUSING = (
    ("connector_roof", (-0.0015, 0.0, 0.0135), (0.0135, 0.021, 0.0015)),
    ("connector_base", (0.0045, 0.0, 0.006), (0.0075, 0.018, 0.006)),
    ("connector_wall_0", (-0.009, 0.0202, 0.006), (0.006, 0.0008, 0.006)),
    ("connector_wall_1", (-0.009, -0.0202, 0.006), (0.006, 0.0008, 0.006)),
)
HOUSING_COLOURS = ((0.12, 0.12, 0.13, 1.0), (0.80, 0.76, 0.64, 1.0), (0.85, 0.85, 0.85, 1.0))
TIN = (0.80, 0.80, 0.83, 1.0)
GOLD = (0.86, 0.70, 0.30, 1.0)
SOLDER = (0.93, 0.93, 0.95, 1.0)


def pin_name(i: int) -> str:
    return f"connector_pin_{i}"


def add_connector(spec: mujoco.MjSpec) -> None:
    """Adds the connector's housing, pins, pads and the (hidden) solder bridge to the ``board`` body."""
    board = spec.body("board")
    box = mujoco.mjtGeom.mjGEOM_BOX
    for name, (x, y, z), half in HOUSING:
        board.add_geom(name=name, type=box, size=list(half), pos=[x, y, BOARD_TOP + z], contype=1, conaffinity=0,
                       rgba=HOUSING_COLOURS[0])
    decor = dict(contype=0, conaffinity=0)
    for i, y in enumerate(PIN_YS):
        board.add_geom(name=pin_name(i), type=box, size=list(PIN_HALF), pos=[PIN_X, y, BOARD_TOP + PIN_HALF[2]],
                       rgba=TIN, **decor)
        board.add_geom(name=f"connector_pad_{i}", type=box, size=[0.0022, 0.002, 0.0001],
                       pos=[PIN_X, y, BOARD_TOP + 0.0001], rgba=GOLD, **decor)
    board.add_geom(name="connector_bridge", type=box, size=[0.0012, PIN_PITCH / 2, 0.0015],
                   pos=[PIN_X, 0.0, BOARD_TOP + 0.0015], rgba=SOLDER, group=HIDDEN_GROUP, **decor)


@dataclass
class ConnectorDefect:
    """One episode's connector: its defect (one of DEFECT_TYPES), where, and the housing's colour."""

    defect: str
    housing_colour: int
    bridge_pins: int = -1  # the bridge joins pins i and i + 1
    bridge_height: float = 0.0  # m
    bent_pin: int = -1
    bend: float = 0.0  # rad, about the board-frame x axis


def sample_defect(seed: int, defect_scale: float, defect: str | None = None) -> ConnectorDefect:
    """The connector of episode ``seed``: clean with probability 0.5, else a bridge or a bent pin (``defect``
    forces one of DEFECT_TYPES). ``defect_scale`` scales the bridge's height and the pin's bend."""
    rng = np.random.default_rng([int(seed), 0x1EAD, 0])
    colour = int(rng.integers(len(HOUSING_COLOURS)))
    if defect is None:
        defect = "none" if rng.random() < 0.5 else DEFECT_TYPES[1 + int(rng.integers(len(DEFECT_TYPES) - 1))]
    if defect not in DEFECT_TYPES:
        raise ValueError(f"unknown defect {defect!r}; choose one of {', '.join(DEFECT_TYPES)}")
    part = ConnectorDefect(defect, colour)
    if defect == "solder_bridge":
        part.bridge_pins = int(rng.integers(PIN_COUNT - 1))
        part.bridge_height = float(rng.uniform(0.002, 0.003) * defect_scale)
    elif defect == "bent_pin":
        part.bent_pin = int(rng.integers(PIN_COUNT))
        part.bend = float(rng.choice([-1, 1]) * rng.uniform(0.35, 0.5) * defect_scale)
    return part


class ConnectorGeoms:
    """The connector's geoms in one compiled model, looked up once; ``apply`` writes an episode into them."""

    def __init__(self, model: mujoco.MjModel):
        self.model = model
        self.housing_ids = np.array([model.geom(name).id for name, _, _ in HOUSING])
        self.pin_ids = np.array([model.geom(pin_name(i)).id for i in range(PIN_COUNT)])
        self.pad_ids = np.array([model.geom(f"connector_pad_{i}").id for i in range(PIN_COUNT)])
        self.bridge_id = model.geom("connector_bridge").id
        self.lead_ids = frozenset([*self.pin_ids.tolist(), *self.pad_ids.tolist(), self.bridge_id])
        self._nominal = (model.geom_pos[self.pin_ids].copy(), model.geom_quat[self.pin_ids].copy(),
                         model.geom_pos[self.bridge_id].copy(), model.geom_size[self.bridge_id].copy())
        # Compiled at their final places, MuJoCo may mark them "same frame as the body" and ignore rewritten poses.
        model.geom_sameframe[[*self.pin_ids, self.bridge_id]] = 0

    def apply(self, part: ConnectorDefect) -> None:
        m = self.model
        pin_pos, pin_quat, bridge_pos, bridge_size = self._nominal
        m.geom_pos[self.pin_ids], m.geom_quat[self.pin_ids] = pin_pos, pin_quat
        m.geom_rgba[self.housing_ids] = HOUSING_COLOURS[part.housing_colour]
        m.geom_group[self.bridge_id] = HIDDEN_GROUP
        if part.defect == "solder_bridge":
            i, h = part.bridge_pins, part.bridge_height
            m.geom_pos[self.bridge_id] = (PIN_X, (PIN_YS[i] + PIN_YS[i + 1]) / 2, BOARD_TOP + h / 2)
            m.geom_size[self.bridge_id] = (bridge_size[0], bridge_size[1], h / 2)
            m.geom_rbound[self.bridge_id] = float(np.linalg.norm(m.geom_size[self.bridge_id]))
            m.geom_group[self.bridge_id] = 0
        elif part.defect == "bent_pin":
            # Bent at its foot: the pin leans about the x axis through its base towards a neighbour.
            i, half_height = part.bent_pin, PIN_HALF[2]
            m.geom_pos[self.pin_ids[i]] = (PIN_X, PIN_YS[i] - np.sin(part.bend) * half_height,
                                           BOARD_TOP + np.cos(part.bend) * half_height)
            m.geom_quat[self.pin_ids[i]] = (np.cos(part.bend / 2), np.sin(part.bend / 2), 0.0, 0.0)
