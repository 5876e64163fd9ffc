"""GPU fast path, in one run: the learner's rates, and where each fine-tuning frame's time goes at 1 to 16 workers.

1. The learner alone, at each ``--sizes`` image side: BC training samples/s (the real actor and BC loss, bf16
   autocast, batches already on the device) and PPO learner frames/s (GAE and ClipPPOLoss epochs); and the parts
   of a frame on one core: env physics + IK, rendering, host-to-device copy of uint8 pixels, policy inference,
   learner update (the largest part is the ``bound``).
2. At each ``--worker-counts`` (capped to the cores here), at the first size: the env bound (the fine-tuning run's
   own ``ParallelEnv``, random actions, no policy) and end-to-end fine-tuning (``PPORun``: direct collector, the
   policy on ``--device``, the full preset's PPO recipe from scratch), timed in alternation, and their ratio.
3. A profile of one more end-to-end iteration at the largest worker count: seconds split into collection (the
   envs stepping, TorchRL's ParallelEnv in the learner process, reset and seeding, policy forward, device
   copies, CUDA synchronisation, the rest of TorchRL's collector) and the update (``profile`` rows).
4. ``robot-rl pipeline --preset quick|full --device DEVICE`` in a temporary folder: each stage's seconds
   (``--skip-pipelines`` leaves either out).

Targets (fixed before any run): end to end >= 8,000 frames/s at 84x84 and >= 40% of the env bound at 16 workers;
``make demo`` <= 60 s, for which the quick pipeline stands (the same command, on the GPU); the full preset
<= 480 s.

    python benchmarks/gpu_benchmark.py --variant cuda    # benchmarks/results/gpu_benchmark.json; exit 2 without CUDA
    python benchmarks/gpu_benchmark.py --variant smoke   # tiny, on the CPU, into runs/gpu_benchmark-smoke/
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from harness import Benchmark, Variant
from protocols import random_pose_continue
from tensordict import TensorDict
from timing import SectionTimer, median_rate, synchronize

from robot_rl import keys
from robot_rl.envs.task import TaskConfig
from robot_rl.envs.tasks.pcb_inspect import PcbInspectTask
from robot_rl.envs.torchrl_env import InspectionEnv
from robot_rl.finetune.collection import push_weights
from robot_rl.finetune.critic import make_privileged_critic
from robot_rl.pipeline import PRESETS, RESULT_FILE
from robot_rl.policy import make_actor
from robot_rl.pretrain.bc_loss import BehaviourCloningLoss, total_loss
from robot_rl.tables import markdown_table

TARGETS = {"end_to_end_frames_per_s_at_84": 8000, "end_to_end_of_env_bound_at_16_workers": 0.40,
           "make_demo_s": 60, "full_pipeline_s": 480}
TARGET_TEXT = {
    "end_to_end_frames_per_s_at_84": f">= {TARGETS['end_to_end_frames_per_s_at_84']} frames/s at 84x84",
    "end_to_end_of_env_bound_at_16_workers": f">= {TARGETS['end_to_end_of_env_bound_at_16_workers']:.0%} of the env "
                                             "bound at 16 workers",
    "make_demo_s": f"<= {TARGETS['make_demo_s']} s (the quick pipeline on this device stands for make demo)",
    "full_pipeline_s": f"<= {TARGETS['full_pipeline_s']} s (the full pipeline on this device)"}
PIPELINES = ("quick", "full")

BENCHMARK = Benchmark("gpu_benchmark", __doc__, variants=(
    Variant("cuda", (), "learner rates, env bound and end to end at 1-16 workers, a profile, both pipelines"),
    Variant("smoke", ("--device", "cpu", "--sizes", "32", "--bc-batch", "8", "--ppo-frames", "64",
                      "--worker-counts", "1", "2", "--envs-per-worker", "2", "--steps-per-env", "8",
                      "--iterations", "1", "--skip-pipelines", *PIPELINES,
                      "--out", "runs/gpu_benchmark-smoke/gpu_benchmark.json"),
            "every part but the pipelines, tiny and on the CPU, out of the results"),
), targets=TARGETS, common={"device": ("cuda", "cuda (cpu only for the smoke run)"), "out": None})


# -- the learner alone ---------------------------------------------------------------------------------------------
def bf16(device: torch.device) -> torch.autocast:
    """The fast path's bf16 autocast on CUDA (off on the CPU: a smoke run stays fp32)."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")


