"""collect-demos writes what meta.json says: a resumed run keeps its stored options, a dataset keeps one task, arm,
difficulty, image size, randomization and mask setting, and a run that cannot fit on the disk does not start."""

from __future__ import annotations

import json

import pytest

from robot_rl.cli import main
from robot_rl.dataset import DatasetError, DemoDataset
from robot_rl.pretrain import collect as collect_module


def _error_lines(capsys) -> list[str]:
    stderr = capsys.readouterr().err
    assert "Traceback" not in stderr
    return [line for line in stderr.splitlines() if line.startswith("robot-rl collect-demos: error:")]


def _stop_early(root, target: int, pose_noise: float) -> bytes:
    """Rewrites the dataset's finished run as one stopped before ``target`` episodes, as a kill leaves it; returns
    the meta.json written."""
    meta = json.loads((root / "meta.json").read_text())
    meta["runs"][0].update(target_episodes=target, complete=False, pose_noise=pose_noise)
    (root / "meta.json").write_text(json.dumps(meta))
    return (root / "meta.json").read_bytes()


def test_a_resumed_collection_runs_and_records_its_stored_options(demos_copy, monkeypatch):
    _stop_early(demos_copy, target=13, pose_noise=0.3)
    used = []
    expert = collect_module.ExpertPolicy
    monkeypatch.setattr(collect_module, "ExpertPolicy",
                        lambda *args, **kwargs: used.append(kwargs["pose_noise"]) or expert(*args, **kwargs))
    # No --episodes, --difficulty or --image-size (their defaults differ from the run's); --pose-noise as stored.
    assert main(["collect-demos", "--out", str(demos_copy), "--num-envs", "1", "--pose-noise", "0.3"]) == 0
    dataset = DemoDataset.open(demos_copy)
    assert used == [0.3]
    assert len(dataset.episodes) == 13 and dataset.data.shape[0] == dataset.frames
    assert dataset.meta["runs"] == [{**dataset.meta["runs"][0], "seed": 0, "target_episodes": 13, "episodes": 13,
                                     "complete": True, "pose_noise": 0.3}]
    assert (dataset.meta["difficulty"], dataset.image_size) == ("easy", 64)


def test_options_given_against_an_interrupted_run_are_refused_in_one_line(demos_copy, capsys):
    before = _stop_early(demos_copy, target=13, pose_noise=0.3)
    # 0.1 is --pose-noise's default: typed on the command line, it is an option given all the same.
    argv = ["collect-demos", "--out", str(demos_copy), "--episodes", "1", "--pose-noise", "0.1", "--num-envs", "1"]
    assert main(argv) == 2
    [line] = _error_lines(capsys)
    assert "run seed 0 is unfinished (12 of 13 episodes)" in line
    assert "--episodes 1 (run has 13), --pose-noise 0.1 (run has 0.3)" in line
    assert "run the same command without them" in line and "another --seed (or --out)" in line
    assert (demos_copy / "meta.json").read_bytes() == before


def test_options_given_against_a_finished_run_of_that_seed_are_refused(demos_copy, capsys):
    before = (demos_copy / "meta.json").read_bytes()
    assert main(["collect-demos", "--out", str(demos_copy), "--seed", "0", "--pose-noise", "0.5"]) == 2
    [line] = _error_lines(capsys)
    assert "already holds that run's 12 episodes" in line and "--pose-noise 0.5 (run has 0.1)" in line
    assert (demos_copy / "meta.json").read_bytes() == before


@pytest.mark.parametrize(("option", "dataset_has", "given"), [
    (["--difficulty", "hard"], "difficulty='easy'", "difficulty='hard' (--difficulty hard)"),
    (["--randomization", "wide"], "randomization='none'", "randomization='wide' (--randomization wide)"),
    (["--image-size", "32"], "image_size=64", "image_size=32 (--image-size 32)"),
    (["--arm", "panda"], "arm='ur5e_like'", "arm='panda' (--arm panda)"),
    (["--masks"], "segmentation=False", "segmentation=True (--masks)"),
    (["--task", "lead-inspect"], "env='pcb-inspect'", "env='lead-inspect' (--task lead-inspect)"),
])
def test_appending_demos_unlike_the_dataset_is_refused_naming_the_option(demos_copy, capsys, option, dataset_has,
                                                                          given):
    before = (demos_copy / "meta.json").read_bytes()
    assert main(["collect-demos", "--out", str(demos_copy), "--episodes", "1", "--num-envs", "1", *option]) == 2
    [line] = _error_lines(capsys)
    assert f"dataset has {dataset_has}, the new demos have {given}" in line
    assert (demos_copy / "meta.json").read_bytes() == before


def test_a_collection_larger_than_the_free_disk_is_refused_before_it_starts(tmp_path, capsys, monkeypatch):
    import shutil
    from collections import namedtuple

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(2 * 10**9, 10**9, 10**9))  # 1 GB free
    out = tmp_path / "demos"
    assert main(["collect-demos", "--out", str(out), "--episodes", "1000000", "--num-envs", "1"]) == 2
    [line] = _error_lines(capsys)
    assert f"{out}: 1000000 episodes need up to ~" in line and "1.0 GB free there" in line
    assert not out.exists() and not list(tmp_path.glob(".demos.*.tmp"))


@pytest.mark.parametrize(("edit", "field"), [
    ({"pose_noise": float("inf")}, "runs[0].pose_noise"),
    ({"pose_noise": "0.1"}, "runs[0].pose_noise"),
    ({"complete": None}, "runs[0].complete"),
    ({"target_episodes": None}, "runs[0].target_episodes"),
])
def test_a_meta_json_whose_run_cannot_be_resumed_is_refused(demos_copy, edit, field):
    meta = json.loads((demos_copy / "meta.json").read_text())
    meta["runs"][0].update(edit)
    (demos_copy / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(DatasetError, match=f"corrupt, {field.replace('[', '.').replace(']', '.')}"):
        DemoDataset.open(demos_copy)
