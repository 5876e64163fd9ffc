"""Shared fixtures. Tests use small budgets; long runs live in benchmarks/ and `make test-slow`."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

from robot_rl.configs import CollectConfig
from robot_rl.pretrain.collect import collect_demos
from robot_rl.stop import clear_stop_request

# Two CPU threads, like CI: keeps timings and thread contention representative.
torch.set_num_threads(2)


@pytest.fixture(autouse=True)
def no_stop_request():
    """Each test starts as a new process would: no Ctrl-C or SIGTERM asked for yet (the request is the
    process's, ``robot_rl.stop``)."""
    clear_stop_request()
    yield
    clear_stop_request()


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


IMAGE_SIZE = 64


def collect(out, episodes: int, image_size: int = IMAGE_SIZE, **overrides) -> dict:
    config = CollectConfig(out=str(out), episodes=episodes, difficulty="easy", image_size=image_size, num_envs=1,
                           episodes_per_commit=4, **overrides)
    return collect_demos(config, progress=False)


@pytest.fixture(scope="session")
def demos_dir(tmp_path_factory):
    """A 12-episode dataset; tests copy it before changing it."""
    root = tmp_path_factory.mktemp("demos") / "demos"
    collect(root, episodes=12)
    return root


@pytest.fixture
def demos_copy(demos_dir, tmp_path):
    target = tmp_path / "demos"
    shutil.copytree(demos_dir, target)
    return target


@pytest.fixture(scope="session")
def bc_run_dir(demos_dir, tmp_path_factory):
    """A behaviour-cloning run folder trained for a few steps on ``demos_dir`` (for fine-tuning tests)."""
    from robot_rl.configs import BCConfig
    from robot_rl.pretrain import bc

    run_dir = tmp_path_factory.mktemp("bc") / "run"
    bc.pretrain(BCConfig(data=str(demos_dir), run_dir=str(run_dir), epochs=1, batch_size=8, steps_per_epoch=2,
                         eval_episodes=1, eval_envs=1, hidden=32, threads=2), progress=False)
    return run_dir
