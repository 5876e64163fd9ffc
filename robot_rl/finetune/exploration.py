"""How widely fine-tuning samples around its start policy: ``FinetuneConfig.exploration``.

PPO improves the policy it samples, while every check, evaluation and export reads the deterministic one. From a
start that already works, fine-tuning's default noise samples a policy that fails where the start succeeds (the
sampled lead start guessed on nearly half the boards its deterministic policy inspected), so PPO trains on failures
its checks never see and drifts off the start; sampling close to the start keeps it. From a start that does not work,
sampling that close leaves PPO little to find: the same settings lifted nothing from a start that guessed
(docs/results/fine-tuning.md). ``auto`` therefore samples close only to a start whose own held-out check shows it works.
"""

from __future__ import annotations

from dataclasses import replace

# The settings live with the options that validate them (robot_rl.configs); re-exported for the benchmarks.
from robot_rl.configs import EXPLORATIONS, LOW_EXPLORATION, LOW_NOISE, LOW_NOISE_LR, WORKING_START, FinetuneConfig

__all__ = ["EXPLORATIONS", "LOW_EXPLORATION", "LOW_NOISE", "LOW_NOISE_LR", "WORKING_START", "resolve", "start_check"]


def start_check(config: FinetuneConfig) -> float | None:
    """The start policy's own held-out check success, from its checkpoint: best.pt is kept for its check; last.pt
    carries the check of its epoch when one ran. None from scratch, or where the checkpoint holds no check of
    itself (older last.pt files)."""
    from robot_rl.checkpoints import policy_checkpoint
    from robot_rl.finetune.models import load_pretrained

    if config.from_scratch or not config.init:
        return None
    state = load_pretrained(config.init, config.checkpoint_kind)
    if policy_checkpoint(config.init, config.checkpoint_kind).name == "best.pt":
        best = state.get("best_success")
        return float(best) if isinstance(best, int | float) and best >= 0 else None
    check = state.get("check_success")
    return float(check) if isinstance(check, int | float) else None


def resolve(config: FinetuneConfig) -> tuple[FinetuneConfig, str]:
    """``config`` with ``exploration`` resolved to ``default`` or ``low`` (``low`` setting ``LOW_EXPLORATION``'s
    options), and one line saying what was chosen and why. A resolved config resolves to itself, so a run's stored
    config and the command that started it agree."""
    if config.exploration == "default":
        return config, ""
    if config.exploration == "low":
        return replace(config, **LOW_EXPLORATION), ""
    check = start_check(config)
    works = check is not None and check >= WORKING_START - 1e-9
    why = (f"the start's own check {check:.0%} {'>=' if works else '<'} {WORKING_START:.0%}" if check is not None
           else "no check of the start policy in its checkpoint" if not config.from_scratch else "from scratch")
    chosen = "low" if works else "default"
    resolved = replace(config, exploration=chosen, **(LOW_EXPLORATION if works else {}))
    return resolved, f"finetune: --exploration auto -> {chosen} ({why})"

