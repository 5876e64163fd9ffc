"""Domain randomization of what the wrist camera sees: lights, board finish, table and fixture colours, the
camera's mount and field of view, sensor noise. Physics, boards, rewards and the expert are untouched.

A ``Randomization`` holds ranges; ``sample(rng)`` draws one episode's ``Appearance`` (concrete values) from them,
and ``ArmScene.set_appearance`` writes it into the compiled model's arrays (materials, lights, camera pose and
field of view), which MuJoCo's renderer reads every frame: no recompile, no new GL context. Pixel noise is added
by the task to each rendered image.

The camera offset moves the *rendered* camera only: the pose the arm controls, and the localization test, stay
the nominal mount's, as on a real cell whose camera sits a few millimetres off where the calibration says.

The perturbation suite (``PERTURBATIONS``) holds fixed shifts outside the ``default`` ranges, for evaluating how a
policy degrades under conditions it was not trained on (``robot-rl evaluate --perturbations``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

import numpy as np

Range = tuple[float, float]
ColourRange = tuple[Range, Range, Range]  # per channel (r, g, b)


def grey(low: float, high: float) -> ColourRange:
    """The same multiplier range on each channel (each channel drawn independently)."""
    return ((low, high),) * 3


def fixed_colour(r: float, g: float, b: float) -> ColourRange:
    return ((r, r), (g, g), (b, b))


@dataclass(frozen=True)
class Randomization:
    """Ranges of the per-episode visual variation; every value is drawn uniformly from its range.

    Multipliers scale the cell's nominal values (1 = nominal). Each quantity's nominal value is the default.
    """

    name: str
    light_intensity: Range = (1.0, 1.0)  # multiplies the lights' diffuse colour and the ambient light
    light_colour: ColourRange = grey(1.0, 1.0)  # per-channel multiplier of the lights' colour
    light_tilt: Range = (0.0, 0.0)  # horizontal offset added to each light direction (z = -1), random heading
    board_colour: ColourRange = grey(1.0, 1.0)  # per-channel multiplier of the board texture
    board_gloss: Range = (1.0, 1.0)  # multiplies the board's specular and shininess (matte to glossy finish)
    table_colour: ColourRange = grey(1.0, 1.0)  # per-channel multiplier of the table (the wrist view's background)
    fixture_colour: ColourRange = grey(1.0, 1.0)  # per-channel multiplier of the clamp posts and the floor
    camera_shift: Range = (0.0, 0.0)  # distance of the wrist camera from its mount (m), random direction
    camera_tilt: Range = (0.0, 0.0)  # rotation of the wrist camera about a random axis (degrees)
    camera_fov: Range = (0.0, 0.0)  # change of the wrist camera's vertical field of view (degrees; nominal 50)
    pixel_noise: Range = (0.0, 0.0)  # std of Gaussian noise on every pixel value (0-255 scale), per episode

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "name":
                continue
            for low, high in value if isinstance(value[0], tuple) else (value,):
                if not low <= high:
                    raise ValueError(f"Randomization.{f.name}: range ({low}, {high}) has low > high")
                if f.name != "camera_fov" and low < 0:
                    raise ValueError(f"Randomization.{f.name} must be >= 0, got ({low}, {high})")
        if not (-40 <= self.camera_fov[0] and self.camera_fov[1] <= 60):
            raise ValueError(f"Randomization.camera_fov must stay within (-40, 60) degrees, got {self.camera_fov}")

    @property
    def is_nominal(self) -> bool:
        """True when every range is the nominal value (the env then skips randomization entirely)."""
        return replace(self, name=NONE.name) == NONE

    def sample(self, rng: np.random.Generator) -> Appearance:
        """One episode's appearance. Always draws the same numbers in the same order, so a seed fixes it."""
        def colour(ranges: ColourRange) -> np.ndarray:
            return np.array([rng.uniform(low, high) for low, high in ranges])

        def heading() -> np.ndarray:
            angle = rng.uniform(0, 2 * math.pi)
            return np.array([math.cos(angle), math.sin(angle)])

        def direction() -> np.ndarray:
            vector = rng.normal(size=3)
            return vector / max(np.linalg.norm(vector), 1e-9)

        return Appearance(
            light_intensity=rng.uniform(*self.light_intensity),
            light_colour=colour(self.light_colour),
            light_tilt=np.stack([heading() * rng.uniform(*self.light_tilt) for _ in range(2)]),
            board_colour=colour(self.board_colour),
            board_gloss=rng.uniform(*self.board_gloss),
            table_colour=colour(self.table_colour),
            fixture_colour=colour(self.fixture_colour),
            camera_offset=direction() * rng.uniform(*self.camera_shift),
            camera_rotation=direction() * math.radians(rng.uniform(*self.camera_tilt)),
            camera_fov=rng.uniform(*self.camera_fov),
            pixel_noise=rng.uniform(*self.pixel_noise),
        )


