"""The wrist camera's auto-exposure: the loop's arithmetic, and what it does to the cell's images."""

from __future__ import annotations

import numpy as np
import pytest

from robot_rl.envs import exposure
from robot_rl.envs.randomization import (
    HIGHLIGHTS,
    METERED,
    NONE,
    PERTURBATIONS,
    RECTIFIED,
    Randomization,
    describe,
    in_cell_of,
    with_camera_of,
    with_exposure,
)
from robot_rl.envs.task import expert_steps
from robot_rl.envs.tasks import get_task


def test_the_loop_moves_the_gain_towards_the_target_within_its_reach():
    assert exposure.next_gain(1.0, exposure.TARGET_LEVEL) == pytest.approx(1.0)
    assert exposure.next_gain(1.0, 2 * exposure.TARGET_LEVEL) == pytest.approx(2 ** -exposure.SMOOTHING)
    assert exposure.next_gain(1.0, exposure.TARGET_LEVEL / 4, smoothing=1.0) == pytest.approx(4.0)
    assert exposure.next_gain(1.0, 1.0, smoothing=1.0) == exposure.GAIN_RANGE[1]  # a black frame: longest exposure
    assert exposure.next_gain(1.0, 255.0, smoothing=1.0) >= exposure.GAIN_RANGE[0]


def test_settling_reaches_the_target_through_a_sensor_that_clips():
    scene = np.linspace(20, 400, 84 * 84 * 3).reshape(84, 84, 3)  # a third of it clips at gain 1

    def render_at(gain: float) -> np.ndarray:
        return np.clip(scene * gain, 0, 255).astype(np.uint8)

    gain = exposure.settle(render_at)
    assert exposure.metered_level(render_at(gain)) == pytest.approx(exposure.TARGET_LEVEL, rel=0.02)


def test_metering_reads_the_centre_of_the_image():
    image = np.zeros((84, 84, 3), np.uint8)
    image[28:56, 28:56] = 90
    assert exposure.metered_level(image) == 90.0
    image[:28] = 255  # a bright table at the edge does not move it
    assert exposure.metered_level(image) == 90.0


def test_the_highlight_meter_reads_the_brightest_channels_99th_percentile_in_the_centre():
    image = np.zeros((84, 84, 3), np.uint8)
    image[28:56, 28:56, 1] = 60
    image[28:31, 28:56, 2] = 200  # 84 of the centre's 784 pixels: more than 1%
    assert exposure.highlight_level(image) == 200.0
    image[:28] = 255  # a bright table at the edge does not move it
    assert exposure.highlight_level(image) == 200.0
    assert exposure.metered_level(image) < 80  # the centre's mean barely sees the highlights


def test_a_clipped_highlight_reading_steps_one_stop_down_and_settling_reaches_the_target():
    highlights = exposure.METERS["highlights"]
    white = np.full((84, 84, 3), 255, np.uint8)
    assert highlights.next_gain(1.0, white, smoothing=1.0) == pytest.approx(exposure.CLIPPED_STEP)
    at_target = np.full((84, 84, 3), int(exposure.HIGHLIGHT_LEVEL), np.uint8)
    assert highlights.next_gain(0.8, at_target) == pytest.approx(0.8)
    scene = np.linspace(20, 900, 84 * 84 * 3).reshape(84, 84, 3)  # highlights 3.5x past clipping at gain 1

    def render_at(gain: float) -> np.ndarray:
        return np.clip(scene * gain, 0, 255).astype(np.uint8)

    gain = exposure.settle(render_at, meter=highlights)
    assert exposure.highlight_level(render_at(gain)) == pytest.approx(exposure.HIGHLIGHT_LEVEL, rel=0.02)
    # in the running loop a clipped frame moves the gain part of the way, as any other reading does
    assert highlights.next_gain(1.0, white) == pytest.approx(exposure.CLIPPED_STEP ** exposure.SMOOTHING)
    assert highlights.next_gain(1.0, np.zeros_like(white)) == exposure.GAIN_RANGE[1]  # a black frame opens up


