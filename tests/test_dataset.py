"""Demonstration datasets: write, append, reload, refuse mismatches and damage, survive a killed append."""

from __future__ import annotations

import json

import pytest
import torch

from robot_rl import keys
from robot_rl.configs import DIFFICULTY_NAMES
from robot_rl.dataset import DatasetError, DemoDataset, EpisodeRecord
from robot_rl.envs.tasks.pcb_inspect.difficulty import DIFFICULTIES
from robot_rl.errors import UsageError
from tests.conftest import IMAGE_SIZE, collect


def test_round_trip_keeps_frames_episodes_and_metadata(demos_dir):
    dataset = DemoDataset.open(demos_dir)
    meta = dataset.meta
    assert meta["env"] == "pcb-inspect" and meta["image_size"] == IMAGE_SIZE and meta["difficulty"] == "easy"
    assert meta["num_episodes"] == len(dataset.episodes) == 12
    assert dataset.frames == sum(e.length for e in dataset.episodes) == meta["frames"]
    assert {"torch", "torchrl", "tensordict", "mujoco"} <= set(meta["packages"])
    data = dataset.data
    assert data[keys.PIXELS].dtype == torch.uint8 and data[keys.PIXELS].shape == (dataset.frames, 64, 64, 3)
    assert data.is_memmap() or type(data[keys.PIXELS]).__name__ == "MemoryMappedTensor"
    for index, episode in enumerate(dataset.episodes):
        frames = data[episode.start : episode.start + episode.length]
        assert (frames[keys.EPISODE] == index).all()
        assert frames[keys.STEP].tolist() == list(range(episode.length))
        assert frames[keys.NEXT, keys.DONE].reshape(-1).tolist() == [False] * (episode.length - 1) + [True]
        assert int(frames[keys.EPISODE_SEED][0]) == episode.seed
    assert sum(e.success for e in dataset.episodes) >= 11  # the expert, with action noise


def test_append_adds_episodes_and_refuses_a_repeated_seed(demos_copy):
    before = DemoDataset.open(demos_copy)
    first_frames = before.data[keys.PIXELS][:5].clone()
    summary = collect(demos_copy, episodes=3)
    after = DemoDataset.open(demos_copy)
    assert len(after.episodes) == 15 and summary["run"]["seed"] == 1
    assert torch.equal(after.data[keys.PIXELS][:5], first_frames)
    assert [r["seed"] for r in after.meta["runs"]] == [0, 1]
    assert not after.episode_seeds() & {e.seed for e in before.episodes} - before.episode_seeds()
    with pytest.raises(UsageError, match="already holds that run"):
        collect(demos_copy, episodes=2, seed=0)
    # The same command again (a kill after the last commit, before the process exited): nothing to do.
    again = collect(demos_copy, episodes=3, seed=1)
    assert again["episodes"] == 15 and len(DemoDataset.open(demos_copy).episodes) == 15


def test_append_with_another_image_size_is_refused(demos_copy):
    with pytest.raises(DatasetError, match="image_size=64.*image_size=48"):
        collect(demos_copy, episodes=1, image_size=48)
    assert len(DemoDataset.open(demos_copy).episodes) == 12


def test_a_killed_append_leaves_the_committed_dataset_intact(demos_copy):
    dataset = DemoDataset.open_for_append(demos_copy, {k: DemoDataset.open(demos_copy).meta[k]
                                                      for k in ("env", "env_version", "image_size", "difficulty")})
    extra = dataset.data[:10].to_tensordict()
    dataset.add_episodes(extra, [EpisodeRecord(-1, 10, 123, True)])  # written, never committed: "killed"
    reopened = DemoDataset.open(demos_copy)
    assert len(reopened.episodes) == 12 and 123 not in reopened.episode_seeds()
    collect(demos_copy, episodes=2)  # the next append overwrites the uncommitted rows
    assert len(DemoDataset.open(demos_copy).episodes) == 14


def test_a_new_dataset_killed_before_its_first_commit_leaves_nothing_behind(demos_dir, tmp_path):
    source = DemoDataset.open(demos_dir)
    root = tmp_path / "fresh"
    writer = DemoDataset.open_for_append(root, {k: source.meta[k] for k in ("env", "env_version", "image_size")})
    writer.add_episodes(source.data[:10].to_tensordict(), [EpisodeRecord(-1, 10, 123, True)])
    # SIGKILL here: no cleanup runs, the build folder stays beside the dataset and nothing is at its name.
    stale = list(tmp_path.glob(".fresh.*.tmp"))
    assert len(stale) == 1 and stale[0].is_dir() and not root.exists()
    (tmp_path / ".other.abc.tmp").mkdir()  # another dataset's temporary: not ours to remove
    collect(root, episodes=2)
    assert not list(tmp_path.glob(".fresh.*.tmp")) and (tmp_path / ".other.abc.tmp").is_dir()
    assert len(DemoDataset.open(root).episodes) == 2


