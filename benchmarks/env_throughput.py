"""Environment throughput: TorchRL PCB-inspection env steps/s against Gymnasium's Pusher-v5 with rgb rendering.

One process, same machine, same run. Each figure is the median of ``--repeats`` timed rollouts after a warm-up.
Rows:
- ``pcb-inspect random``: ``env.rollout`` with no policy, i.e. TorchRL's ``rand_action`` over the whole composite
  action. Two thirds of random verdicts end the episode, so most steps are followed by a reset (a new board).
- ``pcb-inspect random pose``: random pose, verdict "continue": the stepping rate a policy sees mid-episode.
- ``batch of N`` rows step N tasks in this one process (``InspectionEnv(num_envs=N)``), which spreads TorchRL's
  per-call overhead.
- ``randomization default`` rows: the single-env cases with ``randomization="default"`` (domain randomization
  of lights, colours, camera mount and pixel noise), timed in alternation with the same case without it; the
  ratio of the two medians is the cost (target: within 10% at 84x84).
- ``Pusher-v5``: Gymnasium's MuJoCo Pusher, ``render_mode="rgb_array"`` at the same image size, random actions.

    python benchmarks/env_throughput.py            # prints a table, writes benchmarks/results/env_throughput.json
"""

from __future__ import annotations

import sys

import torch
from harness import Benchmark, Variant
from protocols import random_pose_continue
from timing import median_rate, rollout_steps_per_s

from robot_rl.envs.torchrl_env import InspectionEnv
from robot_rl.tables import markdown_table

TARGET_STEPS_PER_S = 800  # at 84x84, in one process
MAX_RANDOMIZATION_SLOWDOWN = 0.10  # domain randomization may cost at most this fraction of steps/s

BENCHMARK = Benchmark("env_throughput", __doc__, variants=(
    Variant("all", (), "env steps/s at 84x84 and 224x224 against Gymnasium's Pusher-v5"),
), targets={"steps_per_s_84": TARGET_STEPS_PER_S, "max_randomization_slowdown": MAX_RANDOMIZATION_SLOWDOWN},
   common={"out": None})


def time_pusher(image_size: int, steps: int, repeats: int) -> float | None:
    try:
        import gymnasium as gym

        env = gym.make("Pusher-v5", render_mode="rgb_array", width=image_size, height=image_size)
    except Exception as err:  # noqa: BLE001 - report the row as missing, keep the rest
        print(f"Pusher-v5 unavailable ({err}); install with `pip install -e '.[bench]'`", file=sys.stderr)
        return None
    env.reset(seed=0)

    def run() -> int:
        for _ in range(steps):
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            env.render()
            if terminated or truncated:
                env.reset()
        return steps

    rate = median_rate(run, repeats)
    env.close()
    return rate


def options(parser) -> None:
    parser.add_argument("--sizes", type=int, nargs="+", default=[84, 224], help="image sides (pixels)")
    parser.add_argument("--steps", type=int, default=1000, help="env steps per timed rollout")
    parser.add_argument("--pusher-steps", type=int, default=100, help="Pusher-v5 steps per timed run")
    parser.add_argument("--batch", type=int, default=16, help="tasks per process in the batched rows")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per figure (median reported)")
    parser.add_argument("--pair-repeats", type=int, default=7,
                        help="alternating timed runs per randomization comparison (median reported)")


def run(args) -> dict:
    torch.set_num_threads(1)

    rows = []
    for size in args.sizes:
        cases = [
            ("pcb-inspect random", None, None),
            ("pcb-inspect random pose", None, random_pose_continue),
            (f"pcb-inspect random, batch of {args.batch}", args.batch, None),
            (f"pcb-inspect random pose, batch of {args.batch}", args.batch, random_pose_continue),
        ]
        size_rows = []
        for name, num_envs, policy in cases:
            envs = {name: InspectionEnv(image_size=size, num_envs=num_envs, seed=0)}
            rate = rollout_steps_per_s(envs, policy, max(args.steps // (num_envs or 1), 1), args.repeats)[name]
            size_rows.append({"env": name, "image": f"{size}x{size}", "steps_per_s": rate})
            print(f"{name} {size}x{size}: {rate:.0f} steps/s", file=sys.stderr)
        for name, policy in (("random", None), ("random pose", random_pose_continue)):
            # In alternation: the machine's drift between runs, on a shared VM larger than this cost, hits both alike.
            envs = {r: InspectionEnv(image_size=size, seed=0, randomization=r) for r in ("none", "default")}
            rates = rollout_steps_per_s(envs, policy, args.steps, args.pair_repeats)
            plain, randomized = rates["none"], rates["default"]
            size_rows.append({"env": f"pcb-inspect {name}, randomization default", "image": f"{size}x{size}",
                              "steps_per_s": randomized, "x_without_randomization": randomized / plain,
                              "paired_steps_per_s_without": plain})
            print(f"{name}, randomization default {size}x{size}: {randomized:.0f} vs {plain:.0f} steps/s",
                  file=sys.stderr)
        pusher = time_pusher(size, args.pusher_steps, args.repeats)
        for row in size_rows:
            row["x_pusher"] = row["steps_per_s"] / pusher if pusher else None
        rows += [*size_rows, {"env": "Pusher-v5 (rgb_array)", "image": f"{size}x{size}", "steps_per_s": pusher}]

    print(markdown_table(rows, ["env", "image", "steps_per_s", "x_pusher", "x_without_randomization"]))
    slowdowns: dict[str, float] = {}  # per image size: the larger of the two randomization rows' slowdowns
    for r in rows:
        if "x_without_randomization" in r:
            slowdowns[r["image"]] = max(slowdowns.get(r["image"], 0.0), 1 - r["x_without_randomization"])
    best_84 = max((r["steps_per_s"] for r in rows if r["image"] == "84x84" and r["env"].startswith("pcb")),
                  default=None)
    return {"rows": rows, "target_steps_per_s_84": TARGET_STEPS_PER_S, "best_steps_per_s_84": best_84,
            "max_randomization_slowdown": MAX_RANDOMIZATION_SLOWDOWN, "randomization_slowdown": slowdowns,
            "randomization_target_met_84": slowdowns.get("84x84", 1.0) <= MAX_RANDOMIZATION_SLOWDOWN}


if __name__ == "__main__":
    sys.exit(BENCHMARK.main(run, options))
