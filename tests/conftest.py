"""Shared fixtures. Tests use small budgets; long runs live in benchmarks/ and `make test-slow`."""

from __future__ import annotations

import numpy as np
import pytest
import torch

# Two CPU threads, like CI: keeps timings and thread contention representative.
torch.set_num_threads(2)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)
