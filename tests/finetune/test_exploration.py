"""--exploration: low sets the sampling options it names, auto reads the start's own check, a resolved config
resolves to itself, and the run folder records what was chosen."""

from __future__ import annotations

import json

import pytest
import torch

from robot_rl.checkpoints import load_checkpoint
from robot_rl.configs import FinetuneConfig
from robot_rl.finetune import exploration, trainer
from robot_rl.finetune.exploration import LOW_EXPLORATION, WORKING_START


def start_folder(tmp_path, name="bc", **state):
    """A behaviour-cloning run folder whose checkpoints hold only ``state`` (all that --exploration auto reads)."""
    folder = tmp_path / name / "checkpoints"
    folder.mkdir(parents=True)
    for kind in ("last", "best"):
        torch.save({"kind": "bc", **state.get(kind, {})}, folder / f"{kind}.pt")
    return folder.parent


def config(init, **options) -> FinetuneConfig:
    return FinetuneConfig(init=str(init), run_dir="runs/unused", **options)


def test_low_scales_the_actors_learning_rate_with_the_pose_scale():
    assert LOW_EXPLORATION["lr"] == pytest.approx(FinetuneConfig.lr * LOW_EXPLORATION["pose_scale_factor"])


def test_default_leaves_the_options_and_low_sets_every_option_it_names(tmp_path):
    plain = config(tmp_path)
    assert exploration.resolve(plain) == (plain, "")
    low, said = exploration.resolve(config(tmp_path, exploration="low"))
    assert {name: getattr(low, name) for name in LOW_EXPLORATION} == LOW_EXPLORATION and not said
    assert exploration.resolve(low)[0] == low  # a stored config resolves to itself


@pytest.mark.parametrize("kind, state, chosen, why", [
    ("best", {"best": {"best_success": 0.86}}, "low", "the start's own check 86% >= 80%"),
    ("best", {"best": {"best_success": 0.4}}, "default", "the start's own check 40% < 80%"),
    ("last", {"last": {"best_success": 0.86, "check_success": 0.5}}, "default", "the start's own check 50% < 80%"),
    ("last", {"last": {"check_success": WORKING_START}}, "low", "the start's own check 80% >= 80%"),
    ("last", {"last": {"best_success": 0.9}}, "default", "no check of the start policy in its checkpoint"),
])
def test_auto_samples_close_only_to_a_start_whose_own_check_works(tmp_path, kind, state, chosen, why):
    start = start_folder(tmp_path, **state)
    resolved, said = exploration.resolve(config(start, exploration="auto", checkpoint_kind=kind))
    assert resolved.exploration == chosen and said == f"finetune: --exploration auto -> {chosen} ({why})"
    low = {name: getattr(resolved, name) for name in LOW_EXPLORATION} == LOW_EXPLORATION
    assert low == (chosen == "low")
    assert exploration.resolve(resolved) == (resolved, "")


def test_auto_from_scratch_keeps_the_default_noise():
    scratch = FinetuneConfig(from_scratch=True, run_dir="runs/unused", exploration="auto")
    resolved, said = exploration.resolve(scratch)
    assert resolved.exploration == "default" and said.endswith("(from scratch)")


@pytest.mark.parametrize("options, message", [
    ({"exploration": "low", "answer_temperature": 0.3}, "--exploration low sets --answer-temperature"),
    ({"exploration": "auto", "dwell_penalty": 0.2}, "--exploration auto sets --dwell-penalty"),
    ({"exploration": "wide"}, "exploration"),
])
def test_an_option_that_exploration_sets_given_another_value_is_refused(options, message):
    with pytest.raises(ValueError, match=message):
        FinetuneConfig(init="runs/bc", run_dir="runs/unused", **options)


def test_a_bc_checkpoint_carries_the_check_of_its_own_epoch(bc_run_dir):
    summary = json.loads((bc_run_dir / "summary.json").read_text())
    last = load_checkpoint(bc_run_dir / "checkpoints" / "last.pt")
    assert last["check_success"] == summary["final_eval"]["success_rate"]


def test_the_run_folder_records_the_options_auto_chose_and_the_same_command_continues_it(bc_run_dir, tmp_path):
    import shutil

    works = tmp_path / "bc"  # the tiny BC run, its last check made to read as a working start
    shutil.copytree(bc_run_dir, works)
    state = load_checkpoint(works / "checkpoints" / "last.pt")
    torch.save({**state, "check_success": 0.9}, works / "checkpoints" / "last.pt")
    command = FinetuneConfig(init=str(works), run_dir=str(tmp_path / "ppo"), exploration="auto", total_frames=32,
                             frames_per_batch=32, num_envs=1, minibatch_size=16, ppo_epochs=1, eval_every=0,
                             eval_episodes=1, threads=2, critic_hidden=16)
    for _ in range(2):  # the second: the same command again after a kill, before any iteration
        run = trainer.PPORun(command)
        try:
            stored = json.loads((tmp_path / "ppo" / "config.json").read_text())
            assert run.config.exploration == "low" and run.config.answer_temperature == 0.1
            assert stored["exploration"] == "low"
            assert {name: stored[name] for name in LOW_EXPLORATION} == LOW_EXPLORATION
        finally:
            run.close()
