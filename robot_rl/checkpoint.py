"""Checkpoints written atomically, with every random-number generator's state for exact resumption."""

from __future__ import annotations

import pickle
import random
import zipfile
from pathlib import Path

import numpy as np
import torch

from robot_rl.errors import UsageError
from robot_rl.io import atomic_path


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
    """Writes ``payload`` with torch.save to a temporary file, then renames it over ``path``."""
    with atomic_path(path) as tmp:
        torch.save(payload, tmp)


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict:
    """Loads a checkpoint; a missing or unreadable file is a UsageError naming it."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"{path}: no such checkpoint")
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except (RuntimeError, EOFError, pickle.UnpicklingError, zipfile.BadZipFile, OSError) as err:
        raise UsageError(f"{path}: unreadable checkpoint ({type(err).__name__}: {err})") from None
