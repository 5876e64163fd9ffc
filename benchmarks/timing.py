"""Shared by the benchmark scripts: what a measurement ran on, the median-of-repeats timing loop, env steps/s, and
exclusive seconds per labelled section of a profiled run (``SectionTimer``). The scripts run as ``python
benchmarks/NAME.py``, which puts this folder on ``sys.path``: ``from timing import ...``.
"""

from __future__ import annotations

import datetime
import os
import platform
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import torch

from robot_rl.compute import cpu_model


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


def synchronize(device: torch.device) -> None:
    """Waits for the work queued on ``device`` (nothing to wait for on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class SectionTimer:
    """Exclusive seconds per labelled section: time spent in a section nested inside another counts for the inner
    one only. On a GPU every section boundary synchronizes, so GPU work counts where it was queued."""

    def __init__(self, device: torch.device):
        self.device, self.seconds = device, defaultdict(float)
        self._stack: list[list] = []  # [label, when its current stretch began]
        self._restore: list = []

    @contextmanager
    def section(self, label: str):
        synchronize(self.device)
        now = time.perf_counter()
        if self._stack:
            self.seconds[self._stack[-1][0]] += now - self._stack[-1][1]
        self._stack.append([label, now])
        try:
            yield
        finally:
            synchronize(self.device)
            end = time.perf_counter()
            self.seconds[label] += end - self._stack.pop()[1]
            if self._stack:
                self._stack[-1][1] = end

    def wrap(self, owner, name: str, label: str, within: str | None = None) -> None:
        """Times ``owner.name`` as ``label``, only inside section ``within`` when given, until ``unwrap``.
        ``owner`` is an instance (that object's calls) or a class (every instance's calls of a plain method: the
        wrapper passes ``self`` on; not for a static or class method)."""
        original, own = getattr(owner, name), name in vars(owner)

        def timed_call(*args, **kwargs):
            if within is not None and not any(entry[0] == within for entry in self._stack):
                return original(*args, **kwargs)
            with self.section(label):
                return original(*args, **kwargs)

        self._restore.append((owner, name, vars(owner).get(name) if own else None, own))
        setattr(owner, name, timed_call)

    def unwrap(self) -> None:
        for owner, name, original, own in reversed(self._restore):
            if own:
                setattr(owner, name, original)
            else:
                delattr(owner, name)
        self._restore.clear()
