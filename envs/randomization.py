"""Domain randomization of what the wrist camera sees: lights, board finish and solder-mask colour, table and
fixture colours, distractor marks on the table, the camera's mount and field of view, sensor noise. Physics, boards,
rewards and the expert are untouched.

A ``Randomization`` holds ranges; ``sample(rng)`` draws one episode's ``Appearance`` (concrete values) from them,
and ``ArmScene.set_appearance`` writes it into the compiled model's arrays (materials, lights, camera pose and
field of view, mark geoms, the board material's texture among the solder-mask textures compiled in once), which
MuJoCo's renderer reads every frame: no recompile, no new GL context. Pixel noise is added
by the task to each rendered image.

The camera offset moves the *rendered* camera only: the pose the arm controls, and the localization test, stay
the nominal mount's, as on a real cell whose camera sits a few millimetres off where the calibration says. No
image tells such an offset from a board placed that much off (the board's place is random), so a policy that
centres what it sees passes a test made in the mount's frame only within the room the offset leaves.
``calibrated`` models the cell that measured its camera after mounting it (a hand-eye calibration): the pose the arm
controls, and so the localization test and the expert, follow the camera as it sits, off by the calibration's
residual error (``calibration_shift``, ``calibration_tilt``). ``rectified`` models a cell that also measured its
lens (an intrinsic calibration) and resamples every wrist image to the nominal field of view
(``robot_rl.envs.lens``), off by the measurement's error (``calibration_fov``). The env models the calibrations'
results, not their procedures. ``auto_exposure`` gives the camera an exposure loop that meters the centre of its
image (its mean or its highlights: ``metering``) and scales all the light it gathers towards that meter's target
(``robot_rl.envs.exposure``).

The perturbation suite (``PERTURBATIONS``) holds fixed shifts outside the ``default`` ranges, for evaluating how a
policy degrades under conditions it was not trained on (``robot-rl evaluate --perturbations``).
"""

from __future__ import annotations

import colorsys
import math
from dataclasses import dataclass, field, fields, replace

import numpy as np

from robot_rl.envs.defaults import CAMERA_EXPOSURES
from robot_rl.envs.exposure import METERS

Range = tuple[float, float]
ColourRange = tuple[Range, Range, Range]  # per channel (r, g, b), or (hue, saturation, value) for an HSV range

# Solder-mask colours (RGB, 0-255) of the board texture; green is the nominal texture as drawn. The others are
# the same texture with its mask and its traces (copper under the mask, a lighter shade) recoloured.
SOLDER_MASKS = {"green": (35, 110, 40), "blue": (20, 55, 135), "black": (24, 24, 27), "red": (145, 25, 28),
                "purple": (85, 35, 115)}
