"""The compute context: one resolution of device, precision, threads and the worker layout, and the presets it
sizes for a machine (a GPU box is described, not needed)."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest
import torch

from robot_rl import compute
from robot_rl.configs import FinetuneConfig
from robot_rl.errors import UsageError
from robot_rl.pipeline import PRESETS, sized_for

TWO_CORES, GPU_BOX = compute.Machine(cores=2, gpus=0), compute.Machine(cores=16, gpus=1)


def test_a_run_without_workers_keeps_torch_threads_and_runs_its_policy_on_the_learner():
    context = compute.resolve("cpu", "fp32", machine=TWO_CORES)
    assert (context.device, context.precision, context.threads) == ("cpu", "fp32", torch.get_num_threads())
    assert (context.workers, context.worker_device, context.worker_precision) == (0, "cpu", "fp32")


def test_workers_leave_the_learner_the_cores_they_do_not_use_and_run_one_thread_each():
    context = compute.resolve("cpu", "fp32", workers=14, num_envs=56, machine=GPU_BOX)
    assert (context.threads, context.worker_threads, context.envs_per_worker, context.num_envs) == (2, 1, 4, 56)
    assert compute.resolve("cpu", "fp32", workers=16, num_envs=16, machine=TWO_CORES).threads == 1  # at least one
    assert compute.resolve("cpu", "fp32", threads=3, workers=14, machine=GPU_BOX).threads == 3  # asked for


def test_the_context_of_a_config_follows_its_collector():
    direct = compute.of_config(FinetuneConfig(from_scratch=True, device="cpu", precision="bf16", num_envs=8, workers=2))
    assert (direct.worker_device, direct.worker_precision, direct.envs_per_worker) == ("cpu", "bf16", 4)
    process = compute.of_config(FinetuneConfig(from_scratch=True, device="cpu", collector="process", workers=2,
                                               worker_device="cpu"))
    assert process.worker_device == "cpu" and process.worker_precision in ("fp32", "bf16")


def test_a_device_this_machine_lacks_is_refused_in_one_line(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(UsageError, match="--device cuda: CUDA is not available"):
        compute.resolve("cuda", machine=TWO_CORES)
    assert compute.resolve("auto", machine=TWO_CORES).device == "cpu"


def test_under_torchrun_auto_is_this_ranks_device(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert compute.resolve("auto", machine=TWO_CORES).device == "cpu"  # gloo ranks on a CPU-only machine
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)
    assert compute.resolve("auto", "fp32", machine=GPU_BOX).device == "cuda:1"


def test_the_record_names_the_context_and_the_processor():
    record = compute.resolve("cpu", "fp32", machine=TWO_CORES).record()
    assert {"device", "precision", "threads", "workers", "envs_per_worker", "cores", "cpu", "gpu"} <= set(record)
    assert record["gpu"] is None and record["cores"] == 2


def test_apply_sets_the_threads_of_this_process():
    before = torch.get_num_threads()
    try:
        replace(compute.resolve("cpu", "fp32", machine=TWO_CORES), threads=1).apply()
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def cuda_context(machine: compute.Machine) -> compute.ComputeContext:
    """A context as ``resolve`` builds it for a learner on a GPU of ``machine`` (this machine may have none)."""
    return replace(compute.resolve("cpu", "fp32", machine=machine), device="cuda:0")


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_a_preset_is_unchanged_on_a_cpu(name):
    preset = PRESETS[name]
    assert sized_for(preset, compute.resolve("cpu", "fp32", machine=GPU_BOX)) is preset
    assert sized_for(preset, compute.resolve("cpu", "fp32", machine=TWO_CORES)) is preset


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_on_a_gpu_box_a_preset_steps_its_envs_in_workers_with_the_recipes_steps_per_env(name, monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: GPU_BOX.cores)  # the options' env bound reads the cores
    preset, sized = PRESETS[name], sized_for(PRESETS[name], cuda_context(GPU_BOX))
    before, after = preset.finetune, sized.finetune
    assert (after.workers, after.num_envs) == (14, 14 * compute.ENVS_PER_WORKER_ON_GPU)
    # Each env collects as many steps per batch as in the recipe, so episodes are not cut shorter.
    assert after.frames_per_batch // after.num_envs == before.frames_per_batch // before.num_envs
    assert after.total_frames % after.frames_per_batch == 0 and after.total_frames >= before.total_frames
    assert replace(sized, finetune=preset.finetune) == preset  # nothing else changes
    FinetuneConfig(**{**after.__dict__})  # the sized options pass the command's own checks
