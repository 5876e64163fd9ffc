"""Rectification of the wrist image to the nominal lens: what a cell that measured its camera's field of view
(an intrinsic calibration) does to every frame before its policy sees it.

A pinhole camera of vertical field of view F puts a ray at height ``y / z`` at ``(H / 2) * (y / z) / tan(F / 2)``
pixels from the image centre. An image taken through a lens measured as F_m, resampled so that it is the image a
lens of the nominal F_0 would take, reads the sensor image at ``centre + d * tan(F_0 / 2) / tan(F_m / 2)`` for
each pixel ``d`` from the centre: a wider lens is cropped about its centre and enlarged, a narrower one shrunk,
with the border it never saw left black (segmentation: background). When F_m is the lens's true field of view the
rectified image is the nominal camera's (up to resampling, which also smooths the sensor's pixel noise, as a real
cell's rectification does); a calibration error leaves the residual scale.

OpenCV's ``cv2.resize`` / ``remap`` would do the resampling; a centred scale of a small square image is two
separable bilinear passes in numpy, which keeps OpenCV out of the env's dependencies.
"""

from __future__ import annotations

import math

import numpy as np


def _sample_points(size: int, scale: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per output pixel along one axis: the two source indices, the weight of the second, whether the sample point
    lies on the sensor (at most half a pixel past its edge pixels' centres)."""
    centre = size / 2
    source = centre + (np.arange(size) + 0.5 - centre) * scale - 0.5  # in source index units (pixel centres)
    on_sensor = (source >= -0.5) & (source <= size - 0.5)
    clipped = np.clip(source, 0, size - 1)
    low = np.floor(clipped).astype(np.intp)
    high = np.minimum(low + 1, size - 1)
    return low, high, (clipped - low).astype(np.float32), on_sensor


class Rectifier:
    """Resamples ``size`` x ``size`` wrist images taken through a lens measured at ``measured_fovy`` degrees to
    the nominal ``nominal_fovy`` (the same for every frame of an episode: built once at reset)."""

    def __init__(self, size: int, nominal_fovy: float, measured_fovy: float):
        if not (0 < nominal_fovy < 180 and 0 < measured_fovy < 180):
            raise ValueError(f"Rectifier: fields of view must lie in (0, 180) degrees, got nominal {nominal_fovy}, "
                             f"measured {measured_fovy}")
        self.size = size
        # Source pixels per rectified pixel from the centre (< 1: the sensor's lens is wider than nominal).
        self.scale = math.tan(math.radians(nominal_fovy) / 2) / math.tan(math.radians(measured_fovy) / 2)
        low, high, weight, on_sensor = _sample_points(size, self.scale)
        # The bilinear resampling along one axis as a matrix (the same for rows and columns: the image is square);
        # rows of pixels the sensor never saw are zero, so their pixels come out black.
        index = np.arange(size)
        self._resample = np.zeros((size, size), np.float32)
        np.add.at(self._resample, (index, low), 1 - weight)
        np.add.at(self._resample, (index, high), weight)
        self._resample[~on_sensor] = 0
        self._nearest = np.where(weight < 0.5, low, high)
        self._seen = on_sensor[:, None] & on_sensor[None, :]  # [H, W]: the rectified pixel was on the sensor

    def image(self, image: np.ndarray) -> np.ndarray:
        """uint8 [H, W, 3] as the sensor took it -> uint8 [H, W, 3] as the nominal lens would (bilinear)."""
        size, resample = self.size, self._resample
        rows = (resample @ image.astype(np.float32).reshape(size, -1)).reshape(image.shape)
        out = np.einsum("jk,ikc->ijc", resample, rows, optimize=True)
        out += 0.5  # rounds when cast
        return np.clip(out, 0, 255, out=out).astype(np.uint8)

    def mask(self, mask: np.ndarray) -> np.ndarray:
        """Class per pixel [H, W] -> the same resampled by nearest neighbour; pixels the sensor never saw get 0
        (background)."""
        out = mask[self._nearest][:, self._nearest]
        return np.where(self._seen, out, 0).astype(mask.dtype)

    def rectified_fovy(self, true_fovy: float) -> float:
        """The field of view (degrees) of the pinhole camera whose image the rectified one is, for a lens whose
        true field of view is ``true_fovy``: the nominal one when the lens was measured exactly."""
        return math.degrees(2 * math.atan(self.scale * math.tan(math.radians(true_fovy) / 2)))