@dataclass(frozen=True)
class Appearance:
    """One episode's drawn values (see ``Randomization`` for their meaning)."""

    light_intensity: float
    light_colour: np.ndarray  # [3]
    light_tilt: np.ndarray  # [2 lights, 2]: x, y offsets of the key and fill light directions
    board_colour: np.ndarray  # [3]
    board_gloss: float
    table_colour: np.ndarray  # [3]
    fixture_colour: np.ndarray  # [3]
    camera_offset: np.ndarray  # [3], m, in the camera mount's frame
    camera_rotation: np.ndarray  # [3], rotation vector (rad) applied to the mount's orientation
    camera_fov: float  # degrees added to the nominal vertical field of view
    pixel_noise: float  # std, 0-255 scale


NONE = Randomization("none")
DEFAULT = Randomization(
    "default",
    light_intensity=(0.6, 1.4), light_colour=grey(0.85, 1.15), light_tilt=(0.0, 0.3),
    board_colour=grey(0.75, 1.25), board_gloss=(0.5, 2.0),
    table_colour=grey(0.7, 1.3), fixture_colour=grey(0.6, 1.4),
    camera_shift=(0.0, 0.004), camera_tilt=(0.0, 2.0), camera_fov=(-3.0, 3.0), pixel_noise=(0.0, 4.0),
)
STRONG = Randomization(
    "strong",
    light_intensity=(0.35, 1.8), light_colour=grey(0.7, 1.3), light_tilt=(0.0, 0.6),
    board_colour=grey(0.5, 1.5), board_gloss=(0.25, 3.0),
    table_colour=grey(0.4, 1.6), fixture_colour=grey(0.3, 1.7),
    camera_shift=(0.0, 0.008), camera_tilt=(0.0, 4.0), camera_fov=(-6.0, 6.0), pixel_noise=(0.0, 8.0),
)
RANDOMIZATIONS = {r.name: r for r in (NONE, DEFAULT, STRONG)}

# Fixed shifts, each outside the ``default`` ranges (the README lists them). Chosen before any policy was
# evaluated on them; changing one changes what the robustness benchmark measures.
PERTURBATIONS = {r.name: r for r in (
    Randomization("dim_light", light_intensity=(0.35, 0.35)),
    Randomization("bright_light", light_intensity=(1.8, 1.8)),
    Randomization("warm_light", light_colour=fixed_colour(1.3, 1.0, 0.6)),
    Randomization("low_light_angle", light_tilt=(0.8, 0.8)),
    Randomization("grey_board", board_colour=fixed_colour(1.0, 0.45, 1.0)),  # a green board turned dark grey
    Randomization("dark_table", table_colour=grey(0.45, 0.45)),
    Randomization("shifted_camera", camera_shift=(0.01, 0.01), camera_tilt=(5.0, 5.0)),
    Randomization("wide_lens", camera_fov=(10.0, 10.0)),
    Randomization("sensor_noise", pixel_noise=(12.0, 12.0)),
)}


def get_randomization(randomization: str | Randomization) -> Randomization:
    """A preset (``none``, ``default``, ``strong``) or perturbation by name, or a given Randomization."""
    if isinstance(randomization, Randomization):
        return randomization
    known = {**RANDOMIZATIONS, **PERTURBATIONS}
    if randomization not in known:
        raise ValueError(f"unknown randomization {randomization!r}; choose one of {', '.join(known)}")
    return known[randomization]


_UNITS = {"camera_shift": " m", "camera_tilt": " deg", "camera_fov": " deg", "pixel_noise": " std"}


def describe(randomization: Randomization) -> str:
    """What differs from the nominal cell, readable: ``light_intensity x0.35; camera_shift 0.01 m``."""
    parts = []
    for f in fields(randomization):
        value = getattr(randomization, f.name)
        if f.name == "name" or value == getattr(NONE, f.name):
            continue
        if isinstance(value[0], tuple):  # a colour: one range per channel
            text = ("x" + _range(value[0]) if len(set(value)) == 1
                    else "x(" + ", ".join(_range(channel) for channel in value) + ")")
        else:
            multiplier = f.name in ("light_intensity", "board_gloss")
            text = ("x" if multiplier else "") + _range(value) + _UNITS.get(f.name, "")
        parts.append(f"{f.name} {text}")
    return "; ".join(parts) or "nominal"


def _range(value: Range) -> str:
    low, high = value
    return f"{low:g}" if low == high else f"{low:g} to {high:g}"