def test_the_centre_meter_is_the_loop_it_always_was():
    centre = exposure.METERS["centre"]
    frame = np.full((84, 84, 3), 240, np.uint8)
    assert centre.next_gain(1.3, frame) == 1.3 * (87.0 / 240.0) ** 0.5  # the formula before meters had names
    assert centre.next_gain(1.3, np.zeros_like(frame)) == exposure.GAIN_RANGE[1]
    renders = []

    def render_at(gain: float) -> np.ndarray:
        renders.append(gain)
        return np.full((84, 84, 3), min(255, round(60 * gain)), np.uint8)

    exposure.settle(render_at)
    assert len(renders) == exposure.SETTLE_FRAMES  # a clipped highlight reading needs more; the mean does not


def _gain_at_view(randomization, boards: int = 3) -> float:
    """The gain the expert's answered frame was taken at, median over boards."""
    task = get_task("pcb-inspect")(randomization=randomization)
    gains = []
    for seed in range(boards):
        gain = None
        for _, result in expert_steps(task, 40_000_000 + seed):
            if not (result.terminated or result.truncated):
                gain = task.exposure_gain
        assert gain is not None
        gains.append(gain)
    return float(np.median(gains))


def test_a_camera_metering_highlights_follows_the_light_and_not_the_boards_colour():
    nominal = _gain_at_view(in_cell_of(NONE, HIGHLIGHTS))
    grey = _gain_at_view(in_cell_of(PERTURBATIONS["grey_board"], HIGHLIGHTS))
    assert grey == pytest.approx(nominal, rel=0.05)
    assert _gain_at_view(in_cell_of(PERTURBATIONS["dim_light"], HIGHLIGHTS)) > 1.5 * nominal
    # the centre's mean follows the board: a grey board opens a mean-metered camera up
    assert _gain_at_view(in_cell_of(PERTURBATIONS["grey_board"], METERED)) > 1.2 * _gain_at_view(
        in_cell_of(NONE, METERED))


def _level_at_view(randomization, boards: int = 3) -> float:
    """The expert's inspection view's metered level, median over boards."""
    task = get_task("pcb-inspect")(randomization=randomization)
    levels = [exposure.metered_level(observation["pixels"]) for seed in range(boards)
              for observation, result in expert_steps(task, 40_000_000 + seed) if result.terminated]
    assert len(levels) == boards
    return float(np.median(levels))


def test_each_frame_is_taken_at_the_gain_its_predecessor_metered_and_a_fixed_camera_has_none():
    task = get_task("pcb-inspect")(randomization=Randomization("metering only", auto_exposure=True))
    frames = [(result.observation["pixels"], task.exposure_gain) for _, result in expert_steps(task, 40_000_000)
              if not (result.terminated or result.truncated)]
    assert len(frames) > 2 and len({gain for _, gain in frames}) > 1
    for (image, gain), (_, next_gain) in zip(frames, frames[1:]):
        assert next_gain == pytest.approx(exposure.next_gain(gain, exposure.metered_level(image)))
    fixed = get_task("pcb-inspect")(randomization=RECTIFIED)
    assert all(fixed.exposure_gain is None for _ in expert_steps(fixed, 40_000_000))


def test_a_metered_camera_brings_dim_light_back_to_the_nominal_board():
    dim = PERTURBATIONS["dim_light"]
    nominal_level = _level_at_view(in_cell_of(NONE, RECTIFIED))
    assert _level_at_view(in_cell_of(dim, RECTIFIED)) < 0.8 * nominal_level  # without: a third darker
    assert _level_at_view(in_cell_of(dim, METERED)) == pytest.approx(nominal_level, rel=0.08)


