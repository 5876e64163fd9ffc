"""A run's files on disk: checkpoints (``torch.save`` of a dict of plain tensors and containers, read back with
``weights_only``, so loading one runs no code), the RNG states they carry, the resolved config, and which
checkpoint a run folder stands for. The run's lifecycle is ``robot_rl.run_folder``; its logs, ``robot_rl.run_logs``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import random
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from robot_rl import compat

# A DAgger run folder holds one BC run folder per round under DAGGER_ROUNDS (robot_rl.pretrain.dagger).
from robot_rl.artefact_files import CHECKPOINTS as CHECKPOINT_DIR
from robot_rl.artefact_files import RUN_CONFIG as CONFIG_FILE  # noqa: F401 - re-exported beside load_config
from robot_rl.artefact_files import RUN_SUMMARY, dagger_round, dagger_round_folders
from robot_rl.configs import CHECKPOINT_KINDS
from robot_rl.envs.errors import file_problem
from robot_rl.errors import NoSpaceLeft, UsageError
from robot_rl.io import atomic_path, check_space, read_json_object, write_json


# -- checkpoints ------------------------------------------------------------------------------------------------
def rng_state() -> dict:
    """States of Python's, NumPy's and torch's (CPU and CUDA) global generators, as torch.save-able values."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {
        "python": random.getstate(),
        "numpy": (kind, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, cached),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    """Restores what ``rng_state`` captured."""
    random.setstate(state["python"])
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(path: str | Path, payload: dict) -> None:
    """Writes ``payload`` with torch.save to a temporary file, then renames it over ``path``. A disk without room
    for it raises NoSpaceLeft (``path`` unchanged)."""
    folder, needed = Path(path).parent, _tensor_bytes(payload)
    check_space(folder, needed)
    try:
        with atomic_path(path) as tmp:
            torch.save(payload, tmp)
    except RuntimeError:
        # torch's writer reports a failed write as a RuntimeError that names no cause; a disk that filled up
        # while it wrote has about the checkpoint's size free again once the temporary file is gone.
        if shutil.disk_usage(folder).free < needed + (needed >> 4) + 2**20:
            raise NoSpaceLeft(folder, needed) from None
        raise


def link_checkpoint(source: str | Path, target: str | Path) -> None:
    """Makes ``target`` a second name of the checkpoint file ``source`` (a hard link, renamed into place), so
    two checkpoints with the same contents take the room of one; a copy where the filesystem has no hard links.
    Safe because every checkpoint write renames a new file into place: writing ``source`` again later leaves
    ``target`` holding what it held."""
    with atomic_path(target) as tmp:
        tmp.unlink()
        try:
            os.link(source, tmp)
        except OSError:
            shutil.copyfile(source, tmp)


