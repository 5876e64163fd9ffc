"""Collection backends (in process, worker processes, Ray), a two-rank DDP learner, and a worker killed on purpose."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest
import torch

from robot_rl import compute
from robot_rl.configs import FinetuneConfig
from robot_rl.envs.torchrl_env import InspectionEnv
from robot_rl.finetune import trainer
from robot_rl.finetune.collection import make_collector, push_weights
from robot_rl.policy import PolicyConfig, make_actor

ENV = {"difficulty": "easy", "image_size": 48}


CTRL_C_WHILE_WORKERS_START = """
import multiprocessing, signal
from robot_rl.processes import workers_ignore_stop_signals

def report(queue):
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, set())
    queue.put(signal.SIGINT in blocked and signal.SIGTERM in blocked)

if __name__ == "__main__":
    import os
    context = multiprocessing.get_context("spawn")  # how TorchRL starts collector and env workers
    queue = context.Queue()
    # Python's own Ctrl-C handler, whatever this process was started with (a shell's background job ignores SIGINT).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with workers_ignore_stop_signals():
            worker = context.Process(target=report, args=(queue,))
            worker.start()
            os.kill(os.getpid(), signal.SIGINT)
        print("the Ctrl-C was lost")
    except KeyboardInterrupt:
        print("interrupted")
    print(queue.get(timeout=60))  # whether the worker has SIGINT and SIGTERM blocked
    worker.join(timeout=60)
    print(signal.getsignal(signal.SIGINT) is signal.default_int_handler,
          bool({signal.SIGINT, signal.SIGTERM} & signal.pthread_sigmask(signal.SIG_BLOCK, set())))
"""


def test_collector_workers_ignore_ctrl_c_and_sigterm_and_the_learner_keeps_its_handler(tmp_path):
    # What a terminal's Ctrl-C (SIGINT to the whole group) then reaches: the learner alone, which finishes the
    # iteration, checkpoints and stops the workers itself. In a process of its own: a Ctrl-C it sends itself must
    # not reach the test runner.
    script = tmp_path / "ctrl_c.py"
    script.write_text(CTRL_C_WHILE_WORKERS_START)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    # a Ctrl-C pressed while the workers start is not lost; the worker has both signals blocked; afterwards this
    # process has its handler back and nothing blocked
    assert result.stdout.split("\n")[:3] == ["interrupted", "True", "True False"]


BLOCK_THEN_START_THE_RESOURCE_TRACKER = """
import multiprocessing, signal
from robot_rl.processes import workers_ignore_stop_signals

def report(queue):
    queue.put(sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, set())))

if __name__ == "__main__":
    context = multiprocessing.get_context("spawn")
    with workers_ignore_stop_signals():
        queue = context.Queue()  # its lock starts multiprocessing's resource tracker, as TorchRL's collectors do
        worker = context.Process(target=report, args=(queue,))
        worker.start()
    print(queue.get(timeout=60))
    worker.join()
