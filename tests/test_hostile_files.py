"""Files made to break the loaders: an arm whose MJCF reaches outside its folder or at special files, checkpoints,
weights and LeRobot columns that are not what they claim, and ``robot-rl info`` on folders that lie. Each ends in one
line naming the file, exit code 2, never a traceback and never a read outside the artefact's folder."""

from __future__ import annotations

import json
import os
import re
import shutil
import zipfile

import pytest
import torch

from robot_rl.cli import main
from robot_rl.configs import ExportConfig
from robot_rl.export import export
from tests.envs.test_arms import TEST_ARM_XML

ARM_FIELDS = {"name": "my_arm", "joints": ["j1", "j2", "j3", "j4", "j5", "j6"], "camera_body": "tool",
              "camera_pos": [0, 0, 0.035], "camera_quat": [0, 1, 0, 0], "servo_gains": [3000, 150]}


def _one_line(capsys) -> str:
    """The one error line a command printed (its "starting" notice aside), checked to be the only one."""
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if not re.match(r"robot-rl [\w-]+: starting", line)]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# -- arm files ---------------------------------------------------------------------------------------------------
@pytest.fixture
def arm_folder(tmp_path):
    """A folder holding a working arm MJCF (arm.xml), a copy of it one level up, and a helper writing arm.json."""
    folder = tmp_path / "arm"
    folder.mkdir()
    (folder / "arm.xml").write_text(TEST_ARM_XML)
    (tmp_path / "outside_arm.xml").write_text(TEST_ARM_XML)
    return folder


def _arm_json(folder, mjcf: str) -> str:
    path = folder / "arm.json"
    path.write_text(json.dumps({**ARM_FIELDS, "mjcf": mjcf}))
    return str(path)


def _with_asset(asset: str, compiler: str = "") -> str:
    xml = TEST_ARM_XML.replace("<worldbody>", f"<asset>{asset}</asset><worldbody>")
    return xml.replace("<compiler ", f"<compiler {compiler} ") if compiler else xml


@pytest.mark.parametrize("mjcf, files, message", [
    ("../outside_arm.xml", {}, "mjcf names '../outside_arm.xml', which leads outside the arm's folder"),
    ("../../../../../../../etc/passwd", {}, "which leads outside the arm's folder"),
    ("/etc/passwd", {}, "mjcf names '/etc/passwd', which leads outside the arm's folder"),
    ("wrap.xml", {"wrap.xml": '<mujoco><include file="../outside_arm.xml"/></mujoco>'},
     "wrap.xml names '../outside_arm.xml', which leads outside"),
    ("mesh.xml", {"mesh.xml": _with_asset('<mesh name="m" file="/etc/passwd"/>')}, "names '/etc/passwd'"),
    ("dir.xml", {"dir.xml": _with_asset('<mesh name="m" file="passwd"/>', 'meshdir="/etc"')}, "names '/etc'"),
    ("cube.xml", {"cube.xml": _with_asset('<texture name="t" type="cube" fileright="../../x.png"/>')},
     "names '../../x.png'"),
])
def test_an_arm_file_never_reads_outside_its_folder(arm_folder, capsys, mjcf, files, message):
    from robot_rl.envs.arms import ArmError, get_arm

    for name, text in files.items():
        (arm_folder / name).write_text(text)
    arm = _arm_json(arm_folder, mjcf)
    with pytest.raises(ArmError, match=re.escape(message)) as error:
        get_arm(arm)
    assert str(error.value).startswith(arm) and "\n" not in str(error.value)
    assert main(["demo", "--arm", arm, "--out", str(arm_folder / "demo"), "--episodes", "1"]) == 2
    assert message in _one_line(capsys)


@pytest.mark.parametrize("make, message", [
    (lambda p: os.symlink("arm.xml", p), "is a symlink"),
    (lambda p: os.symlink("/dev/zero", p), "is a symlink"),
    (os.mkfifo, "is a FIFO, not a regular file"),
    (os.mkdir, "is a folder, not a file"),
])
@pytest.mark.parametrize("where", ["mjcf", "include", "mesh"])
def test_an_arm_file_naming_a_symlink_or_special_file_is_refused_by_name(arm_folder, make, message, where):
    from robot_rl.envs.arms import ArmError, get_arm

    make(arm_folder / "odd")
    if where == "include":
        (arm_folder / "wrap.xml").write_text('<mujoco><include file="odd"/></mujoco>')
    if where == "mesh":
        (arm_folder / "wrap.xml").write_text(_with_asset('<mesh name="m" file="odd"/>'))
    with pytest.raises(ArmError, match=re.escape(f"{arm_folder / 'odd'} {message}")):
        get_arm(_arm_json(arm_folder, "odd" if where == "mjcf" else "wrap.xml"))


