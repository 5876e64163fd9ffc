"""The verdict readings of ``benchmarks/verdict_decoding.py``: each makes the deterministic verdict the one it names."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import verdict_decoding  # noqa: E402  (benchmarks/ is not a package: its scripts import each other by name)

from robot_rl.policy import ActorHeads, ResidualActorHeads  # noqa: E402

# continue, pass, rework: the most likely single verdict is "continue" (0.4), yet answering (0.6) beats waiting
UNSURE_WHICH = torch.tensor([[math.log(0.4), math.log(0.35), math.log(0.25)]])


def _read(decoding: str, logits: torch.Tensor, seed: int = 0) -> torch.Tensor:
    return verdict_decoding.decoded(decoding, logits, torch.Generator().manual_seed(seed)).argmax(-1)


def test_the_mode_keeps_the_logits_and_the_factored_mode_answers_when_answering_is_likelier():
    assert torch.equal(verdict_decoding.decoded("mode", UNSURE_WHICH, torch.Generator()), UNSURE_WHICH)
    assert _read("mode", UNSURE_WHICH).item() == 0
    assert _read("factored-mode", UNSURE_WHICH).item() == 1  # answers, with the likelier answer
    waiting = torch.tensor([[math.log(0.55), math.log(0.4), math.log(0.05)]])
    assert _read("factored-mode", waiting).item() == 0


def test_the_sampled_reading_draws_each_verdict_as_often_as_its_probability():
    draws = _read("sampled", UNSURE_WHICH.expand(20_000, 3))
    shares = torch.bincount(draws, minlength=3) / len(draws)
    assert torch.allclose(shares, torch.tensor([0.4, 0.35, 0.25]), atol=0.015)
    assert torch.equal(draws, _read("sampled", UNSURE_WHICH.expand(20_000, 3)))  # seeded


def test_an_unknown_reading_is_refused():
    with pytest.raises(ValueError, match="unknown reading 'median'"):
        verdict_decoding.decoded("median", UNSURE_WHICH, torch.Generator())


@pytest.mark.parametrize("kind", [ActorHeads, ResidualActorHeads])
def test_reading_rewires_every_verdict_head_of_an_actor_and_leaves_the_pose_alone(kind):
    torch.manual_seed(0)
    options = {"residual_scale": 0.1} if kind is ResidualActorHeads else {}
    heads = kind(features=5, hidden=8, pose_dim=6, verdicts=3, min_scale=0.01, answer_temperature=0.25,
                 continue_floor=0.05, **options)
    actor = torch.nn.Sequential(torch.nn.Identity(), heads)
    features = torch.randn(64, 5)
    loc, scale, logits = heads(features)
    verdict_decoding.reading("factored-mode", torch.Generator())(actor)
    loc_read, scale_read, logits_read = heads(features)
    assert torch.equal(loc, loc_read) and torch.equal(scale, scale_read)
    answer_now = logits[:, 1:].logsumexp(-1) >= logits[:, 0]
    expected = torch.where(answer_now, 1 + logits[:, 1:].argmax(-1), 0)
    assert torch.equal(logits_read.argmax(-1), expected)


def test_a_stall_is_read_on_the_steps_whose_observation_was_at_the_view():
    from tensordict import TensorDict

    from robot_rl import keys

    # localized after steps 1-3 (so the policy acted at the view on steps 2 and 3); no verdict: it stalled
    camera = torch.zeros(4, 7)
    camera[:, 0] = torch.tensor([0.0, 0.010, 0.013, 0.017])
    rollout = TensorDict({keys.VERDICT: torch.zeros(4, dtype=torch.long),
                          verdict_decoding.ANSWER_NOW: torch.tensor([0.1, 0.2, 0.6, 0.3]),
                          (keys.NEXT, *keys.LOCALIZED): torch.tensor([[False], [True], [True], [True]]),
                          (keys.NEXT, *keys.CAMERA_POSE): camera}, batch_size=[4])
    assert verdict_decoding.stall(rollout) == {"steps_at_view": 2, "p_answer_max": 0.6, "p_answer_median": 0.3,
                                               "travel_mm_per_step": 3.5}
    answered = rollout.clone()
    answered[keys.VERDICT][-1] = 1
    assert verdict_decoding.stall(answered) is None
    never_there = rollout.clone()
    never_there[(keys.NEXT, *keys.LOCALIZED)].zero_()
    assert verdict_decoding.stall(never_there) is None
    arrived_last = rollout.clone()  # localized only by its last step: it never acted at the view
    arrived_last[(keys.NEXT, *keys.LOCALIZED)][:3] = False
    assert verdict_decoding.stall(arrived_last) is None