def timed(fn, repeats: int, device: torch.device) -> float:
    """Seconds per call (median of ``repeats``, after one warm-up call), synchronizing the GPU around each call."""
    fn()
    times = []
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        fn()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def fake_frames(env: InspectionEnv, batch: int, device: torch.device) -> TensorDict:
    """A batch shaped like collected data: random pixels, the env's other keys, random actions."""
    size = env.observation_spec[keys.PIXELS].shape[-2]
    td = env.fake_tensordict().expand(batch).clone()
    td.set(keys.PIXELS, torch.randint(0, 256, (batch, size, size, 3), dtype=torch.uint8))
    td.set((keys.NEXT, keys.PIXELS), torch.randint(0, 256, (batch, size, size, 3), dtype=torch.uint8))
    td.set((keys.NEXT, keys.REWARD), torch.randn(batch, 1))
    return td.to(device)


def bc_samples_per_s(size: int, batch: int, device: torch.device) -> float:
    env = InspectionEnv(image_size=size)
    actor = make_actor(env.observation_spec, env.full_action_spec).to(device)
    loss = BehaviourCloningLoss(actor, decision_weight=100.0, verdict_weight=5.0)
    optimizer = torch.optim.AdamW(actor.parameters(), lr=1e-4)
    data = fake_frames(env, batch, device)
    data.set(keys.EXPERT_POSE, torch.rand(batch, 6, device=device) * 2 - 1)
    data.set(keys.EXPERT_VERDICT, torch.randint(0, 3, (batch,), device=device))

    def step():
        with bf16(device):
            value = total_loss(loss(data.clone(False)))
        optimizer.zero_grad(set_to_none=True)
        value.backward()
        optimizer.step()

    return batch / timed(step, 10, device)


def ppo_learner_frames_per_s(size: int, frames: int, minibatch: int, device: torch.device) -> float:
    from torchrl.objectives import ClipPPOLoss
    from torchrl.objectives.value import GAE

    env = InspectionEnv(image_size=size)
    actor = make_actor(env.observation_spec, env.full_action_spec).to(device).eval()
    critic = make_privileged_critic(env.observation_spec).to(device).eval()  # what PPO trains
    data = fake_frames(env, frames, device)
    with torch.no_grad():
        actor(data)
    data = data.reshape(-1, min(64, frames))  # [envs, time]
    loss = ClipPPOLoss(actor, critic, functional=False)
    gae = GAE(gamma=0.99, lmbda=0.95, value_network=critic, deactivate_vmap=True)
    optimizer = torch.optim.Adam(loss.parameters(), lr=1e-5)

    def iteration():
        with torch.no_grad(), bf16(device):
            gae(data)
        flat = data.reshape(-1)
        for start in range(0, frames, minibatch):
            with bf16(device):
                out = loss(flat[start : start + minibatch])
                value = out["loss_objective"] + out["loss_critic"] + out["loss_entropy"]
            optimizer.zero_grad(set_to_none=True)
            value.backward()
            optimizer.step()

    return frames / timed(iteration, 3, device)


def parts_per_frame(size: int, device: torch.device, learner_frames_per_s: float) -> dict:
    """Milliseconds per frame of each part of collection and learning (one env, batch-64 GPU work)."""
    task = PcbInspectTask("default", TaskConfig(image_size=size))
    task.reset(0)
    rng = np.random.default_rng(0)
    observe = task._observe
    task._observe = lambda: task._last_observation  # physics + IK only
    start = time.perf_counter()
    for i in range(200):
        if task._done:
            task.reset(i)
        task.step(rng.uniform(-0.3, 0.3, 6), 0)
    physics = (time.perf_counter() - start) / 200
    task._observe = observe
    start = time.perf_counter()
    for _ in range(200):
        observe()
    render = (time.perf_counter() - start) / 200
    env = InspectionEnv(image_size=size)
    actor = make_actor(env.observation_spec, env.full_action_spec).to(device).eval()
    cpu_batch = fake_frames(env, 64, torch.device("cpu")).select(keys.PIXELS, keys.JOINT_STATE)
    copy = timed(lambda: cpu_batch.to(device, non_blocking=False), 20, device) / 64
    gpu_batch = cpu_batch.to(device)

    def infer():
        with torch.no_grad(), bf16(device):
            actor(gpu_batch.clone(False))

    inference = timed(infer, 20, device) / 64
    return {"env_physics_ik_ms": physics * 1e3, "render_ms": render * 1e3, "host_to_device_ms": copy * 1e3,
            "policy_inference_ms": inference * 1e3, "learner_update_ms": 1e3 / learner_frames_per_s}


