"""Domain randomization: deterministic per seed, inside its documented ranges, pixels-only."""

from __future__ import annotations

import colorsys
import dataclasses

import numpy as np
import pytest

from robot_rl.configs import RANDOMIZATION_NAMES
from robot_rl.envs.randomization import (
    CALIBRATED,
    DEFAULT,
    MARK_HALF_SIZE,
    MARK_RADIUS,
    MAX_MARKS,
    MOUNT,
    NONE,
    PERTURBATIONS,
    RANDOMIZATIONS,
    SOLDER_MASKS,
    STRONG,
    SURFACES,
    WIDE,
    Randomization,
    describe,
    get_randomization,
    in_cell_of,
)
from robot_rl.envs.scene import recoloured_board_texture
from robot_rl.envs.task import TaskConfig
from robot_rl.envs.tasks.pcb_inspect import PcbInspectTask

SIZE = 48


def make_task(randomization, difficulty="default") -> PcbInspectTask:
    return PcbInspectTask(difficulty, TaskConfig(image_size=SIZE), randomization=randomization)


def test_presets_match_the_cli_names():
    assert tuple(RANDOMIZATIONS) == RANDOMIZATION_NAMES
    assert RANDOMIZATIONS["none"].is_nominal and not DEFAULT.is_nominal
    assert not set(PERTURBATIONS) & set(RANDOMIZATIONS)


@pytest.mark.parametrize("preset", ["strong", "wide", "surfaces"])
def test_same_seed_same_scene_and_nothing_accumulates_across_episodes(preset):
    first, second = make_task(preset), make_task(preset)
    a = first.reset(7)["pixels"]
    assert np.array_equal(a, second.reset(7)["pixels"])  # another task, same seed: the same image
    assert not np.array_equal(a, first.reset(8)["pixels"])  # another seed: another scene
    model = first.scene.model
    assert np.array_equal(a, first.reset(7)["pixels"])  # back to seed 7: nothing left over from seed 8
    assert first.scene.model is model  # written into the compiled model, never recompiled


def test_every_drawn_value_stays_in_its_documented_range():
    rng = np.random.default_rng(0)
    for preset in (DEFAULT, STRONG):
        for _ in range(200):
            a = preset.sample(rng)
            assert preset.light_intensity[0] <= a.light_intensity <= preset.light_intensity[1]
            for name in ("light_colour", "board_colour", "table_colour", "fixture_colour"):
                low, high = np.array(getattr(preset, name)).T
                assert np.all((low <= getattr(a, name)) & (getattr(a, name) <= high)), name
            tilts = np.linalg.norm(a.light_tilt, axis=1)
            assert np.all((preset.light_tilt[0] - 1e-9 <= tilts) & (tilts <= preset.light_tilt[1] + 1e-9))
            assert preset.board_gloss[0] <= a.board_gloss <= preset.board_gloss[1]
            assert np.linalg.norm(a.camera_offset) <= preset.camera_shift[1] + 1e-12
            assert np.degrees(np.linalg.norm(a.camera_rotation)) <= preset.camera_tilt[1] + 1e-9
            assert preset.camera_fov[0] <= a.camera_fov <= preset.camera_fov[1]
            assert preset.pixel_noise[0] <= a.pixel_noise <= preset.pixel_noise[1]


def test_the_surfaces_preset_is_wide_with_the_default_camera_mount():
    camera = ("camera_shift", "camera_tilt")
    for f in dataclasses.fields(SURFACES):
        if f.name != "name":
            source = DEFAULT if f.name in camera else WIDE
            assert getattr(SURFACES, f.name) == getattr(source, f.name), f.name


def test_surfaces_stay_in_their_documented_ranges():
    rng = np.random.default_rng(1)
    masks, mark_counts = set(), set()
    for _ in range(300):
        a = WIDE.sample(rng)
        assert a.board_mask in WIDE.board_masks
        masks.add(a.board_mask)
        hsv = colorsys.rgb_to_hsv(*a.table_rgb)
        for value, (low, high) in zip(hsv[1:], WIDE.table_hsv[1:]):  # hue spans the whole circle
            assert low - 1e-9 <= value <= high + 1e-9
        mark_counts.add(len(a.marks))
        radius = np.hypot(a.marks[:, 0], a.marks[:, 1])
        assert np.all((MARK_RADIUS[0] <= radius) & (radius <= MARK_RADIUS[1]))
        assert np.all((MARK_HALF_SIZE[0] <= a.marks[:, 3:5]) & (a.marks[:, 3:5] <= MARK_HALF_SIZE[1]))
        assert np.all((0 <= a.marks[:, 5:]) & (a.marks[:, 5:] <= 1))
    assert masks == set(WIDE.board_masks)
    assert mark_counts == set(range(WIDE.table_marks[0], WIDE.table_marks[1] + 1))


