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
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

TARGET_LEVEL = 87.0  # grey levels (0-255), the metered centre's mean at the nominal cell's inspection view
GAIN_RANGE = (0.25, 4.0)  # the exposure's reach, as a camera's between its shortest and longest exposure
SMOOTHING = 0.5  # each frame moves the log-gain this fraction of the way to the metered correction
SETTLE_FRAMES = 4  # full corrections at reset: clipped pixels under-report the light, so one reading is not enough


def centre(image: np.ndarray) -> np.ndarray:
    """The centre third (in each direction) of an [H, W, ...] image: what the camera meters."""
    height, width = image.shape[:2]
    return image[height // 3: height - height // 3, width // 3: width - width // 3]


def metered_level(image: np.ndarray) -> float:
    """The mean grey level of the centre third of a uint8 [H, W, 3] image, at least 1 (a black frame meters as
    the darkest level, not zero)."""
    return max(float(centre(image).mean()), 1.0)


def next_gain(gain: float, level: float, smoothing: float = SMOOTHING) -> float:
    """The gain of the next frame after a frame taken at ``gain`` metered ``level``: ``smoothing`` of the way (in
    log terms) to the gain that would have put it at ``TARGET_LEVEL``, within ``GAIN_RANGE``."""
    corrected = gain * (TARGET_LEVEL / level) ** smoothing
    return float(np.clip(corrected, *GAIN_RANGE))


def settle(render_at: Callable[[float], np.ndarray], gain: float = 1.0) -> float:
    """The steady gain of a still camera: ``render_at(gain)`` renders the wrist image at a gain; each of
    ``SETTLE_FRAMES`` readings corrects fully."""
    for _ in range(SETTLE_FRAMES):
        gain = next_gain(gain, metered_level(render_at(gain)), smoothing=1.0)
    return gain
