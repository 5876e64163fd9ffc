"""A run's compute context, resolved once from the machine and the options: where the learner runs, in which
precision, with how many threads, and how collection spreads over worker processes.

Every training run (``robot_rl.training_run.TrainingRun``) and evaluation resolves one ``ComputeContext`` before
it builds anything, applies it to its process, and records it in its summary. The rules live here and nowhere else:

- ``device`` ``auto``: this rank's GPU (``LOCAL_RANK`` under ``torchrun``) when CUDA is available, else the CPU;
  ``cuda`` under ``torchrun`` means this rank's GPU too.
- ``precision`` ``auto``: ``robot_rl.precision``'s rule for that device.
- torch threads: the learner process runs torch's default (which honours ``OMP_NUM_THREADS``, set to 1 per rank
  by ``torchrun``) unless told (``--threads``); while env workers run beside it on this machine it keeps the
  threads they leave (``collection_threads``: one fewer per local worker, at least one), and each worker runs one
  torch thread. That is TorchRL's own split, made explicit so that no process oversubscribes the cores; it starts
  when the collector starts its workers, so what a run does before (BC's batch-norm calibration, building the
  models) keeps every thread. Workers of a Ray cluster (``--ray-address``) run elsewhere and take no thread here.

``Machine`` is what the sizing reads (cores, GPUs); tests pass one to size a GPU box on a CPU-only machine.
"""

from __future__ import annotations

import os
import platform
from dataclasses import asdict, dataclass
from typing import Any

import torch

from robot_rl.options import resolve_device
from robot_rl.precision import cpu_flags, resolve_precision

# Envs each worker process steps when a preset is sized for a GPU box: enough to hide a worker's per-step
# synchronisation behind its own envs, few enough that the policy's batch arrives often.
ENVS_PER_WORKER_ON_GPU = 4
# Cores a GPU run keeps for the learner process (the policy forward, transfers, TorchRL's collector).
LEARNER_CORES_ON_GPU = 2
# The most env workers a preset is sized to: the largest layout benchmarks/gpu_benchmark.py measures (1-16); a
# bigger box keeps its other cores rather than run a layout nobody has timed.
MAX_WORKERS_ON_GPU = 16


@dataclass(frozen=True)
class Machine:
    """What sizing reads from the machine: usable CPU cores and visible CUDA devices."""

    cores: int
    gpus: int

    @classmethod
    def here(cls) -> Machine:
        """This process's machine: the cores it may run on (its affinity, capped by a cgroup's CPU quota, as a
        container's limit), the GPUs CUDA shows it."""
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        quota = _cgroup_cpu_quota()
        return cls(cores=max(1, min(cores, quota)) if quota else cores,
                   gpus=torch.cuda.device_count() if torch.cuda.is_available() else 0)


@dataclass(frozen=True)
class ComputeContext:
    """One run's compute, resolved (no ``auto`` left): see the module docstring for the rules."""

    device: str  # torch device string of the learner: "cpu", "cuda:0"
    precision: str  # of the image encoder: "fp32" or "bf16"
    threads: int  # torch intra-op threads of this (the learner's) process
    collection_threads: int  # this process's threads while its local env workers run (TorchRL sets them)
    workers: int  # env worker processes (0: the envs step in this process)
    envs_per_worker: int  # envs each worker steps (all of them when there is no worker)
    worker_threads: int  # torch threads of each worker process
    worker_device: str  # where the collection policy runs: the learner's device, or the workers' own copies'
    worker_precision: str  # the collection policy's encoder precision on ``worker_device``
    compile: bool  # torch.compile the encoder
    cores: int
    gpus: int

    @property
    def torch_device(self) -> torch.device:
        return torch.device(self.device)

    def apply(self) -> None:
        """Sets this process's torch threads (a no-op when they already match)."""
        if torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)

    def record(self) -> dict[str, Any]:
        """What a run summary or results file records: the context, and the processor and GPU it ran on."""
        gpu = torch.cuda.get_device_name(self.torch_device) if self.torch_device.type == "cuda" else None
        return {**asdict(self), "gpu": gpu, "cpu": cpu_model(), "cpu_bf16": sorted(
            cpu_flags() & {"avx512_bf16", "amx_bf16", "bf16"}), "machine": platform.machine()}