# -- end to end at each worker count -------------------------------------------------------------------------------
def finetune_run(size: int, workers: int, envs_per_worker: int, steps_per_env: int, device: str, run_dir: Path):
    """A from-scratch ``PPORun`` with the full preset's PPO recipe, its envs in ``workers`` ParallelEnv processes
    of ``envs_per_worker`` envs, ``steps_per_env`` steps of each env per batch."""
    from robot_rl.finetune.trainer import PPORun

    batch = workers * envs_per_worker * steps_per_env
    config = replace(PRESETS["full"].finetune, init="", from_scratch=True, anchor_weight=0.0, image_size=size,
                     run_dir=str(run_dir), num_envs=workers * envs_per_worker, workers=workers, collector="direct",
                     frames_per_batch=batch, total_frames=batch * 1000, minibatch_size=min(256, batch),
                     critic_warmup=0, eval_every=0, eval_episodes=1, checkpoint_every=1000, device=device)
    return PPORun(config)


def ppo_iteration(run, iterator) -> tuple[int, float]:
    """One fine-tuning iteration as ``PPORun.train`` runs it (collect, update, weights to the collector; no checks,
    logs or checkpoints): (frames, seconds)."""
    start = time.perf_counter()
    batch = next(iterator)
    run.update(batch)
    push_weights(run.collector, run.collection_policy)
    synchronize(run.device)
    run.iteration += 1  # the collector seeds each batch's boards from it
    return batch.numel(), time.perf_counter() - start


def env_bound_and_end_to_end(run, steps_per_env: int, iterations: int) -> tuple[float, float, float]:
    """(env bound frames/s, end-to-end frames/s, end-to-end seconds per iteration): medians over ``iterations``
    env rollouts and fine-tuning iterations in alternation, after one warm-up of each. The env bound is the run's
    own ParallelEnv stepping random poses (verdict "continue") for as many steps as a batch."""
    iterator = iter(run.collector)

    def rollout() -> int:
        return run.env.rollout(steps_per_env, policy=random_pose_continue, break_when_any_done=False).numel()

    rollout(), ppo_iteration(run, iterator)  # warm-up: renderers, cuDNN autotuning, caches
    env_rates, seconds, frames = [], [], 0
    for _ in range(iterations):
        env_rates.append(median_rate(rollout, 1))
        frames, spent = ppo_iteration(run, iterator)
        seconds.append(spent)
    per_iteration = statistics.median(seconds)
    return statistics.median(env_rates), frames / per_iteration, per_iteration


# -- the profile of one iteration ----------------------------------------------------------------------------------
COLLECTION = "collection"
# The rows of the profile, in order: (label, what it holds).
PROFILE_ROWS = (
    ("envs stepping", "the learner process waits for the workers' physics, IK and rendering"),
    ("ParallelEnv in the learner", "actions into shared memory, frames out of it (copies), worker signalling"),
    ("reset and seeding", "each batch starts with fresh boards: a reset and a seed sent to every worker"),
    ("policy forward", "the collection policy on its device"),
    ("device copies", "TensorDict.to: each step to the policy's device, actions back, the frames into storage"),
    ("CUDA synchronisation", "the collector's wait for the GPU before each env step (what is left of it: the "
                             "profile synchronizes after each section, so GPU work counts where it was queued)"),
    ("collector bookkeeping", "the rest of TorchRL's collector: carriers, trajectory ids, stacking the batch"),
    ("update", "GAE and the PPO epochs"),
    ("weights to the collector", "push_weights after the update"),
)


def profile_iteration(run) -> dict:
    """Seconds of one fine-tuning iteration by part (``PROFILE_ROWS``), with the iteration's frames and seconds."""
    timer, env, collector = SectionTimer(run.device), run.collector.env, run.collector
    timer.wrap(env, "_wait_for_workers", "envs stepping")
    timer.wrap(env, "step_and_maybe_reset", "ParallelEnv in the learner")
    timer.wrap(env, "reset", "reset and seeding")
    timer.wrap(env, "set_seed", "reset and seeding")
    timer.wrap(run.collection_policy, "forward", "policy forward")
    timer.wrap(TensorDict, "to", "device copies", within=COLLECTION)
    timer.wrap(collector, "_sync_env", "CUDA synchronisation")
    iterator = iter(collector)
    try:
        start = time.perf_counter()
        with timer.section(COLLECTION):
            batch = next(iterator)
        with timer.section("update"):
            run.update(batch)
        with timer.section("weights to the collector"):
            push_weights(collector, run.collection_policy)
        total = time.perf_counter() - start
    finally:
        timer.unwrap()
    seconds = defaultdict(float, {**timer.seconds, "collector bookkeeping": timer.seconds[COLLECTION]})
    rows = [{"part": label, "s_per_iteration": round(seconds[label], 4), "share": round(seconds[label] / total, 3),
             "ms_per_frame": round(1e3 * seconds[label] / batch.numel(), 4), "what": what}
            for label, what in PROFILE_ROWS]
    collection = sum(seconds[label] for label, _ in PROFILE_ROWS[:7])
    return {"rows": rows, "frames": batch.numel(), "iteration_s": round(total, 3),
            "collection_s": round(collection, 3)}