def test_a_symlinked_folder_on_the_way_and_a_symlinked_arm_file_are_refused(arm_folder, tmp_path):
    from robot_rl.envs.arms import ArmError, get_arm

    (tmp_path / "meshes").mkdir()
    (arm_folder / "meshes").symlink_to(tmp_path / "meshes")
    (arm_folder / "wrap.xml").write_text(_with_asset('<mesh name="m" file="meshes/m.stl"/>'))
    with pytest.raises(ArmError, match=re.escape(f"{arm_folder / 'meshes'} is a symlink")):
        get_arm(_arm_json(arm_folder, "wrap.xml"))
    linked = tmp_path / "linked.json"
    linked.symlink_to(_arm_json(arm_folder, "arm.xml"))
    with pytest.raises(ArmError, match="linked.json: cannot read an ArmSpec: a symlink"):
        get_arm(str(linked))
    os.mkfifo(tmp_path / "fifo.json")
    with pytest.raises(ArmError, match="fifo.json: cannot read an ArmSpec: a FIFO"):
        get_arm(str(tmp_path / "fifo.json"))


def test_an_arm_file_with_includes_and_meshes_inside_its_folder_loads(arm_folder):
    from robot_rl.envs.arms import get_arm
    from robot_rl.envs.scene import ArmScene

    (arm_folder / "parts").mkdir()
    (arm_folder / "parts" / "tetra.obj").write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\nf 1 2 3\nf 1 2 4\nf 1 3 4\n"
                                                   "f 2 3 4\n")
    (arm_folder / "parts" / "assets.xml").write_text(
        '<mujoco><compiler meshdir="parts"/><asset><mesh name="tetra" file="tetra.obj" scale="0.01 0.01 0.01"/>'
        '</asset></mujoco>')
    (arm_folder / "wrap.xml").write_text(TEST_ARM_XML.replace(
        "<worldbody>", '<include file="parts/assets.xml"/><worldbody>').replace(
        '<geom name="tool_box"', '<geom type="mesh" mesh="tetra" contype="0" conaffinity="0"/><geom name="tool_box"'))
    scene = ArmScene(0, get_arm(_arm_json(arm_folder, "wrap.xml")))
    assert scene.model.nmesh == 1


