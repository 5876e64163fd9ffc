"""The PPO collector, one option for three of TorchRL's collection backends.

- ``direct``: a ``Collector`` in this process; envs stepped here, or ``num_envs / workers`` in each of
  ``workers`` ``ParallelEnv`` processes; the policy on the learner device (pixels cross to it as uint8).
- ``process``: ``Collector(backend="process")``, i.e. a ``MultiSyncCollector``: worker processes each stepping
  their share of the envs with a policy copy, results through shared memory, weights pushed after each update.
- ``ray``: ``Collector(backend="ray")``, TorchRL's ``RayCollector``: the same workers as Ray actors, on this
  machine or a cluster (``ray_address``).

Every worker process creates its own renderer on first use (renderers are per process), and ignores Ctrl-C and
SIGTERM: the learner alone stops on them, after finishing and checkpointing its iteration.
"""

from __future__ import annotations

from functools import partial

import torch
from torchrl.collectors import Collector
from torchrl.envs import ParallelEnv

from robot_rl.compute import ComputeContext
from robot_rl.configs import FinetuneConfig
from robot_rl.envs import make_env
from robot_rl.envs.defaults import DEFAULT_TASK
from robot_rl.envs.gl_backend import render_on_device
from robot_rl.envs.tasks import get_task
from robot_rl.envs.torchrl_env import InspectionEnv
from robot_rl.processes import workers_ignore_stop_signals


def make_collector(config: FinetuneConfig, policy, env_kwargs: dict, compute: ComputeContext, seed: int,
                   pre_collect_hook=None):
    """Builds the collector of ``config.collector`` on the run's compute context (the learner's device, the
    threads of this process and of each worker); returns (collector, direct env or None). Its worker processes
    ignore Ctrl-C and SIGTERM (``robot_rl.processes.workers_ignore_stop_signals``)."""
    render_on_device(compute.torch_device)  # under EGL the env workers render on the run's GPU
    with workers_ignore_stop_signals():
        return _make_collector(config, policy, env_kwargs, compute, seed, pre_collect_hook)


def _make_collector(config: FinetuneConfig, policy, env_kwargs: dict, compute: ComputeContext, seed: int,
                    pre_collect_hook=None):
    device = compute.torch_device
    # A finite total: TorchRL's Ray collector yields nothing for -1 ("unbounded"). The trainer stops by itself.
    common = dict(frames_per_batch=config.frames_per_batch, total_frames=2 * config.total_frames,
                  reset_at_each_iter=True, storing_device=device, env_device="cpu")
    if config.collector != "ray":  # (RayCollector does not take these options)
        common["auto_register_policy_transforms"] = False  # the policy needs no env transforms
    # The context's thread split (robot_rl.compute), which TorchRL applies to this process when it starts the
    # workers: the learner keeps its threads minus one per local worker, each worker runs one.
    threads = dict(num_threads=compute.collection_threads, num_sub_threads=compute.worker_threads)
    per_worker = compute.envs_per_worker
    # The task as a class: worker processes know only the built-in names (and import nothing a file names).
    env_kwargs = {**env_kwargs, "task": get_task(env_kwargs.get("task", DEFAULT_TASK))}
    create = partial(InspectionEnv, num_envs=per_worker if per_worker > 1 else None, **env_kwargs)
    if config.collector == "direct":
        if config.workers:  # batch [workers, envs per worker], stepped in spawned processes
            env = ParallelEnv(config.workers, create, mp_start_method="spawn", **threads)
            env.set_seed(seed)
        else:
            env = make_env(num_envs=config.num_envs, parallel=False, seed=seed, **env_kwargs)
        collector = Collector(env, policy, policy_device=device, pre_collect_hook=pre_collect_hook, **common)
        return collector, env
    options = {}
    if config.collector == "ray":
        init = {"address": config.ray_address} if config.ray_address else {
            "num_cpus": config.workers, "include_dashboard": False, "_node_ip_address": "127.0.0.1"}
        # Weights go through Ray's object store (push_weights below) rather than TorchRL's default Ray scheme,
        # whose gloo rendezvous between the driver and the actors timed out on this machine.
        options = {"ray_init_config": init, "remote_configs": {"num_cpus": 1, "num_gpus": 0},
                   "weight_sync_schemes": {}}
    collector = Collector([create] * config.workers, policy, backend=config.collector, sync=True,
                          policy_device=torch.device(compute.worker_device), backend_options=options or None,
                          **common, **({} if config.collector == "ray" else threads))
    collector.set_seed(seed)
    return collector, None


def push_weights(collector, policy) -> None:
    """Sends ``policy``'s current weights to every collector worker."""
    if hasattr(collector, "remote_collectors"):  # Ray
        import ray
        from tensordict import TensorDict

        weights = ray.put(TensorDict.from_module(policy).data.to("cpu"))
        ray.get([worker.update_policy_weights_.remote(weights) for worker in collector.remote_collectors])
    else:
        collector.update_policy_weights_()