def test_a_dataset_written_before_a_reward_term_existed_takes_appends_in_its_own_layout(demos_dir, tmp_path):
    source = DemoDataset.open(demos_dir)
    older = tmp_path / "older"
    dwell = (keys.NEXT, keys.REWARD_TERMS, "dwell")
    writer = DemoDataset.open_for_append(older, source.meta)
    writer.add_episodes(source.data.to_tensordict().exclude(dwell),
                        [EpisodeRecord(-1, e.length, e.seed, e.success) for e in source.episodes])
    writer.commit()
    collect(older, episodes=2, seed=1)  # today's env emits the dwell term
    appended = DemoDataset.open(older)
    assert len(appended.episodes) == len(source.episodes) + 2 and dwell not in appended.data.keys(True, True)
    # ... also when the appends outgrow the storage (a new one is made from the frames being added).
    frames = source.data.to_tensordict()
    writer = DemoDataset.open_for_append(older, appended.meta)
    for _ in range(writer.meta["capacity"] // frames.shape[0] + 1):
        writer.add_episodes(frames, [EpisodeRecord(-1, e.length, e.seed, e.success) for e in source.episodes])
    writer.commit()
    grown = DemoDataset.open(older)
    assert grown.meta["storage"] != appended.meta["storage"] and dwell not in grown.data.keys(True, True)
    assert (keys.NEXT, keys.REWARD_TERMS, "collision") in grown.data.keys(True, True)


def test_growing_past_the_capacity_switches_storage_atomically(demos_copy):
    dataset = DemoDataset.open(demos_copy)
    old_storage = dataset.meta["storage"]
    frames = dataset.data.to_tensordict()
    writer = DemoDataset.open_for_append(demos_copy, dataset.meta)
    repeats = writer.meta["capacity"] // frames.shape[0] + 1
    for _ in range(repeats):
        writer.add_episodes(frames, [EpisodeRecord(-1, e.length, e.seed, e.success) for e in dataset.episodes])
    writer.commit()
    grown = DemoDataset.open(demos_copy)
    assert grown.meta["storage"] != old_storage and not (demos_copy / old_storage).exists()
    assert grown.frames == frames.shape[0] * (repeats + 1)
    assert torch.equal(grown.data[keys.PIXELS][: frames.shape[0]], frames[keys.PIXELS])


@pytest.mark.parametrize("damage, message", [
    ("missing_folder", "no such dataset folder"),
    ("empty_folder", "empty folder"),
    ("corrupt_meta", "corrupt JSON"),
    ("truncated_meta", "corrupt JSON"),
    ("wrong_counts", "do not add up"),
    ("missing_storage", "truncated dataset"),
    ("truncated_pixels", "truncated"),
])
def test_damaged_datasets_are_refused_with_the_culprit_named(demos_copy, tmp_path, damage, message):
    meta_path = demos_copy / "meta.json"
    meta = json.loads(meta_path.read_text())
    storage = demos_copy / meta["storage"]
    target = demos_copy
    if damage == "missing_folder":
        target = tmp_path / "nope"
    elif damage == "empty_folder":
        target = tmp_path / "empty"
        target.mkdir()
    elif damage == "corrupt_meta":
        meta_path.write_text("{not json")
    elif damage == "truncated_meta":
        meta_path.write_text(meta_path.read_text()[:100])
    elif damage == "wrong_counts":
        meta["frames"] += 5
        meta_path.write_text(json.dumps(meta))
    elif damage == "missing_storage":
        (storage / "meta.json").unlink()
    elif damage == "truncated_pixels":
        pixels = storage / "pixels.memmap"
        with open(pixels, "r+b") as f:
            f.truncate(1000)
    with pytest.raises(DatasetError, match=message) as error:
        DemoDataset.open(target)
    assert str(target) in str(error.value) and "\n" not in str(error.value)


def test_split_is_by_whole_episodes(demos_dir):
    dataset = DemoDataset.open(demos_dir)
    train, val = dataset.split(0.25)
    assert train.shape[0] + val.shape[0] == dataset.frames
    assert set(train[keys.EPISODE].tolist()).isdisjoint(val[keys.EPISODE].tolist())
    assert len(set(val[keys.EPISODE].tolist())) == 3


def test_difficulty_names_match_the_env():
    assert tuple(DIFFICULTIES) == DIFFICULTY_NAMES


def test_datasets_record_their_randomization_and_refuse_another(demos_copy, tmp_path):
    from robot_rl.configs import RANDOMIZATION_NAMES
    from robot_rl.envs.randomization import RANDOMIZATIONS

    assert tuple(RANDOMIZATIONS) == RANDOMIZATION_NAMES
    with pytest.raises(DatasetError, match="randomization='none'.*randomization='default'"):
        collect(demos_copy, episodes=1, randomization="default")
    collect(tmp_path / "randomized", episodes=1, randomization="default")
    assert DemoDataset.open(tmp_path / "randomized").meta["randomization"] == "default"


class _CreatesMarker:
    """Unpickling it creates ``path``: the proof that a loader ran code from a file."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return open, (self.path, "w")


def _add_pickle_sidecar(storage, marker) -> None:
    """A non-tensor entry as tensordict writes one: a folder whose ``other.pickle`` unpickles on load."""
    import pickle

    meta = json.loads((storage / "meta.json").read_text())
    meta["note"] = {"type": "NonTensorData"}
    (storage / "meta.json").write_text(json.dumps(meta))
    (storage / "note").mkdir()
    (storage / "note" / "meta.json").write_text(json.dumps({
        "_type": "<class 'tensordict.tensorclass.NonTensorData'>", "_is_non_tensor": True, "_metadata": None}))
    (storage / "note" / "other.pickle").write_bytes(pickle.dumps({"data": _CreatesMarker(marker)}))


def test_a_storage_with_a_pickle_sidecar_is_refused_without_unpickling_it(demos_copy, tmp_path, capsys):
    from robot_rl.cli import main

    marker = tmp_path / "code-ran"
    storage = demos_copy / json.loads((demos_copy / "meta.json").read_text())["storage"]
    _add_pickle_sidecar(storage, marker)
    with pytest.raises(DatasetError, match="other.pickle: not a tensor file") as error:
        DemoDataset.open(demos_copy)
    assert "\n" not in str(error.value)
    (storage / "note" / "other.pickle").rename(storage / "note" / "other.memmap")  # hidden under a tensor's name
    with pytest.raises(DatasetError, match="entry 'note' is not a tensor or TensorDict"):
        DemoDataset.open(demos_copy)
    (storage / "note" / "other.memmap").rename(storage / "note" / "other.pickle")
    for argv in (["pretrain", "--data", str(demos_copy), "--out", str(tmp_path / "bc")],
                 ["export-dataset", "--data", str(demos_copy), "--out", str(tmp_path / "lerobot")],
                 ["collect-demos", "--out", str(demos_copy), "--episodes", "1", "--image-size", "64"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "other.pickle" in err, err
    assert not marker.exists()


@pytest.mark.parametrize("plant", ["pkl_file", "symlinked_leaf", "symlinked_storage", "storage_outside"])
def test_a_storage_with_stray_files_symlinks_or_outside_names_is_refused(demos_copy, tmp_path, plant):
    meta_path = demos_copy / "meta.json"
    meta = json.loads(meta_path.read_text())
    storage = demos_copy / meta["storage"]
    culprit = storage / "extra.pkl"
    if plant == "pkl_file":
        culprit.write_bytes(b"\x80\x04N.")
        message = "not a tensor file"
    elif plant == "symlinked_leaf":
        culprit = storage / "episode.memmap"
        outside = tmp_path / "elsewhere.memmap"
        culprit.rename(outside)
        culprit.symlink_to(outside)
        message = "a symlink"
    elif plant == "symlinked_storage":
        outside = tmp_path / "storage-elsewhere"
        storage.rename(outside)
        culprit = storage
        storage.symlink_to(outside)
        message = "a symlink"
    else:
        meta["storage"] = "../storage-0001"
        meta_path.write_text(json.dumps(meta))
        culprit, message = meta_path, "storage must name a storage-NNNN folder inside the dataset"
    with pytest.raises(DatasetError, match=message) as error:
        DemoDataset.open(demos_copy)
    assert str(culprit) in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("edit, field", [
    (lambda m: m["episodes"][0].__setitem__(1, -200), "episodes[0]"),
    (lambda m: m.update(frames=-82), "frames"),
    (lambda m: m["episodes"][1].__setitem__(0, m["episodes"][1][0] + 3), "episodes[1]"),
    (lambda m: m.update(capacity=m["frames"] - 1), "capacity"),
    (lambda m: m.update(frames=float(m["frames"])), "frames"),
    (lambda m: m["episodes"][2].__setitem__(2, "seven"), "episodes[2]"),
    (lambda m: m["episodes"][2].__setitem__(2, 1.5), "episodes[2]"),
    (lambda m: m.update(num_episodes=99), "num_episodes"),
    (lambda m: m.update(image_size=100_000), "image_size"),
    (lambda m: m.update(image_size=True), "image_size"),
    (lambda m: m["runs"][0].update(seed=-4), "runs[0].seed"),
    (lambda m: m.update(episodes={"0": 1}), "episodes"),
])
def test_a_meta_json_with_impossible_counts_is_refused_naming_the_field(demos_copy, edit, field):
    meta_path = demos_copy / "meta.json"
    meta = json.loads(meta_path.read_text())
    edit(meta)
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(DatasetError) as error:
        DemoDataset.open(demos_copy)
    message = str(error.value)
    assert message.startswith(f"{meta_path}: corrupt, {field} ") and "\n" not in message, message


def test_a_storage_meta_naming_a_torch_function_as_dtype_is_refused(demos_copy):
    storage = demos_copy / json.loads((demos_copy / "meta.json").read_text())["storage"]
    entries = json.loads((storage / "meta.json").read_text())
    entries["episode"]["dtype"] = "torch.load"
    (storage / "meta.json").write_text(json.dumps(entries))
    with pytest.raises(DatasetError, match="unknown dtype 'torch.load' for episode"):
        DemoDataset.open(demos_copy)


def _no_space(*args, **kwargs):
    import errno

    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("full", ["free space", "allocation"])
def test_a_full_disk_ends_collect_demos_in_one_line_with_nothing_half_written_and_the_same_command_resumes(
        tmp_path, monkeypatch, capsys, full):
    import os
    import shutil
    from collections import namedtuple

    from robot_rl.cli import main

    out = tmp_path / "demos"
    argv = ["collect-demos", "--out", str(out), "--episodes", "2", "--difficulty", "easy", "--image-size", "48",
            "--num-envs", "1", "--seed", "5"]
    with monkeypatch.context() as patch:
        if full == "free space":  # seen before writing
            usage = namedtuple("usage", "total used free")
            patch.setattr(shutil, "disk_usage", lambda path: usage(2**30, 2**30 - 4096, 4096))
        else:  # the file system refuses the blocks (a sparse memmap would have died of SIGBUS at its first write)
            patch.setattr(os, "posix_fallocate", _no_space)
        # Too little free space is refused before the run starts (exit 2); a refused allocation stops it (exit 1).
        assert main(argv) == (2 if full == "free space" else 1)
    stderr = capsys.readouterr().err
    err = [line for line in stderr.splitlines() if line.startswith("robot-rl")]  # below the progress bar
    line = (f"robot-rl collect-demos: error: {out}: 2 episodes need up to ~" if full == "free space" else
            f"robot-rl collect-demos: error: no space left on device writing {out} (needs ~")
    assert "Traceback" not in stderr and len(err) == 1 and err[0].startswith(line), err
    assert not out.exists() and not list(tmp_path.glob(".demos.*.tmp"))
    assert main(argv) == 0  # once there is space
    assert len(DemoDataset.open(out).episodes) == 2


def test_demos_collected_with_masks_hold_one_per_frame_and_bc_recolours_them(tmp_path, demos_dir):
    from robot_rl.configs import BCConfig
    from robot_rl.envs.perception import BOARD, TABLE
    from robot_rl.pretrain import bc

    root = tmp_path / "masked"
    collect(root, episodes=2, masks=True)
    dataset = DemoDataset.open(root)
    assert dataset.has_masks and dataset.meta["segmentation"] is True
    masks, pixels = dataset.data[keys.SEGMENTATION], dataset.data[keys.PIXELS]
    assert masks.shape == (dataset.frames, IMAGE_SIZE, IMAGE_SIZE) and masks.dtype == torch.uint8
    assert (masks == BOARD).any() and (masks == TABLE).any()
    # The board is greener than the (grey-brown) table: the mask follows the image.
    green = pixels[..., 1].float() - pixels[..., 0].float()
    assert green[masks == BOARD].mean() > green[masks == TABLE].mean() + 20
    with pytest.raises(DatasetError, match="segmentation=True.*segmentation=False"):
        collect(root, episodes=1)  # a dataset holds masks for all its frames or none
    assert not DemoDataset.open(demos_dir).has_masks  # datasets without masks keep loading

    config = dict(epochs=1, batch_size=8, steps_per_epoch=2, eval_every=0, eval_episodes=1, eval_envs=1, hidden=32,
                  val_fraction=0.5, threads=2, recolour="table,background")
    summary = bc.pretrain(BCConfig(data=str(root), run_dir=str(tmp_path / "bc"), **config), progress=False)
    assert summary["finished"]
    with pytest.raises(UsageError, match="no segmentation masks"):
        bc.pretrain(BCConfig(data=str(demos_dir), run_dir=str(tmp_path / "bc2"), **config), progress=False)


def test_a_meta_json_promising_masks_the_storage_lacks_is_refused(demos_copy):
    meta = json.loads((demos_copy / "meta.json").read_text())
    meta["segmentation"] = True
    (demos_copy / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(DatasetError, match="segmentation mask.*no entry"):
        DemoDataset.open(demos_copy)
    meta["segmentation"] = "yes"
    (demos_copy / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(DatasetError, match="segmentation must be true or false"):
        DemoDataset.open(demos_copy)
