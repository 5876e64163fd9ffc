"""The compute context: one resolution of device, precision, threads and the worker layout, and the presets it
sizes for a machine (a GPU box is described, not needed)."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import pytest
import torch

from robot_rl import compute, pipeline
from robot_rl.configs import FinetuneConfig
from robot_rl.errors import UsageError
from robot_rl.pipeline import PRESETS, sized_for
from robot_rl.precision import resolve_precision

TWO_CORES, GPU_BOX = compute.Machine(cores=2, gpus=0), compute.Machine(cores=16, gpus=1)


def test_a_run_without_workers_keeps_torch_threads_and_runs_its_policy_on_the_learner():
    context = compute.resolve("cpu", "fp32", machine=TWO_CORES)
    assert (context.device, context.precision, context.threads) == ("cpu", "fp32", torch.get_num_threads())
    assert (context.workers, context.worker_device, context.worker_precision) == (0, "cpu", "fp32")


def test_local_workers_leave_the_learner_the_threads_they_do_not_use_and_run_one_thread_each():
    context = compute.resolve("cpu", "fp32", threads=16, workers=14, num_envs=56, machine=GPU_BOX)
    # The learner builds on all its threads; once the workers run it keeps the two they leave.
    assert (context.threads, context.collection_threads, context.worker_threads) == (16, 2, 1)
    assert (context.workers, context.envs_per_worker) == (14, 4)
    assert compute.resolve("cpu", "fp32", threads=2, workers=16, num_envs=16).collection_threads == 1  # at least 1
    # Without --threads: torch's own count (OMP_NUM_THREADS, torchrun's 1 per rank), not the machine's cores.
    default = compute.resolve("cpu", "fp32", workers=1, num_envs=2, machine=GPU_BOX)
    assert (default.threads, default.collection_threads) == (torch.get_num_threads(),
                                                              max(1, torch.get_num_threads() - 1))


def test_the_workers_of_a_ray_cluster_take_no_thread_of_this_machine():
    remote = compute.of_config(FinetuneConfig(from_scratch=True, device="cpu", collector="ray", workers=8,
                                              num_envs=8, threads=4, ray_address="10.0.0.1:6379"))
    local = compute.of_config(FinetuneConfig(from_scratch=True, device="cpu", collector="ray", workers=2,
                                             num_envs=8, threads=4))
    assert (remote.collection_threads, local.collection_threads) == (4, 2)


def test_the_context_of_a_config_follows_its_collector():
    direct = compute.of_config(FinetuneConfig(from_scratch=True, device="cpu", precision="bf16", num_envs=8, workers=2))
    assert (direct.worker_device, direct.worker_precision, direct.envs_per_worker) == ("cpu", "bf16", 4)
    process = compute.of_config(FinetuneConfig(from_scratch=True, device="cpu", precision="fp32", collector="process",
                                               workers=2, worker_device="cpu"))
    # The workers' copies resolve the asked precision on their own device: an explicit fp32 stays fp32 there (on a
    # CPU with native bf16 too), and auto follows that device's rule.
    assert (process.worker_device, process.worker_precision, process.precision) == ("cpu", "fp32", "fp32")
    auto = compute.of_config(FinetuneConfig(from_scratch=True, device="cpu", collector="process", workers=2,
                                            worker_device="cpu"))
    assert auto.worker_precision == resolve_precision("auto", torch.device("cpu"))


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
    finetune = PRESETS[name].finetune
    assert sized_for(finetune, compute.resolve("cpu", "fp32", machine=GPU_BOX)) is finetune
    assert sized_for(finetune, compute.resolve("cpu", "fp32", machine=TWO_CORES)) is finetune


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_on_a_gpu_box_a_preset_steps_its_envs_in_workers_with_the_recipes_steps_per_env(name, monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: GPU_BOX.cores)  # the options' env bound reads the cores
    before = PRESETS[name].finetune
    after = sized_for(before, cuda_context(GPU_BOX))
    assert (after.workers, after.num_envs) == (14, 14 * compute.ENVS_PER_WORKER_ON_GPU)
    # Each env collects as many steps per batch as in the recipe, so episodes are not cut shorter.
    assert after.frames_per_batch // after.num_envs == before.frames_per_batch // before.num_envs
    assert after.total_frames % after.frames_per_batch == 0 and after.total_frames >= before.total_frames
    # The critic's warm-up keeps at least the recipe's frames, in whole (now larger) iterations.
    assert after.critic_warmup * after.frames_per_batch >= before.critic_warmup * before.frames_per_batch
    assert (after.critic_warmup - 1) * after.frames_per_batch < before.critic_warmup * before.frames_per_batch
    sized_fields = {"workers", "num_envs", "frames_per_batch", "total_frames", "critic_warmup"}
    assert {k: v for k, v in vars(after).items() if k not in sized_fields} == {
        k: v for k, v in vars(before).items() if k not in sized_fields}  # nothing else changes
    FinetuneConfig(**vars(after))  # the sized options pass the command's own checks


def test_a_box_with_many_cores_runs_no_more_workers_than_were_measured():
    workers, num_envs, frames = compute.collection_layout(1024, 8, 0, "cuda:0", compute.Machine(cores=96, gpus=8))
    assert (workers, num_envs, frames) == (compute.MAX_WORKERS_ON_GPU,
                                           compute.MAX_WORKERS_ON_GPU * compute.ENVS_PER_WORKER_ON_GPU,
                                           compute.MAX_WORKERS_ON_GPU * compute.ENVS_PER_WORKER_ON_GPU * 128)


def test_a_cgroup_quota_caps_the_cores(monkeypatch):
    monkeypatch.setattr(compute, "_cgroup_cpu_quota", lambda: 3)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    assert compute.Machine.here().cores == 3
    monkeypatch.setattr(compute, "_cgroup_cpu_quota", lambda: 0)  # no quota: the affinity
    assert compute.Machine.here().cores == 16


def test_a_pipeline_root_records_the_recipe_and_only_its_fine_tuning_is_laid_out_for_the_machine(tmp_path,
                                                                                                monkeypatch):
    """A root started on a GPU box records the preset's own options (so it resumes on a CPU); the fine-tuning
    stage alone gets the box's layout. The stages are stubs: this is the wiring, not the training."""
    monkeypatch.setattr(os, "cpu_count", lambda: GPU_BOX.cores)
    on_gpu, on_cpu = cuda_context(GPU_BOX), compute.resolve("cpu", "fp32")
    monkeypatch.setattr(pipeline.compute, "resolve", lambda *args, **kwargs: on_gpu)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: "a GPU this test describes")
    monkeypatch.setattr(pipeline, "collect_demos", lambda config, progress: None)
    configs = {}

    def train_stage(recipe, name, run, config, label=None):
        configs[name] = config
        return {}

    monkeypatch.setattr(pipeline.Recipe, "train", train_stage)
    monkeypatch.setattr(pipeline.Recipe, "evaluate", lambda *args: {"metrics": {}})
    preset = PRESETS["quick"]
    result = pipeline.run_pipeline(preset, tmp_path, device="cuda", progress=False, log=lambda line: None)
    assert json.loads((tmp_path / pipeline.PRESET_FILE).read_text()) == json.loads(json.dumps(preset.options()))
    tuned = configs["finetune"]
    assert (tuned.workers, tuned.num_envs) == (14, 56) and tuned.frames_per_batch == 56 * 128
    assert configs["pretrain"].epochs == preset.pretrain.epochs
    assert result["compute"]["device"] == "cuda:0"
    # The same root on a CPU: the recipe matches, nothing is refused.
    monkeypatch.setattr(pipeline.compute, "resolve", lambda *args, **kwargs: on_cpu)
    pipeline.run_pipeline(preset, tmp_path, device="cpu", progress=False, log=lambda line: None)
    assert (configs["finetune"].workers, configs["finetune"].num_envs) == (0, 8)


class _Built(Exception):
    """Raised by the stand-ins below once they have seen the options TorchRL would get."""


@pytest.mark.parametrize("collector", ["direct", "process"])
def test_the_collector_gets_the_contexts_thread_split(collector, monkeypatch):
    from robot_rl.finetune import collection

    seen = {}

    def capture(*args, **kwargs):
        seen.update(kwargs)
        raise _Built

    monkeypatch.setattr(collection, "ParallelEnv" if collector == "direct" else "Collector", capture)
    config = FinetuneConfig(from_scratch=True, device="cpu", precision="fp32", collector=collector, workers=2,
                            num_envs=4, threads=5)
    context = compute.of_config(config)
    with pytest.raises(_Built):
        collection.make_collector(config, policy=None, env_kwargs={}, compute=context, seed=0)
    assert (seen["num_threads"], seen["num_sub_threads"]) == (3, 1) == (context.collection_threads,
                                                                          context.worker_threads)
