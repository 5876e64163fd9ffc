"""Artefacts are data: a dataset, checkpoint, export or arm file that names code never gets it imported unless the
user says so, and bad files end in one line naming the culprit with exit code 2."""

from __future__ import annotations

import json
import shutil
import sys

import pytest
import torch

from robot_rl.checkpoints import load_checkpoint, policy_checkpoint
from robot_rl.cli import main
from robot_rl.configs import ExportConfig
from robot_rl.export import export

EVIL = "evil_tasks:Task"


@pytest.fixture
def evil_module(tmp_path, monkeypatch):
    """A module on sys.path whose import creates a marker file; yields the marker."""
    marker = tmp_path / "imported"
    folder = tmp_path / "code"
    folder.mkdir()
    (folder / "evil_tasks.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.syspath_prepend(str(folder))
    yield marker
    sys.modules.pop("evil_tasks", None)


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    return err


def _checkpoint_naming(bc_run_dir, path, **env) -> str:
    """The BC run's checkpoint with ``env`` entries replaced; its arm digest is dropped unless ``env`` gives one
    (an artefact from before digests were recorded)."""
    state = load_checkpoint(policy_checkpoint(bc_run_dir))
    state["env"].pop("arm_sha256", None)
    state["env"].update(env)
    torch.save(state, path)
    return str(path)


@pytest.fixture(scope="module")
def exported(bc_run_dir, tmp_path_factory):
    """The BC run's actor as model.safetensors + config.json."""
    folder = tmp_path_factory.mktemp("export") / "weights"
    export(ExportConfig(checkpoint=str(bc_run_dir), out=str(folder), format="safetensors"))
    return folder


def _export_naming(exported, tmp_path, edit) -> str:
    folder = tmp_path / "weights"
    shutil.copytree(exported, folder)
    config = json.loads((folder / "config.json").read_text())
    edit(config)
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder)


def test_a_dataset_naming_a_task_module_is_not_imported_without_trust_code(demos_copy, tmp_path, evil_module,
                                                                          capsys):
    meta = json.loads((demos_copy / "meta.json").read_text())
    (demos_copy / "meta.json").write_text(json.dumps({**meta, "env": EVIL}))
    pretrain = ["pretrain", "--data", str(demos_copy), "--out", str(tmp_path / "bc")]
    assert main(pretrain) == 2
    err = _one_line(capsys)
    assert f"meta.json: task '{EVIL}' is code to import" in err and "--trust-code" in err
    assert not evil_module.exists()
    assert main([*pretrain, "--trust-code"]) == 2  # the user's opt-in: imported (it holds no task class)
    assert evil_module.exists() and "cannot import it" in _one_line(capsys)


def test_a_checkpoint_naming_a_task_module_is_not_imported_by_evaluate_export_or_finetune(
        bc_run_dir, tmp_path, evil_module, capsys):
    checkpoint = _checkpoint_naming(bc_run_dir, tmp_path / "named.pt", env=EVIL)
    for argv in (["evaluate", "--policy", checkpoint, "--out", str(tmp_path / "eval")],
                 ["export", "--policy", checkpoint, "--out", str(tmp_path / "export")]):
        assert main(argv) == 2, argv
        assert f"task '{EVIL}' is code to import" in _one_line(capsys)
    (tmp_path / "bc" / "checkpoints").mkdir(parents=True)
    shutil.copy(checkpoint, tmp_path / "bc" / "checkpoints" / "last.pt")
    assert main(["finetune", "--policy", str(tmp_path / "bc"), "--out", str(tmp_path / "ppo")]) == 2
    assert f"task '{EVIL}' is code to import" in _one_line(capsys)
    assert main(["evaluate", "--policy", checkpoint, "--task", "pcb-inspect"]) == 2
    assert f"does not match {checkpoint} (task '{EVIL}')" in _one_line(capsys)
    assert not evil_module.exists()
    assert main(["evaluate", "--policy", checkpoint, "--task", EVIL]) == 2  # named by the user: imported
    assert evil_module.exists() and "cannot import it" in _one_line(capsys)


