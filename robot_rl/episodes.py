"""Per-episode summaries of TorchRL rollouts of the inspection task (used by the demo, evaluation and logs)."""

from __future__ import annotations

from tensordict import TensorDictBase

from robot_rl.envs import keys
from robot_rl.envs.board import DEFECT_TYPES
from robot_rl.envs.task import Verdict


def summarize_episode(rollout: TensorDictBase) -> dict:
    """Metrics of one finished episode, from its rollout (batch shape ``[T]``, as ``env.rollout`` returns).

    Returns episode seed, defect, verdict given (``none`` if the episode ended without one), success (a correct
    verdict while localized), guess (a verdict given while not localized, right or wrong), correct verdict, steps,
    return, steps with a collision, first step localized (1-based, ``None`` if never), timed-out and unstable
    flags, and the sum of each reward term.
    """
    if rollout.batch_dims != 1:
        raise ValueError(f"summarize_episode expects one episode with batch shape [T], got {tuple(rollout.shape)}")
    nxt = rollout.get(keys.NEXT)
    terminated = bool(nxt.get(keys.TERMINATED)[-1])
    unstable = bool(nxt.get(keys.UNSTABLE).any())
    localized = nxt.get(keys.LOCALIZED).reshape(-1).nonzero()
    return {
        "episode_seed": int(rollout.get(keys.EPISODE_SEED)[0]),
        "defect": DEFECT_TYPES[int(rollout.get(keys.DEFECT_TYPE)[0])],
        "verdict": Verdict(int(rollout.get(keys.VERDICT)[-1])).name.lower() if terminated else "none",
        "success": bool(nxt.get(keys.SUCCESS)[-1]),
        "guess": terminated and not bool(nxt.get(keys.LOCALIZED)[-1]),
        "correct_verdict": terminated and float(nxt.get(keys.reward_term("verdict"))[-1]) > 0,
        "steps": rollout.shape[0],
        "return": float(nxt.get(keys.REWARD).sum()),
        "collision_steps": int(nxt.get(keys.COLLISION).sum()),
        "steps_to_localize": int(localized[0]) + 1 if len(localized) else None,
        "timed_out": bool(nxt.get(keys.TRUNCATED)[-1]) and not unstable,
        "unstable": unstable,
        "reward_terms": {name: float(nxt.get(keys.reward_term(name)).sum()) for name in keys.REWARD_TERM_NAMES},
    }
