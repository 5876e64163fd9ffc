"""Collection frames/s of each backend with 1, 2, 4, ... workers, up to the core count.

84x84 images, the ResNet18 actor on the collection side (CPU), 4 envs per worker. Backends: ``direct`` (one
Collector here, envs in ParallelEnv workers), ``process`` (MultiSyncCollector: worker processes with their own
policy copies) and ``ray`` (RayCollector on a local Ray instance). Scaling efficiency = frames/s with N workers
/ (N x frames/s with 1 worker); the target is at least 0.8 where cores allow.

    python benchmarks/collector_scaling.py      # prints a table, writes benchmarks/results/collector_scaling.json
"""

from __future__ import annotations

import os
import sys

from harness import Benchmark, Variant
from timing import median_rate

from robot_rl import compute
from robot_rl.configs import FinetuneConfig
from robot_rl.envs.torchrl_env import InspectionEnv
from robot_rl.finetune.collection import make_collector, push_weights
from robot_rl.policy import make_actor
from robot_rl.tables import markdown_table

BENCHMARK = Benchmark("collector_scaling", __doc__, variants=(
    Variant("all", (), "direct, process and Ray collectors, 1 to all cores"),
))


def frames_per_second(backend: str, workers: int, envs_per_worker: int, image_size: int, batches: int) -> float:
    num_envs = workers * envs_per_worker
    config = FinetuneConfig(from_scratch=True, anchor_weight=0.0, image_size=image_size, num_envs=num_envs,
                            frames_per_batch=num_envs * 32, total_frames=num_envs * 32 * (batches + 2),
                            minibatch_size=1, collector=backend, workers=workers)
    env_kwargs = {"difficulty": "default", "image_size": image_size}
    proof = InspectionEnv(**env_kwargs)
    actor = make_actor(proof.observation_spec, proof.full_action_spec).eval()
    collector, _ = make_collector(config, actor, env_kwargs, compute.of_config(config), seed=0)
    try:
        push_weights(collector, actor)
        iterator = iter(collector)
        next(iterator)  # warm-up: workers started, renderers made
        return median_rate(lambda: next(iterator).numel(), batches)
    finally:
        collector.shutdown()


def options(parser) -> None:
    cores = os.cpu_count() or 1
    parser.add_argument("--backends", nargs="+", default=["direct", "process", "ray"], help="backends to time")
    parser.add_argument("--max-workers", type=int, default=cores, help="largest worker count (default: cores)")
    parser.add_argument("--envs-per-worker", type=int, default=4, help="envs per worker")
    parser.add_argument("--image-size", type=int, default=84, help="image side, pixels")
    parser.add_argument("--batches", type=int, default=3, help="timed batches per figure (median reported)")


def run(args) -> dict:
    counts = [1]
    while counts[-1] * 2 <= args.max_workers:
        counts.append(counts[-1] * 2)

    rows = []
    for backend in args.backends:
        base = None
        for workers in counts:
            try:
                rate = frames_per_second(backend, workers, args.envs_per_worker, args.image_size, args.batches)
            except ImportError as err:
                print(f"{backend}: skipped ({err})", file=sys.stderr)
                break
            base = base or rate
            rows.append({"backend": backend, "workers": workers, "frames_per_s": rate,
                         "speedup": rate / base, "efficiency": rate / (base * workers)})
            print(f"{backend} x{workers}: {rate:.0f} frames/s", file=sys.stderr)
    print(markdown_table(rows))
    return {"rows": rows, "envs_per_worker": args.envs_per_worker, "image_size": args.image_size,
            "policy": "ResNet18 actor on the collection side, CPU"}


if __name__ == "__main__":
    sys.exit(BENCHMARK.main(run, options))