MAX_MARKS = 8  # distractor-mark geoms compiled into every model (hidden inside the table when unused)
MARK_RADIUS = (0.055, 0.18)  # m, distance of a mark's centre from the board centre (outside the board's corners)
MARK_HALF_SIZE = (0.004, 0.025)  # m, half extents of a mark (a label, a screw, a scrap of tape)


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
    board_masks: tuple[str, ...] = ("green",)  # solder-mask colours (SOLDER_MASKS), one drawn per episode
    table_colour: ColourRange = grey(1.0, 1.0)  # per-channel multiplier of the table (the wrist view's background)
    # When set, the table's colour is drawn in HSV instead (hue in [0, 1) wraps around the colour circle), then
    # multiplied by table_colour. None keeps the nominal grey-brown.
    table_hsv: ColourRange | None = None
    table_marks: tuple[int, int] = (0, 0)  # number of distractor marks drawn on the table around the board
    fixture_colour: ColourRange = grey(1.0, 1.0)  # per-channel multiplier of the clamp posts and the floor
    camera_shift: Range = (0.0, 0.0)  # distance of the wrist camera from its mount (m), random direction
    camera_tilt: Range = (0.0, 0.0)  # rotation of the wrist camera about a random axis (degrees)
    camera_fov: Range = (0.0, 0.0)  # change of the wrist camera's vertical field of view (degrees; nominal 50)
    pixel_noise: Range = (0.0, 0.0)  # std of Gaussian noise on every pixel value (0-255 scale), per episode
    # The arm controls the camera's measured pose instead of its drawn one (a calibrated cell), measured with an
    # error of calibration_shift (m) and calibration_tilt (degrees), each in a random direction.
    calibrated: bool = False
    calibration_shift: Range = (0.0, 0.0)
    calibration_tilt: Range = (0.0, 0.0)
    # Every wrist image is resampled to the nominal field of view from the lens's measured one (a cell that
    # calibrated its camera's intrinsics), measured with an error of calibration_fov (degrees, either sign).
    rectified: bool = False
    calibration_fov: Range = (0.0, 0.0)
    # The camera meters the centre of its image every frame and sets its exposure from it (robot_rl.envs.exposure),
    # reading the centre's mean or its highlights (exposure.METERS).
    auto_exposure: bool = False
    metering: str = "centre"

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("name", "board_masks", "table_hsv", "table_marks", "calibrated", "rectified",
                          "auto_exposure", "metering"):
                continue
            for low, high in value if isinstance(value[0], tuple) else (value,):
                if not low <= high:
                    raise ValueError(f"Randomization.{f.name}: range ({low}, {high}) has low > high")
                if f.name != "camera_fov" and low < 0:
                    raise ValueError(f"Randomization.{f.name} must be >= 0, got ({low}, {high})")
        if self.metering not in METERS:
            raise ValueError(f"Randomization.metering must be one of {', '.join(METERS)}, got {self.metering!r}")
        if self.metering != "centre" and not self.auto_exposure:
            raise ValueError(f"Randomization.metering needs auto_exposure: a fixed camera meters nothing, got "
                             f"{self.metering!r}")
        if not (-40 <= self.camera_fov[0] and self.camera_fov[1] <= 60):
            raise ValueError(f"Randomization.camera_fov must stay within (-40, 60) degrees, got {self.camera_fov}")
        unknown = [mask for mask in self.board_masks if mask not in SOLDER_MASKS]
        if not self.board_masks or unknown:
            raise ValueError(f"Randomization.board_masks must name some of {', '.join(SOLDER_MASKS)}, "
                             f"got {self.board_masks}")
        if self.table_hsv is not None and not all(0 <= low <= high <= 1 for low, high in self.table_hsv):
            raise ValueError(f"Randomization.table_hsv ranges must lie in [0, 1] with low <= high, "
                             f"got {self.table_hsv}")
        low, high = self.table_marks
        if not (isinstance(low, int) and isinstance(high, int) and 0 <= low <= high <= MAX_MARKS):
            raise ValueError(f"Randomization.table_marks must be integers 0 <= low <= high <= {MAX_MARKS}, "
                             f"got {self.table_marks}")

    @property
    def is_nominal(self) -> bool:
        """True when every range is the nominal value (the env then skips randomization entirely)."""
        return replace(self, name=NONE.name) == NONE

    def sample(self, rng: np.random.Generator) -> Appearance:
        """One episode's appearance. Always draws the same numbers in the same order, so a seed fixes it.

        Surfaces (mask, HSV table, marks) are drawn after everything else and only by a preset that varies them,
        so the appearances of presets without them are those they had before surfaces existed; the calibrations'
        errors come last, each drawn only by a cell that has that calibration.
        """
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
            **self._sample_surfaces(rng),
            **self._sample_calibration(rng, direction),
            auto_exposure=self.auto_exposure,
            metering=self.metering,
        )

    def _sample_calibration(self, rng: np.random.Generator, direction) -> dict:
        drawn = {}
        if self.calibrated:
            drawn["calibration_offset"] = direction() * rng.uniform(*self.calibration_shift)
            drawn["calibration_rotation"] = direction() * math.radians(rng.uniform(*self.calibration_tilt))
        if self.rectified:
            drawn["lens_error"] = rng.choice((-1.0, 1.0)) * rng.uniform(*self.calibration_fov)
        return drawn

    def _sample_surfaces(self, rng: np.random.Generator) -> dict:
        mask = self.board_masks[rng.integers(len(self.board_masks))] if len(self.board_masks) > 1 else \
            self.board_masks[0]
        table_rgb = None if self.table_hsv is None else hsv_to_rgb(
            [rng.uniform(low, high) for low, high in self.table_hsv])
        marks = np.zeros((0, MARK_FIELDS))
        if self.table_marks[1] > 0:
            count = int(rng.integers(self.table_marks[0], self.table_marks[1] + 1))
            radius, angle = rng.uniform(*MARK_RADIUS, count), rng.uniform(0, 2 * math.pi, count)
            marks = np.column_stack([
                radius * np.cos(angle), radius * np.sin(angle), rng.uniform(0, math.pi, count),
                rng.uniform(*MARK_HALF_SIZE, (count, 2)),
                np.array([hsv_to_rgb(hsv) for hsv in rng.uniform(0, 1, (count, 3))]).reshape(count, 3)])
        return {"board_mask": mask, "table_rgb": table_rgb, "marks": marks}


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
    board_mask: str = "green"  # key of SOLDER_MASKS
    table_rgb: np.ndarray | None = None  # [3] in [0, 1], replaces the table's nominal colour (then table_colour)
    marks: np.ndarray = field(default_factory=lambda: np.zeros((0, MARK_FIELDS)))  # [n, MARK_FIELDS], see below
    # A calibrated cell's measurement error of the camera's pose (None: not calibrated, the arm controls the
    # drawn mount): offset [3] m and rotation vector [3] rad, in the camera's frame as it sits.
    calibration_offset: np.ndarray | None = None
    calibration_rotation: np.ndarray | None = None
    # A rectifying cell's error of the measured field of view (degrees; None: the images are not rectified).
    lens_error: float | None = None
    auto_exposure: bool = False  # the camera sets its exposure from its own image (robot_rl.envs.exposure)
    metering: str = "centre"  # how it reads that image: a key of exposure.METERS

    @property
    def rectified(self) -> bool:
        """The cell resamples its wrist images to the nominal lens."""
        return self.lens_error is not None