def test_presets_without_surfaces_draw_what_they_drew_before_surfaces_existed():
    a = DEFAULT.sample(np.random.default_rng(3))
    assert (a.board_mask, a.table_rgb, a.marks.shape) == ("green", None, (0, 8))
    states = {}
    for preset in (NONE, DEFAULT, WIDE):
        rng = np.random.default_rng(3)
        drawn = preset.sample(rng)
        states[preset.name] = rng.bit_generator.state["state"]["state"]
        if preset is WIDE:  # the shared values first, as DEFAULT draws them
            assert (drawn.light_intensity, drawn.pixel_noise) == (a.light_intensity, a.pixel_noise)
    assert states["default"] == states["none"] != states["wide"]  # surfaces draw only in presets that vary them


def test_the_surfaces_reach_the_model_and_unused_marks_stay_out_of_sight():
    task, nominal = make_task("wide"), make_task("none")
    m, m0, scene = task.scene.model, nominal.scene.model, task.scene
    board = scene.board_material_id
    for seed in range(6):
        task.reset(seed)
        a = task.appearance
        assert m.mat_texid[board, 1] == scene.mask_texture_ids[a.board_mask]  # role 1: rgb
        np.testing.assert_allclose(m.mat_rgba[scene.table_material_id, :3], a.table_rgb)
        board_xy = task.scene.data.mocap_pos[scene.board_mocap_id][:2]
        used, unused = scene.mark_geom_ids[:len(a.marks)], scene.mark_geom_ids[len(a.marks):]
        np.testing.assert_allclose(m.geom_pos[used, :2] - board_xy, a.marks[:, :2])
        np.testing.assert_allclose(m.geom_rgba[used, :3], a.marks[:, 5:])
        table = m0.geom("table")
        below_top = m.geom_pos[unused, 2] + m.geom_size[unused, 2] < table.pos[2] + table.size[2]
        assert below_top.all()  # inside the table box: no camera sees them
    assert m0.mat_texid[board, 1] == nominal.scene.mask_texture_ids["green"]


def test_solder_mask_textures_recolour_the_mask_and_traces_only():
    green = recoloured_board_texture(SOLDER_MASKS["green"])
    blue = recoloured_board_texture(SOLDER_MASKS["blue"])
    assert set(map(tuple, np.unique(green.reshape(-1, 3), axis=0))) >= {SOLDER_MASKS["green"]}
    unchanged = (green == blue).all(-1)
    assert 0.02 < unchanged.mean() < 0.2  # vias and silkscreen keep their colours
    assert (blue[~unchanged] != green[~unchanged]).any(-1).all()
    task = make_task("none")
    m = task.scene.model
    texture = m.texture("pcb_texture_blue")
    compiled = m.tex_data[texture.adr[0]:texture.adr[0] + texture.width[0] * texture.height[0] * 3]
    assert np.array_equal(compiled.reshape(blue.shape), blue)


def test_the_model_gets_what_was_drawn():
    task = make_task("strong")
    nominal = make_task("none")
    for seed in range(5):
        task.reset(seed)
        nominal.reset(seed)
        a, m, m0 = task.appearance, task.scene.model, nominal.scene.model
        np.testing.assert_allclose(m.light_diffuse, m0.light_diffuse * a.light_intensity * a.light_colour)
        board = task.scene.board_material_id
        np.testing.assert_allclose(m.mat_rgba[board, :3], m0.mat_rgba[board, :3] * a.board_colour)
        camera = task.scene.wrist_camera_id
        assert m.cam_fovy[camera] == pytest.approx(m0.cam_fovy[camera] + a.camera_fov)
        assert np.linalg.norm(m.cam_pos[camera] - m0.cam_pos[camera]) == pytest.approx(
            np.linalg.norm(a.camera_offset))


@pytest.mark.parametrize("shift", ["default", "wide", *PERTURBATIONS])
def test_a_perturbation_changes_pixels_and_nothing_else(shift):
    plain, shifted = make_task("none"), make_task(shift)
    seed = 3
    a, b = plain.reset(seed), shifted.reset(seed)
    assert not np.array_equal(a["pixels"], b["pixels"])
    rng = np.random.default_rng(seed)
    for _ in range(4):
        for name, value in plain.privileged().items():
            assert np.array_equal(value, shifted.privileged()[name]), name
        assert np.array_equal(a["joint_state"], b["joint_state"])
        pose = rng.uniform(-1, 1, 6)
        ra, rb = plain.step(pose, 0), shifted.step(pose, 0)
        assert (ra.reward, ra.terms, ra.flags, ra.terminated, ra.truncated) == \
            (rb.reward, rb.terms, rb.flags, rb.terminated, rb.truncated)
        a, b = ra.observation, rb.observation


def _outside(shift: Randomization, trained: Randomization, name: str) -> bool:
    value, ranges = getattr(shift, name), getattr(trained, name)
    if name == "board_masks":
        return bool(set(value) - set(ranges))
    if ranges is None:  # table_hsv: the trained preset keeps the nominal colour
        return True
    value, ranges = np.array(value).reshape(-1, 2), np.array(ranges).reshape(-1, 2)
    return bool(((value[:, 0] < ranges[:, 0]) | (value[:, 1] > ranges[:, 1])).any())


SURFACE_SHIFTS = ("blue_table", "white_table", "purple_board", "cluttered_table")


