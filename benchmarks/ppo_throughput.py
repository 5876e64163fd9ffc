"""PPO frames per second at the few preset's settings, next to the bound, and where one iteration's time goes.

All at the ``few`` preset of ``bc_vs_scratch.py`` (64x64, easy boards, frozen encoder: features cached at
collection, 8 envs, 1,024 frames and 8 PPO epochs an iteration), from its BC checkpoint, in one process and run:

- ``env alone``: the 8 envs stepping random poses with verdict "continue" (physics, IK, rendering; no policy);
- ``policy alone``: the collection policy (ResNet18 encoder + heads, writing the features) on batches of 8;
- ``bound``: 1 / (1/env + 1/policy), a frame's cost when its env step and its policy forward run one after the
  other, each as fast as alone on the whole machine; overlapping the two (the process collector) can beat it;
- ``PPO, <variant>``: collection + update frames/s (checks apart) over the timed iterations after one warm-up
  iteration, for the direct collector (envs stepped in the learner's process), the process collector
  (``MultiSyncCollector``, 2 workers x 4 envs, each with a policy copy: one steps envs while the other runs its
  policy), and end to end (the encoder trained, every PPO epoch re-running the ResNet; one timed iteration);
- a profile of one direct iteration (cProfile): env step (physics + IK, rendering), policy forward, GAE + update;
  and one closed-loop check (50 boards) timed apart.

Every policy figure (policy alone, the bound, each PPO variant) is measured in fp32 and in bf16 (``--precision``:
the encoder under bf16 autocast), the two back to back. Writes ``benchmarks/results/ppo_throughput.json``. Targets:
PPO >= 70% of the bound; bf16 PPO frames/s >= 1.3x fp32 (direct collector) where the CPU runs bf16 natively.

    python benchmarks/ppo_throughput.py       # about 8 minutes on 2 CPU cores (reuses the few preset's BC run)
"""

from __future__ import annotations

import cProfile
import pstats
import shutil
import statistics
import sys
import time
from contextlib import closing
from pathlib import Path

import torch
from harness import Benchmark, Variant
from protocols import PRESETS, ppo_config, prepare_bc, random_pose_continue
from timing import median_rate, rollout_steps_per_s

from robot_rl.envs.torchrl_env import InspectionEnv
from robot_rl.finetune import trainer
from robot_rl.precision import describe
from robot_rl.run_logs import read_scalar
from robot_rl.tables import markdown_table

PRESET = PRESETS["few"]
TARGET_FRACTION_OF_BOUND = 0.70
BF16_TARGET = 1.3  # bf16 PPO frames/s over fp32 (direct collector), where bf16 is native (fixed before the run)
PRECISIONS = ("fp32", "bf16")
# name -> (options, timed iterations); end to end every PPO epoch re-runs the ResNet (about 13x slower), so once.
VARIANTS = {"direct collector": ({}, None),
            "process collector (2 workers)": ({"collector": "process", "workers": 2}, None),
            "direct, end to end (encoder lr 1e-5)": ({"encoder_lr": 1e-5}, 1)}
# Where a direct iteration's time goes: (label, "file:function" in the profile; the outermost call counts).
PROFILE_PARTS = (("env step (all of it)", "torchrl_env.py:_step"), ("  of which physics", "scene.py:step"),
                 ("  of which IK", "ik.py:solve"), ("  of which rendering", "rendering.py:render"),
                 ("policy forward: encoder", "encoder.py:forward"), ("GAE + PPO update", "trainer.py:update"))

BENCHMARK = Benchmark("ppo_throughput", __doc__, variants=(
    Variant("few", (), "PPO frames/s at the few preset against the env and policy bound, fp32 and bf16"),
))


def policy_alone(run: trainer.PPORun, num_envs: int, image_size: int, repeats: int) -> float:
    frames = run.env.rollout(2, policy=random_pose_continue, break_when_any_done=False)[..., 0]
    policy = run.collection_policy
    with torch.no_grad():
        policy(frames.clone())

        def forward_32_batches() -> int:
            for _ in range(32):
                policy(frames.clone())
            return 32 * num_envs

        return median_rate(forward_32_batches, repeats)


def ppo_rate(run: trainer.PPORun, iterations: int) -> float:
    run.run(progress=False, until=iterations + 1)
    seconds = [s for _, s in read_scalar(run.run_dir, "train/iteration_seconds")][1:]  # the first warms up
    return run.config.frames_per_batch / statistics.median(seconds)


def profile_iteration(run: trainer.PPORun) -> dict:
    """Seconds of one direct iteration by part, from cProfile's cumulative times."""
    iterator = iter(run.collector)
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    batch = next(iterator)
    run.update(batch)
    profiler.disable()
    total = time.perf_counter() - start
    stats = pstats.Stats(profiler).stats
    parts = {label: 0.0 for label, _ in PROFILE_PARTS}
    for (filename, _, function), (_, _, _, cumulative, _) in stats.items():
        name = f"{Path(filename).name}:{function}"
        for label, pattern in PROFILE_PARTS:
            if name == pattern:
                parts[label] = max(parts[label], cumulative)
    counted = ("env step (all of it)", "policy forward: encoder", "GAE + PPO update")
    parts["other (collector, heads, TorchRL, copies)"] = total - sum(parts[k] for k in counted)
    parts["iteration total (profiled)"] = total
    return {k: round(v, 2) for k, v in parts.items()}


