"""Arms and tasks: the scripted expert of a task with each arm, and each arm's env throughput, in one run.

For every arm (``ur5e_like``, ``panda``; ``--arms``): the expert inspects ``--boards`` fresh boards (seeds from
40,000,000, never used for demos) through the TorchRL env, 84x84, no randomization. Reported: strict success
(correct verdict with the board localized) with its Wilson 95% interval, collisions per episode, steps to decide.
Throughput: env steps/s with random poses and verdict "continue" (the rate a policy sees mid-episode), one env in
this process, the median of ``--repeats`` rollouts, timed in alternation across the arms so the machine's drift
falls on all alike; quoted as a ratio to ``ur5e_like``.

Targets, fixed before the first run (issue: arm and task API): with the Panda, expert success >= 95% and 0
collisions at default difficulty on >= 200 boards (PCB task); on the lead-inspection task, expert success >= 95%
at default difficulty on >= 200 boards with every arm.

    python benchmarks/arms.py --list   # the named variants (--variant NAME runs one)
"""

from __future__ import annotations

import statistics
import sys
import time

from harness import Benchmark, Variant
from protocols import ci_cell, random_pose_continue
from timing import rollout_steps_per_s

from robot_rl.closed_loop import run_episodes
from robot_rl.envs.arms import ARMS
from robot_rl.envs.defaults import DEFAULT_TASK
from robot_rl.envs.expert_policy import ExpertPolicy
from robot_rl.envs.tasks import TASKS
from robot_rl.envs.torchrl_env import InspectionEnv, make_env
from robot_rl.episodes import aggregate, summarize_episode
from robot_rl.tables import markdown_table

FIRST_SEED = 40_000_000
TARGET_SUCCESS, TARGET_COLLISIONS = 0.95, 0.0

BENCHMARK = Benchmark("arms", __doc__, variants=(
    Variant("pcb-inspect", (), "the PCB task's expert with every arm on 200 default boards, and env steps/s (~3 min)"),
    Variant("lead-inspect", ("--task", "lead-inspect", "--difficulties", "easy", "default", "hard", "--out",
                             "benchmarks/results/arms_lead_inspect.json"), "the lead task, its three levels"),
), common={"boards": (200, "fresh boards per arm and difficulty"), "out": None})


def expert_on_boards(task: str, arm: str, difficulty: str, boards: int, num_envs: int) -> dict:
    seeds = list(range(FIRST_SEED, FIRST_SEED + boards))
    env = make_env(num_envs=num_envs, difficulty=difficulty, image_size=84, parallel=num_envs > 1,
                   episode_seeds=seeds, arm=arm, task=task)
    start = time.perf_counter()
    try:
        rollouts = run_episodes(env, ExpertPolicy(task=task), boards)
    finally:
        env.close()
    metrics = aggregate([summarize_episode(r, task) for r in rollouts])
    return {"metrics": metrics, "wall_s": round(time.perf_counter() - start, 1)}


def options(parser) -> None:
    parser.add_argument("--task", default=DEFAULT_TASK, choices=list(TASKS))
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    parser.add_argument("--difficulties", nargs="+", default=["default"], choices=["easy", "default", "hard"])
    parser.add_argument("--num-envs", type=int, default=2, help="ParallelEnv workers for the expert episodes")
    parser.add_argument("--steps", type=int, default=300, help="steps per timed rollout")
    parser.add_argument("--repeats", type=int, default=5)


def run(args) -> dict:
    expert, rows = {}, []
    for arm in args.arms:
        for difficulty in args.difficulties:
            result = expert_on_boards(args.task, arm, difficulty, args.boards, args.num_envs)
            expert[f"{arm}/{difficulty}"] = result
            m = result["metrics"]
            rows.append({"arm": arm, "difficulty": difficulty, "boards": m["episodes"],
                         "expert success (95% CI)": ci_cell(m["success_rate"], m["success_ci95"], 1),
                         "collisions / episode": f"{m['collisions_per_episode']:.3f}",
                         "episode length": m["episode_length"], "wall s": result["wall_s"]})
    envs = {arm: InspectionEnv(image_size=84, seed=0, arm=arm, task=args.task) for arm in args.arms}
    # median_high: the figure as it has always been reported (the upper middle rate for an even --repeats)
    rates = rollout_steps_per_s(envs, random_pose_continue, args.steps, args.repeats, statistics.median_high)
    base = rates.get("ur5e_like")
    for row in rows:
        row["env steps/s (84x84)"] = round(rates[row["arm"]])
        row["ratio to ur5e_like"] = round(rates[row["arm"]] / base, 2) if base else None
    print(markdown_table(rows))
    targets = {}
    for key, result in expert.items():
        arm, difficulty = key.split("/")
        if (arm != "ur5e_like" or args.task != DEFAULT_TASK) and difficulty == "default":
            m = result["metrics"]
            collisions = TARGET_COLLISIONS if args.task == DEFAULT_TASK else None  # the lead target: success
            met = (m["success_rate"] >= TARGET_SUCCESS and m["episodes"] >= 200
                   and (collisions is None or m["collisions_per_episode"] <= collisions))
            targets[arm] = {"success": TARGET_SUCCESS, "collisions_per_episode": collisions,
                            "boards_at_least": 200, "met": met}
            print(f"target ({arm}, default): success >= {TARGET_SUCCESS:.0%}"
                  f"{', 0 collisions' if collisions is not None else ''}, >= 200 boards: {'met' if met else 'MISSED'}")
    return {"task": args.task, "image_size": 84, "first_seed": FIRST_SEED, "expert": expert,
            "steps_per_s": {arm: round(rate, 1) for arm, rate in rates.items()},
            "throughput": {"steps": args.steps, "repeats": args.repeats, "policy": "random pose, continue",
                           "timing": "alternating, median"},
            "targets": targets}


if __name__ == "__main__":
    sys.exit(BENCHMARK.main(run, options))