# A mark row: x, y offset from the board centre (m, world frame), yaw (rad), half extents x, y (m), rgb in [0, 1].
MARK_FIELDS = 8


def hsv_to_rgb(hsv) -> np.ndarray:
    """[hue, saturation, value] in [0, 1] (hue wraps) -> rgb in [0, 1]."""
    h, s, v = float(hsv[0]) % 1.0, float(hsv[1]), float(hsv[2])
    return np.array(colorsys.hsv_to_rgb(h, s, v))


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
# Default's light, finish and noise ranges, and the surfaces of any cell: the table over the whole hue circle and a
# wide brightness range, four solder-mask colours, up to five distractor marks around the board. The camera mount
# varies twice as much as in default (strong's range): benchmarks/results/shifted_camera.json records that a
# policy centring the board in its image can still localize under the 10 mm, 5 deg shift, so the views of such
# mounts belong in training (the shift itself stays outside).
WIDE = replace(
    DEFAULT, name="wide", table_colour=grey(1.0, 1.0), table_hsv=((0.0, 1.0), (0.0, 0.75), (0.12, 0.85)),
    board_masks=("green", "blue", "black", "red"), table_marks=(0, 5), camera_shift=(0.0, 0.008),
    camera_tilt=(0.0, 4.0),
)
# Wide's surfaces with default's camera mount: the wide arm changed two things at once and missed every target;
# this preset tests the surfaces alone (the camera range is the suspect: robustness_wide.json, README).
SURFACES = replace(WIDE, name="surfaces", camera_shift=DEFAULT.camera_shift, camera_tilt=DEFAULT.camera_tilt)
# Surfaces with a camera mount range that contains the suite's shifted_camera (10 mm, 5 deg) and a little beyond,
# as a hand-bolted camera sits: the mount range alone against surfaces (benchmarks/perception.py's mount arm).
MOUNT = replace(SURFACES, name="mount", camera_shift=(0.0, 0.012), camera_tilt=(0.0, 6.0))
# Mount's cell calibrated after the camera went on: the arm controls the camera where it sits, as measured to
# within 2 mm and 1 deg (a generous residual for a hand-eye calibration).
CALIBRATED = replace(MOUNT, name="calibrated", calibrated=True, calibration_shift=(0.0, 0.002),
                     calibration_tilt=(0.0, 1.0))
# Calibrated's cell that measured its lens too, to within 0.5 deg of field of view (a focal length within about
# 1%, a routine checkerboard calibration's), and rectifies every image to the nominal lens.
RECTIFIED = replace(CALIBRATED, name="rectified", rectified=True, calibration_fov=(0.0, 0.5))
# Calibrated's cell under a light range that contains the suite's dim (x0.35) and bright (x1.8) light and a little
# beyond, as the mount range contains the shifted camera: the light drawn in the scene (shading, specular
# highlights), where pretrain --exposure changes it in image space (benchmarks/perception.py compares the two).
LIGHTS = replace(CALIBRATED, name="lights", light_intensity=(0.3, 2.0))
# Rectified's cell with a camera that sets its exposure from the centre of its image every frame, as a camera's
# auto-exposure does before its sensor clips: the light shifts change the light the sensor gathers, the exposure
# brings the inspected part back towards its nominal level.
METERED = replace(RECTIFIED, name="metered", auto_exposure=True)
# Metered's camera reading the parts' highlights instead of the centre's mean: its gain follows the light on the
# parts and not the board's or the table's colour (benchmarks/results/exposure_loop.json measures both cameras).
HIGHLIGHTS = replace(METERED, name="highlights", metering="highlights")
RANDOMIZATIONS = {r.name: r for r in (NONE, DEFAULT, WIDE, SURFACES, STRONG, MOUNT, CALIBRATED, LIGHTS, RECTIFIED,
                                      METERED, HIGHLIGHTS)}

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
    # Added with the ``wide`` preset, before any policy was evaluated on them; outside its ranges too: a
    # saturated blue table, a near-white table, a solder-mask colour it does not draw, more marks than it draws.
    Randomization("blue_table", table_hsv=((0.6, 0.6), (0.95, 0.95), (0.5, 0.5))),
    Randomization("white_table", table_hsv=((0.12, 0.12), (0.04, 0.04), (0.96, 0.96))),
    Randomization("purple_board", board_masks=("purple",)),
    Randomization("cluttered_table", table_marks=(MAX_MARKS, MAX_MARKS)),
)}


