"""Closed-loop inspection episodes: run a policy on given boards and summarize them (``robot_rl.episodes``).

Shared by behaviour cloning (periodic checks), PPO fine-tuning, ``robot-rl evaluate`` and the benchmarks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from tensordict import TensorDictBase
from tensordict.nn import InteractionType, set_interaction_type
from torchrl.envs.utils import step_mdp

from robot_rl import keys
from robot_rl.envs import make_env
from robot_rl.envs.defaults import DEFAULT_TASK
from robot_rl.episodes import aggregate, summarize_episode

StepCallback = Callable[[int, TensorDictBase], None]


def held_out_seeds(first: int, count: int, excluded: set[int]) -> list[int]:
    """``count`` board seeds from ``first`` upwards, skipping any seed the training data contains."""
    seeds, seed = [], first
    while len(seeds) < count:
        if seed not in excluded:
            seeds.append(seed)
        seed += 1
    return seeds


def run_episodes(env, policy, episodes: int, deterministic: bool = True, keep_pixels: bool = False,
                 callback: StepCallback | None = None) -> list[TensorDictBase]:
    """Runs ``policy`` in ``env`` until ``episodes`` episodes have finished; returns each as a [T] TensorDict.

    Episode ``k`` runs in env slot ``k % B`` (B = batch size) as its ``k // B``-th episode, so with an env made
    by ``make_env(episode_seeds=seeds)`` episode ``k`` inspects board ``seeds[k]``. Slots that have done their
    share keep stepping until the others finish; their extra episodes are dropped. ``deterministic`` uses the
    policy's mode (tanh of the pose mean, most likely verdict). ``callback(slot, step)`` sees every kept step,
    pixels included, right after it and before a finished env is reset (so the env still shows that step's
    outcome). Pixels are dropped from the returned steps unless ``keep_pixels``.
    """
    batched = len(env.batch_size) > 0
    slots = env.batch_size.numel() if batched else 1
    quota = [len(range(i, episodes, slots)) for i in range(slots)]
    finished: list[list[TensorDictBase]] = [[] for _ in range(slots)]
    current: list[list[TensorDictBase]] = [[] for _ in range(slots)]
    interaction = InteractionType.DETERMINISTIC if deterministic else InteractionType.RANDOM
    td = env.reset()
    while any(len(done) < q for done, q in zip(finished, quota)):
        with torch.no_grad(), set_interaction_type(interaction):
            td = policy(td)
        td = env.step(td)  # callbacks run before finished envs are reset, so they can render the final state
        full = td.exclude(keys.PARAMS)
        kept = full if keep_pixels else full.exclude(keys.PIXELS, (keys.NEXT, keys.PIXELS))
        for i in range(slots):
            if len(finished[i]) == quota[i]:
                continue
            step = kept[i] if batched else kept
            current[i].append(step)
            if callback is not None:
                callback(i, full[i] if batched else full)
            if bool(step.get((keys.NEXT, keys.DONE))):
                finished[i].append(torch.stack(current[i]))
                current[i] = []
        td = env.maybe_reset(step_mdp(td))
    return [finished[k % slots][k // slots] for k in range(episodes)]


def evaluate_policy(policy, seeds: Sequence[int], difficulty: str = "default", image_size: int = 84,
                    num_envs: int = 1, parallel: bool = False, deterministic: bool = True,
                    device: str | torch.device = "cpu", **env_kwargs) -> tuple[dict, list[dict]]:
    """Runs one episode per seed; returns (aggregate metrics, per-episode summaries in seed order)."""
    num_envs = max(1, min(num_envs, len(seeds)))
    env = make_env(num_envs=num_envs, difficulty=difficulty, image_size=image_size, parallel=parallel,
                   episode_seeds=seeds, device=device, **env_kwargs)
    try:
        rollouts = run_episodes(env, policy, len(seeds), deterministic=deterministic)
    finally:
        env.close()
    summaries = [summarize_episode(r, env_kwargs.get("task", DEFAULT_TASK)) for r in rollouts]
    return aggregate(summaries), summaries
