"""The flat-action Gymnasium variant: the checkers, the verdict mapping, and Stable-Baselines3 training on it."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from robot_rl import FLAT_GYM_IDS
from robot_rl.envs.flat import VERDICT_THRESHOLD, make_flat_env, verdict_of
from robot_rl.envs.task import Verdict
from robot_rl.envs.tasks import TASKS


def test_every_task_has_a_flat_id_that_passes_the_gymnasium_checker():
    assert set(FLAT_GYM_IDS) == set(TASKS)
    env = gym.make(FLAT_GYM_IDS["pcb-inspect"], difficulty="easy", image_size=32)
    assert env.action_space.shape == (7,) and env.observation_space["pixels"].dtype == np.uint8
    env.close()
    env = make_flat_env(task="lead-inspect", difficulty="easy", image_size=32)  # the checker wants it unwrapped
    check_env(env, skip_render_check=True)
    env.close()


def test_the_verdict_score_maps_to_continue_pass_rework_and_bad_actions_raise():
    assert [verdict_of(s) for s in (-1.0, -VERDICT_THRESHOLD - 1e-3, 0.0, VERDICT_THRESHOLD, 1.0)] == [
        Verdict.PASS, Verdict.PASS, Verdict.CONTINUE, Verdict.CONTINUE, Verdict.REWORK]
    env = gym.make(FLAT_GYM_IDS["lead-inspect"], difficulty="easy", image_size=32)
    env.reset(seed=0)
    _, _, terminated, _, _ = env.step(np.zeros(7, np.float32))
    assert not terminated
    _, reward, terminated, _, info = env.step(np.array([0, 0, 0, 0, 0, 0, 1.0], np.float32))
    assert terminated and abs(info["reward_terms"]["verdict"]) == 1.0
    with pytest.raises(ValueError, match=r"flat action must have shape \(7,\)"):
        env.step(np.zeros(6, np.float32))
    env.close()


def test_stable_baselines3_checks_and_trains_ppo_on_the_flat_env():
    sb3 = pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    env = gym.make(FLAT_GYM_IDS["pcb-inspect"], difficulty="easy", image_size=36, max_steps=16)
    sb3_check_env(env, warn=True)
    model = sb3.PPO("MultiInputPolicy", env, n_steps=64, batch_size=32, n_epochs=1, seed=0, device="cpu",
                    policy_kwargs={"net_arch": [32]})
    model.learn(total_timesteps=128)
    action, _ = model.predict(env.reset(seed=1)[0], deterministic=True)
    assert action.shape == (7,) and np.isfinite(action).all()
    env.close()
