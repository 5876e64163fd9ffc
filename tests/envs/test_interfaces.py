"""Gymnasium and TorchRL front-ends: registration, checkers, specs, batching, determinism."""

from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env
from torchrl.envs.utils import check_env_specs

from robot_rl.envs import GYM_ID, keys, make_env
from robot_rl.envs.gym_env import InspectionGymEnv
from robot_rl.envs.torchrl_env import InspectionEnv


def test_gymnasium_env_is_registered_and_passes_the_checker():
    env = gym.make(GYM_ID, render_mode="rgb_array")
    check_env(env.unwrapped, skip_render_check=False)
    env.reset(seed=0)
    frame = env.render()
    assert frame.dtype == np.uint8 and frame.shape == (360, 480, 3)
    env.close()


def test_importing_robot_rl_registers_the_gymnasium_id_without_loading_mujoco():
    # A fresh interpreter: this one has loaded MuJoCo already. robot_rl.envs registers the ids, so it is imported,
    # but none of its modules that load MuJoCo or torch.
    code = ("import sys, gymnasium as gym, robot_rl; assert robot_rl.GYM_ID in gym.registry; "
            "assert not {'mujoco', 'torch', 'robot_rl.envs.task', 'robot_rl.envs.rendering'} & set(sys.modules); "
            "env = gym.make(robot_rl.GYM_ID, difficulty='easy', image_size=32); "
            "obs, _ = env.reset(seed=0); print(obs['pixels'].shape)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "(32, 32, 3)"


@pytest.mark.parametrize("image_size", [64, 224])
def test_observations_match_their_spaces(image_size):
    env = InspectionGymEnv("easy", image_size=image_size)
    obs, _ = env.reset(seed=3)
    assert obs["pixels"].shape == (image_size, image_size, 3) and obs["pixels"].dtype == np.uint8
    assert obs["joint_state"].shape == (12,) and obs["joint_state"].dtype == np.float32
    for _ in range(5):
        obs, reward, *_ = env.step({"pose": env.action_space["pose"].sample(), "verdict": 0})
        assert env.observation_space.contains(obs)
        assert np.isfinite(reward)


def test_torchrl_env_passes_check_env_specs():
    env = make_env(seed=0)
    check_env_specs(env)
    td = env.rollout(3, break_when_any_done=False)
    assert td[keys.PIXELS].dtype == torch.uint8 and td[keys.PIXELS].shape == (3, 84, 84, 3)
    assert td[keys.JOINT_STATE].dtype == torch.float32 and td[keys.JOINT_STATE].shape == (3, 12)
    assert env.action_keys == [keys.POSE, keys.VERDICT]
    env.close()


def test_in_process_batch_passes_check_env_specs_and_resets_partially():
    env = make_env(num_envs=3, parallel=False, seed=0)
    assert env.batch_size == (3,)
    check_env_specs(env)
    td = env.reset()
    seeds_before = td[keys.EPISODE_SEED].clone()
    pixels_before = td[keys.PIXELS].clone()
    td.set("_reset", torch.tensor([[False], [True], [False]]))
    td = env.reset(td)
    seeds_after = td[keys.EPISODE_SEED]
    assert torch.equal(td[keys.PIXELS][[0, 2]], pixels_before[[0, 2]])
    assert torch.equal(seeds_after[[0, 2]], seeds_before[[0, 2]])
    assert seeds_after[1] != seeds_before[1]
    env.close()


def test_parallel_env_batches_several_envs():
    env = make_env(num_envs=2, seed=0)
    try:
        assert env.batch_size == (2,)
        check_env_specs(env)
        td = env.rollout(4, break_when_any_done=False)
        assert td[keys.PIXELS].shape == (2, 4, 84, 84, 3)
        # Each worker has its own seeded stream: different boards.
        assert td[keys.EPISODE_SEED][0, 0] != td[keys.EPISODE_SEED][1, 0]
    finally:
        env.close()


def test_episode_seeds_select_the_boards():
    env = InspectionEnv(seed=0, episode_seeds=[42, 43])
    first, second = env.reset(), env.reset()
    assert int(first[keys.EPISODE_SEED]) == 42 and int(second[keys.EPISODE_SEED]) == 43
    again = InspectionEnv(seed=5, episode_seeds=[42]).reset()
    assert torch.equal(first[keys.PIXELS], again[keys.PIXELS])
    assert torch.equal(first[keys.BOARD_POSE], again[keys.BOARD_POSE])


def test_parallel_workers_take_episode_seeds_round_robin():
    env = make_env(num_envs=2, seed=0, episode_seeds=[11, 22, 33])
    try:
        assert env.reset()[keys.EPISODE_SEED].reshape(-1).tolist() == [11, 22]
        assert env.reset()[keys.EPISODE_SEED].reshape(-1).tolist()[0] == 33
    finally:
        env.close()


def _rollout_gym(seed: int, actions) -> tuple[list, list]:
    env = InspectionGymEnv()
    obs, _ = env.reset(seed=seed)
    observations, rewards = [obs], []
    for pose in actions:
        obs, reward, terminated, truncated, _ = env.step({"pose": pose, "verdict": 0})
        observations.append(obs)
        rewards.append(reward)
    env.close()
    return observations, rewards


def test_same_seed_and_actions_give_identical_observations_and_rewards(rng):
    actions = rng.uniform(-1, 1, size=(15, 6)).astype(np.float32)
    obs_a, rew_a = _rollout_gym(7, actions)
    obs_b, rew_b = _rollout_gym(7, actions)
    assert rew_a == rew_b
    for a, b in zip(obs_a, obs_b):
        np.testing.assert_array_equal(a["pixels"], b["pixels"])
        np.testing.assert_array_equal(a["joint_state"], b["joint_state"])


def test_torchrl_env_is_deterministic_under_a_seed(rng):
    actions = torch.as_tensor(rng.uniform(-1, 1, size=(10, 6)), dtype=torch.float32)

    def run():
        env = make_env(seed=11)
        td = env.reset()
        frames = [td[keys.PIXELS]]
        for pose in actions:
            td[keys.POSE], td[keys.VERDICT] = pose, torch.tensor(0)
            td = env.step(td)
            frames.append(td["next", keys.PIXELS])
            td = td["next"]
        return torch.stack(frames)

    assert torch.equal(run(), run())


def test_initial_states_vary_across_seeds():
    env = InspectionGymEnv()
    boards = {tuple(env.reset(seed=s)[1]["task"]["board_pose"].round(4)) for s in range(8)}
    joint_states = {tuple(env.reset(seed=s)[0]["joint_state"][:6].round(4)) for s in range(8)}
    assert len(boards) == 8 and len(joint_states) == 8


def test_torchrl_pixel_transforms_read_the_env_like_any_pixel_env(tmp_path):
    # TorchRL's pixel transforms expect `pixels` as uint8 [H, W, 3], as its from_pixels envs and Gymnasium emit.
    from torchrl.envs import CatFrames, Resize, ToTensorImage, TransformedEnv
    from torchrl.record import VideoRecorder
    from torchrl.record.loggers import CSVLogger

    recorder = VideoRecorder(CSVLogger("video", log_dir=str(tmp_path)), tag="wrist", in_keys=[keys.PIXELS])
    env = TransformedEnv(make_env(seed=0, difficulty="easy", image_size=48),
                         ToTensorImage(in_keys=[keys.PIXELS], out_keys=["image"]))
    env.append_transform(recorder)
    def keep_looking(td):  # random moves, never a verdict: no episode ends (and resets) within the rollout
        td.set(keys.POSE, torch.rand(6) * 2 - 1)
        return td.set(keys.VERDICT, torch.zeros((), dtype=torch.int64))

    td = env.rollout(3, policy=keep_looking, break_when_any_done=False)
    raw = td[keys.PIXELS]
    assert raw.shape == (3, 48, 48, 3) and raw.dtype == torch.uint8
    assert td["image"].shape == (3, 3, 48, 48) and td["image"].dtype == torch.float32
    torch.testing.assert_close(td["image"], raw.permute(0, 3, 1, 2).float() / 255)
    frames = torch.stack(recorder.obs)  # the recorder's frames: channels-first, the rollout's images
    assert frames.shape[1:] == (3, 48, 48) and torch.equal(frames[-1], td["next", keys.PIXELS][-1].permute(2, 0, 1))

    stacked = TransformedEnv(make_env(seed=0, difficulty="easy", image_size=48),
                             ToTensorImage(in_keys=[keys.PIXELS], out_keys=["image"]))
    stacked.append_transform(Resize(32, 32, in_keys=["image"]))
    stacked.append_transform(CatFrames(N=4, dim=-3, in_keys=["image"]))
    td = stacked.rollout(3, break_when_any_done=False)
    assert td["image"].shape == (3, 12, 32, 32)
    assert td["image"].min() >= 0 and td["image"].max() <= 1 and td["image"][-1, -3:].std() > 0