def test_an_episode_starts_from_its_own_lights_not_the_last_exposure():
    task = get_task("pcb-inspect")(randomization=METERED)
    model = task.scene.model
    nominal_specular = model.light_specular.copy()
    task.reset(5)
    assert task._exposure_gain is not None and task._exposure_gain != pytest.approx(1.0)
    assert not np.allclose(model.light_specular, nominal_specular)  # the exposure scales every light
    plain = get_task("pcb-inspect")(randomization=RECTIFIED)
    plain.scene.model.light_specular[:] *= 3  # a scene left exposed by someone else
    plain.scene.set_lighting(np.random.default_rng(0), 0.0)
    assert np.allclose(plain.scene.model.light_specular, nominal_specular)


def test_a_shift_in_a_metered_cell_keeps_the_cells_exposure():
    shifted = in_cell_of(PERTURBATIONS["bright_light"], METERED)
    assert shifted.auto_exposure and shifted.rectified and shifted.light_intensity == (1.8, 1.8)
    assert not in_cell_of(PERTURBATIONS["bright_light"], RECTIFIED).auto_exposure
    assert "auto exposure" in describe(METERED)


def test_the_nominal_setting_of_a_metered_policy_keeps_its_camera():
    assert with_camera_of(NONE, METERED).auto_exposure and with_camera_of(NONE, METERED).light_intensity == (1.0, 1.0)
    assert with_camera_of(NONE, RECTIFIED) is NONE  # nothing to carry: the named preset itself


def test_a_deployment_names_the_cameras_exposure_whatever_the_policy_was_trained_with():
    assert with_exposure(RECTIFIED, "") is RECTIFIED and with_exposure(METERED, "auto") is METERED
    deployed = with_exposure(RECTIFIED, "auto")
    assert deployed.auto_exposure and deployed.rectified and deployed.calibrated
    assert not with_exposure(METERED, "fixed").auto_exposure and with_exposure(METERED, "fixed").rectified
    with pytest.raises(ValueError, match="camera exposure 'manual'"):
        with_exposure(RECTIFIED, "manual")
    highlights = with_exposure(RECTIFIED, "highlights")
    assert highlights.auto_exposure and highlights.metering == "highlights" and highlights.rectified
    assert with_exposure(HIGHLIGHTS, "highlights") is HIGHLIGHTS
    assert with_exposure(HIGHLIGHTS, "auto").metering == "centre"
    assert not with_exposure(HIGHLIGHTS, "fixed").auto_exposure


def test_a_shift_in_a_highlight_metered_cell_meters_the_highlights_too():
    shifted = in_cell_of(PERTURBATIONS["dim_light"], HIGHLIGHTS)
    assert shifted.auto_exposure and shifted.metering == "highlights"
    assert describe(shifted).endswith("auto exposure; metering highlights")
    assert "metering" not in describe(METERED)  # the centre is the default meter
    with pytest.raises(ValueError, match="metering must be one of centre, highlights"):
        Randomization("spot", auto_exposure=True, metering="spot")
    with pytest.raises(ValueError, match="metering needs auto_exposure"):  # a fixed camera meters nothing
        Randomization("fixed highlights", metering="highlights")


def test_every_deployed_cameras_meter_is_a_meter():
    from robot_rl.envs.defaults import CAMERA_EXPOSURES

    assert {metering for _, metering in CAMERA_EXPOSURES.values()} <= set(exposure.METERS)


def test_a_video_replay_leaves_the_exposure_and_lights_the_scene_as_drawn():
    task = get_task("pcb-inspect")(randomization=METERED)
    model = task.scene.model
    task.reset(7)
    gain, exposed = task._exposure_gain, model.light_specular.copy()
    with task.exposure_kept():
        task.scene.data.qpos[:] += 0.05  # elsewhere: the loop moves the gain
        for _ in range(3):
            task.camera_image()
        with task.lit_as_drawn():
            assert np.allclose(model.light_specular, task.scene._undrawn_light[0])
    assert task._exposure_gain == gain and np.array_equal(model.light_specular, exposed)
