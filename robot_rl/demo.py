"""A short rollout of the scripted expert through the TorchRL env: PNG frames and episode metrics."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from robot_rl.envs import keys, make_env
from robot_rl.envs.defaults import DEFAULT_ARM, DEFAULT_TASK
from robot_rl.envs.expert_policy import ExpertPolicy
from robot_rl.envs.tasks import get_task
from robot_rl.episodes import summarize_episode
from robot_rl.video import side_by_side, write_png


def run_expert_demo(out_dir: str | Path, episodes: int = 3, difficulty: str = "default", image_size: int = 84,
                    seed: int = 0, frames_per_episode: int = 4, arm: str = DEFAULT_ARM,
                    task: str = DEFAULT_TASK) -> list[dict]:
    """Runs the expert for ``episodes`` episodes, writes ``frames_per_episode`` PNGs of each (wrist camera beside
    the third-person camera) under ``out_dir/frames/``, and returns one metrics dict per episode."""
    out_dir = Path(out_dir)
    get_task(task, trust_code=True)  # the caller's own task (a module:Class is imported and registered here)
    env = make_env(difficulty=difficulty, image_size=image_size, seed=seed, arm=arm, task=task)
    policy = ExpertPolicy(env.task.config, task=task)
    max_steps = env.task.config.max_steps
    summaries = []
    try:
        for episode in range(episodes):
            scene_frames: list[np.ndarray] = []

            def record(env, _td, frames=scene_frames):
                frames.append(env.render_scene(240, 320))

            rollout = env.rollout(max_steps, policy=policy, callback=record)
            summary = summarize_episode(rollout, task)
            pixels = rollout.get((keys.NEXT, keys.PIXELS)).numpy()
            for t in np.unique(np.linspace(0, len(scene_frames) - 1, frames_per_episode).round().astype(int)):
                write_png(out_dir / "frames" / f"episode{episode:02d}_step{t + 1:03d}.png",
                          side_by_side(pixels[t], scene_frames[t]))
            summaries.append({"episode": episode, **summary})
    finally:
        env.close()
    return summaries