def test_an_export_naming_a_task_module_is_not_imported(exported, tmp_path, evil_module):
    from robot_rl.envs.tasks import TaskError
    from robot_rl.policy_io import load_actor

    folder = _export_naming(exported, tmp_path, lambda config: config["env"].update(env=EVIL))
    with pytest.raises(TaskError, match="is code to import") as error:
        load_actor(folder)
    assert "\n" not in str(error.value) and "config.json" in str(error.value)
    assert not evil_module.exists()


@pytest.fixture
def arm_file(tmp_path):
    """A user's arm: ArmSpec JSON with its MJCF beside it (6 joints, as the BC run's arm)."""
    from tests.envs.test_arms import TEST_ARM_XML

    (tmp_path / "my_arm.xml").write_text(TEST_ARM_XML)
    path = tmp_path / "my_arm.json"
    path.write_text(json.dumps({"name": "my_arm", "mjcf": "my_arm.xml", "joints": ["j1", "j2", "j3", "j4", "j5", "j6"],
                                "camera_body": "tool", "camera_pos": [0.0, 0.0, 0.035],
                                "camera_quat": [0.0, 1.0, 0.0, 0.0], "servo_gains": [3000.0, 150.0]}))
    return path


def _move_camera(arm_file) -> None:
    values = json.loads(arm_file.read_text())
    values["camera_pos"] = [0.0, 0.01, 0.035]
    arm_file.write_text(json.dumps(values, indent=2))


def test_a_checkpoint_refuses_an_arm_file_edited_since_and_an_old_one_warns(bc_run_dir, arm_file, tmp_path, capsys):
    from robot_rl.envs.arms import arm_digest
    from robot_rl.policy_io import load_actor

    recorded = arm_digest(str(arm_file))
    checkpoint = _checkpoint_naming(bc_run_dir, tmp_path / "arm.pt", arm=str(arm_file), arm_sha256=recorded)
    _, env_info, _ = load_actor(checkpoint)
    assert env_info.arm_sha256 == recorded and capsys.readouterr().err == ""
    arm_file.write_text(json.dumps(json.loads(arm_file.read_text())))  # reformatted only: the same arm
    load_actor(checkpoint)
    _move_camera(arm_file)
    now = arm_digest(str(arm_file))
    assert main(["evaluate", "--policy", checkpoint, "--episodes", "1", "--videos", "0"]) == 2
    err = _one_line(capsys)
    assert "arm.pt: arm" in err and f"arm_sha256 {recorded} recorded, {now} now" in err
    old = _checkpoint_naming(bc_run_dir, tmp_path / "old.pt", arm=str(arm_file))  # from before hashes
    load_actor(old)
    err = _one_line(capsys)
    assert err.startswith(f"warning: {old}: records arm {arm_file} by path only")


def test_datasets_record_their_arm_files_content_and_refuse_it_edited(arm_file, tmp_path, capsys):
    from robot_rl.envs.arms import arm_digest
    from tests.conftest import collect

    data = tmp_path / "demos"
    collect(data, episodes=1, image_size=32, arm=str(arm_file))
    recorded = json.loads((data / "meta.json").read_text())["arm_sha256"]
    assert recorded == arm_digest(str(arm_file))
    _move_camera(arm_file)
    assert main(["pretrain", "--data", str(data), "--out", str(tmp_path / "bc")]) == 2
    assert f"arm_sha256 {recorded} recorded" in _one_line(capsys)
    assert main(["collect-demos", "--out", str(data), "--episodes", "1", "--image-size", "32", "--difficulty",
                 "easy", "--num-envs", "1", "--arm", str(arm_file)]) == 2
    assert "changed since the dataset's demos" in _one_line(capsys)


def test_an_export_refuses_an_arm_file_edited_since(exported, arm_file, tmp_path):
    from robot_rl.envs.arms import ArmError, arm_digest
    from robot_rl.policy_io import load_actor

    recorded = arm_digest(str(arm_file))
    folder = _export_naming(exported, tmp_path, lambda c: c["env"].update(arm=str(arm_file), arm_sha256=recorded))
    load_actor(folder)
    _move_camera(arm_file)
    with pytest.raises(ArmError, match=f"config.json: arm .* changed since it was recorded .*{recorded} recorded"):
        load_actor(folder)


