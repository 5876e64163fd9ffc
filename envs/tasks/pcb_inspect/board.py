"""Printed circuit boards: a pool of component geoms on the board body, and a seeded layout sampler.

Every component is a flat solder pad plus a body on top of it. A defect is visible because the pad and the body
disagree (missing body, body rotated or shifted off its pad) or because something foreign sits on the board (a
solder blob, a burn mark). The layout of an episode is a pure function of its seed; the defect is drawn from an
independent stream, so the same seed with and without a defect gives the same components.

MuJoCo cannot add geoms to a compiled model, so the pool is added once at load time (``add_component_pool``) and
each episode moves, resizes, recolours and shows/hides pool geoms by writing the model arrays (``BoardGeoms``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import mujoco
import numpy as np

from robot_rl.envs.difficulty import Difficulty
from robot_rl.envs.scene import BOARD_TOP, HIDDEN_GROUP

PAD_HALF_HEIGHT = 0.0001

POOL_SIZES = {"chip": 3, "cap": 3, "res": 5}
COUNT_RANGES = {"chip": (1, 3), "cap": (1, 3), "res": (2, 5)}  # at most 11 of the 12 grid cells
DEFECT_TYPES = ("none", "missing", "rotated", "shifted", "solder_blob", "burn_mark")

GOLD = (0.86, 0.70, 0.30, 1.0)
TIN = (0.80, 0.80, 0.83, 1.0)
BODY_COLOURS = {
    "chip": ((0.10, 0.10, 0.12, 1.0),),
    "cap": ((0.12, 0.22, 0.55, 1.0), (0.70, 0.55, 0.30, 1.0)),
    "res": ((0.20, 0.35, 0.60, 1.0), (0.25, 0.20, 0.18, 1.0)),
}
SOLDER = (0.93, 0.93, 0.95, 1.0)
SCORCH = (0.16, 0.09, 0.04, 1.0)

# Layout grid: 4 x 3 cells of 20 mm on the 80 x 60 mm board, one component per cell.
_CELL = 0.02
_CELL_CENTRES = [
    (-0.03 + _CELL * i, -0.02 + _CELL * j) for i in range(4) for j in range(3)
]


@dataclass
class Component:
    """One placed component, in the board frame. ``half`` is the body half-extent (x, y, z)."""

    kind: str
    slot: int
    x: float
    y: float
    yaw: float
    half: tuple[float, float, float]
    colour: tuple[float, float, float, float]
    # Where the body sits relative to its pad (a defect moves it).
    body_dx: float = 0.0
    body_dy: float = 0.0
    body_dyaw: float = 0.0
    body_visible: bool = True


@dataclass
class BoardLayout:
    """Components and defect of one board. ``defect`` is one of DEFECT_TYPES."""

    components: list[Component]
    defect: str = "none"
    blob: tuple[float, float, float] | None = None  # x, y, radius of a solder blob
    burn: tuple[float, float, float] | None = None  # x, y, radius of a burn mark
    free_cells: list[tuple[float, float]] = field(default_factory=list)  # grid cells without a component

    @property
    def defective(self) -> bool:
        return self.defect != "none"

    @property
    def defect_index(self) -> int:
        return DEFECT_TYPES.index(self.defect)


def pool_geom_names(kind: str, slot: int) -> tuple[str, str]:
    """Names of the pad and body geoms of one pool slot."""
    return f"{kind}_{slot}_pad", f"{kind}_{slot}_body"


def add_component_pool(spec: mujoco.MjSpec) -> None:
    """Adds every pool geom (hidden, non-colliding) to the ``board`` body of a model spec."""
    board = spec.body("board")
    hidden = dict(contype=0, conaffinity=0, group=HIDDEN_GROUP)
    for kind, count in POOL_SIZES.items():
        body_type = mujoco.mjtGeom.mjGEOM_CYLINDER if kind == "cap" else mujoco.mjtGeom.mjGEOM_BOX
        for slot in range(count):
            pad, body = pool_geom_names(kind, slot)
            board.add_geom(name=pad, type=mujoco.mjtGeom.mjGEOM_BOX, size=[0.003, 0.003, PAD_HALF_HEIGHT], **hidden)
            board.add_geom(name=body, type=body_type, size=[0.003, 0.003, 0.001], **hidden)
    board.add_geom(name="solder_blob", type=mujoco.mjtGeom.mjGEOM_ELLIPSOID, size=[0.002, 0.002, 0.001],
                   rgba=SOLDER, **hidden)
    board.add_geom(name="burn_mark", type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[0.005, 0.0002, 0],
                   rgba=SCORCH, **hidden)


# Per kind: uniform ranges of the body half-extents (x, y, z), in metres; caps are round (y = x).
_HALF_RANGES = {
    "chip": ((0.0045, 0.0065), (0.0035, 0.0065), (0.0008, 0.0008)),
    "cap": ((0.0025, 0.0035), (0.0025, 0.0035), (0.002, 0.003)),
    "res": ((0.0035, 0.0045), (0.0015, 0.0015), (0.0012, 0.0012)),
}


def sample_layout(seed: int, difficulty: Difficulty, defect: str | None = None) -> BoardLayout:
    """Draws the board of episode ``seed``: components from one stream, the defect from another.

    ``defect`` forces a defect type (one of DEFECT_TYPES); ``None`` draws it: clean with probability 0.5,
    otherwise a uniformly chosen type.
    """
    rng = np.random.default_rng([int(seed), 0xB0A2D, 0])
    cells = rng.permutation(len(_CELL_CENTRES))
    counts = {kind: int(rng.integers(low, high + 1)) for kind, (low, high) in COUNT_RANGES.items()}
    draws = rng.random((sum(counts.values()), 7))  # one row per component: jitter x, y, yaw, colour, half x, y, z
    components: list[Component] = []
    for kind, count in counts.items():
        low, high = np.array(_HALF_RANGES[kind]).T
        for slot in range(count):
            u = draws[len(components)]
            cx, cy = _CELL_CENTRES[cells[len(components)]]
            half = low + u[4:7] * (high - low)
            if kind == "cap":
                half[1] = half[0]
            colours = BODY_COLOURS[kind]
            components.append(Component(
                kind, slot, cx + 0.004 * (u[0] - 0.5), cy + 0.004 * (u[1] - 0.5), np.pi / 2 * float(u[2] < 0.5),
                (float(half[0]), float(half[1]), float(half[2])), colours[int(u[3] * len(colours))],
            ))

    rng = np.random.default_rng([int(seed), 0xB0A2D, 1])
    if defect is None:
        defect = "none" if rng.random() < 0.5 else DEFECT_TYPES[1 + int(rng.integers(len(DEFECT_TYPES) - 1))]
    if defect not in DEFECT_TYPES:
        raise ValueError(f"unknown defect {defect!r}; choose one of {', '.join(DEFECT_TYPES)}")
    free = [_CELL_CENTRES[i] for i in cells[len(components):]]
    layout = BoardLayout(components=components, defect=defect, free_cells=free)
    _apply_defect(rng, layout, difficulty.defect_scale)
    return layout


def _apply_defect(rng: np.random.Generator, layout: BoardLayout, scale: float) -> None:
    chips = [c for c in layout.components if c.kind == "chip"]
    if layout.defect == "missing":
        # Chips and capacitors leave a pad large enough to see at inspection height.
        candidates = [c for c in layout.components if c.kind in ("chip", "cap")]
        candidates[int(rng.integers(len(candidates)))].body_visible = False
    elif layout.defect == "rotated":
        chip = chips[int(rng.integers(len(chips)))]
        chip.body_dyaw = float(rng.choice([-1, 1]) * rng.uniform(0.6, 0.785) * min(scale, 1.0))
    elif layout.defect == "shifted":
        chip = chips[int(rng.integers(len(chips)))]
        # Along one of the chip's axes, by about its half-width: a bare strip of pad shows on one side.
        axis = int(rng.integers(2))
        offset = float(rng.choice([-1, 1]) * rng.uniform(0.9, 1.2) * chip.half[axis] * scale)
        chip.body_dx, chip.body_dy = (offset, 0.0) if axis == 0 else (0.0, offset)
    elif layout.defect in ("solder_blob", "burn_mark"):
        # Foreign matter goes in an empty cell so no component body can hide it.
        cx, cy = layout.free_cells[int(rng.integers(len(layout.free_cells)))]
        x, y = (float(v) for v in rng.uniform(-0.003, 0.003, size=2) + (cx, cy))
        if layout.defect == "solder_blob":
            layout.blob = (x, y, float(rng.uniform(0.004, 0.005) * scale))
        else:
            layout.burn = (x, y, float(rng.uniform(0.006, 0.008) * scale))


class BoardGeoms:
    """The pool geoms of one compiled model, looked up once; ``apply`` writes a layout into them."""

    def __init__(self, model: mujoco.MjModel):
        self.model = model
        self.slots = {(kind, slot): tuple(model.geom(name).id for name in pool_geom_names(kind, slot))
                      for kind, count in POOL_SIZES.items() for slot in range(count)}
        self.blob_id, self.burn_id = model.geom("solder_blob").id, model.geom("burn_mark").id
        self.pool_ids = np.array([*np.ravel(list(self.slots.values())), self.blob_id, self.burn_id])
        # The pool was compiled at the body origin, so MuJoCo marked it "same frame as the body" and would ignore
        # the positions written below.
        model.geom_sameframe[self.pool_ids] = 0

    def apply(self, layout: BoardLayout) -> None:
        """Shows the layout's geoms at their places (board frame) and hides the rest of the pool."""
        rows = []  # (geom id, position, yaw, size, rgba)
        pad_z = BOARD_TOP + PAD_HALF_HEIGHT
        for comp in layout.components:
            pad_id, body_id = self.slots[(comp.kind, comp.slot)]
            hx, hy, hz = comp.half
            if comp.kind == "cap":
                pad_size, body_size = (hx + 0.0012, hx + 0.0012, PAD_HALF_HEIGHT), (hx, hz, 0.0)
            elif comp.kind == "res":
                pad_size, body_size = (hx + 0.0018, hy + 0.0006, PAD_HALF_HEIGHT), (hx, hy, hz)
            else:
                pad_size, body_size = (hx + 0.0015, hy + 0.0015, PAD_HALF_HEIGHT), (hx, hy, hz)
            rows.append((pad_id, (comp.x, comp.y, pad_z), comp.yaw, pad_size, GOLD if comp.kind == "chip" else TIN))
            if comp.body_visible:
                # Body offsets are in the component frame, so a shifted chip moves along its own axes.
                c, s = np.cos(comp.yaw), np.sin(comp.yaw)
                body_pos = (comp.x + c * comp.body_dx - s * comp.body_dy, comp.y + s * comp.body_dx + c * comp.body_dy,
                            BOARD_TOP + 2 * PAD_HALF_HEIGHT + hz)
                rows.append((body_id, body_pos, comp.yaw + comp.body_dyaw, body_size, comp.colour))
        if layout.blob is not None:
            x, y, r = layout.blob
            rows.append((self.blob_id, (x, y, BOARD_TOP + 0.5 * r), 0.0, (r, r, 0.6 * r), SOLDER))
        if layout.burn is not None:
            x, y, r = layout.burn
            rows.append((self.burn_id, (x, y, BOARD_TOP + 0.0002), 0.0, (r, 0.0002, 0.0), SCORCH))

        m = self.model
        m.geom_group[self.pool_ids] = HIDDEN_GROUP
        ids, pos, yaw, size, rgba = (np.array(column) for column in zip(*rows))
        m.geom_pos[ids] = pos
        m.geom_quat[ids] = np.stack([np.cos(yaw / 2), np.zeros_like(yaw), np.zeros_like(yaw), np.sin(yaw / 2)], 1)
        m.geom_size[ids] = size
        m.geom_rgba[ids] = rgba
        m.geom_rbound[ids] = np.linalg.norm(size, axis=1)
        m.geom_group[ids] = 0