def resolve(device: str = "auto", precision: str = "auto", threads: int = 0, compile: bool = False,
            workers: int = 0, num_envs: int = 1, worker_device: str | None = None, remote_workers: bool = False,
            machine: Machine | None = None) -> ComputeContext:
    """The context of these options on ``machine`` (default: this one); raises ``UsageError`` for a device this
    machine lacks. ``worker_device``: where worker processes run their own policy copies (None: the collection
    policy runs in this process, on the learner's device); ``remote_workers``: they run on other machines."""
    machine = machine or Machine.here()
    torch_device = _device(device)
    policy_device = torch_device if worker_device is None else resolve_device(worker_device)
    threads = threads or torch.get_num_threads()
    local_workers = 0 if remote_workers else workers
    return ComputeContext(
        device=str(torch_device), precision=resolve_precision(precision, torch_device), threads=threads,
        collection_threads=max(1, threads - local_workers),
        workers=workers, envs_per_worker=max(num_envs // max(workers, 1), 1), worker_threads=1,
        worker_device=str(policy_device), worker_precision=resolve_precision(precision, policy_device),
        compile=compile, cores=machine.cores, gpus=machine.gpus)


def of_config(config: Any, machine: Machine | None = None) -> ComputeContext:
    """The context of a command's config: its ``device``, ``precision`` and, where it has them, ``threads``,
    ``compile``, ``workers``, ``num_envs`` and (with a ``process`` or ``ray`` collector) ``worker_device``."""
    collector = getattr(config, "collector", "direct")
    return resolve(config.device, config.precision, threads=getattr(config, "threads", 0),
                   compile=getattr(config, "compile", False), workers=getattr(config, "workers", 0),
                   num_envs=getattr(config, "num_envs", 1) or 1,
                   worker_device=config.worker_device if collector != "direct" else None,
                   remote_workers=collector == "ray" and bool(config.ray_address), machine=machine)


def collection_layout(frames_per_batch: int, num_envs: int, workers: int, device: str,
                      machine: Machine) -> tuple[int, int, int]:
    """(workers, num_envs, frames_per_batch) of a preset's fine-tuning on ``machine`` with the learner on
    ``device``. On a GPU the envs step in ``cores - LEARNER_CORES_ON_GPU`` worker processes (at most
    ``MAX_WORKERS_ON_GPU``), each stepping ``ENVS_PER_WORKER_ON_GPU``, and each env still collects as many steps
    per batch as the preset's recipe (the batch grows with the envs: a shorter segment per env would cut episodes
    at every batch). On a CPU the preset stays as it is."""
    if not device.startswith("cuda") or machine.cores <= LEARNER_CORES_ON_GPU:
        return workers, num_envs, frames_per_batch
    steps_per_env = frames_per_batch // num_envs
    gpu_workers = min(machine.cores - LEARNER_CORES_ON_GPU, MAX_WORKERS_ON_GPU)
    gpu_envs = gpu_workers * ENVS_PER_WORKER_ON_GPU
    return gpu_workers, gpu_envs, gpu_envs * steps_per_env


def _device(name: str) -> torch.device:
    """``name`` resolved: ``auto`` and, under ``torchrun``, ``cuda`` mean this rank's GPU."""
    local_rank = os.environ.get("LOCAL_RANK")
    if name in ("auto", "cuda") and local_rank is not None and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        if torch.cuda.is_available():
            return torch.device("cuda", int(local_rank))
        return resolve_device("cpu" if name == "auto" else name)
    device = resolve_device(name)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return device


def _cgroup_cpu_quota() -> int:
    """The CPUs a cgroup v2 quota (``cpu.max``) grants this process, rounded up; 0 when there is none."""
    try:
        quota, period = open("/sys/fs/cgroup/cpu.max").read().split()[:2]
    except (OSError, ValueError):
        return 0
    if quota == "max" or not quota.isdigit() or not period.isdigit() or int(period) == 0:
        return 0
    return -(-int(quota) // int(period))


def cpu_model() -> str:
    """The CPU's model name as the kernel reports it (the platform's processor string elsewhere)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"
