"""GPU fast path, in one command (under 8 minutes on one GPU): where the time goes and which part bounds a run.

1. BC training samples/s at 84x84 and 224x224: the real actor and BC loss, bf16 autocast, channels-last input,
   on batches already on the GPU (the learner alone). Published ResNet18 training: ~3,500 img/s at 224x224 on an
   RTX 3090 with AMP and channels-last; the target here is 5,000 samples/s on an H200.
2. PPO learner frames/s at 84x84 and 224x224: GAE and ClipPPOLoss epochs over a batch on the GPU.
3. The parts of a fine-tuning iteration, per frame: env physics + IK, rendering (CPU, one env), policy inference
   and host-to-device copy of uint8 pixels (GPU), and the learner update; and end-to-end fine-tuning frames/s
   with envs in CPU worker processes. The largest per-frame cost is reported as the bound.

    python benchmarks/gpu_benchmark.py      # writes benchmarks/results/gpu_benchmark.json (exit 2 without CUDA)
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from harness import Benchmark, Variant
from tensordict import TensorDict

from robot_rl import keys
from robot_rl.envs.task import TaskConfig
from robot_rl.envs.tasks.pcb_inspect import PcbInspectTask
from robot_rl.envs.torchrl_env import InspectionEnv
from robot_rl.finetune.critic import make_privileged_critic
from robot_rl.policy import make_actor
from robot_rl.pretrain.bc_loss import BehaviourCloningLoss, total_loss
from robot_rl.tables import markdown_table

BENCHMARK = Benchmark("gpu_benchmark", __doc__, variants=(
    Variant("cuda", (), "BC and PPO learner rates and a fine-tuning iteration's parts on one GPU"),
), common={"device": ("cuda", "cuda (cpu only for a smoke run of this script)"), "out": None})


def bf16(device: torch.device) -> torch.autocast:
    """The fast path's bf16 autocast on CUDA (off on the CPU: a smoke run stays fp32)."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")


def timed(fn, repeats: int, device: torch.device) -> float:
    """Seconds per call (median of ``repeats``), synchronizing the GPU around each call."""
    sync = torch.cuda.synchronize if device.type == "cuda" else lambda device: None
    fn()
    times = []
    for _ in range(repeats):
        sync(device)
        start = time.perf_counter()
        fn()
        sync(device)
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


def parts_per_frame(size: int, device: torch.device, ppo_frames: int) -> dict:
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
    learner = 1.0 / ppo_learner_frames_per_s(size, ppo_frames, min(256, ppo_frames), device)
    return {"env_physics_ik_ms": physics * 1e3, "render_ms": render * 1e3, "host_to_device_ms": copy * 1e3,
            "policy_inference_ms": inference * 1e3, "learner_update_ms": learner * 1e3}


def end_to_end_frames_per_s(size: int, workers: int, iterations: int, device: str) -> float:
    from robot_rl.configs import FinetuneConfig
    from robot_rl.finetune.trainer import PPORun

    run_dir = Path(tempfile.mkdtemp(prefix="gpu-bench-"))
    config = FinetuneConfig(from_scratch=True, anchor_weight=0.0, image_size=size, run_dir=str(run_dir / "run"),
                            num_envs=workers * 4, workers=workers, frames_per_batch=workers * 4 * 64,
                            total_frames=workers * 4 * 64 * (iterations + 1), minibatch_size=128, ppo_epochs=2,
                            eval_every=0, eval_episodes=1, critic_warmup=0, checkpoint_every=1000, device=device,
                            shaping=0.0)
    run = PPORun(config)
    try:
        run.run(progress=False, until=1)  # warm-up: workers, renderers, cuDNN autotuning
        start, frames = time.perf_counter(), run.frames
        run.run(progress=False, until=1 + iterations)
        return (run.frames - frames) / (time.perf_counter() - start)
    finally:
        run.close()
        shutil.rmtree(run_dir, ignore_errors=True)


def options(parser) -> None:
    parser.add_argument("--sizes", type=int, nargs="+", default=[84, 224], help="image sides, pixels")
    parser.add_argument("--bc-batch", type=int, default=256, help="BC samples per step")
    parser.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 2),
                        help="CPU env worker processes in the end-to-end run")
    parser.add_argument("--iterations", type=int, default=3, help="timed fine-tuning iterations")
    parser.add_argument("--ppo-frames", type=int, default=4096, help="frames per PPO learner iteration")


def run(args) -> dict | int:
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("gpu_benchmark: no CUDA device here; run it on a machine with a GPU", file=sys.stderr)
        return 2
    torch.backends.cudnn.benchmark = True
    rows, parts = [], {}
    for size in args.sizes:
        bc = bc_samples_per_s(size, args.bc_batch, device)
        ppo = ppo_learner_frames_per_s(size, args.ppo_frames, min(512, args.ppo_frames), device)
        parts[size] = parts_per_frame(size, device, args.ppo_frames)
        cpu_env_ms = parts[size]["env_physics_ik_ms"] + parts[size]["render_ms"]
        rows.append({"image": f"{size}x{size}", "bc_samples_per_s": bc, "ppo_learner_frames_per_s": ppo,
                     "cpu_env_frames_per_s_per_worker": 1e3 / cpu_env_ms,
                     "bound": max(parts[size], key=parts[size].get)})
        print(f"{size}: BC {bc:.0f} samples/s, PPO learner {ppo:.0f} frames/s", file=sys.stderr)
    end_to_end = end_to_end_frames_per_s(args.sizes[0], args.workers, args.iterations, args.device)
    print(markdown_table(rows))
    print(markdown_table([{"image": f"{s}x{s}", **p} for s, p in parts.items()]))
    print(f"\nend-to-end fine-tuning at {args.sizes[0]}x{args.sizes[0]} with {args.workers} CPU env workers: "
          f"{end_to_end:.0f} frames/s")
    return {"rows": rows, "parts_ms_per_frame": parts, "end_to_end_frames_per_s": end_to_end,
            "end_to_end_workers": args.workers, "bc_target_224": 5000}


if __name__ == "__main__":
    sys.exit(BENCHMARK.main(run, options))
