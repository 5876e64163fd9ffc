"""Closed-loop inspection episodes: run a policy on given boards, summarize each episode, aggregate metrics.

Shared by behaviour cloning (periodic checks), PPO fine-tuning, ``robot-rl evaluate`` and the benchmarks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from scipy.stats import binomtest
from tensordict import TensorDictBase
from tensordict.nn import InteractionType, set_interaction_type
from torchrl.envs.utils import step_mdp

from robot_rl import keys
from robot_rl.envs import make_env
from robot_rl.episodes import summarize_episode

StepCallback = Callable[[int, TensorDictBase], None]


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


def wilson_interval(successes: int, total: int) -> tuple[float, float]:
    """The Wilson 95% confidence interval of a proportion ``successes / total`` (total > 0)."""
    ci = binomtest(successes, total).proportion_ci(confidence_level=0.95, method="wilson")
    return float(ci.low), float(ci.high)


def _rate(successes: int, total: int) -> dict:
    """Proportion with its Wilson 95% confidence interval."""
    if total == 0:
        return {"rate": None, "ci95": [None, None]}
    return {"rate": successes / total, "ci95": list(wilson_interval(successes, total))}


def aggregate(summaries: Sequence[dict]) -> dict:
    """Metrics over episode summaries (see ``summarize_episode``).

    success rate (+ Wilson 95% CI; success = a correct verdict while the board is localized), guess rate (episodes
    that gave a verdict without having the board localized), verdict accuracy over episodes that gave a verdict
    (guesses included), confusion matrix of verdicts
    (rows: clean/defective board; columns: pass/rework/no verdict), collisions per episode, steps to localize,
    return and each reward term (means), timed-out and unstable episode counts.
    """
    n = len(summaries)
    judged = [s for s in summaries if s["verdict"] in ("pass", "rework")]
    confusion = {truth: {verdict: 0 for verdict in ("pass", "rework", "none")} for truth in ("clean", "defective")}
    for s in summaries:
        confusion["clean" if s["defect"] == "none" else "defective"][s["verdict"]] += 1
    localize = [s["steps_to_localize"] for s in summaries if s["steps_to_localize"] is not None]
    mean = lambda values: float(np.mean(values)) if len(values) else None  # noqa: E731
    success = _rate(sum(s["success"] for s in summaries), n)
    return {
        "episodes": n,
        "success_rate": success["rate"],
        "success_ci95": success["ci95"],
        "guess_rate": _rate(sum(s["guess"] for s in summaries), n)["rate"],
        "guesses": sum(s["guess"] for s in summaries),
        "verdict_accuracy": _rate(sum(s["correct_verdict"] for s in judged), len(judged))["rate"],
        "verdicts_given": len(judged),
        "confusion": confusion,
        "collisions_per_episode": mean([s["collision_steps"] for s in summaries]),
        "episodes_with_collision": sum(s["collision_steps"] > 0 for s in summaries),
        "localized_episodes": len(localize),
        "steps_to_localize": mean(localize),
        "episode_length": mean([s["steps"] for s in summaries]),
        "return": mean([s["return"] for s in summaries]),
        "reward_terms": {name: mean([s["reward_terms"][name] for s in summaries]) for name in keys.REWARD_TERM_NAMES},
        "timed_out": sum(s["timed_out"] for s in summaries),
        "timed_out_rate": sum(s["timed_out"] for s in summaries) / n if n else None,
        "unstable": sum(s["unstable"] for s in summaries),
    }


def check_scalars(metrics: dict, names: Sequence[str]) -> dict:
    """A closed-loop check as logged scalars: ``eval/<name>`` for ``names`` (numbers), plus the success rate's
    Wilson interval (``eval/success_ci95_low``, ``eval/success_ci95_high``) and the board count (``eval/boards``).
    One format for BC's checks and PPO's."""
    low, high = metrics["success_ci95"]
    return {**{f"eval/{name}": metrics[name] for name in names}, "eval/success_ci95_low": low,
            "eval/success_ci95_high": high, "eval/boards": metrics["episodes"]}


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
    summaries = [summarize_episode(r) for r in rollouts]
    return aggregate(summaries), summaries
