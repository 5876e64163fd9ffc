"""What a demo dataset folder must be before anything in it is read: its ``meta.json`` bounded and consistent, and
its storage plain data.

A dataset is data: opening one never runs code and never reads outside its folder. TensorDict's memmap format
can hold pickled objects (non-tensor entries, tensorclasses), and unpickling runs code; so the storage folder is
walked first and holds only what robot_rl writes: folders, ``meta.json`` files naming tensor leaves and nested
TensorDicts, and ``.memmap`` files, no symlinks, no other names. Every count in ``meta.json`` is bounded and
cross-checked before anything is allocated. Any violation is a ``DatasetError`` of one line naming the file.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import torch

from robot_rl.artefact_files import DATASET_META as META_FILE
from robot_rl.errors import UsageError

IMAGE_SIZES = (32, 224)  # the wrist camera image sides robot_rl records (robot_rl.configs.IMAGE_SIZES)
MAX_FRAMES = 2**40  # far beyond any dataset, small enough that a count never overflows a size computation
STORAGE_NAME = re.compile(r"storage-\d{4,}")
ENTRY_NAME = re.compile(r"[A-Za-z0-9_]+")  # the TensorDict keys robot_rl writes: plain file names
TENSORDICT_TYPE = "<class 'tensordict._td.TensorDict'>"
# The leaf dtypes a TensorDict memmap may name (looked up here, never as an attribute of torch).
DTYPES = {f"torch.{name}": getattr(torch, name) for name in (
    "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64")}
_LEAF_FIELDS = {"device", "shape", "dtype", "is_nested"}
_FOLDER_FIELDS = {"shape", "device", "_type"}


class DatasetError(UsageError):
    """A dataset folder that is missing, empty, truncated, corrupt or incompatible (message names the file)."""


def is_count(value, low: int = 0, high: int = MAX_FRAMES) -> bool:
    """Whether ``value`` is an int (not a bool) in [low, high]."""
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def check_meta(meta: dict, meta_path: Path) -> None:
    """Bounds and cross-checks every count of a dataset's ``meta.json``: episodes contiguous from frame 0, each at
    least one frame long, their lengths summing to ``frames``, ``frames <= capacity``, ``num_episodes`` and the
    runs consistent, ``image_size`` in 32-224, names plain. Raises DatasetError naming the file and the field."""
    def refuse(field: str, rule: str) -> None:
        raise DatasetError(f"{meta_path}: corrupt, {field} {rule}")

    for field in ("frames", "capacity"):
        if not is_count(meta[field]):
            refuse(field, f"must be an integer in [0, 2^40], got {meta[field]!r}")
    if meta["capacity"] < meta["frames"]:
        refuse("capacity", f"{meta['capacity']} is less than the {meta['frames']} frames")
    if not is_count(meta["image_size"], *IMAGE_SIZES):
        refuse("image_size", f"must be an integer in [{IMAGE_SIZES[0]}, {IMAGE_SIZES[1]}], got {meta['image_size']!r}")
    if not isinstance(meta["storage"], str) or not STORAGE_NAME.fullmatch(meta["storage"]):
        refuse("storage", f"must name a storage-NNNN folder inside the dataset, got {meta['storage']!r}")
    for field in ("env", "arm", "difficulty", "randomization"):
        if field in meta and not isinstance(meta[field], str):
            refuse(field, f"must be a string, got {meta[field]!r}")
    if "segmentation" in meta and not isinstance(meta["segmentation"], bool):
        refuse("segmentation", f"must be true or false, got {meta['segmentation']!r}")
    if "env_version" in meta and not is_count(meta["env_version"], 0, 2**31):
        refuse("env_version", f"must be a non-negative integer, got {meta['env_version']!r}")
    _check_episodes(meta, refuse)
    _check_runs(meta, refuse)


def _check_episodes(meta: dict, refuse) -> None:
    episodes = meta["episodes"]
    if not isinstance(episodes, list):
        refuse("episodes", "must be a list of [start, length, seed, success]")
    start = 0
    for index, row in enumerate(episodes):
        if not (isinstance(row, list) and len(row) == 4):
            refuse(f"episodes[{index}]", f"must be [start, length, seed, success], got {row!r}")
        first, length, seed, success = row
        if first != start or not is_count(first):
            refuse(f"episodes[{index}]", f"starts at {first!r}; episodes are contiguous, this one starts at {start}")
        if not is_count(length, 1):
            refuse(f"episodes[{index}]", f"has length {length!r}; a length is an integer >= 1")
        if not is_count(seed, -2**63, 2**63 - 1):
            refuse(f"episodes[{index}]", f"has seed {seed!r}; a seed is an integer")
        if not isinstance(success, bool):
            refuse(f"episodes[{index}]", f"has success {success!r}; true or false")
        start += length
    if start != meta["frames"]:
        refuse("episodes", f"lengths add up to {start}, not to the {meta['frames']} frames (do not add up)")
    if "num_episodes" in meta and meta["num_episodes"] != len(episodes):
        refuse("num_episodes", f"is {meta['num_episodes']!r}, the table lists {len(episodes)} episodes")


def _check_runs(meta: dict, refuse) -> None:
    runs = meta.get("runs", [])
    if not isinstance(runs, list):
        refuse("runs", "must be a list")
    for index, run in enumerate(runs):
        if not isinstance(run, dict):
            refuse(f"runs[{index}]", "must be an object")
        for field, low in (("seed", 0), ("target_episodes", 1), ("episodes", 0)):
            if not is_count(run.get(field), low):
                refuse(f"runs[{index}].{field}", f"must be an integer >= {low}, got {run.get(field)!r}")
        if not isinstance(run.get("complete"), bool):
            refuse(f"runs[{index}].complete", f"must be true or false, got {run.get('complete')!r}")
        # A resumed collection runs with its run's pose noise.
        noise = run.get("pose_noise", 0.0)
        if isinstance(noise, bool) or not isinstance(noise, (int, float)) or not 0 <= noise < math.inf:
            refuse(f"runs[{index}].pose_noise", f"must be a finite number >= 0, got {noise!r}")
        if is_count(run.get("episodes")) and is_count(run.get("target_episodes")) and \
                run["episodes"] > run["target_episodes"]:
            refuse(f"runs[{index}].episodes", f"{run['episodes']} exceed its target_episodes {run['target_episodes']}")


def check_storage(root: Path, storage_dir: Path, capacity: int) -> None:
    """Refuses a storage folder that is anything but plain tensors: a symlink, a file other than ``meta.json`` and
    ``*.memmap`` (a pickle sidecar), a ``meta.json`` entry that is not a tensor leaf or nested TensorDict, a name
    that is not plain, a leaf whose first dimension is not ``capacity`` or whose file is shorter than its shape.
    Nothing is unpickled, imported or allocated."""
    for path in (root / META_FILE, storage_dir):
        if path.is_symlink():
            raise DatasetError(f"{path}: a symlink; a dataset holds its own files")
    for folder, subfolders, files in os.walk(storage_dir):
        folder = Path(folder)
        for name in subfolders + files:
            path = folder / name
            if path.is_symlink():
                raise DatasetError(f"{path}: a symlink; a dataset holds its own files")
            if name in files and name != META_FILE and not name.endswith(".memmap"):
                raise DatasetError(f"{path}: not a tensor file (refusing pickles and other files in a dataset)")
    _check_folder(storage_dir, capacity)


def _check_folder(folder: Path, capacity: int) -> None:
    meta_path = folder / META_FILE
    try:
        entries = json.loads(meta_path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DatasetError(f"{meta_path}: unreadable ({type(err).__name__}: {str(err).splitlines()[0]})") from None
    kind = entries.get("_type") if isinstance(entries, dict) else type(entries).__name__
    if kind != TENSORDICT_TYPE:
        raise DatasetError(f"{meta_path}: not a plain TensorDict (type {kind!r}; refusing pickled and non-tensor data)")
    if entries.get("shape") != [capacity]:
        raise DatasetError(f"{meta_path}: batch shape {entries.get('shape')!r}, meta.json's capacity is {capacity}")
    for name, entry in entries.items():
        if name in _FOLDER_FIELDS:
            continue
        if not ENTRY_NAME.fullmatch(name) or not isinstance(entry, dict):
            raise DatasetError(f"{meta_path}: entry {name!r} is not a plain tensor entry")
        if entry == {"type": "TensorDict"}:
            if not (folder / name).is_dir():
                raise DatasetError(f"{folder / name}: missing (named in {meta_path})")
            _check_folder(folder / name, capacity)
        elif entry.get("type") is not None or not set(entry) <= _LEAF_FIELDS or entry.get("is_nested", False):
            raise DatasetError(f"{meta_path}: entry {name!r} is not a tensor or TensorDict (type "
                               f"{entry.get('type')!r}; refusing pickled and non-tensor data)")
        else:
            _check_leaf(folder, name, entry, capacity)


def _check_leaf(folder: Path, name: str, entry: dict, capacity: int) -> None:
    # Loading a memmap silently extends a short file with zeros, so sizes are checked against the shape first.
    meta_path, path = folder / META_FILE, folder / f"{name}.memmap"
    shape, dtype = entry.get("shape"), DTYPES.get(entry.get("dtype"))
    if dtype is None:
        raise DatasetError(f"{meta_path}: unknown dtype {entry.get('dtype')!r} for {name}")
    if not (isinstance(shape, list) and shape and all(is_count(n) for n in shape) and shape[0] == capacity):
        raise DatasetError(f"{meta_path}: entry {name!r} has shape {shape!r}; [capacity, ...] of integers expected")
    expected = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    size = path.stat().st_size if path.is_file() else -1
    if size < expected:
        raise DatasetError(f"{path}: truncated ({size} of {expected} bytes)" if size >= 0 else f"{path}: missing")