# -- the pipelines -------------------------------------------------------------------------------------------------
def pipeline_seconds(preset: str, device: str, timeout: float) -> dict:
    """``robot-rl pipeline --preset PRESET --device DEVICE`` in a temporary folder: its wall seconds (the command,
    imports included) and each stage's (its ``pipeline.json``), or why there are none."""
    folder = Path(tempfile.mkdtemp(prefix=f"gpu-bench-{preset}-"))
    command = [sys.executable, "-m", "robot_rl.cli", "pipeline", "--preset", preset, "--device", device,
               "--root", str(folder / "root")]
    try:
        start = time.perf_counter()
        with open(folder / "log.txt", "w") as log:
            try:
                done = subprocess.run(command, cwd=folder, stdout=log, stderr=subprocess.STDOUT, timeout=timeout)
                status = "finished" if done.returncode == 0 else f"failed (exit {done.returncode})"
            except subprocess.TimeoutExpired:
                status = f"timed out after {timeout:.0f} s"
        wall = time.perf_counter() - start
        result = folder / "root" / RESULT_FILE
        stages = json.loads(result.read_text())["seconds"] if result.is_file() else {}
        if status != "finished":
            print(f"pipeline {preset}: {status}; its log ends:\n{(folder / 'log.txt').read_text()[-2000:]}",
                  file=sys.stderr)
        return {"preset": preset, "status": status, "wall_s": round(wall, 1), "stages_s": stages}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# -- targets -------------------------------------------------------------------------------------------------------
def target_verdicts(size: int, largest: dict, pipelines: dict) -> dict:
    """Each target with its value and whether it was met (None: not measured in this run)."""

    def within(limit: float, pipeline: dict | None) -> tuple:
        if pipeline is None:
            return None, None
        return pipeline["wall_s"], pipeline["status"] == "finished" and pipeline["wall_s"] <= limit

    rate, ratio, limit = largest["end_to_end_frames_per_s"], largest["end_to_end_of_env_bound"], TARGETS
    measured = {"end_to_end_frames_per_s_at_84": (round(rate), rate >= limit["end_to_end_frames_per_s_at_84"])
                if size == 84 else (None, None),
                "end_to_end_of_env_bound_at_16_workers": (round(ratio, 3),
                                                          ratio >= limit["end_to_end_of_env_bound_at_16_workers"]),
                "make_demo_s": within(limit["make_demo_s"], pipelines.get("quick")),
                "full_pipeline_s": within(limit["full_pipeline_s"], pipelines.get("full"))}
    verdicts = {name: {"target": TARGET_TEXT[name], "value": value, "met": met}
                for name, (value, met) in measured.items()}
    for name in ("end_to_end_frames_per_s_at_84", "end_to_end_of_env_bound_at_16_workers"):
        verdicts[name]["workers"] = largest["workers"]
    return verdicts


def options(parser) -> None:
    parser.add_argument("--sizes", type=int, nargs="+", default=[84, 224],
                        help="image sides, pixels (the first for the end-to-end runs)")
    parser.add_argument("--bc-batch", type=int, default=256, help="BC samples per step")
    parser.add_argument("--ppo-frames", type=int, default=4096, help="frames per PPO learner iteration")
    parser.add_argument("--worker-counts", type=int, nargs="+", default=[1, 2, 4, 8, 16],
                        help="ParallelEnv workers of the env bound and end-to-end runs (capped to the cores here)")
    parser.add_argument("--envs-per-worker", type=int, default=4, help="envs each worker steps")
    parser.add_argument("--steps-per-env", type=int, default=64, help="steps of each env per fine-tuning batch")
    parser.add_argument("--iterations", type=int, default=3, help="timed iterations (and env rollouts) per count")
    parser.add_argument("--skip-pipelines", nargs="*", choices=PIPELINES, default=[], help="pipelines not to run")
    parser.add_argument("--pipeline-timeout", type=float, default=1800, help="seconds before a pipeline is stopped")


def worker_counts(asked: list[int], cores: int) -> list[int]:
    """The asked worker counts, each capped to ``cores``, without repeats, in increasing order."""
    return sorted({max(1, min(count, cores)) for count in asked})