# -- checkpoints and weights -------------------------------------------------------------------------------------
def _hostile_pt(tmp_path) -> dict:
    """Files named .pt that torch cannot read, each with what the one line must say."""
    cases = {}
    (tmp_path / "hello.pt").write_text("hello")  # not a zip: torch's legacy reader fails with a KeyError
    cases["hello.pt"] = "unreadable"
    torch.save({"a": torch.zeros(3)}, tmp_path / "whole.pt")
    data = (tmp_path / "whole.pt").read_bytes()
    (tmp_path / "truncated.pt").write_bytes(data[: len(data) // 2])
    cases["truncated.pt"] = "unreadable"
    with zipfile.ZipFile(tmp_path / "empty_zip.pt", "w"):
        pass
    cases["empty_zip.pt"] = "unreadable"
    os.mkfifo(tmp_path / "fifo.pt")
    cases["fifo.pt"] = "a FIFO, not a regular file"
    (tmp_path / "folder.pt").mkdir()
    cases["folder.pt"] = "a folder, not a file"
    return cases


def test_a_pt_file_torch_cannot_read_is_one_line_for_every_loader(demos_dir, tmp_path, capsys):
    from robot_rl.checkpoints import load_checkpoint
    from robot_rl.encoder import WeightsError, load_resnet_weights
    from robot_rl.errors import UsageError

    resnet = __import__("torchvision").models.resnet18()
    for name, message in _hostile_pt(tmp_path).items():
        path = tmp_path / name
        with pytest.raises(UsageError, match=re.escape(f"{path}: ")) as error:
            load_checkpoint(path)
        assert message in str(error.value) and "\n" not in str(error.value)
        with pytest.raises(WeightsError, match=re.escape(f"{path}: ")) as error:
            load_resnet_weights(resnet, path)
        # A folder given as encoder weights is read as a pretrain-encoder run folder.
        assert (message if name != "folder.pt" else "no encoder.pt") in str(error.value)
    for name in ("hello.pt", "fifo.pt"):
        assert main(["export", "--policy", str(tmp_path / name), "--out", str(tmp_path / "out")]) == 2
        assert f"{tmp_path / name}: " in _one_line(capsys)


def test_exported_weights_that_torch_or_safetensors_cannot_read_are_one_line(bc_run_dir, tmp_path, capsys):
    folder = tmp_path / "weights"
    export(ExportConfig(checkpoint=str(bc_run_dir), out=str(folder), format="safetensors"))
    (folder / "model.safetensors").write_bytes(b"\xff" * 64)
    assert main(["evaluate", "--policy", str(folder), "--out", str(tmp_path / "eval")]) == 2
    assert f"{folder / 'model.safetensors'}: unreadable exported weights" in _one_line(capsys)
    (folder / "model.safetensors").unlink()
    os.mkfifo(folder / "model.safetensors")
    assert main(["evaluate", "--policy", str(folder), "--out", str(tmp_path / "eval")]) == 2
    assert "model.safetensors: not readable exported weights: a FIFO" in _one_line(capsys)


# -- LeRobot columns ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def lerobot_png(demos_dir, tmp_path_factory):
    from robot_rl.pretrain.lerobot_export import export_dataset

    root = tmp_path_factory.mktemp("lerobot") / "png"
    export_dataset(demos_dir, root, video_codec="none", progress=False)
    return root


@pytest.mark.parametrize("column, cells", [
    ("observation.state", "strings"), ("action", "strings"), ("task.episode_seed", "strings"),
    ("index", "strings"), ("next.done", "strings"), ("observation.state", "nulls"),
])
def test_a_lerobot_column_not_of_its_declared_type_is_one_line(lerobot_png, tmp_path, capsys, column, cells):
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path / "ds"
    shutil.copytree(lerobot_png, root)
    data = root / "data/chunk-000/file-000.parquet"
    table = pq.read_table(data)
    index = table.column_names.index(column)
    values = (pa.array(["x"] * len(table)) if cells == "strings" else
              pa.nulls(len(table), table.column(column).type))
    pq.write_table(table.set_column(index, column, values), data)
    assert main(["pretrain", "--data", str(root), "--out", str(tmp_path / "run")]) == 2
    err = _one_line(capsys)
    assert f"{root / 'data'}: column {column!r}" in err
    assert ("holds string" in err) if cells == "strings" else ("empty cells" in err)


def test_a_lerobot_feature_declared_as_text_is_refused_at_its_declaration(lerobot_png, tmp_path):
    from robot_rl.dataset import DatasetError
    from robot_rl.pretrain.lerobot_import import open_demos

    root = tmp_path / "ds"
    shutil.copytree(lerobot_png, root)
    info = json.loads((root / "meta/info.json").read_text())
    info["features"]["observation.state"]["dtype"] = "string"
    (root / "meta/info.json").write_text(json.dumps(info))
    with pytest.raises(DatasetError, match="feature 'observation.state' has dtype 'string'"):
        open_demos(root, tmp_path / "imported")


# -- robot-rl info -----------------------------------------------------------------------------------------------
def _info(capsys, path) -> tuple[int, str]:
    code = main(["info", str(path)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.parametrize("frames, message", [
    (-5, "frames must be an integer in [0, 2^40], got -5"),
    (10**12, "not to the 1000000000000 frames"),
])
def test_info_refuses_a_dataset_whose_meta_lies_as_training_would(demos_copy, capsys, frames, message):
    meta = json.loads((demos_copy / "meta.json").read_text())
    meta.update(frames=frames, capacity=max(frames, meta["capacity"]))
    (demos_copy / "meta.json").write_text(json.dumps(meta))
    code, out = _info(capsys, demos_copy)
    assert code == 2 and "frames" not in out.split("error:")[0]  # nothing described before the refusal
    assert f"{demos_copy / 'meta.json'}: corrupt" in out and message in out and len(out.strip().splitlines()) == 1


def test_info_describes_an_export_folder_and_refuses_a_corrupt_one(bc_run_dir, tmp_path, capsys):
    folder = tmp_path / "export"
    export(ExportConfig(checkpoint=str(bc_run_dir), out=str(folder), format="safetensors"))
    code, out = _info(capsys, folder)
    assert code == 0, out
    lines = {label: value.strip() for label, value in (line.split(": ", 1) for line in out.splitlines())}
    assert lines["stage"] == "exported policy (export)" and lines["files"] == "model.safetensors"
    assert lines["arm"] == "ur5e_like"
    (folder / "policy.json").unlink()  # weights and config.json only: still an export, not a run folder
    code, out = _info(capsys, folder)
    assert code == 0 and "exported policy" in out, out
    config = json.loads((folder / "config.json").read_text())
    config["env"]["image_size"] = -5
    (folder / "config.json").write_text(json.dumps(config))
    code, out = _info(capsys, folder)
    assert code == 2 and f"{folder / 'config.json'}: env image_size must be" in out and "KeyError" not in out


def test_info_reads_where_the_expert_decides_and_refuses_storage_that_cannot_say(tmp_path):
    from types import SimpleNamespace

    from tensordict import TensorDict

    from robot_rl import keys
    from robot_rl.dataset_checks import DatasetError
    from robot_rl.info import _decisions

    def dataset(localized, verdict, joint_state):
        data = TensorDict({keys.JOINT_STATE: joint_state, keys.EXPERT_VERDICT: verdict}, batch_size=[4])
        if localized is not None:
            data[keys.LOCALIZED] = localized
        return SimpleNamespace(data=data, frames=4)

    joints = torch.zeros(4, 12)
    at_board = torch.tensor([[False], [True], [True], [True]])
    assert _decisions(dataset(at_board, torch.tensor([0, 0, 0, 2]), joints), tmp_path).startswith(
        "2.00 frames labelled continue per verdict frame")
    assert _decisions(dataset(at_board, torch.zeros(4, dtype=torch.long), joints), tmp_path) == (
        "no verdict frames; 3 frames labelled continue")
    assert _decisions(dataset(None, torch.zeros(4, dtype=torch.long), joints), tmp_path).startswith("not recorded")
    for bad in (dataset(at_board.float(), torch.zeros(4, dtype=torch.long), joints),
                dataset(at_board, torch.zeros(4), joints),
                dataset(at_board, torch.zeros(4, dtype=torch.long), torch.zeros(4, 11))):
        with pytest.raises(DatasetError, match="corrupt storage"):
            _decisions(bad, tmp_path)


def test_info_refuses_a_curve_whose_failure_counts_are_not_counts(tmp_path):
    from robot_rl.errors import UsageError
    from robot_rl.info import _checked_curve
    from robot_rl.learning_curves import stop_text, where_it_stops

    good = [{"success_rate": 0.5, "frames": 0, "failures": {}}, {"success_rate": 0.75, "frames": 64, "failures": {}}]
    assert _checked_curve(good, tmp_path) == good
    assert stop_text(where_it_stops([good], 4)).endswith("failures per 100 in the last quarter: none")
    for failures in ({"guess": None}, {"guess": 1.5}, {"guess": -1}, [1]):
        with pytest.raises(UsageError, match="corrupt"):
            _checked_curve([{"success_rate": 0.5, "frames": 0, "failures": failures}], tmp_path)


def test_info_refuses_a_run_folder_whose_files_are_corrupt(bc_run_dir, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(bc_run_dir, run)
    (run / "checkpoints" / "last.pt").unlink()
    (run / "checkpoints" / "last.pt").write_text("hello")
    code, out = _info(capsys, run)
    assert code == 2 and f"{run / 'checkpoints' / 'last.pt'}: unreadable checkpoint" in out
    shutil.rmtree(run)
    shutil.copytree(bc_run_dir, run)
    config = json.loads((run / "config.json").read_text())
    config["epochs"] = -5
    (run / "config.json").write_text(json.dumps(config))
    code, out = _info(capsys, run)
    assert code == 2 and f"{run / 'config.json'}: corrupt config" in out
    os.mkfifo(tmp_path / "fifo.pt")
    code, out = _info(capsys, tmp_path / "fifo.pt")
    assert code == 2 and "fifo.pt: not a checkpoint: a FIFO" in out


@pytest.mark.parametrize("text", ["[]", "{}", '"run"'])
def test_a_config_that_is_not_a_runs_options_is_refused_naming_the_file(tmp_path, text):
    from robot_rl.checkpoints import load_config
    from robot_rl.configs import BCConfig
    from robot_rl.errors import UsageError

    (tmp_path / "config.json").write_text(text)
    with pytest.raises(UsageError, match=r"config.json: not a run's config"):
        load_config(tmp_path / "config.json", BCConfig)


def test_counts_no_machine_can_hold_are_refused_before_any_work(tmp_path, capsys):
    from robot_rl.cli import main

    assert main(["finetune", "--from-scratch", "--out", str(tmp_path / "ppo"), "--total-frames",
                 "100000000000"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "robot-rl finetune: error: --total-frames must be <= 1,000,000,000, got 100000000000"]
    assert main(["pretrain-encoder", "--out", str(tmp_path / "encoder"), "--views", "100000000000",
                 "--image-size", "32"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "100,000,000,000 views need" in err[0] and "use fewer --views" in err[0]


def test_a_task_name_that_is_not_a_task_class_is_refused_naming_it():
    from robot_rl.envs.tasks import get_task
    from robot_rl.errors import UsageError

    with pytest.raises(UsageError, match=r"^--task os:getcwd: .* is not an InspectionTask subclass"):
        get_task("os:getcwd", trust_code=True)
