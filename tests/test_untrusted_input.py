"""Artefacts are data: a dataset, checkpoint, export or arm file that names code never gets it imported unless the
user says so, and bad files end in one line naming the culprit with exit code 2."""

from __future__ import annotations

import json
import shutil
import sys

import pytest
import torch

from robot_rl.cli import main
from robot_rl.configs import ExportConfig
from robot_rl.export import export
from robot_rl.run_folder import load_checkpoint, policy_checkpoint

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
    state = load_checkpoint(policy_checkpoint(bc_run_dir))
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
    pretrain = ["pretrain", "--data", str(demos_copy), "--run-dir", str(tmp_path / "bc")]
    assert main(pretrain) == 2
    err = _one_line(capsys)
    assert f"meta.json: task '{EVIL}' is code to import" in err and "--trust-code" in err
    assert not evil_module.exists()
    assert main([*pretrain, "--trust-code"]) == 2  # the user's opt-in: imported (it holds no task class)
    assert evil_module.exists() and "cannot import it" in _one_line(capsys)


def test_a_checkpoint_naming_a_task_module_is_not_imported_by_evaluate_export_or_finetune(
        bc_run_dir, tmp_path, evil_module, capsys):
    checkpoint = _checkpoint_naming(bc_run_dir, tmp_path / "named.pt", env=EVIL)
    for argv in (["evaluate", "--checkpoint", checkpoint, "--out", str(tmp_path / "eval")],
                 ["export", "--checkpoint", checkpoint, "--out", str(tmp_path / "export")]):
        assert main(argv) == 2, argv
        assert f"task '{EVIL}' is code to import" in _one_line(capsys)
    (tmp_path / "bc" / "checkpoints").mkdir(parents=True)
    shutil.copy(checkpoint, tmp_path / "bc" / "checkpoints" / "best.pt")
    assert main(["finetune", "--init", str(tmp_path / "bc"), "--run-dir", str(tmp_path / "ppo")]) == 2
    assert f"task '{EVIL}' is code to import" in _one_line(capsys)
    assert main(["evaluate", "--checkpoint", checkpoint, "--task", "pcb-inspect"]) == 2
    assert f"was trained on task '{EVIL}'" in _one_line(capsys)
    assert not evil_module.exists()
    assert main(["evaluate", "--checkpoint", checkpoint, "--task", EVIL]) == 2  # named by the user: imported
    assert evil_module.exists() and "cannot import it" in _one_line(capsys)


def test_an_export_naming_a_task_module_is_not_imported(exported, tmp_path, evil_module):
    from robot_rl.envs.tasks import TaskError
    from robot_rl.policy import load_actor

    folder = _export_naming(exported, tmp_path, lambda config: config["env"].update(env=EVIL))
    with pytest.raises(TaskError, match="is code to import") as error:
        load_actor(folder)
    assert "\n" not in str(error.value) and "config.json" in str(error.value)
    assert not evil_module.exists()