def learner_rates(args, device: torch.device) -> tuple[list[dict], dict]:
    """Part 1 at each image size: (BC and PPO learner rows, milliseconds per frame of each part)."""
    rows, parts = [], {}
    for size in args.sizes:
        bc = bc_samples_per_s(size, args.bc_batch, device)
        ppo = ppo_learner_frames_per_s(size, args.ppo_frames, min(512, args.ppo_frames), device)
        parts[size] = parts_per_frame(size, device, ppo)
        cpu_env_ms = parts[size]["env_physics_ik_ms"] + parts[size]["render_ms"]
        rows.append({"image": f"{size}x{size}", "bc_samples_per_s": bc, "ppo_learner_frames_per_s": ppo,
                     "cpu_env_frames_per_s_per_worker": 1e3 / cpu_env_ms,
                     "bound": max(parts[size], key=parts[size].get)})
        print(f"{size}: BC {bc:.0f} samples/s, PPO learner {ppo:.0f} frames/s", file=sys.stderr)
    return rows, parts


def scaling(args, size: int, counts: list[int]) -> tuple[list[dict], dict]:
    """Parts 2 and 3: a row per worker count (env bound, end to end, their ratio) and the profile of one more
    iteration at the largest count."""
    rows, profile = [], {}
    for workers in counts:
        run_dir = Path(tempfile.mkdtemp(prefix="gpu-bench-run-"))
        finetune = finetune_run(size, workers, args.envs_per_worker, args.steps_per_env, args.device, run_dir)
        try:
            env_rate, rate, seconds = env_bound_and_end_to_end(finetune, args.steps_per_env, args.iterations)
            # The learner's while its env workers run: the run's compute context's collection_threads
            # (robot_rl/compute.py; TrainingRun applies its threads, the ParallelEnv this split when it starts them).
            threads = torch.get_num_threads()
            if workers == counts[-1]:
                profile = {"workers": workers, "unprofiled_iteration_s": round(seconds, 3),
                           **profile_iteration(finetune)}
                profile["env_bound_s_same_frames"] = round(profile["frames"] / env_rate, 3)
        finally:
            finetune.close()
            shutil.rmtree(run_dir, ignore_errors=True)
        rows.append({"workers": workers, "envs": workers * args.envs_per_worker, "learner_threads": threads,
                     "env_bound_frames_per_s": env_rate, "end_to_end_frames_per_s": rate,
                     "end_to_end_of_env_bound": rate / env_rate})
        print(f"{workers} workers: env bound {env_rate:.0f} frames/s, end to end {rate:.0f}", file=sys.stderr)
    return rows, profile


def run(args) -> dict | int:
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("gpu_benchmark: no CUDA device here; run it on a machine with a GPU (or --variant smoke)",
              file=sys.stderr)
        return 2
    torch.backends.cudnn.benchmark = True
    learner, parts = learner_rates(args, device)
    size, cores = args.sizes[0], len(os.sched_getaffinity(0))
    rows, profile = scaling(args, size, worker_counts(args.worker_counts, cores))
    pipelines = {preset: pipeline_seconds(preset, args.device, args.pipeline_timeout)
                 for preset in PIPELINES if preset not in args.skip_pipelines}
    targets = target_verdicts(size, rows[-1], pipelines)

    print(markdown_table(learner))
    print(markdown_table([{"image": f"{s}x{s}", **p} for s, p in parts.items()]))
    print(f"\nat {size}x{size}, {args.envs_per_worker} envs per worker, {args.steps_per_env} steps per env a batch:")
    print(markdown_table(rows))
    print(f"\none iteration at {profile['workers']} workers: {profile['frames']} frames in {profile['iteration_s']} s "
          f"profiled ({profile['unprofiled_iteration_s']} s unprofiled; the env bound steps them in "
          f"{profile['env_bound_s_same_frames']} s)")
    print(markdown_table(profile["rows"]))
    if pipelines:
        print(markdown_table([{"preset": p["preset"], "status": p["status"], "wall s": p["wall_s"],
                               **p["stages_s"]} for p in pipelines.values()]))
    print("targets: " + ", ".join(f"{name} {'-' if v['met'] is None else 'met' if v['met'] else 'MISSED'}"
                                  for name, v in targets.items()))
    return {"learner": learner, "parts_ms_per_frame": parts, "image_size": size, "cores": cores,
            "envs_per_worker": args.envs_per_worker, "steps_per_env": args.steps_per_env, "scaling": rows,
            "profile": profile, "pipelines": pipelines, "targets": targets,
            "end_to_end_recipe": "the full preset's PPO from scratch (frozen encoder), direct collector"}


if __name__ == "__main__":
    sys.exit(BENCHMARK.main(run, options))