def test_perturbations_lie_outside_the_training_ranges():
    for shift in PERTURBATIONS.values():
        changed = [f.name for f in dataclasses.fields(shift)
                   if f.name != "name" and getattr(shift, f.name) != getattr(NONE, f.name)]
        assert changed, shift.name
        for trained in (DEFAULT, WIDE, SURFACES) if shift.name in SURFACE_SHIFTS else (DEFAULT,):
            assert any(_outside(shift, trained, name) for name in changed), f"{shift.name} inside {trained.name}"
        assert describe(shift) != "nominal"


def test_bad_ranges_and_names_are_refused():
    with pytest.raises(ValueError, match="light_intensity"):
        Randomization("bad", light_intensity=(1.2, 0.8))
    with pytest.raises(ValueError, match="pixel_noise"):
        Randomization("bad", pixel_noise=(-1.0, 2.0))
    with pytest.raises(ValueError, match="board_masks"):
        Randomization("bad", board_masks=("teal",))
    with pytest.raises(ValueError, match="table_marks"):
        Randomization("bad", table_marks=(0, MAX_MARKS + 1))
    with pytest.raises(ValueError, match="table_hsv"):
        Randomization("bad", table_hsv=((0, 1), (0, 1.5), (0, 1)))
    with pytest.raises(ValueError, match="unknown randomization 'foggy'"):
        get_randomization("foggy")


def _camera_and_site(task: PcbInspectTask) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    data, scene = task.scene.data, task.scene
    return (data.cam_xpos[scene.wrist_camera_id].copy(), data.cam_xmat[scene.wrist_camera_id].reshape(3, 3).copy(),
            *scene.camera_pose())


def _angle(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.degrees(np.arccos(np.clip((np.trace(a.T @ b) - 1) / 2, -1, 1))))


def test_a_calibrated_cell_controls_the_camera_where_it_sits():
    shift = in_cell_of(PERTURBATIONS["shifted_camera"], CALIBRATED)
    exact = dataclasses.replace(shift, calibration_shift=(0.0, 0.0), calibration_tilt=(0.0, 0.0))
    for seed in range(3):
        camera, camera_rot, site, site_rot = _camera_and_site(_reset(make_task(exact), seed))
        np.testing.assert_allclose(site, camera, atol=1e-9)
        np.testing.assert_allclose(site_rot, camera_rot, atol=1e-9)
        camera, camera_rot, site, site_rot = _camera_and_site(_reset(make_task(shift), seed))
        assert 0 < np.linalg.norm(site - camera) <= 0.002 + 1e-9  # the calibration's error, within its range
        assert 0 < _angle(site_rot, camera_rot) <= 1.0 + 1e-6
        # Uncalibrated, the arm controls the drawn mount: 10 mm from the camera as it sits.
        camera, _, site, _ = _camera_and_site(_reset(make_task("shifted_camera"), seed))
        assert np.linalg.norm(site - camera) == pytest.approx(0.01)


def _reset(task: PcbInspectTask, seed: int) -> PcbInspectTask:
    task.reset(seed)
    return task


def test_the_calibration_draws_last_and_only_in_a_calibrated_cell():
    uncalibrated = dataclasses.replace(CALIBRATED, calibrated=False)
    rng_a, rng_b = np.random.default_rng(5), np.random.default_rng(5)
    a, b = CALIBRATED.sample(rng_a), uncalibrated.sample(rng_b)
    assert b.calibration_offset is None and a.calibration_offset is not None
    np.testing.assert_array_equal(a.camera_offset, b.camera_offset)  # everything else as drawn without it
    assert rng_a.bit_generator.state != rng_b.bit_generator.state
    assert CALIBRATED == dataclasses.replace(MOUNT, name="calibrated", calibrated=True,
                                             calibration_shift=CALIBRATED.calibration_shift,
                                             calibration_tilt=CALIBRATED.calibration_tilt)


def test_the_camera_site_goes_back_to_its_mount_when_a_cell_is_not_calibrated():
    task = make_task(CALIBRATED)
    nominal = make_task("none").scene
    _reset(task, 0)
    task.scene.set_appearance(MOUNT.sample(np.random.default_rng(0)))
    site = task.scene.camera_site_id
    np.testing.assert_array_equal(task.scene.model.site_pos[site], nominal.model.site_pos[site])
    np.testing.assert_array_equal(task.scene.model.site_quat[site], nominal.model.site_quat[site])


def test_shifts_keep_the_calibration_of_the_cell():
    shift = PERTURBATIONS["shifted_camera"]
    assert in_cell_of(shift, MOUNT) is shift and in_cell_of(shift, NONE) is shift
    calibrated = in_cell_of(shift, CALIBRATED)
    assert calibrated.calibrated and calibrated.camera_shift == shift.camera_shift
    assert calibrated.calibration_tilt == CALIBRATED.calibration_tilt
    assert describe(calibrated) == ("camera_shift 0.01 m; camera_tilt 5 deg; calibrated; "
                                    "calibration_shift 0 to 0.002 m; calibration_tilt 0 to 1 deg")