class _CreatesMarker:
    """Unpickling it creates ``path``: the proof that a loader ran code from a file."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return open, (self.path, "w")


def test_pickled_encoder_weights_and_checkpoints_get_one_line_and_never_run(demos_dir, bc_run_dir, tmp_path, capsys):
    marker = tmp_path / "code-ran"
    evil = tmp_path / "evil.pt"
    torch.save({"conv1.weight": _CreatesMarker(marker)}, evil)
    assert main(["pretrain", "--data", str(demos_dir), "--out", str(tmp_path / "bc"), "--encoder-weights",
                 str(evil)]) == 2
    err = _one_line(capsys)
    assert f"{evil}: not a plain tensor file (refusing pickled objects)" in err and "weights_only" not in err
    assert main(["evaluate", "--policy", str(evil)]) == 2
    err = _one_line(capsys)
    assert f"{evil}: not a plain checkpoint (refusing pickled objects)" in err and "weights_only" not in err
    assert not marker.exists()
    torch.save(torch.zeros(3), tmp_path / "tensor.pt")
    assert main(["evaluate", "--policy", str(tmp_path / "tensor.pt")]) == 2
    assert "tensor.pt: not a robot_rl checkpoint (it holds a Tensor, not a dict)" in _one_line(capsys)
    assert main(["pretrain", "--data", str(demos_dir), "--out", str(tmp_path / "bc"), "--encoder-weights",
                 str(tmp_path / "tensor.pt")]) == 2
    assert "tensor.pt: not a ResNet18 state dict (holds a Tensor)" in _one_line(capsys)
    huge = _checkpoint_naming(bc_run_dir, tmp_path / "huge.pt")
    state = torch.load(huge, weights_only=True)
    state["policy_config"]["hidden"] = 10**9
    torch.save(state, huge)
    assert main(["evaluate", "--policy", huge]) == 2
    assert "huge.pt: policy_config hidden must be an integer in [1, 4096], got 1000000000" in _one_line(capsys)


@pytest.mark.parametrize("edit, message", [
    (lambda c: c["env"].update(image_size=10**6), "env image_size must be an integer in [32, 224], got 1000000"),
    (lambda c: c["env"].update(image_size=-84), "env image_size must be an integer in [32, 224], got -84"),
    (lambda c: c["env"].update(image_size=84.5), "env image_size must be an integer in [32, 224], got 84.5"),
    (lambda c: c.update(extra=1), "has unknown key 'extra'"),
    (lambda c: c.pop("env"), "lacks 'env'"),
    (lambda c: c["env"].pop("arm"), "env lacks arm"),
    (lambda c: c["policy_config"].update(hidden="256"), "policy_config hidden must be an integer"),
    (lambda c: c["policy_config"].update(code="os.system"), "policy_config has unknown key 'code'"),
])
def test_an_export_config_outside_its_schema_gets_one_line_naming_it(exported, tmp_path, capsys, edit, message):
    folder = _export_naming(exported, tmp_path, edit)
    assert main(["evaluate", "--policy", folder, "--out", str(tmp_path / "eval")]) == 2
    err = _one_line(capsys)
    assert f"{folder}/config.json: " in err and message in err, err


def test_safetensors_with_wrong_shapes_get_one_line(exported, tmp_path, capsys):
    from safetensors.torch import load_file, save_file

    folder = tmp_path / "weights"
    shutil.copytree(exported, folder)
    tensors = load_file(str(folder / "model.safetensors"))
    name = next(k for k, v in tensors.items() if v.dim() == 2)
    tensors[name] = torch.zeros(3, 5)
    save_file(tensors, str(folder / "model.safetensors"))
    assert main(["evaluate", "--policy", str(folder)]) == 2
    err = _one_line(capsys)
    assert "model.safetensors: weights do not fit this robot_rl's policy" in err and f"{name!r} is [3, 5]" in err
    del tensors[name]
    save_file(tensors, str(folder / "model.safetensors"))
    assert main(["evaluate", "--policy", str(folder)]) == 2
    assert f"1 missing, e.g. {name!r}" in _one_line(capsys)
