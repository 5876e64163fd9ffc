"""Fine-tuning's reward makes a guess a losing bet on every built-in task: a verdict given before the board is
localized earns less than looking first and then answering, even when the guess is right, and a constant verdict
given at once earns less than never answering (so a policy that guesses has learnt something the reward does not
pay for: it cannot localize well enough, or its "guesses" come from views the task does not count as localized)."""

from __future__ import annotations

import numpy as np
import pytest

from robot_rl.configs import FinetuneConfig
from robot_rl.envs.task import POSE_DIM, Verdict
from robot_rl.envs.tasks import TASKS, build_task
from robot_rl.finetune.models import env_options
from robot_rl.provenance import Provenance

BOARDS = range(6)


DWELL_PENALTIES = (0.0, 0.05)  # the default, and the lead-dwell-1m preset's (benchmarks/protocols.py)


def fine_tuning_task(name: str, dwell_penalty: float = 0.0):
    """The task as PPO fine-tunes it: the reward weights and shaping discount of the fine-tuning options (the
    defaults, but for ``dwell_penalty``)."""
    config = FinetuneConfig(from_scratch=True, dwell_penalty=dwell_penalty)
    options = env_options(config, Provenance(task=name))
    return build_task(name, "default", 64, options["reward_weights"], {"shaping_gamma": options["shaping_gamma"]})


def discounted_return(rewards: list[float], gamma: float) -> float:
    return sum(reward * gamma**step for step, reward in enumerate(rewards))


def expert_episode(task, seed: int, answer_after: int | None = None, wait_at_view: bool = False,
                   localized: list[bool] | None = None) -> tuple[list[float], dict]:
    """The task's scripted expert on board ``seed`` (its rewards and the last step's flags); with ``answer_after``,
    the right verdict is given after that many of the expert's steps instead (a right guess, if not localized);
    with ``wait_at_view``, from where the expert answers the arm stays put and never answers. ``localized``, if
    given, receives each step's flag."""
    expert = task.expert_class(task.config)
    observation, rewards, waiting = task.reset(seed), [], False
    for step in range(task.config.max_steps):
        state = task.privileged()
        pose, verdict = expert.act(state["camera_pose"], state["board_pose"], state["defective"],
                                   observation["joint_state"])
        if step == answer_after:
            pose, verdict = np.zeros(POSE_DIM, dtype=np.float32), Verdict.REWORK if task.defective else Verdict.PASS
        waiting = waiting or (wait_at_view and verdict != Verdict.CONTINUE)
        if waiting:
            pose, verdict = np.zeros(POSE_DIM, dtype=np.float32), Verdict.CONTINUE
        result = task.step(pose, verdict)
        observation = result.observation
        rewards.append(result.reward)
        if localized is not None:
            localized.append(result.flags["localized"])
        if result.terminated or result.truncated:
            break
    return rewards, result.flags


def guess_episode(task, seed: int, verdict: Verdict) -> list[float]:
    """A verdict given on the first step, from the start pose."""
    task.reset(seed)
    result = task.step(np.zeros(POSE_DIM, dtype=np.float32), verdict)
    assert result.terminated and not result.flags["localized"]
    return [result.reward]


def silent_episode(task, seed: int) -> list[float]:
    """No verdict at all: the arm stays where it starts until the episode is truncated."""
    task.reset(seed)
    rewards = []
    while True:
        result = task.step(np.zeros(POSE_DIM, dtype=np.float32), Verdict.CONTINUE)
        rewards.append(result.reward)
        if result.terminated or result.truncated:
            return rewards


@pytest.mark.parametrize("dwell_penalty", DWELL_PENALTIES)
@pytest.mark.parametrize("name", sorted(TASKS))
def test_a_right_guess_on_the_way_earns_less_than_looking_first(name, dwell_penalty):
    task, gamma = fine_tuning_task(name, dwell_penalty), FinetuneConfig(from_scratch=True).gamma
    for seed in BOARDS:
        rewards, flags = expert_episode(task, seed)
        assert flags["success"], f"{name}: the expert failed board {seed}"
        looked = discounted_return(rewards, gamma)
        guesses = 0
        for step in range(len(rewards) - 1):  # every state on the expert's way, up to its own verdict
            guessed, flags = expert_episode(task, seed, answer_after=step)
            if flags["localized"]:
                continue  # an answer from a localized view is an inspection, not a guess
            guesses += 1
            assert discounted_return(guessed, gamma) < looked, (name, seed, step)
        assert guesses, f"{name}: board {seed} starts localized"


@pytest.mark.parametrize("dwell_penalty", DWELL_PENALTIES)
@pytest.mark.parametrize("name", sorted(TASKS))
def test_a_constant_verdict_earns_less_than_looking_and_less_than_never_answering(name, dwell_penalty):
    task, gamma = fine_tuning_task(name, dwell_penalty), FinetuneConfig(from_scratch=True).gamma
    looked = [discounted_return(expert_episode(task, seed)[0], gamma) for seed in BOARDS]
    silent = np.mean([discounted_return(silent_episode(task, seed), gamma) for seed in BOARDS])
    for verdict in (Verdict.PASS, Verdict.REWORK):
        guessed = np.mean([discounted_return(guess_episode(task, seed, verdict), gamma) for seed in BOARDS])
        # Even a guess that is always right is worth less than looking: it earns the verdict and gives it back.
        assert guessed < min(looked) and guessed < silent, (name, verdict.name, guessed, min(looked), silent)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_the_dwell_penalty_charges_waiting_at_the_view_for_every_step_it_lasts(name):
    # Without it, staying at the view to the time limit costs only the verdict not earned (and discounting); with
    # it, each step there costs its weight too, so answering there is worth more than waiting also step by step.
    plain, charged = fine_tuning_task(name), fine_tuning_task(name, dwell_penalty=0.05)
    for seed in BOARDS:
        localized = []
        waited, flags = expert_episode(plain, seed, wait_at_view=True, localized=localized)
        waited_charged, _ = expert_episode(charged, seed, wait_at_view=True)
        answered, _ = expert_episode(charged, seed)
        assert flags["localized"] and not flags["success"] and len(waited) == plain.config.max_steps
        assert sum(localized) > plain.config.max_steps // 2, (name, seed, sum(localized))
        # each step that ended localized costs 0.05 more, the one at the time limit included; no other step does
        assert waited_charged == pytest.approx([r - 0.05 * at for r, at in zip(waited, localized)], abs=1e-12)
        assert sum(answered) > sum(waited_charged)
