"""Task semantics: reward terms, verdicts, localization, collisions, defects, bad input, instability."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from robot_rl.envs import DEFECT_TYPES, RewardWeights, ScriptedExpert, TaskConfig, Verdict
from robot_rl.envs.gym_env import InspectionGymEnv
from robot_rl.envs.tasks.pcb_inspect import PcbInspectTask

ZERO = np.zeros(6, np.float32)


def run_expert(env: InspectionGymEnv, seed: int, defect: str | None = None, stop_before_verdict: bool = False):
    """Runs the expert for one episode; returns (observations, infos, rewards, last verdict)."""
    expert = ScriptedExpert(env.task.config)
    obs, info = env.reset(options={"episode_seed": seed, "defect": defect})
    observations, infos, rewards = [obs], [info], []
    for _ in range(env.task.config.max_steps):
        task = info["task"]
        pose, verdict = expert.act(task["camera_pose"], task["board_pose"], task["defective"], obs["joint_state"])
        if stop_before_verdict and verdict != Verdict.CONTINUE:
            break
        obs, reward, terminated, truncated, info = env.step({"pose": pose, "verdict": verdict})
        observations.append(obs)
        infos.append(info)
        rewards.append(reward)
        if terminated or truncated:
            break
    return observations, infos, rewards, int(verdict)


def test_reward_total_equals_the_sum_of_its_terms(rng):
    env = InspectionGymEnv(reward_weights={"shaping": 0.1})
    for episode in range(6):
        env.reset(seed=episode)
        for _ in range(20):
            verdict = int(rng.choice(3, p=[0.9, 0.05, 0.05]))
            _, reward, terminated, truncated, info = env.step({"pose": rng.uniform(-1, 1, 6), "verdict": verdict})
            assert reward == pytest.approx(sum(info["reward_terms"].values()), abs=1e-9)
            if terminated or truncated:
                break


def test_correct_and_wrong_verdicts_end_the_episode_with_their_weights():
    weights = RewardWeights(correct_verdict=2.0, wrong_verdict=-3.0)
    for defect, right, wrong in (("none", Verdict.PASS, Verdict.REWORK), ("burn_mark", Verdict.REWORK, Verdict.PASS)):
        for verdict, expected in ((right, 2.0), (wrong, -3.0)):
            env = InspectionGymEnv(reward_weights=weights)
            env.reset(options={"episode_seed": 5, "defect": defect})
            _, reward, terminated, truncated, info = env.step({"pose": ZERO, "verdict": int(verdict)})
            assert terminated and not truncated
            assert info["reward_terms"]["verdict"] == expected
            # From the home pose the board is not localized: even a correct verdict is a guess, not a success.
            assert not info["localized"] and info["success"] is False
            with pytest.raises(RuntimeError, match="after the episode ended"):
                env.step({"pose": ZERO, "verdict": 0})


def test_step_limit_truncates():
    env = InspectionGymEnv(max_steps=5)
    env.reset(seed=0)
    for step in range(5):
        _, _, terminated, truncated, _ = env.step({"pose": ZERO, "verdict": 0})
        assert not terminated and truncated == (step == 4)


def test_localization_bonus_is_paid_once_within_the_budget():
    env = InspectionGymEnv()
    _, infos, _, _ = run_expert(env, seed=3)
    bonuses = [i["reward_terms"]["localization"] for i in infos[1:]]
    assert bonuses.count(0.5) == 1 and set(bonuses) <= {0.0, 0.5}
    first_localized = next(k for k, i in enumerate(infos[1:]) if i["localized"])
    assert bonuses[first_localized] == 0.5

    late = InspectionGymEnv(localization_budget=2)
    _, infos, _, _ = run_expert(late, seed=3)
    assert all(i["reward_terms"]["localization"] == 0.0 for i in infos[1:])


def test_guess_term_takes_back_only_verdicts_given_off_the_board():
    # Default weights: the env pays a lucky guess like an inspection (the term is there, at 0).
    env = InspectionGymEnv()
    env.reset(options={"episode_seed": 5, "defect": "none"})
    _, reward, _, _, info = env.step({"pose": ZERO, "verdict": int(Verdict.PASS)})
    assert not info["localized"] and info["reward_terms"]["guess"] == 0.0 and reward == 1.0
    # Fine-tuning's weight: a correct verdict from the home pose nets 0, a wrong one -2 ...
    penalized = InspectionGymEnv(reward_weights={"guess": -1.0})
    for verdict, expected in ((Verdict.PASS, 0.0), (Verdict.REWORK, -2.0)):
        penalized.reset(options={"episode_seed": 5, "defect": "none"})
        _, reward, _, _, info = penalized.step({"pose": ZERO, "verdict": int(verdict)})
        assert info["reward_terms"]["guess"] == -1.0 and reward == pytest.approx(expected)
    # ... and a verdict given at the inspection pose is not touched.
    _, infos, rewards, _ = run_expert(penalized, seed=3)
    assert infos[-1]["success"] and infos[-1]["reward_terms"]["guess"] == 0.0
    assert rewards[-1] == pytest.approx(infos[-1]["reward_terms"]["verdict"] + infos[-1]["reward_terms"]["collision"])


def test_dwell_term_charges_every_step_spent_at_the_view_without_a_verdict():
    # Off by default; with fine-tuning's weight each continue step that ends localized pays it, and nothing else.
    _, plain, _, _ = run_expert(InspectionGymEnv(), seed=3, stop_before_verdict=True)
    assert all(i["reward_terms"]["dwell"] == 0.0 for i in plain[1:])
    env = InspectionGymEnv(reward_weights={"dwell": -0.05})
    _, infos, _, _ = run_expert(env, seed=3, stop_before_verdict=True)
    assert any(i["localized"] for i in infos[1:]) and any(not i["localized"] for i in infos[1:])
    assert [i["reward_terms"]["dwell"] for i in infos[1:]] == [-0.05 if i["localized"] else 0.0 for i in infos[1:]]
    # Waiting at the view costs a step's weight; the verdict step itself is not charged.
    _, reward, _, _, info = env.step({"pose": ZERO, "verdict": int(Verdict.CONTINUE)})
    assert info["localized"] and info["reward_terms"]["dwell"] == -0.05
    _, reward, terminated, _, info = env.step({"pose": ZERO, "verdict": int(Verdict.PASS)})
    assert terminated and info["reward_terms"]["dwell"] == 0.0


def test_potential_shaping_rewards_progress_towards_the_inspection_pose():
    env = InspectionGymEnv(reward_weights={"shaping": 1.0})
    _, infos, _, _ = run_expert(env, seed=4)
    shaping = [i["reward_terms"]["shaping"] for i in infos[1:-1]]
    assert sum(shaping) > 0.3  # the expert approaches the goal
    assert infos[-1]["reward_terms"]["shaping"] <= 0  # the terminal state has zero potential


def test_expert_succeeds_on_all_200_seeds_without_collisions():
    # The README's expert figure (200/200 strict successes, 0 collisions at default difficulty, seeds 0-199):
    # the env is deterministic per seed, so this is the figure itself, not a sample of it.
    env = InspectionGymEnv("default")
    failed, collided = [], []
    for seed in range(200):
        _, infos, _, _ = run_expert(env, seed)
        if not infos[-1]["success"]:
            failed.append(seed)
        if any(i.get("collision", False) for i in infos[1:]):
            collided.append(seed)
    assert not failed, f"expert failed on seeds {failed}"
    assert not collided, f"expert collided on seeds {collided}"


@pytest.mark.parametrize("difficulty", ["easy", "hard"])
def test_expert_handles_every_difficulty(difficulty):
    env = InspectionGymEnv(difficulty)
    results = [run_expert(env, seed)[1][-1]["success"] for seed in range(20)]
    assert sum(results) >= 19


def test_driving_into_a_post_is_detected_and_penalized():
    env = InspectionGymEnv("default")
    env.reset(options={"episode_seed": 0})
    task = env.task
    post = task.scene.data.mocap_pos[task.scene.post_mocap_ids[0]].copy()
    collided, penalties = False, []
    for _ in range(60):
        camera = task.scene.camera_pose()[0]
        target = post + np.array([0.0, 0.0, 0.03])  # the clamp on top of the post
        pose = np.concatenate([np.clip((target - camera) / task.config.max_translation, -1, 1), np.zeros(3)])
        _, _, terminated, truncated, info = env.step({"pose": pose, "verdict": 0})
        penalties.append(info["reward_terms"]["collision"])
        if info["collision"]:
            collided = True
            break
    assert collided, "driving the camera into a clamp post was never reported as a collision"
    assert penalties[-1] == pytest.approx(-0.3) and set(penalties[:-1]) == {0.0}


def test_a_defect_changes_the_inspection_view_but_not_the_layout():
    env = InspectionGymEnv("default")
    clean_obs, clean_infos, _, _ = run_expert(env, seed=9, defect="none", stop_before_verdict=True)
    clean_layout = env.task.layout
    for defect in DEFECT_TYPES[1:]:
        obs, infos, _, _ = run_expert(env, seed=9, defect=defect, stop_before_verdict=True)
        assert [c.kind for c in env.task.layout.components] == [c.kind for c in clean_layout.components]
        assert infos[-1]["localized"] and clean_infos[-1]["localized"]
        difference = np.abs(obs[-1]["pixels"].astype(int) - clean_obs[-1]["pixels"].astype(int))
        assert (difference.max(axis=0) > 40).sum() >= 3, f"{defect} is not visible at inspection"
        assert infos[-1]["task"]["defective"][0] and not clean_infos[-1]["task"]["defective"][0]


@pytest.mark.parametrize("pose, verdict, error", [
    (np.full(6, np.nan), 0, ValueError),
    (np.array([0, 0, np.inf, 0, 0, 0]), 0, ValueError),
    (np.zeros(5), 0, ValueError),
    (np.zeros((2, 6)), 0, ValueError),
    (np.array(["a"] * 6), 0, TypeError),
    (ZERO, 3, ValueError),
    (ZERO, -1, ValueError),
    (ZERO, 0.5, TypeError),
    (ZERO, np.array([1, 2]), TypeError),
])
def test_bad_actions_raise_a_clear_error(pose, verdict, error):
    env = InspectionGymEnv()
    env.reset(seed=0)
    with pytest.raises(error, match="action (pose|verdict)"):
        env.step({"pose": pose, "verdict": verdict})
    env.step({"pose": ZERO, "verdict": 0})  # the env is still usable


def test_out_of_range_pose_is_clipped():
    results = []
    for pose in (np.array([5, -5, 2, 0, 0, -9.0]), np.array([1, -1, 1, 0, 0, -1.0])):
        env = InspectionGymEnv()
        env.reset(seed=2)
        results.append(env.step({"pose": pose, "verdict": 0})[0]["joint_state"])
    np.testing.assert_array_equal(*results)


def test_missing_action_keys_raise():
    env = InspectionGymEnv()
    env.reset(seed=0)
    with pytest.raises(ValueError, match="keys 'pose' and 'verdict'"):
        env.step({"pose": ZERO})


def test_physics_instability_truncates_without_nan():
    task = PcbInspectTask("easy", TaskConfig())
    before = task.reset(0)
    task.scene.data.qvel[:] = 1e12  # blow the simulation up
    result = task.step(ZERO, 0)
    assert result.flags["unstable"] and result.truncated and not result.terminated
    for value in result.observation.values():
        assert np.isfinite(value.astype(np.float64)).all()
    np.testing.assert_array_equal(result.observation["pixels"], before["pixels"])


def test_config_validation_names_the_field():
    with pytest.raises(ValueError, match="image_size"):
        TaskConfig(image_size=500)
    with pytest.raises(ValueError, match="max_steps"):
        replace(TaskConfig(), max_steps=0)
