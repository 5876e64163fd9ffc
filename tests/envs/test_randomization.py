"""Domain randomization: deterministic per seed, inside its documented ranges, pixels-only."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from robot_rl.configs import RANDOMIZATION_NAMES
from robot_rl.envs.randomization import (
    DEFAULT,
    PERTURBATIONS,
    RANDOMIZATIONS,
    STRONG,
    Randomization,
    describe,
    get_randomization,
)
from robot_rl.envs.task import PcbInspectTask, TaskConfig

SIZE = 48


def make_task(randomization, difficulty="default") -> PcbInspectTask:
    return PcbInspectTask(difficulty, TaskConfig(image_size=SIZE), randomization=randomization)


def test_presets_match_the_cli_names():
    assert tuple(RANDOMIZATIONS) == RANDOMIZATION_NAMES
    assert RANDOMIZATIONS["none"].is_nominal and not DEFAULT.is_nominal
    assert not set(PERTURBATIONS) & set(RANDOMIZATIONS)


def test_same_seed_same_scene_and_nothing_accumulates_across_episodes():
    first, second = make_task("strong"), make_task("strong")
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


@pytest.mark.parametrize("shift", ["default", *PERTURBATIONS])
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


def test_perturbations_lie_outside_the_default_ranges():
    for shift in PERTURBATIONS.values():
        changed = [f.name for f in dataclasses.fields(shift)
                   if f.name != "name" and getattr(shift, f.name) != getattr(RANDOMIZATIONS["none"], f.name)]
        assert changed, shift.name
        for name in changed:
            value, trained = np.array(getattr(shift, name)).reshape(-1, 2), np.array(getattr(DEFAULT, name))
            trained = trained.reshape(-1, 2)
            outside = (value[:, 0] < trained[:, 0]) | (value[:, 1] > trained[:, 1])
            assert outside.any(), f"{shift.name}.{name} is inside the default range"
        assert describe(shift) != "nominal"


def test_bad_ranges_and_names_are_refused():
    with pytest.raises(ValueError, match="light_intensity"):
        Randomization("bad", light_intensity=(1.2, 0.8))
    with pytest.raises(ValueError, match="pixel_noise"):
        Randomization("bad", pixel_noise=(-1.0, 2.0))
    with pytest.raises(ValueError, match="unknown randomization 'foggy'"):
        get_randomization("foggy")
