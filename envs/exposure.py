"""Auto-exposure of the wrist camera: what a camera that meters its own image does before its pixels clip.

A camera's exposure multiplies all the light its sensor gathers, before the sensor's noise and its clipping at
full scale; in MuJoCo's renderer that is every light source scaled by one gain (``ArmScene.set_exposure``). The
camera meters the centre of its image (spot metering, where the inspected part sits at the inspection view) and
moves its gain towards the level that puts the metered mean at ``TARGET_LEVEL``, a fraction of the way each frame
(``SMOOTHING``), as a camera's exposure loop converges over a few frames rather than jumping: frame t is taken
with the gain frame t-1's metering chose. At reset, and for an encoder's still views, the loop runs to its
steady state first (``settle``).

``TARGET_LEVEL`` is the nominal cell's: the median metered level of the pcb task's expert at its inspection view
over 10 boards (86.9 grey levels, measured with the default arm; the board fills the metered centre there), so at
the nominal light a camera settled at the view holds a gain near 1, and a dimmer or brighter cell is brought back
towards it. A camera arriving at the view from elsewhere holds what its loop has reached by then
(``benchmarks/exposure_loop.py`` measures it).

A camera meters one of two ways (``METERS``). ``centre`` is the mean above. ``highlights`` meters the brightest
channel's 99th percentile in the same centre and holds it just under clipping (``HIGHLIGHT_LEVEL``), as a camera set
to protect its highlights does: the parts' specular highlights answer to the light that falls on them, while the
centre's mean also answers to what colour the board and the table are, so a grey board or a dark table moves a
mean-metered gain and not a highlight-metered one. A clipped reading says only that the light is too much, so the
loop then aims ``CLIPPED_STEP`` down (one stop) rather than by the reading, and moves the usual part of the way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

TARGET_LEVEL = 87.0  # grey levels (0-255), the metered centre's mean at the nominal cell's inspection view
GAIN_RANGE = (0.25, 4.0)  # the exposure's reach, as a camera's between its shortest and longest exposure
SMOOTHING = 0.5  # each frame moves the log-gain this fraction of the way to the metered correction
SETTLE_FRAMES = 4  # full corrections at reset: clipped pixels under-report the light, so one reading is not enough
HIGHLIGHT_PERCENTILE = 99.0  # of the centre's brightest channel: the parts' highlights, not single hot pixels
HIGHLIGHT_LEVEL = 240.0  # grey levels: the highlights held just under the sensor's clipping at 255
CLIPPED_READING = 254.0  # a highlight reading at or above it is clipped
CLIPPED_STEP = 0.5  # the gain ratio a clipped reading aims for: one stop down


def centre(image: np.ndarray) -> np.ndarray:
    """The centre third (in each direction) of an [H, W, ...] image: what the camera meters."""
    height, width = image.shape[:2]
    return image[height // 3: height - height // 3, width // 3: width - width // 3]


def metered_level(image: np.ndarray) -> float:
    """The mean grey level of the centre third of a uint8 [H, W, 3] image, at least 1 (a black frame meters as
    the darkest level, not zero)."""
    return max(float(centre(image).mean()), 1.0)


def highlight_level(image: np.ndarray) -> float:
    """The ``HIGHLIGHT_PERCENTILE`` of the brightest channel over the centre third of a uint8 [H, W, 3] image, at
    least 1."""
    return max(float(np.percentile(centre(image).max(axis=2), HIGHLIGHT_PERCENTILE)), 1.0)


def next_gain(gain: float, level: float, smoothing: float = SMOOTHING, target: float = TARGET_LEVEL) -> float:
    """The gain of the next frame after a frame taken at ``gain`` metered ``level``: ``smoothing`` of the way (in
    log terms) to the gain that would have put it at ``target``, within ``GAIN_RANGE``."""
    corrected = gain * (target / level) ** smoothing
    return float(np.clip(corrected, *GAIN_RANGE))


@dataclass(frozen=True)
class Meter:
    """How a camera reads its image (``read``: a uint8 [H, W, 3] image to a level), the level it holds, and how many
    full corrections settle it at reset (``settle_frames``)."""

    name: str
    read: Callable[[np.ndarray], float]
    target: float
    clipped_from: float | None = None  # a reading at or above it is clipped: the loop aims CLIPPED_STEP down
    # Full corrections at reset. A highlight meter that starts clipped (a bright cell at gain 1) needs its one-stop
    # steps first, then the readings that correct it, so it gets twice the mean meter's.
    settle_frames: int = SETTLE_FRAMES

    def next_gain(self, gain: float, image: np.ndarray, smoothing: float = SMOOTHING) -> float:
        """The gain of the frame after ``image``, taken at ``gain``."""
        level = self.read(image)
        if self.clipped_from is not None and level >= self.clipped_from:
            level = self.target / CLIPPED_STEP
        return next_gain(gain, level, smoothing, self.target)


METERS = {meter.name: meter for meter in (
    Meter("centre", metered_level, TARGET_LEVEL),
    Meter("highlights", highlight_level, HIGHLIGHT_LEVEL, clipped_from=CLIPPED_READING,
          settle_frames=2 * SETTLE_FRAMES),
)}


def settle(render_at: Callable[[float], np.ndarray], gain: float = 1.0, meter: Meter = METERS["centre"]) -> float:
    """The steady gain of a still camera: ``render_at(gain)`` renders the wrist image at a gain; each of the meter's
    ``settle_frames`` readings corrects fully."""
    for _ in range(meter.settle_frames):
        gain = meter.next_gain(gain, render_at(gain), smoothing=1.0)
    return gain
