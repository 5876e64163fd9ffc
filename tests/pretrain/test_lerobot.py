"""LeRobot datasets (v3.0) out of and into robot_rl: layout, round trips, BC on one, bad input."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import av
import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from robot_rl import keys
from robot_rl.cli import main
from robot_rl.dataset import DatasetError, DemoDataset
from robot_rl.pretrain import lerobot_layout as layout
from robot_rl.pretrain.lerobot_export import export_dataset
from robot_rl.pretrain.lerobot_import import open_demos


@pytest.fixture(scope="module")
def exports(demos_dir, tmp_path_factory):
    """The 12-episode demos exported with PNG frames and with H.264 video."""
    root = tmp_path_factory.mktemp("lerobot")
    for codec in ("none", "h264"):
        export_dataset(demos_dir, root / codec, video_codec=codec, progress=False)
    return root


def _leaves(data) -> dict:
    return {layout.flat_key(k): v for k, v in data.items(include_nested=True, leaves_only=True)}


def _assert_same_demos(original: DemoDataset, imported: DemoDataset, pixels_exact: bool) -> None:
    assert imported.meta["episodes"] == original.meta["episodes"]
    for field in ("env", "env_version", "image_size", "difficulty", "randomization", "arm"):
        assert imported.meta[field] == original.meta[field], field
    before, after = _leaves(original.data), _leaves(imported.data)
    assert before.keys() == after.keys()
    for key, value in before.items():
        if key == (keys.PIXELS,) and not pixels_exact:
            error = (value.float() - after[key].float()).abs()
            assert error.mean() < 6, f"mean pixel error {error.mean():.2f}"  # H.264 at crf 18, 4:2:0 chroma
            continue
        assert after[key].dtype == value.dtype and torch.equal(after[key], value), key


def test_the_export_has_lerobot_v3_layout(exports, demos_dir):
    demos, root = DemoDataset.open(demos_dir), exports / "h264"
    info = json.loads((root / layout.INFO_PATH).read_text())
    assert info["codebase_version"] == "v3.0" and info["fps"] == layout.FPS
    assert (info["total_episodes"], info["total_frames"]) == (len(demos.episodes), demos.frames)
    assert info["robot_type"] == "ur5e_like" and info["splits"] == {"train": f"0:{len(demos.episodes)}"}
    features = info["features"]
    assert features[layout.IMAGE]["dtype"] == "video" and features[layout.IMAGE]["shape"] == [64, 64, 3]
    assert features[layout.STATE]["shape"] == [12] and features[layout.ACTION]["shape"] == [7]
    assert features["next.reward"] == {"dtype": "float32", "shape": [1], "names": None}
    assert features["task.board_pose"]["shape"] == [4] and features["next.done"]["dtype"] == "bool"
    episodes = pq.read_table(root / layout.EPISODES_PATH).to_pylist()
    assert [e["length"] for e in episodes] == [e.length for e in demos.episodes]
    assert [e["dataset_from_index"] for e in episodes] == [e.start for e in demos.episodes]
    prefix = f"videos/{layout.IMAGE}"
    assert [e[f"{prefix}/from_timestamp"] for e in episodes] == [e.start / layout.FPS for e in demos.episodes]
    data = pq.read_table(root / "data/chunk-000/file-000.parquet")
    assert layout.IMAGE not in data.column_names  # in the MP4
    assert data.column("index").to_pylist() == list(range(demos.frames))
    assert data.column("frame_index").to_pylist() == demos.data[keys.STEP].tolist()
    tasks = pq.read_table(root / layout.TASKS_PATH)
    assert tasks.to_pylist() == [{"task_index": 0, "__index_level_0__": "pcb-inspect"}]
    assert json.loads(tasks.schema.metadata[b"pandas"])["index_columns"] == ["__index_level_0__"]
    stats = json.loads((root / layout.STATS_PATH).read_text())
    assert np.array(stats[layout.IMAGE]["mean"]).shape == (3, 1, 1) and stats["action"]["count"] == [demos.frames]
    with av.open(str(root / "videos" / layout.IMAGE / "chunk-000/file-000.mp4")) as video:
        times = [frame.time for frame in video.decode(video=0)]
    assert np.allclose(times, np.arange(demos.frames) / layout.FPS)  # frame k at k / fps, as LeRobot looks up


def test_png_round_trip_is_exact(exports, demos_dir, tmp_path):
    imported = open_demos(exports / "none", tmp_path / "imported")
    _assert_same_demos(DemoDataset.open(demos_dir), imported, pixels_exact=True)


def test_video_round_trip_is_within_the_codec_error(exports, demos_dir, tmp_path):
    imported = open_demos(exports / "h264", tmp_path / "imported")
    _assert_same_demos(DemoDataset.open(demos_dir), imported, pixels_exact=False)
    again = open_demos(exports / "h264", tmp_path / "imported")  # the copy is reused, not read again
    assert again.meta["storage"] == imported.meta["storage"]


def test_an_export_over_several_files_round_trips(demos_dir, tmp_path, monkeypatch):
    # Files closed after every batch of 2 episodes: rows must name the file their frames are in.
    from robot_rl.pretrain import lerobot_export

    monkeypatch.setattr(lerobot_export, "EPISODES_PER_WRITE", 2)
    monkeypatch.setattr(layout, "DATA_FILE_MB", 0)
    monkeypatch.setattr(layout, "VIDEO_FILE_MB", 0)
    export_dataset(demos_dir, tmp_path / "split", progress=False)
    assert len(list((tmp_path / "split" / "data").glob("*/*.parquet"))) == 6
    assert len(list((tmp_path / "split" / "videos").rglob("*.mp4"))) == 6
    imported = open_demos(tmp_path / "split", tmp_path / "imported")
    _assert_same_demos(DemoDataset.open(demos_dir), imported, pixels_exact=False)


def _edit_info(root, edit) -> None:
    info = json.loads((root / layout.INFO_PATH).read_text())
    edit(info)
    (root / layout.INFO_PATH).write_text(json.dumps(info))


@pytest.mark.parametrize("edit, message", [
    (lambda info: info.update(fps=30), "fps 30, robot_rl's envs step at 10 Hz"),
    (lambda info: info["features"][layout.STATE].update(shape=[14]), "'observation.state' has shape [14]"),
    (lambda info: info.update(codebase_version="v2.1"), "codebase_version v2.1"),
])
def test_a_dataset_robot_rl_cannot_train_on_is_refused_naming_why(exports, tmp_path, edit, message):
    root = tmp_path / "bad"
    shutil.copytree(exports / "none", root)
    _edit_info(root, edit)
    with pytest.raises(DatasetError, match=re.escape(message)):
        open_demos(root, tmp_path / "imported")


def test_resuming_after_the_source_changed_is_refused(exports, tmp_path):
    root = tmp_path / "source"
    shutil.copytree(exports / "none", root)
    open_demos(root, tmp_path / "imported")
    _edit_info(root, lambda info: info.update(robot_type="ur5e_like"))  # rewritten: another version
    with pytest.raises(DatasetError, match="changed since the run started"):
        open_demos(root, tmp_path / "imported", resuming=True)
    assert open_demos(root, tmp_path / "imported").meta["source"]["path"] == str(root.resolve())  # a new run


def test_a_dataset_made_elsewhere_trains_on_its_action(exports, demos_dir, tmp_path):
    # No robot_rl meta and no expert label: the task comes from the task string, the seeds from the frames.
    root = tmp_path / "elsewhere"
    shutil.copytree(exports / "none", root)
    (root / layout.ROBOT_RL_PATH).unlink()
    _edit_info(root, lambda info: info["features"].pop(layout.EXPERT_ACTION))
    data_file = root / "data/chunk-000/file-000.parquet"
    pq.write_table(pq.read_table(data_file).drop_columns([layout.EXPERT_ACTION]), data_file)
    imported = open_demos(root, tmp_path / "imported")
    demos = DemoDataset.open(demos_dir)
    assert [e.seed for e in imported.episodes] == [e.seed for e in demos.episodes]
    assert imported.meta["env"] == "pcb-inspect" and imported.meta["arm"] == "ur5e_like"
    assert torch.equal(imported.data[keys.EXPERT_POSE], demos.data[keys.POSE])
    _edit_info(root, lambda info: info.update(robot_type="so100"))
    with pytest.raises(DatasetError, match="robot_type 'so100' is not a robot_rl arm"):
        open_demos(root, tmp_path / "imported-so100")


def test_pretrain_runs_on_a_lerobot_dataset(exports, tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert main(["pretrain", "--data", str(exports / "h264"), "--out", str(run_dir), "--epochs", "1",
                 "--batch-size", "8", "--steps-per-epoch", "2", "--eval-episodes", "1", "--num-envs", "1",
                 "--hidden", "16"]) == 0
    assert "closed-loop success" in capsys.readouterr().out
    assert DemoDataset.open(run_dir / "demos").meta["source"]["path"] == str((exports / "h264").resolve())


def test_export_dataset_command(demos_dir, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["export-dataset", "--data", str(demos_dir), "--out", str(out), "--video-codec", "none"]) == 0
    assert "LeRobot v3.0 dataset, 12 episodes" in capsys.readouterr().out
    assert not list(tmp_path.glob(".out.*.tmp"))  # built under a temporary name, renamed when whole
    assert main(["export-dataset", "--data", str(demos_dir), "--out", str(out)]) == 2
    assert "already exists and is not empty" in capsys.readouterr().err


def _cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "robot_rl.cli", *argv], capture_output=True, text=True, timeout=300)


def test_a_dataset_missing_a_feature_gets_a_one_line_error(exports, tmp_path):
    root = tmp_path / "broken"
    shutil.copytree(exports / "h264", root)
    _edit_info(root, lambda info: info["features"].pop("task.board_pose"))
    with pytest.raises(DatasetError, match="no feature 'task.board_pose'"):
        open_demos(root, tmp_path / "imported")
    result = _cli("pretrain", "--data", str(root), "--out", str(tmp_path / "run"))
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "no feature 'task.board_pose'" in result.stderr


@pytest.mark.parametrize("template, message", [
    ("../elsewhere/videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4", "leads outside the dataset"),
    ("/etc/passwd", "leads outside the dataset"),
    ("videos/{video_key.__class__}/file.mp4", "has field {video_key.__class__}"),
    ("videos/{video_key[0]}/file.mp4", "has field {video_key[0]}"),
    ("videos/{video_key!r}/file.mp4", "has field {video_key!r}"),
    ("videos/{chunk_index:999999999999d}.mp4", "has field {chunk_index:999999999999d}"),
])
def test_a_video_path_template_cannot_leave_the_dataset_or_reach_python_attributes(exports, tmp_path, capsys,
                                                                                   template, message):
    from robot_rl.errors import UsageError

    root = tmp_path / "ds"
    shutil.copytree(exports / "h264", root)
    shutil.copytree(exports / "h264", tmp_path / "elsewhere")  # another folder's video that must not be trained on
    _edit_info(root, lambda info: info.update(video_path=template))
    with pytest.raises(UsageError, match=re.escape(message)) as error:
        open_demos(root, tmp_path / "imported")
    assert "\n" not in str(error.value) and str(root) in str(error.value)
    assert main(["pretrain", "--data", str(root), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and message in err
    assert not (tmp_path / "imported").exists()


def test_symlinks_leading_out_of_a_lerobot_dataset_are_refused(exports, tmp_path):
    from robot_rl.errors import UsageError

    root = tmp_path / "ds"
    shutil.copytree(exports / "h264", root)
    outside = tmp_path / "outside.mp4"
    video = root / "videos" / layout.IMAGE / "chunk-000" / "file-000.mp4"
    video.rename(outside)
    video.symlink_to(outside)
    with pytest.raises(UsageError, match="leads outside the dataset folder") as error:
        open_demos(root, tmp_path / "imported")
    assert "file-000.mp4" in str(error.value)
    video.unlink()
    outside.rename(video)
    data_file = root / "data/chunk-000/file-000.parquet"
    data_file.rename(tmp_path / "outside.parquet")
    data_file.symlink_to(tmp_path / "outside.parquet")
    with pytest.raises(UsageError, match="file-000.parquet.*leads outside the dataset folder"):
        open_demos(root, tmp_path / "imported")
    data_file.unlink()
    (tmp_path / "outside.parquet").rename(data_file)
    _edit_info(root, lambda info: info.update(data_path="../../data/chunk-{chunk_index:03d}/file-{file_index:03d}.pq"))
    with pytest.raises(UsageError, match="data_path: .* leads outside the dataset folder"):
        open_demos(root, tmp_path / "imported")


@pytest.mark.parametrize("edit, message", [
    (lambda info: info["features"][layout.IMAGE].update(shape=[100000, 100000, 3]), "S in 32-224"),
    (lambda info: info["features"][layout.IMAGE].update(shape=[64.0, 64.0, 3]), "S in 32-224"),
    (lambda info: info.update(total_frames=-5), "total_frames must be an integer"),
    (lambda info: info["features"].update({layout.STATE: "shape"}), "no feature 'observation.state'"),
])
def test_unbounded_shapes_and_counts_in_info_json_are_refused(exports, tmp_path, edit, message):
    root = tmp_path / "bad"
    shutil.copytree(exports / "none", root)
    _edit_info(root, edit)
    with pytest.raises(DatasetError, match=re.escape(message)) as error:
        open_demos(root, tmp_path / "imported")
    assert "\n" not in str(error.value)


def test_an_episodes_table_with_a_negative_length_is_refused(exports, tmp_path):
    root = tmp_path / "bad"
    shutil.copytree(exports / "none", root)
    episodes = root / layout.EPISODES_PATH
    table = pq.read_table(episodes)
    lengths = table.column("length").to_pylist()
    table = table.set_column(table.column_names.index("length"), "length",
                             __import__("pyarrow").array([-200] + lengths[1:]))
    pq.write_table(table, episodes)
    with pytest.raises(DatasetError, match=r"length -200 must be an integer in \[1, "):
        open_demos(root, tmp_path / "imported")
