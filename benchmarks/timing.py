"""Shared by the benchmark scripts: what a measurement ran on, the median-of-repeats timing loop, env steps/s.

The scripts run as ``python benchmarks/NAME.py``, which puts this folder on ``sys.path``: ``from timing import ...``.
"""

from __future__ import annotations

import datetime
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def describe_machine() -> dict:
    """CPU model and count, memory, GPU (if any) and library versions."""
    info = {
        "cpu": cpu_model(),
        "logical_cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }
    try:
        pages, page_size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        info["memory_gib"] = round(pages * page_size / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        pass
    return info


def provenance() -> dict:
    """When, from which commit and with which command line a results file was made."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True,
                                cwd=Path(__file__).parent).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, cwd=Path(__file__).parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit, dirty = None, ""
    return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "commit": commit, "uncommitted_changes": bool(dirty), "argv": sys.argv}


def median_rate(run: Callable[[], int], repeats: int) -> float:
    """The median over ``repeats`` calls of items per second, where ``run()`` does the work and returns how many
    items (steps, frames) it handled. Warm up before calling: the first call is timed like the others."""
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        count = run()
        rates.append(count / (time.perf_counter() - start))
    return statistics.median(rates)


def rollout_steps_per_s(envs: dict, policy, steps: int, repeats: int, median=statistics.median) -> dict:
    """Env steps per second of each of ``envs`` (name -> TorchRL env; every batched env's step counted): the
    ``median`` over ``repeats`` rollouts of ``steps`` steps with ``policy`` (None: random actions), timed in
    alternation across the envs (A, B, A, B, ...) so that the machine's drift falls on all alike, after a 5-step
    warm-up; closes the envs."""
    for env in envs.values():
        env.rollout(5, policy=policy, break_when_any_done=False)  # warm-up: renderer, caches
    rates: dict = {name: [] for name in envs}
    for _ in range(repeats):
        for name, env in envs.items():
            rates[name].append(median_rate(lambda e=env: e.rollout(steps, policy=policy,
                                                                 break_when_any_done=False).numel(), 1))
    for env in envs.values():
        env.close()
    return {name: median(values) for name, values in rates.items()}