def _tensor_bytes(value: Any) -> int:
    """The bytes of the tensors in a nested checkpoint payload (what torch.save writes, give or take headers)."""
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, Mapping):
        return sum(_tensor_bytes(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_tensor_bytes(v) for v in value)
    return 0


def read_tensor_file(path: str | Path, what: str = "checkpoint", error: type[UsageError] = UsageError,
                     map_location: str | torch.device = "cpu") -> Any:
    """What ``torch.save`` wrote at ``path``, read with torch's ``weights_only`` (plain tensors and containers: no
    code runs). Whatever goes wrong while reading it (missing, not a regular file, pickled objects, not torch's
    zip format, truncated, corrupt) is a one-line ``error`` naming the file and calling it ``what``."""
    path = Path(path)
    problem = file_problem(path, follow_symlinks=True)
    if problem:
        raise error(f"{path}: no such {what}" if problem == "no such file" else f"{path}: not a {what}: {problem}")
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        # torch's own message suggests weights_only=False, i.e. running the file's code: never here. It raises this
        # error for a pickled object (an "Unsupported global") and for bytes that are no pickle at all alike.
        detail = str(err).partition("WeightsUnpickler error:")[2].strip()
        if not detail or detail.startswith("Unsupported global"):
            raise error(f"{path}: not a plain {what} (refusing pickled objects)") from None
        raise error(f"{path}: unreadable {what} (UnpicklingError: {detail.splitlines()[0][:200]})") from None
    except Exception as err:  # noqa: BLE001 - a corrupt file fails anywhere in torch's reader, with any type
        reason = err.strerror if isinstance(err, OSError) and err.strerror else (str(err).strip().splitlines()
                                                                                 or [""])[0]
        raise error(f"{path}: unreadable {what} ({type(err).__name__}: {reason[:200]})") from None


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict:
    """Loads a checkpoint (plain tensors and containers only: ``read_tensor_file``); a missing or unreadable
    file, one holding pickled objects or anything but a dict is a one-line UsageError naming it."""
    state = read_tensor_file(path, "checkpoint", map_location=map_location)
    if not isinstance(state, dict):
        raise UsageError(f"{path}: not a robot_rl checkpoint (it holds a {type(state).__name__}, not a dict)")
    return state


def policy_checkpoint(source: str | Path, kind: str = "last") -> Path:
    """The one rule for which checkpoint a run folder means, wherever a policy is read (``evaluate``, ``export``,
    ``pretrain``/``dagger``/``finetune --policy``, the pipeline): ``kind`` "last" (the default) is
    ``checkpoints/last.pt``, the policy the run ended with, which the project reports; "best" is ``best.pt``, the
    policy of its best held-out check (``last.pt`` while the run has none). A DAgger run folder means the run
    folder of the round it ended with (``dagger_policy_run``); a file means itself, whatever ``kind``."""
    if kind not in CHECKPOINT_KINDS:
        raise UsageError(f"--checkpoint-kind must be one of {', '.join(CHECKPOINT_KINDS)}, got {kind!r}")
    path = Path(source)
    if path.is_dir() and not (path / CHECKPOINT_DIR).is_dir():
        path = dagger_policy_run(path)
    if path.is_dir():
        folder = path / CHECKPOINT_DIR
        path = folder / "best.pt" if kind == "best" and (folder / "best.pt").is_file() else folder / "last.pt"
    return path


def dagger_policy_run(run_dir: Path) -> Path:
    """The BC run folder a DAgger run folder means: once finished, the round its summary names (``final_round``:
    a stop rule may end the run on an earlier round with a better check; 0 is the init run it started from), else
    its last round so far (the folder itself while it has none)."""
    summary = run_dir / RUN_SUMMARY
    final = read_json_object(summary).get("final_round") if summary.is_file() else None
    if final == 0:
        return Path(read_json_object(run_dir / CONFIG_FILE)["init"])
    if isinstance(final, int) and final > 0:
        return dagger_round(run_dir, final)
    rounds = [path for path in dagger_round_folders(run_dir) if (path / CHECKPOINT_DIR).is_dir()]
    return rounds[-1] if rounds else run_dir


def describe_policy(source: str | Path, kind: str = "last") -> str:
    """One line saying which checkpoint ``source`` means under ``policy_checkpoint``'s rule, for commands to print."""
    path = policy_checkpoint(source, kind)
    if not Path(source).is_dir():
        return f"policy: {path}"
    if path.name == "best.pt":
        return f"policy: {path} (--checkpoint-kind best: the run's best held-out check)"
    why = "the run has no best.pt yet" if kind == "best" else "--checkpoint-kind best takes best.pt"
    return f"policy: {path} (the policy the run ended with; {why})"


def run_folder_of(checkpoint: str | Path) -> Path:
    """The run folder a checkpoint file belongs to (its parent, for a file outside ``checkpoints/``)."""
    checkpoint = Path(checkpoint)
    return checkpoint.parent.parent if checkpoint.parent.name == CHECKPOINT_DIR else checkpoint.parent


# -- config ----------------------------------------------------------------------------------------------------
def save_config(path: str | Path, config: Any) -> None:
    write_json(path, dataclasses.asdict(config))


def load_config(path: str | Path, config_cls: type) -> Any:
    """The config stored at ``path``; an option the file predates takes the behaviour of that time, a renamed one
    is read under its new name (``robot_rl.compat.run_config``), the rest of the class's defaults fill in."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"{path}: missing (not a run folder of this command?)")
    try:
        stored = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise UsageError(f"{path}: corrupt config ({err})") from None
    # Every run's config has named its folder since the first version: one without is not a run's config (and
    # the class's defaults must not stand in for a whole run).
    if not isinstance(stored, dict) or "run_dir" not in stored:
        raise UsageError(f"{path}: not a run's config (a JSON object with the run's options, run_dir among them)")
    try:
        return config_cls(**compat.run_config(config_cls, stored))
    except (TypeError, ValueError) as err:
        raise UsageError(f"{path}: corrupt config ({err})") from None
