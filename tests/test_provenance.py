"""The one provenance record: constructors per artefact, older artefacts' defaults, the inherit rule, the env."""

from __future__ import annotations

import pytest

from robot_rl import compat
from robot_rl.envs.defaults import DEFAULT_ARM, DEFAULT_TASK
from robot_rl.errors import UsageError
from robot_rl.provenance import Provenance


def test_the_defaults_are_registered_names():
    from robot_rl import configs
    from robot_rl.envs.arms import ARMS
    from robot_rl.envs.tasks import TASKS

    assert DEFAULT_TASK in TASKS and DEFAULT_ARM in ARMS
    assert configs.CollectConfig().task == DEFAULT_TASK and configs.CollectConfig().arm == DEFAULT_ARM
    assert Provenance().task == DEFAULT_TASK and Provenance().arm == DEFAULT_ARM


def test_a_new_record_carries_this_codes_task_version_and_arm_digest():
    from robot_rl.envs.arms import arm_digest
    from robot_rl.envs.tasks import get_task

    record = Provenance.new(task="lead-inspect", image_size=64)
    assert (record.task, record.difficulty, record.image_size, record.randomization) == (
        "lead-inspect", "default", 64, "none")
    assert record.task_version == get_task("lead-inspect").version
    assert record.arm_sha256 == arm_digest(DEFAULT_ARM)


def test_the_stored_record_reads_back_the_same():
    record = Provenance.new(difficulty="easy", randomization="surfaces", arm="panda")
    stored = record.record()
    assert stored["env"] == DEFAULT_TASK and "task" not in stored  # the on-disk names artefacts have always used
    assert list(stored) == ["env", "env_version", "difficulty", "image_size", "randomization", "arm", "arm_sha256"]
    assert Provenance.from_record(stored, "x.pt") == record


def test_older_artefacts_get_what_they_meant():
    old_checkpoint = {"env": {"env": "pcb-inspect", "difficulty": "easy", "image_size": 64}}
    record = Provenance.of_checkpoint(old_checkpoint, "old.pt")
    assert (record.randomization, record.arm) == (compat.ENV_RECORD_DEFAULTS["randomization"], DEFAULT_ARM)
    assert record.task_version is None and record.arm_sha256 is None
    old_meta = {"format": "robot_rl-demos", "env": "pcb-inspect", "env_version": 2, "image_size": 84,
                "frames": 10, "episodes": []}
    assert Provenance.of_dataset(old_meta, "meta.json").difficulty == "default"


@pytest.mark.parametrize("env, culprit", [
    ({"env": "pcb-inspect", "difficulty": "easy"}, "lacks image_size"),
    ({"env": "pcb-inspect", "difficulty": "easy", "image_size": 10**6}, "image_size must be"),
    ({"env": "pcb-inspect", "difficulty": "brutal", "image_size": 64}, "difficulty must be"),
    ({"env": "pcb-inspect", "difficulty": "easy", "image_size": 64, "colour": "red"}, "unknown key 'colour'"),
    ("pcb-inspect", "env must be an object"),
])
def test_a_bad_record_is_refused_naming_the_file_and_field(env, culprit):
    with pytest.raises(UsageError, match=culprit) as err:
        Provenance.of_checkpoint({"env": env}, "bad.pt")
    assert str(err.value).startswith("bad.pt: ") and "\n" not in str(err.value)


def test_inherit_takes_upstream_values_and_refuses_contradictions_in_one_line():
    upstream = Provenance(task="lead-inspect", difficulty="easy", image_size=64, randomization="default")
    assert upstream.inherit("the BC run runs/bc", task="", difficulty="", image_size=0, arm="") == upstream
    assert upstream.inherit("the BC run runs/bc", image_size=64, task="lead-inspect") == upstream
    with pytest.raises(UsageError) as err:
        upstream.inherit("the BC run runs/bc", image_size=84)
    assert str(err.value) == "--image-size 84 does not match the BC run runs/bc (image size 64)"
    shifted = upstream.inherit("runs/bc/checkpoints/last.pt", may_change=("difficulty", "randomization"),
                               difficulty="hard", randomization="none")
    assert (shifted.difficulty, shifted.randomization, shifted.task) == ("hard", "none", "lead-inspect")
    with pytest.raises(UsageError, match="--arm panda does not match"):
        upstream.inherit("x", may_change=("difficulty",), arm="panda")


def test_verified_refuses_another_task_version_and_an_edited_arm():
    current = Provenance.new()
    assert current.verified("meta.json") == current
    with pytest.raises(UsageError, match="meta.json: recorded with task pcb-inspect v"):
        Provenance(task_version=current.task_version + 1).verified("meta.json")
    with pytest.raises(UsageError, match="changed since it was recorded"):
        Provenance(arm_sha256="0" * 64).verified("meta.json")


def test_the_env_is_the_one_the_record_describes():
    record = Provenance(task="lead-inspect", difficulty="easy", image_size=32)
    env = record.make_env(num_envs=1, seed=0)
    try:
        assert env.task.name == "lead-inspect" and env.observation_spec["pixels"].shape[-2] == 32
    finally:
        env.close()
    assert record.env_kwargs(randomization="default")["randomization"] == "default"
