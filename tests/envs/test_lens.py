"""A rectifying cell: wrist images, segmentation and image labels resampled to the nominal lens."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from robot_rl.envs.lens import Rectifier
from robot_rl.envs.randomization import (
    CALIBRATED,
    PERTURBATIONS,
    RECTIFIED,
    Randomization,
    describe,
    in_cell_of,
)
from robot_rl.envs.task import TaskConfig
from robot_rl.envs.tasks.pcb_inspect import PcbInspectTask

SIZE = 64
EXACT = dataclasses.replace(RECTIFIED, calibration_shift=(0.0, 0.0), calibration_tilt=(0.0, 0.0),
                            calibration_fov=(0.0, 0.0))


def _observed(randomization: Randomization, seed: int) -> tuple[dict, dict]:
    task = PcbInspectTask("default", TaskConfig(image_size=SIZE), randomization=randomization)
    task.observe_segmentation = True
    observation = task.reset(seed)
    return observation, task.perception_targets()


def test_the_nominal_lens_measured_exactly_leaves_an_image_unchanged():
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (SIZE, SIZE, 3), dtype=np.uint8)
    mask = rng.integers(0, 5, (SIZE, SIZE), dtype=np.uint8)
    rectifier = Rectifier(SIZE, 50.0, 50.0)
    np.testing.assert_array_equal(rectifier.image(image), image)
    np.testing.assert_array_equal(rectifier.mask(mask), mask)
    assert rectifier.rectified_fovy(50.0) == pytest.approx(50.0)
    assert Rectifier(SIZE, 50.0, 60.0).rectified_fovy(60.0) == pytest.approx(50.0)  # a lens measured exactly


def test_a_narrower_lens_leaves_the_border_it_never_saw_black_and_background():
    image = np.full((SIZE, SIZE, 3), 200, np.uint8)
    rectifier = Rectifier(SIZE, 50.0, 40.0)
    out, mask = rectifier.image(image), rectifier.mask(np.full((SIZE, SIZE), 3, np.uint8))
    assert np.all(out[0] == 0) and np.all(out[:, -1] == 0) and np.all(mask[0] == 0)
    centre = slice(SIZE // 4, 3 * SIZE // 4)
    assert np.all(out[centre, centre] == 200) and np.all(mask[centre, centre] == 3)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_wide_lens_rectified_looks_like_the_nominal_lens(seed):
    nominal, nominal_labels = _observed(in_cell_of(Randomization("nominal"), EXACT), seed)
    wide, wide_labels = _observed(in_cell_of(PERTURBATIONS["wide_lens"], EXACT), seed)
    unrectified, unrectified_labels = _observed(PERTURBATIONS["wide_lens"], seed)

    def difference(a):
        return np.abs(a["pixels"].astype(int) - nominal["pixels"].astype(int)).mean()

    assert difference(wide) < 2.0 < 3.0 < difference(unrectified)
    assert (wide["segmentation"] == nominal["segmentation"]).mean() > 0.97
    np.testing.assert_allclose(wide_labels["point_pixel"], nominal_labels["point_pixel"], atol=1e-3)
    assert np.abs(unrectified_labels["point_pixel"] - nominal_labels["point_pixel"]).max() > 1.0
    assert wide_labels["point_in_view"] == nominal_labels["point_in_view"]


@pytest.mark.parametrize("seed", [0, 3])
def test_a_lens_measured_with_an_error_leaves_its_scale_in_the_image(seed):
    """The rectified image is off by the measurement's error: a lens measured wider than it is shows the board
    larger (the target farther from the image centre), by tan(measured / 2) / tan(true / 2)."""
    fixed_error = dataclasses.replace(EXACT, calibration_fov=(2.0, 2.0))
    _, nominal = _observed(in_cell_of(Randomization("nominal"), EXACT), seed)
    task = PcbInspectTask("default", TaskConfig(image_size=SIZE),
                          randomization=in_cell_of(PERTURBATIONS["wide_lens"], fixed_error))
    task.reset(seed)
    error, true_fovy = task.appearance.lens_error, task.scene.nominal_fovy + 10.0
    assert abs(error) == pytest.approx(2.0)
    ratio = np.tan(np.radians(true_fovy + error) / 2) / np.tan(np.radians(true_fovy) / 2)
    centre = SIZE / 2
    np.testing.assert_allclose(task.perception_targets()["point_pixel"] - centre,
                               (nominal["point_pixel"] - centre) * ratio, atol=1e-3)


def test_a_target_out_of_the_sensor_is_out_of_view_in_the_rectified_image():
    """A narrower lens rectified leaves a black border the sensor never saw: a target there is out of view though
    it lies inside the rectified frame."""
    narrow = in_cell_of(Randomization("narrow_lens", camera_fov=(-15.0, -15.0)), EXACT)
    task = PcbInspectTask("default", TaskConfig(image_size=SIZE), randomization=narrow)
    task.reset(0)
    scene = task.scene
    camera = scene.wrist_camera_id
    position, rotation = scene.data.cam_xpos[camera], scene.data.cam_xmat[camera].reshape(3, 3)
    # a point straight ahead but at 95% of the nominal half-width: inside the nominal frame, outside the sensor's
    half_width = np.tan(np.radians(scene.nominal_fovy) / 2) * 0.95
    task.inspection_target = lambda: position + rotation @ np.array([half_width * 0.3, 0.0, -0.3])
    labels = task.perception_targets()
    assert 0 <= labels["point_pixel"][0] < SIZE and not labels["point_in_view"][0]
    task.inspection_target = lambda: position + rotation @ np.array([0.0, 0.0, -0.3])
    labels = task.perception_targets()
    np.testing.assert_allclose(labels["point_pixel"], [SIZE / 2, SIZE / 2], atol=1e-6)
    assert labels["point_in_view"][0]


def test_the_lens_error_draws_last_within_its_range_and_only_in_a_rectifying_cell():
    rng_a, rng_b = np.random.default_rng(4), np.random.default_rng(4)
    errors = []
    for _ in range(200):
        a, b = RECTIFIED.sample(rng_a), CALIBRATED.sample(rng_b)
        assert b.lens_error is None and not b.rectified and a.rectified
        np.testing.assert_array_equal(a.calibration_rotation, b.calibration_rotation)  # the draws before it too
        errors.append(a.lens_error)
        rng_b.bit_generator.state = rng_a.bit_generator.state
    errors = np.array(errors)
    assert np.all(np.abs(errors) <= RECTIFIED.calibration_fov[1]) and errors.min() < 0 < errors.max()
    assert RECTIFIED == dataclasses.replace(CALIBRATED, name="rectified", rectified=True,
                                            calibration_fov=RECTIFIED.calibration_fov)


def test_shifts_keep_the_lens_calibration_of_the_cell():
    shift = PERTURBATIONS["wide_lens"]
    assert in_cell_of(shift, CALIBRATED).rectified is False
    rectified = in_cell_of(shift, RECTIFIED)
    assert rectified.rectified and rectified.calibrated and rectified.camera_fov == shift.camera_fov
    assert describe(rectified) == ("camera_fov 10 deg; calibrated; calibration_shift 0 to 0.002 m; "
                                   "calibration_tilt 0 to 1 deg; rectified; calibration_fov 0 to 0.5 deg")