def options(parser) -> None:
    parser.add_argument("--iterations", type=int, default=3, help="timed PPO iterations per collector")
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats of the env and policy rates")


def run(args) -> dict:
    bc_dir, _ = prepare_bc(PRESET, "cpu")
    root = Path(PRESET["bc"].run_dir).parent / "throughput"
    shutil.rmtree(root, ignore_errors=True)
    image_size, num_envs = PRESET["demos"].image_size, PRESET["ppo"]["num_envs"]

    def make_run(name: str, precision: str, **overrides) -> closing[trainer.PPORun]:
        config = ppo_config(PRESET, "bc", 0, root, bc_dir, "cpu", run_dir=str(root / name), critic_warmup=0,
                            eval_every=0, checkpoint_every=1000, total_frames=PRESET["ppo"]["frames_per_batch"]
                            * (args.iterations + 2), precision=precision, **overrides)
        # (total_frames only sizes the collector: each variant stops after its timed iterations)
        return closing(trainer.PPORun(config))

    # The bound: the env alone and the collection policy alone, same size and batch
    env = InspectionEnv(difficulty=PRESET["demos"].difficulty, image_size=image_size, num_envs=num_envs, seed=0)
    env_rate = rollout_steps_per_s({"env": env}, random_pose_continue, 32, args.repeats)["env"]
    rows = [{"what": "env alone (8 envs)", "precision": "-", "frames/s": round(env_rate, 1)}]
    bounds, profiles, rates = {}, {}, {}
    for precision in PRECISIONS:
        with make_run(f"probe-{precision}", precision) as probe:
            policy_rate = policy_alone(probe, num_envs, image_size, args.repeats)
            profile = profiles[precision] = profile_iteration(probe)
            check_start = time.perf_counter()
            check = probe.closed_loop()
            profile["one check (50 boards)"] = round(time.perf_counter() - check_start, 2)
            profile["frames in one check"] = round(check["episode_length"] * check["episodes"])
        bound = bounds[precision] = 1 / (1 / env_rate + 1 / policy_rate)
        rows += [{"what": "policy alone (batch 8)", "precision": precision, "frames/s": round(policy_rate, 1)},
                 {"what": "bound: 1 / (1/env + 1/policy)", "precision": precision, "frames/s": round(bound, 1)}]
    for index, (name, (overrides, iterations)) in enumerate(VARIANTS.items()):
        for precision in PRECISIONS:  # back to back, so drift hits both alike
            with make_run(f"variant{index}-{precision}", precision, **overrides) as ppo:
                rate = rates[(name, precision)] = ppo_rate(ppo, iterations or args.iterations)
            rows.append({"what": f"PPO, {name} (collect + update)", "precision": precision,
                         "frames/s": round(rate, 1), "of bound": f"{rate / bounds[precision]:.0%}"})
            print(rows[-1], file=sys.stderr)
    speedups = {name: round(rates[(name, "bf16")] / rates[(name, "fp32")], 3) for name in VARIANTS}
    native = describe("auto", "cpu")["native_bf16"]
    direct = speedups["direct collector"]
    targets = {"bf16_ppo_speedup_direct": {"target": f">= {BF16_TARGET}x where bf16 is native", "value": direct,
                                           "native_bf16": native, "met": direct >= BF16_TARGET if native else None},
               "ppo_of_bound": {"target": f">= {TARGET_FRACTION_OF_BOUND:.0%} (direct collector, each precision)",
                                "value": {p: round(rates[("direct collector", p)] / bounds[p], 3) for p in PRECISIONS},
                                "met": all(rates[("direct collector", p)] / bounds[p] >= TARGET_FRACTION_OF_BOUND
                                           for p in PRECISIONS)}}
    print(markdown_table(rows))
    print(markdown_table([{"part of one direct iteration": k, **{p: profiles[p][k] for p in PRECISIONS}}
                          for k in profiles["fp32"]]))
    print(f"bf16 / fp32 PPO frames/s: {speedups}; targets {targets}")
    return {"precision": describe("auto", "cpu"), "rows": rows, "bound_frames_per_s": bounds,
            "profile_direct_iteration": profiles, "bf16_speedup": speedups, "targets": targets,
            "target_fraction_of_bound": TARGET_FRACTION_OF_BOUND,
            "settings": {"image_size": image_size, "num_envs": num_envs,
                         "frames_per_batch": PRESET["ppo"]["frames_per_batch"],
                         "ppo_epochs": PRESET["ppo"]["ppo_epochs"], "encoder": "frozen (cached features)"}}


if __name__ == "__main__":
    sys.exit(BENCHMARK.main(run, options))
