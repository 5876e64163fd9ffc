"""Episodes of the inspection task, from rollout to metrics: one path for evaluation, BC checks, PPO logs, the demo.

``summarize_episode`` turns one finished episode (a [T] TensorDict) into a summary; ``finished_episodes`` does it
for every episode that ended in a collected batch; ``aggregate`` turns summaries into metrics (success with its
Wilson interval, guesses, confusion, ...); ``check_scalars`` is how a closed-loop check is logged.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.stats import binomtest
from tensordict import TensorDictBase

from robot_rl.envs import keys
from robot_rl.envs.defaults import DEFAULT_TASK
from robot_rl.envs.task import Verdict
from robot_rl.envs.tasks import get_task

# Why an episode failed, one kind per failed episode, in the order they are tested: the physics went unstable; a
# verdict given away from the inspection view (a guess); a wrong verdict at the view; no verdict although the board
# was localized at some step (the view found, the answer never given there); no verdict and the board never
# localized (the view never found). Collisions cost reward without failing an episode: they are counted apart.
FAILURE_KINDS = ("unstable", "guess", "wrong_verdict", "no_verdict_at_view", "view_never_found")


def failure_kind(summary: dict) -> str | None:
    """The ``FAILURE_KINDS`` entry of an episode summary (None: it succeeded)."""
    if summary["success"]:
        return None
    if summary["unstable"]:
        return "unstable"
    if summary["guess"]:
        return "guess"
    if summary["verdict"] != "none":
        return "wrong_verdict"
    return "no_verdict_at_view" if summary["steps_to_localize"] is not None else "view_never_found"


def summarize_episode(rollout: TensorDictBase, task: str = DEFAULT_TASK) -> dict:
    """Metrics of one finished episode of ``task``, from its rollout (batch shape ``[T]``, as ``env.rollout``
    returns).

    Returns episode seed, defect, verdict given (``none`` if the episode ended without one), success (a correct
    verdict while localized), guess (a verdict given while not localized, right or wrong), correct verdict, steps,
    return, steps with a collision, first step localized (1-based, ``None`` if never), timed-out and unstable
    flags, the sum of each reward term, and why it failed (``failure``: a ``FAILURE_KINDS`` entry, None on success).
    """
    if rollout.batch_dims != 1:
        raise ValueError(f"summarize_episode expects one episode with batch shape [T], got {tuple(rollout.shape)}")
    nxt = rollout.get(keys.NEXT)
    terminated = bool(nxt.get(keys.TERMINATED)[-1])
    unstable = bool(nxt.get(keys.UNSTABLE).any())
    localized = nxt.get(keys.LOCALIZED).reshape(-1).nonzero()
    summary = {
        "episode_seed": int(rollout.get(keys.EPISODE_SEED)[0]),
        "defect": get_task(task).defect_types[int(rollout.get(keys.DEFECT_TYPE)[0])],
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
    return {**summary, "failure": failure_kind(summary)}


def finished_episodes(batch: TensorDictBase, task: str = DEFAULT_TASK) -> list[dict]:
    """Summaries of the episodes that finished in a collected batch [envs, T] whose episodes start at t = 0 (every
    PPO iteration resets its envs); unfinished tails are left out.

    Hand-written rather than TorchRL's ``split_trajectories``, which pads every episode to the longest and keeps
    the unfinished tails; here each finished episode is sliced as it is.
    """
    done = batch.get((keys.NEXT, keys.DONE)).squeeze(-1)
    summaries = []
    for env in range(done.shape[0]):
        start = 0
        for end in done[env].nonzero().squeeze(-1).tolist():
            summaries.append(summarize_episode(batch[env, start:end + 1], task))
            start = end + 1
    return summaries


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
    return and each reward term (means), timed-out and unstable episode counts, failed episodes by kind
    (``FAILURE_KINDS``) and success, guesses and failures per defect (``by_defect``).
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
        "failures": failure_counts(summaries),
        "by_defect": {defect: {"episodes": len(group), "success_rate": sum(s["success"] for s in group) / len(group),
                               "guesses": sum(s["guess"] for s in group), "failures": failure_counts(group)}
                      for defect, group in _by_defect(summaries).items()},
    }


def failure_counts(summaries: Sequence[dict]) -> dict[str, int]:
    """Failed episodes of each ``FAILURE_KINDS`` kind."""
    kinds = [failure_kind(s) for s in summaries]
    return {kind: kinds.count(kind) for kind in FAILURE_KINDS}


def _by_defect(summaries: Sequence[dict]) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = {}
    for s in summaries:
        groups.setdefault(s["defect"], []).append(s)
    return dict(sorted(groups.items()))


def check_scalars(metrics: dict, names: Sequence[str]) -> dict:
    """A closed-loop check as logged scalars: ``eval/<name>`` for ``names`` (numbers), plus the success rate's
    Wilson interval (``eval/success_ci95_low``, ``eval/success_ci95_high``) and the board count (``eval/boards``).
    One format for BC's checks and PPO's."""
    low, high = metrics["success_ci95"]
    return {**{f"eval/{name}": metrics[name] for name in names}, "eval/success_ci95_low": low,
            "eval/success_ci95_high": high, "eval/boards": metrics["episodes"]}
