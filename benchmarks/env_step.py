"""Env step cost: physics + IK per frame of the fast paths against the reference path, in one run.

A frame's physics + IK is the camera-pose IK (``InspectionTask``'s ``self.ik.solve``) and one control period of
physics (``ArmScene.step``). The reference path is the code before the fast paths, still in the package:
``MinkCameraPoseIK`` (mink builds the QP, qpsolvers hands it to DAQP) and ``ArmScene.step_substeps`` (one MuJoCo
call per substep). The fast path is what a task runs: ``CameraPoseIK`` (the same QP into preallocated arrays,
DAQP called directly) and ``ArmScene.step`` (the substeps in one MuJoCo call). Both give the same rollouts bit for
bit (``tests/envs/test_step_speedups.py``).

Both paths step their own task through the same boards and random pose actions (verdict "continue"), so they
visit the same states; only the two calls are timed, per frame (not resets). The paths alternate board by board
(which goes first alternating too) so that the machine's drift falls on both alike; each figure is the median over
``--repeats`` runs of ``--frames`` frames. Target: fast / reference <= 0.476 (0.63 ms per frame on the GPU box's
Xeon down to 0.30 ms).

What a longer physics timestep (a new env version) would change: ``results/env_step_timesteps*.json``, written by
the version ``harness.RETIRED_COMMANDS`` names.

    python benchmarks/env_step.py                      # writes benchmarks/results/env_step.json
"""

from __future__ import annotations

import statistics
import sys
import time

import mujoco
import numpy as np
from harness import Benchmark, Variant

from robot_rl.envs.ik import camera_ik
from robot_rl.envs.scene import quat_from_rotvec
from robot_rl.envs.tasks import build_task
from robot_rl.tables import markdown_table

TARGET_RATIO = 0.476  # 0.30 ms of the 0.63 ms per frame measured on the GPU box
EPISODE_FRAMES = 80  # a new board after this many frames (the task's step limit)
_INTEGRATION = mujoco.mjtState.mjSTATE_INTEGRATION  # everything a step reads, controls included

BENCHMARK = Benchmark("env_step", __doc__, variants=(
    Variant("all", (), "physics + IK per frame, fast paths against the reference (pcb-inspect, default arm)"),
    Variant("panda", ("--arm", "panda", "--out", "benchmarks/results/env_step_panda.json"),
            "the same with the Panda (7 joints, posture task; needs the [panda] extra)"),
), targets={"max_ratio": TARGET_RATIO}, common={"out": None})


def options(parser) -> None:
    parser.add_argument("--task", default="pcb-inspect", help="registered task")
    parser.add_argument("--arm", default="ur5e_like", help="registered arm")
    parser.add_argument("--difficulty", default="default", help="difficulty preset")
    parser.add_argument("--frames", type=int, default=1600, help="frames per path per timed run")
    parser.add_argument("--repeats", type=int, default=7, help="timed runs per path (median reported)")


class SteppedPath:
    """One task stepped by one path's IK and physics, timing those two calls per frame."""

    def __init__(self, args, reference: bool):
        self.task = build_task(args.task, args.difficulty, 32, None, {}, arm=args.arm)
        scene = self.task.scene
        if reference:
            self.solve, self.step = camera_ik(scene, reference=True).solve, scene.step_substeps
        else:
            self.solve, self.step = self.task.ik.solve, scene.step

    def episode(self, board: int, actions: np.ndarray) -> tuple[float, float, int]:
        """Steps board ``board`` through ``actions`` [frames, 6] (until one is unstable); returns the seconds
        spent in IK, in physics, and the frames stepped."""
        task, scene, config = self.task, self.task.scene, self.task.config
        task.reset(board)
        ik_s = physics_s = 0.0
        frames = 0
        for action in actions:
            frames += 1
            # What InspectionTask._joint_targets computes before its IK call (untimed: the same on both paths).
            target_pos = scene.camera_pose()[0] + action[:3] * config.max_translation
            target_quat = np.empty(4)
            mujoco.mju_mulQuat(target_quat, quat_from_rotvec(action[3:] * config.max_rotation), scene.camera_quat())
            start = time.perf_counter()
            targets = self.solve(scene.qpos, target_pos, target_quat)
            solved = time.perf_counter()
            outcome = self.step(targets)
            ik_s, physics_s = ik_s + solved - start, physics_s + time.perf_counter() - solved
            if outcome.unstable:
                break
        return ik_s, physics_s, frames


def timed_run(paths: dict[str, SteppedPath], boards: np.ndarray, first: int) -> dict[str, dict]:
    """Every path through the same boards (``boards``: actions [board, frame, 6]), alternating board by board
    which path goes first (from path ``first``); microseconds per frame of IK, physics and both, per path."""
    spent = {name: np.zeros(3) for name in paths}
    names = list(paths)
    for board, actions in enumerate(boards):
        shift = (board + first) % len(names)
        for name in names[shift:] + names[:shift]:
            spent[name] += paths[name].episode(board, actions)
    return {name: {"ik_us": float(ik / frames * 1e6), "physics_us": float(physics / frames * 1e6),
                   "total_us": float((ik + physics) / frames * 1e6)} for name, (ik, physics, frames) in spent.items()}


def median_figures(paths: dict[str, SteppedPath], boards: np.ndarray, repeats: int) -> tuple[dict, dict]:
    """``timed_run`` after a warm-up, ``repeats`` times: each path's median figures and every run's."""
    timed_run(paths, boards[:2], 0)  # warm-up: renderer, caches
    runs: dict[str, list[dict]] = {name: [] for name in paths}
    for repeat in range(repeats):
        for name, figures in timed_run(paths, boards, repeat).items():
            runs[name].append(figures)
    return {name: {key: statistics.median(r[key] for r in rs) for key in rs[0]} for name, rs in runs.items()}, runs


def run(args) -> dict:
    boards = np.random.default_rng(0).uniform(-1, 1, (max(args.frames // EPISODE_FRAMES, 1), EPISODE_FRAMES, 6))
    paths = {"reference": SteppedPath(args, reference=True), "fast": SteppedPath(args, reference=False)}
    medians, runs = median_figures(paths, boards, args.repeats)
    ratio = float(medians["fast"]["total_us"] / medians["reference"]["total_us"])
    rows = [{"path": name, **{k: round(v, 1) for k, v in m.items()}} for name, m in medians.items()]
    print(markdown_table(rows, ["path", "ik_us", "physics_us", "total_us"]))
    print(f"fast / reference: {ratio:.3f} (target <= {TARGET_RATIO})", file=sys.stderr)
    return {"task": args.task, "arm": args.arm, "difficulty": args.difficulty,
            "frames_per_run": int(boards.shape[0] * boards.shape[1]), "repeats": args.repeats, "rows": rows,
            "runs": runs, "ratio": ratio, "ik_ratio": medians["fast"]["ik_us"] / medians["reference"]["ik_us"],
            "physics_ratio": medians["fast"]["physics_us"] / medians["reference"]["physics_us"],
            "target_ratio": TARGET_RATIO, "target_met": ratio <= TARGET_RATIO}

if __name__ == "__main__":
    sys.exit(BENCHMARK.main(run, options))
