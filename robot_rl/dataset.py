"""Demonstration datasets on disk: TensorDict memmaps (TorchRL's on-disk format) plus a ``meta.json`` commit record.

Layout of a dataset folder::

    meta.json         what is committed: frame and episode counts, episode table, env and package versions
    storage-0001/     memmapped TensorDict, one row per frame, capacity rows (files are sparse past the end)

Writes never touch committed frames. Appending writes new frames past the committed count, then atomically
replaces ``meta.json``; a run killed before that leaves frames that no reader sees and the next append
overwrites. When the capacity runs out, the committed frames are copied into a new, larger ``storage-NNNN``
that ``meta.json`` switches to on commit. A new dataset is built under a temporary name and renamed into place
on its first commit. So a reader sees the old dataset or the new one, never a mix, and memory stays flat: rows
are read from the memmaps only when sampled. A writer's memmaps have their disk blocks allocated before any row
is written into them, so a full disk ends the append with ``NoSpaceLeft`` and nothing half-written, never with a
SIGBUS. One writer at a time: ``collect-demos`` holds the dataset's lock (``robot_rl.locks``).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import torch
from tensordict import TensorDict, TensorDictBase

from robot_rl import compat, keys
from robot_rl.configs import CollectConfig
from robot_rl.dataset_checks import META_FILE, DatasetError, check_meta, check_storage
from robot_rl.errors import NoSpaceLeft
from robot_rl.io import check_space, preallocate, write_json
from robot_rl.options import option_name

FORMAT = "robot_rl-demos"
FORMAT_VERSION = 1
PACKAGES = ("robot-rl", "torch", "torchrl", "tensordict", "mujoco", "gymnasium")
# Rows: the observation a decision was made on, the executed and expert actions, what the step returned.
# The next observation of a frame is the following frame of its episode, so it is not stored twice.
EXCLUDED_KEYS = (("collector",), (keys.NEXT, keys.PIXELS), (keys.NEXT, keys.JOINT_STATE), (keys.NEXT, keys.TASK),
                 (keys.NEXT, keys.SEGMENTATION))
# Keys the env may not (yet) produce but the dataset format depends on: checked when a dataset is opened.
REQUIRED_KEYS = (keys.PIXELS, keys.JOINT_STATE, keys.EXPERT_POSE, keys.EXPERT_VERDICT, keys.EPISODE, keys.STEP,
                 keys.DEFECTIVE, keys.CAMERA_POSE, keys.BOARD_POSE, (keys.NEXT, keys.DONE), (keys.NEXT, keys.SUCCESS))
# Fields every part of a dataset must share, with their value in datasets written before the field existed.
ARM_DIGEST = "arm_sha256"  # an arm file's content hash (robot_rl.envs.arms.arm_digest), compared when both have it
# meta.json's "segmentation": true when every frame has its segmentation mask (keys.SEGMENTATION).
MASKS_FIELD = "segmentation"
# The meta.json fields that hold for every demo of a dataset, each with the collect-demos option (CollectConfig
# field) that sets it; datasets written before a field existed are read through robot_rl.compat.
DATASET_OPTIONS = {"env": "task", "difficulty": "difficulty", "image_size": "image_size",
                   "randomization": "randomization", "arm": "arm", MASKS_FIELD: "masks"}
COMPATIBILITY_FIELDS = ("env", "env_version", *DATASET_OPTIONS)


def package_versions() -> dict[str, str]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


@dataclass
class EpisodeRecord:
    start: int  # first frame
    length: int
    seed: int  # the board's episode seed
    success: bool

    def as_list(self) -> list:
        return [self.start, self.length, self.seed, self.success]


class DemoDataset:
    """A demonstration dataset folder: open it (``open``), or create/append (``open_for_append``)."""

    def __init__(self, root: Path, meta: dict, storage: TensorDictBase | None, build_dir: Path | None = None):
        self.root, self.meta, self._storage, self._build_dir = root, meta, storage, build_dir
        self.episodes = [EpisodeRecord(*row) for row in meta["episodes"]]

    # -- reading ----------------------------------------------------------------------------------------------
    @classmethod
    def open(cls, root: str | Path) -> DemoDataset:
        """Opens a committed dataset, checking it is whole; raises DatasetError naming the culprit file."""
        root = Path(root)
        meta = _read_meta(root)
        storage = _open_storage(root, meta)
        return cls(root, meta, storage)

    @property
    def frames(self) -> int:
        return int(self.meta["frames"])

    @property
    def image_size(self) -> int:
        return int(self.meta["image_size"])

    @property
    def has_masks(self) -> bool:
        """Every frame has its segmentation mask (``keys.SEGMENTATION``)."""
        return bool(self.meta.get(MASKS_FIELD, False))

    @property
    def data(self) -> TensorDictBase:
        """The committed frames: a memmap-backed TensorDict view of shape [frames] (nothing read into RAM)."""
        return self._storage[: self.frames]

    def episode_seeds(self) -> set[int]:
        return {e.seed for e in self.episodes}

    def split(self, val_fraction: float) -> tuple[TensorDictBase, TensorDictBase]:
        """Train and validation frames, split by whole episodes: the last ``val_fraction`` of the episodes
        (at least one) validate. Episodes are in collection order, which is random in their boards, so a
        contiguous split is an unbiased one and both halves stay memmap views."""
        if not 0 < val_fraction < 1:
            raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
        if len(self.episodes) < 2:
            raise DatasetError(f"{self.root / META_FILE}: needs at least 2 episodes to split, has "
                               f"{len(self.episodes)}")
        n_val = max(1, round(len(self.episodes) * val_fraction))
        boundary = self.episodes[-n_val].start
        return self._storage[:boundary], self._storage[boundary : self.frames]

    # -- writing ----------------------------------------------------------------------------------------------
    @classmethod
    def open_for_append(cls, root: str | Path, info: dict) -> DemoDataset:
        """Opens ``root`` for appending, or prepares a new dataset there. ``info`` describes the data to add
        (env, env_version, image_size, difficulty, ...); a dataset whose demos differ in any of
        ``COMPATIBILITY_FIELDS`` (or were recorded with an edited arm file) is refused."""
        root = Path(root)
        remove_stale_build_dirs(root)
        if root.exists() and any(root.iterdir()):
            dataset = cls.open(root)
            _check_compatible(dataset.meta, info, root / META_FILE)
            recorded, new = dataset.meta.get(ARM_DIGEST), info.get(ARM_DIGEST)
            if recorded and new and recorded != new:  # the same arm file, edited since the dataset's demos
                raise DatasetError(f"{root / META_FILE}: arm {info.get('arm')} changed since the dataset's demos "
                                   f"({ARM_DIGEST} {recorded} recorded, {new} now); use another folder")
            dataset._remove_unreferenced_storage()
            preallocate(root / str(dataset.meta["storage"]))  # storage written before preallocation was sparse
            return dataset
        meta = {"format": FORMAT, "format_version": FORMAT_VERSION, **info, "frames": 0, "capacity": 0,
                "storage": None, "episodes": [], "runs": [], "packages": package_versions()}
        root.parent.mkdir(parents=True, exist_ok=True)
        build_dir = Path(tempfile.mkdtemp(prefix=f".{root.name}.", suffix=".tmp", dir=root.parent))
        build_dir.chmod(0o755)  # mkdtemp makes it private; the dataset is an ordinary folder
        return cls(root, meta, None, build_dir=build_dir)

    @property
    def _dir(self) -> Path:
        return self._build_dir or self.root

    def add_episodes(self, frames: TensorDictBase, episodes: list[EpisodeRecord]) -> None:
        """Writes whole episodes (their frames, contiguous, shape [N]) past the committed end. Not visible to
        readers until ``commit``. ``episodes`` give lengths, seeds and successes; starts are assigned here."""
        frames = frames.exclude(*EXCLUDED_KEYS)
        if self._storage is not None:
            # A dataset keeps the keys it was created with: frames of a newer env (a reward term added since, say)
            # append to it in its own layout.
            frames = frames.select(*self._storage.keys(True, True), strict=False)
        start = self.frames
        if start + frames.shape[0] > self.meta["capacity"]:
            self._grow(start + frames.shape[0], template=frames[0])
        self._storage[start : start + frames.shape[0]] = frames
        for episode in episodes:
            self.meta["episodes"].append([start, episode.length, episode.seed, bool(episode.success)])
            self.episodes.append(EpisodeRecord(start, episode.length, episode.seed, episode.success))
            start += episode.length
        self.meta["frames"] = start

    def commit(self, run: dict | None = None) -> None:
        """Makes everything added so far visible, atomically (and puts a new dataset in place)."""
        if run is not None:
            self.meta["runs"].append(run)
        self.meta["num_episodes"] = len(self.meta["episodes"])
        write_json(self._dir / META_FILE, self.meta)
        if self._build_dir is not None:
            self._build_dir.rename(self.root)
            self._build_dir = None
            self._storage = _open_storage(self.root, self.meta)
        self._remove_unreferenced_storage()

    def discard(self) -> None:
        """Drops a dataset that was never committed (its temporary folder)."""
        if self._build_dir is not None:
            shutil.rmtree(self._build_dir, ignore_errors=True)
            self._build_dir = None

    def _grow(self, needed: int, template: TensorDictBase) -> None:
        # Copy the committed frames into a bigger storage; meta.json switches to it on the next commit.
        capacity = max(1024, 2 * needed)
        version = 1 + max((int(p.name.split("-")[1]) for p in self._dir.glob("storage-*")), default=0)
        name = f"storage-{version:04d}"
        try:
            check_space(self._dir, capacity * _row_bytes(template))
            new = template.expand(capacity).memmap_like(prefix=self._dir / name)
            preallocate(self._dir / name)
        except NoSpaceLeft as err:
            shutil.rmtree(self._dir / name, ignore_errors=True)
            raise NoSpaceLeft(self.root, err.needed, err.errno) from None  # the dataset, not its build folder
        except BaseException:
            shutil.rmtree(self._dir / name, ignore_errors=True)
            raise
        if self.frames:
            new[: self.frames] = self._storage[: self.frames]
        self._storage, self.meta["storage"], self.meta["capacity"] = new, name, capacity

    def _remove_unreferenced_storage(self) -> None:
        # Storage folders that meta.json does not name are leftovers of an interrupted grow.
        for path in self._dir.glob("storage-*"):
            if path.name != self.meta["storage"]:
                shutil.rmtree(path, ignore_errors=True)


def _check_compatible(meta: dict, info: dict, meta_path: Path) -> None:
    """Refuses demos (``info``) that differ from the dataset (``meta``) in a field every demo shares, naming the
    field, both values and the collect-demos option that sets it."""
    before, after = compat.dataset_meta(meta), compat.dataset_meta(info)
    for field in COMPATIBILITY_FIELDS:
        if before.get(field) != after.get(field):
            option = DATASET_OPTIONS.get(field)
            flag = f" ({_as_option(option, after.get(field))})" if option else ""
            raise DatasetError(f"{meta_path}: dataset has {field}={before.get(field)!r}, the new demos have "
                               f"{field}={after.get(field)!r}{flag}; a dataset holds one {field}: use another "
                               "folder")


def _as_option(option: str, value) -> str:
    """The collect-demos option that sets ``option`` (a CollectConfig field) to ``value``, as typed."""
    flag = option_name(CollectConfig, option)
    if isinstance(value, bool):
        return flag if value else flag.replace("--", "--no-", 1)
    return f"{flag} {value}"


def read_meta(root: str | Path) -> dict | None:
    """The checked ``meta.json`` of the dataset at ``root``, or None where there is none yet (no folder, or an
    empty one); anything else there that is not a whole dataset raises DatasetError."""
    root = Path(root)
    if not root.is_dir() or not any(root.iterdir()):
        return None
    return _read_meta(root)


def _row_bytes(row: TensorDictBase) -> int:
    """The bytes one frame takes in the storage."""
    return sum(leaf.numel() * leaf.element_size() for leaf in row.values(include_nested=True, leaves_only=True))


def remove_stale_build_dirs(root: Path) -> None:
    """Removes the temporary build folders of ``root`` left by runs killed before their first commit
    (``.NAME.*.tmp`` beside it). One writer per dataset at a time, so none of them belongs to a live run."""
    if root.parent.is_dir():
        for path in root.parent.glob(f".{root.name}.*.tmp"):
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)


def _read_meta(root: Path) -> dict:
    meta_path = root / META_FILE
    if not root.is_dir():
        raise DatasetError(f"{root}: no such dataset folder")
    if not meta_path.is_file():
        what = "empty folder" if not any(root.iterdir()) else "not a demo dataset"
        raise DatasetError(f"{meta_path}: missing ({what}; create one with `robot-rl collect-demos`)")
    try:
        meta = json.loads(meta_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise DatasetError(f"{meta_path}: corrupt JSON ({err})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise DatasetError(f"{meta_path}: not a robot_rl demo dataset")
    if meta.get("format_version") != FORMAT_VERSION:
        raise DatasetError(f"{meta_path}: format version {meta.get('format_version')}, this robot_rl reads "
                           f"{FORMAT_VERSION}")
    missing = [f for f in ("frames", "capacity", "storage", "episodes", "image_size", "env") if f not in meta]
    if missing:
        raise DatasetError(f"{meta_path}: corrupt, missing fields {', '.join(missing)}")
    if meta["frames"] == 0 or not meta["episodes"]:
        raise DatasetError(f"{meta_path}: empty dataset (no episodes)")
    check_meta(meta, meta_path)
    return meta


def _open_storage(root: Path, meta: dict) -> TensorDictBase:
    """The storage ``meta.json`` names, memory-mapped once ``check_storage`` found it plain tensors."""
    storage_dir = root / str(meta["storage"])
    if not (storage_dir / META_FILE).is_file():
        raise DatasetError(f"{storage_dir / 'meta.json'}: missing (truncated dataset)")
    check_storage(root, storage_dir, meta["capacity"])
    try:
        # allow_pickle=False as well: tensordict itself refuses what the walk above might ever miss.
        storage = TensorDict.load_memmap(storage_dir, allow_pickle=False)
    except Exception as err:  # noqa: BLE001 - tensordict raises many kinds on damaged memmaps
        raise DatasetError(f"{storage_dir}: corrupt storage ({type(err).__name__}: {err})") from None
    for key in REQUIRED_KEYS:
        if key not in storage.keys(include_nested=True):
            raise DatasetError(f"{storage_dir}: corrupt storage, no {key!r} entry")
    if storage.shape[0] < meta["frames"]:
        raise DatasetError(f"{storage_dir}: truncated, {storage.shape[0]} rows for {meta['frames']} frames")
    if storage[keys.PIXELS].shape[-2] != meta["image_size"]:
        raise DatasetError(f"{storage_dir}: pixels are {storage[keys.PIXELS].shape[-2]} wide, meta.json says "
                           f"{meta['image_size']}")
    if meta.get(MASKS_FIELD, False):
        masks = storage.get(keys.SEGMENTATION, None)
        expected = (storage.shape[0], meta["image_size"], meta["image_size"])
        if masks is None or tuple(masks.shape) != expected or masks.dtype != torch.uint8:
            found = "no entry" if masks is None else f"{masks.dtype} {list(masks.shape)}"
            raise DatasetError(f"{storage_dir}: meta.json says every frame has a segmentation mask, the storage has "
                               f"{found} (uint8 {list(expected)} expected)")
    return storage