"""


def test_workers_keep_the_stop_signals_blocked_when_the_resource_tracker_starts_with_them(tmp_path):
    # The tracker's start unblocks SIGINT and SIGTERM in the starting thread: a process collector's workers, the
    # first of their kind in a fresh process, would then have died of a SIGTERM sent to the process group.
    script = tmp_path / "start.py"
    script.write_text(BLOCK_THEN_START_THE_RESOURCE_TRACKER)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[0] == "[2, 15]"


def backend_config(collector: str, **overrides) -> FinetuneConfig:
    values = dict(from_scratch=True, anchor_weight=0.0, num_envs=2, frames_per_batch=32, total_frames=64,
                  minibatch_size=16, collector=collector, workers=0 if collector == "direct" else 2, **ENV)
    values.update(overrides)
    return FinetuneConfig(**values)


def one_batch(config: FinetuneConfig, before_shutdown=None):
    proof = InspectionEnv(**ENV)
    actor = make_actor(proof.observation_spec, proof.full_action_spec, PolicyConfig(hidden=16)).eval()
    collector, _ = make_collector(config, actor, dict(ENV), compute.of_config(config), seed=0)
    try:
        push_weights(collector, actor)
        batch = next(iter(collector))
        push_weights(collector, actor)  # weights reach the workers after an update too
        if before_shutdown is not None:
            before_shutdown(collector)
        return batch.reshape(-1)
    finally:
        collector.shutdown()


def layout(batch) -> dict:
    return {key: (tuple(value.shape[1:]), value.dtype) for key, value in batch.items(True, True)
            if key != ("collector", "traj_ids")}


@pytest.fixture(scope="module")
def direct_batch():
    return one_batch(backend_config("direct"))


def test_worker_processes_collect_what_the_direct_backend_collects(direct_batch):
    batch = one_batch(backend_config("process"))
    assert batch.numel() == direct_batch.numel() == 32
    assert layout(batch) == layout(direct_batch)


def test_ray_backend_on_a_local_cluster(direct_batch):
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    cluster.add_node(num_cpus=1)  # a second node: the two collector actors (1 CPU each) must use both
    try:
        cluster.wait_for_nodes()
        nodes_used = set()

        def record_nodes(collector):
            nodes_used.update(ray.get([worker.__ray_call__.remote(lambda self: ray.get_runtime_context().get_node_id())
                                       for worker in collector.remote_collectors]))

        batch = one_batch(backend_config("ray", ray_address=cluster.address), before_shutdown=record_nodes)
        assert batch.numel() == direct_batch.numel() == 32
        assert layout(batch) == layout(direct_batch)
        assert len(nodes_used) == 2  # one collector actor on each node
    finally:
        ray.shutdown()
        cluster.shutdown()


def test_two_rank_gloo_learner_keeps_identical_parameters(tmp_path):
    script = tmp_path / "rank.py"
    script.write_text(textwrap.dedent(f"""
        import os, sys, torch
        from robot_rl.configs import FinetuneConfig
        from robot_rl.finetune.trainer import PPORun
        config = FinetuneConfig(from_scratch=True, anchor_weight=0.0, difficulty="easy", image_size=48,
                                run_dir={str(tmp_path / "run")!r}, total_frames=32, frames_per_batch=32,
                                num_envs=2, minibatch_size=16, ppo_epochs=1, critic_warmup=0, eval_episodes=1,
                                critic_hidden=16, threads=1)
        run = PPORun(config)
        before = torch.cat([p.detach().flatten() for p in run.actor.parameters()]).clone()
        run.run(progress=False, until=1)
        after = torch.cat([p.detach().flatten() for p in run.actor.parameters()])
        run.close()
        torch.save({{"before": before, "after": after}}, {str(tmp_path)!r} + f"/rank{{os.environ['RANK']}}.pt")
    """))
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(script)]
    result = subprocess.run(torchrun, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1)]
    assert torch.equal(ranks[0]["before"], ranks[1]["before"])
    assert not torch.equal(ranks[0]["before"], ranks[0]["after"])  # a step was taken...
    assert torch.equal(ranks[0]["after"], ranks[1]["after"])  # ...and both ranks took the same one
    assert (tmp_path / "run" / "checkpoints" / "last.pt").is_file()


def test_a_killed_worker_stops_the_run_cleanly(tmp_path):
    config = backend_config("process", run_dir=str(tmp_path / "run"), total_frames=96, ppo_epochs=1,
                            critic_warmup=0, eval_every=0, eval_episodes=1, checkpoint_every=1, critic_hidden=16,
                            threads=2)
    run = trainer.PPORun(config)
    try:
        run.run(progress=False, until=1)
        saved = (tmp_path / "run" / "checkpoints" / "last.pt").read_bytes()
        run.collector.procs[0].kill()
        start = time.monotonic()
        with pytest.raises(trainer.CollectionFailed, match="process collection worker failed"):
            run.run(progress=False, until=3)
        assert time.monotonic() - start < 120
        assert (tmp_path / "run" / "checkpoints" / "last.pt").read_bytes() == saved
    finally:
        start = time.monotonic()
        run.close()
        assert time.monotonic() - start < 60