def in_cell_of(shift: Randomization, cell: Randomization) -> Randomization:
    """``shift`` in a cell calibrated as ``cell`` is: a shift changes what the camera sees, not whether the cell
    measured where its camera sits or its lens, or how its camera sets its exposure (a calibrated policy is
    evaluated calibrated)."""
    if cell.calibrated and not shift.calibrated:
        shift = replace(shift, calibrated=True, calibration_shift=cell.calibration_shift,
                        calibration_tilt=cell.calibration_tilt)
    if cell.rectified and not shift.rectified:
        shift = replace(shift, rectified=True, calibration_fov=cell.calibration_fov)
    return with_camera_of(shift, cell)


def with_camera_of(setting: Randomization, cell: Randomization) -> Randomization:
    """``setting`` seen through the camera of ``cell``: a camera that sets its own exposure does so in every
    setting a policy trained with it meets, the nominal one included (a behaviour of the camera, not a condition
    of the cell; a deployment may name another: ``with_exposure``), metering as that camera does. A setting with an
    exposure loop of its own keeps its own meter. ``setting`` itself when there is nothing to carry."""
    if cell.auto_exposure and not setting.auto_exposure:
        return replace(setting, auto_exposure=True, metering=cell.metering)
    return setting


def with_exposure(setting: Randomization, camera_exposure: str) -> Randomization:
    """``setting`` with the camera's exposure a deployment names (``CAMERA_EXPOSURES``; '' keeps the setting's):
    the camera on the cell, not the one the policy was trained with, sets the exposure (``robot-rl evaluate
    --camera-exposure``). ``setting`` itself when it already has that exposure."""
    if camera_exposure not in ("", *CAMERA_EXPOSURES):
        raise ValueError(f"unknown camera exposure {camera_exposure!r}; choose one of {', '.join(CAMERA_EXPOSURES)}")
    if not camera_exposure:
        return setting
    auto, metering = CAMERA_EXPOSURES[camera_exposure]
    if (setting.auto_exposure, setting.metering) == (auto, metering):
        return setting
    return replace(setting, auto_exposure=auto, metering=metering)


def get_randomization(randomization: str | Randomization) -> Randomization:
    """A preset (``RANDOMIZATIONS``) or perturbation by name, or a given Randomization."""
    if isinstance(randomization, Randomization):
        return randomization
    known = {**RANDOMIZATIONS, **PERTURBATIONS}
    if randomization not in known:
        raise ValueError(f"unknown randomization {randomization!r}; choose one of {', '.join(known)}")
    return known[randomization]


_UNITS = {"camera_shift": " m", "camera_tilt": " deg", "camera_fov": " deg", "pixel_noise": " std",
          "calibration_shift": " m", "calibration_tilt": " deg", "calibration_fov": " deg"}


def describe(randomization: Randomization) -> str:
    """What differs from the nominal cell, readable: ``light_intensity x0.35; camera_shift 0.01 m``."""
    parts = []
    for f in fields(randomization):
        value = getattr(randomization, f.name)
        if f.name == "name" or value == getattr(NONE, f.name):
            continue
        if f.name in ("calibrated", "rectified", "auto_exposure"):
            parts.append(f.name.replace("_", " "))
            continue
        if f.name == "metering":
            parts.append(f"metering {value}")
            continue
        if f.name == "board_masks":
            text = ", ".join(value)
        elif f.name == "table_hsv":
            text = " ".join(f"{channel}{_range(r)}" for channel, r in zip("hsv", value))
        elif f.name == "table_marks":
            text = _range(value)
        elif isinstance(value[0], tuple):  # a colour: one range per channel
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
