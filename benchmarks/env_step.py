"""Env step cost: physics + IK per frame of the fast paths against the reference path, in one run.

A frame's physics + IK is the camera-pose IK (``InspectionTask``'s ``self.ik.solve``) and one control period of
physics (``ArmScene.step``). The reference path is the code before the fast paths, still in the package:
``MinkCameraPoseIK`` (mink builds the QP, qpsolvers hands it to DAQP) and ``ArmScene.step_substeps`` (one MuJoCo
call per substep). The fast path is what a task runs: ``CameraPoseIK`` (the same QP into preallocated arrays,
DAQP called directly) and ``ArmScene.step`` (the substeps in one MuJoCo call). Both give the same rollouts bit for
bit (``tests/envs/test_step_speedups.py``).

Both paths step their own task through the same boards and random pose actions (verdict "continue"), so they
visit the same states; only the two calls are timed, per frame, and resets (with their render) are not. The paths
alternate board by board (80 frames each, which path goes first alternating too) so that the machine's drift falls
on both alike; a run is ``--frames`` frames of each, each figure the median over ``--repeats`` runs, the ratio
that of the medians. Target: fast / reference <= 0.476, i.e. the
0.63 ms per frame measured on the GPU box's Xeon down to 0.30 ms.

``--timesteps DT ...`` asks what a new env version with a longer physics timestep would change, since the substeps
are most of a frame's cost. Speed: the fast path at each DT beside the env's and the reference, timed as above in
the same run. Behaviour: from every state the fast path visits at the env's step (the same boards and actions), one
control period runs at the env's timestep and at each DT; the record gives how far the camera ends from where the
env's step puts it (position and angle, median / p99 / max; the pose as the env reads it after a period, from the
kinematics MuJoCo computed at the start of the period's last substep, so a longer step's pose is that much older
too), the size of the action behind the largest gap, on how many periods the env's step touched anything and on
how many the collision flag disagrees, and how many periods raised an instability warning. Then the task's
scripted expert inspects ``--expert-boards`` fresh boards at each step (strict success, collisions). Targets do
not apply to it: it measures a choice, it makes none.

    python benchmarks/env_step.py                      # writes benchmarks/results/env_step.json
    python benchmarks/env_step.py --variant timesteps  # -> benchmarks/results/env_step_timesteps.json
"""

from __future__ import annotations

import statistics
import sys
import time

import mujoco
import numpy as np
from harness import Benchmark, Variant
from protocols import fresh_board_seeds

from robot_rl.envs.ik import camera_ik
from robot_rl.envs.scene import CONTROL_PERIOD, PHYSICS_TIMESTEP, instability_warnings, quat_from_rotvec
from robot_rl.envs.task import expert_steps
from robot_rl.envs.tasks import build_task
from robot_rl.episodes import wilson_interval
from robot_rl.tables import markdown_table

TARGET_RATIO = 0.476  # 0.30 ms of the 0.63 ms per frame measured on the GPU box
EPISODE_FRAMES = 80  # a new board after this many frames (the task's step limit)
_INTEGRATION = mujoco.mjtState.mjSTATE_INTEGRATION  # everything a step reads, controls included

BENCHMARK = Benchmark("env_step", __doc__, variants=(
    Variant("all", (), "physics + IK per frame, fast paths against the reference (pcb-inspect, default arm)"),
    Variant("panda", ("--arm", "panda", "--out", "benchmarks/results/env_step_panda.json"),
            "the same with the Panda (7 joints, posture task; needs the [panda] extra)"),
    Variant("timesteps", ("--timesteps", "0.005", "0.01", "0.02", "--out",
                          "benchmarks/results/env_step_timesteps.json"),
            "the fast path at longer physics timesteps: its cost, one control period against the env's, the expert"),
    Variant("timesteps-panda", ("--arm", "panda", "--timesteps", "0.005", "0.01", "0.02", "--out",
                                "benchmarks/results/env_step_timesteps_panda.json"),
            "the same with the Panda (needs the [panda] extra)"),
), targets={"max_ratio": TARGET_RATIO}, common={"out": None})


def options(parser) -> None:
    parser.add_argument("--task", default="pcb-inspect", help="registered task")
    parser.add_argument("--arm", default="ur5e_like", help="registered arm")
    parser.add_argument("--difficulty", default="default", help="difficulty preset")
    parser.add_argument("--frames", type=int, default=1600, help="frames per path per timed run")
    parser.add_argument("--repeats", type=int, default=7, help="timed runs per path (median reported)")
    parser.add_argument("--timesteps", type=float, nargs="+", default=(),
                        help="physics timesteps (s) to compare with the env's, one control period from each state")
    parser.add_argument("--expert-boards", type=int, default=200,
                        help="fresh boards the scripted expert inspects at each timestep (with --timesteps)")


class SteppedPath:
    """One task stepped by one path's IK and physics, timing those two calls per frame."""

    def __init__(self, args, reference: bool, timestep: float = PHYSICS_TIMESTEP):
        self.task = build_task(args.task, args.difficulty, 32, None, {}, arm=args.arm)
        scene = self.task.scene
        scene.set_physics_timestep(timestep)
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


def one_period(scene, state: np.ndarray, timestep: float) -> tuple[np.ndarray, np.ndarray, bool, int]:
    """One control period from ``state`` (integration state, controls set) at physics ``timestep``: the camera's
    position and rotation after it as the env reads them, whether anything touched, and the instability warnings
    it raised."""
    m, d = scene.model, scene.data
    mujoco.mj_setState(m, d, state, _INTEGRATION)
    scene.set_physics_timestep(timestep)
    d.warning.number[:] = 0  # counted from here (an instability's reset of the data keeps its own warning)
    d.maxuse_con = 0
    mujoco.mj_step(m, d, scene.substeps)
    position, rotation = scene.camera_pose()
    scene.set_physics_timestep(PHYSICS_TIMESTEP)
    return position, rotation.copy(), bool(d.maxuse_con > 0), instability_warnings(d)  # rotation: a view


def period_gaps(args, boards: np.ndarray, timesteps: list[float]) -> dict[float, dict]:
    """Per timestep of ``timesteps``, one control period against the env's from every state the fast path visits
    through ``boards`` (module docstring)."""
    path = SteppedPath(args, reference=False)
    scene, config = path.task.scene, path.task.config
    state = np.empty(mujoco.mj_stateSize(scene.model, _INTEGRATION))
    position_mm, angle_deg, action_size = ({dt: [] for dt in timesteps} for _ in range(3))
    counts = {dt: {"collision_differs": 0, "unstable_periods": 0} for dt in [*timesteps, PHYSICS_TIMESTEP]}
    touched_at_env_step = 0
    for board, actions in enumerate(boards):
        path.task.reset(board)
        for action in actions:
            target_quat = np.empty(4)
            mujoco.mju_mulQuat(target_quat, quat_from_rotvec(action[3:] * config.max_rotation), scene.camera_quat())
            scene.data.ctrl[scene.actuator_ids] = path.solve(
                scene.qpos, scene.camera_pose()[0] + action[:3] * config.max_translation, target_quat)
            mujoco.mj_getState(scene.model, scene.data, state, _INTEGRATION)
            # The env's timestep last: its period is the one the episode goes on from.
            outcomes = {dt: one_period(scene, state, dt) for dt in [*timesteps, PHYSICS_TIMESTEP]}
            env_position, env_rotation, env_touched, _ = outcomes[PHYSICS_TIMESTEP]
            touched_at_env_step += env_touched
            for dt, (position, rotation, touched, raised) in outcomes.items():
                counts[dt]["unstable_periods"] += raised > 0
                if dt == PHYSICS_TIMESTEP:
                    continue
                counts[dt]["collision_differs"] += touched != env_touched
                position_mm[dt].append(float(np.linalg.norm(position - env_position) * 1000))
                cosine = np.clip((np.trace(rotation.T @ env_rotation) - 1) / 2, -1.0, 1.0)
                angle_deg[dt].append(float(np.degrees(np.arccos(cosine))))
                action_size[dt].append(float(np.abs(action).max()))

    def spread(name: str, values: list[float]) -> dict:
        return {f"{name}_{stat}": round(float(f(values)), 4) for stat, f in
                (("median", np.median), ("p99", lambda v: np.percentile(v, 99)), ("max", np.max))}

    gaps = {dt: {**spread("position_mm", position_mm[dt]), **spread("angle_deg", angle_deg[dt]),
                 "largest_gap_action": round(action_size[dt][int(np.argmax(position_mm[dt]))], 3),
                 **counts[dt], "env_step_touched": touched_at_env_step} for dt in timesteps}
    return {**gaps, PHYSICS_TIMESTEP: {**counts[PHYSICS_TIMESTEP], "env_step_touched": touched_at_env_step}}


def expert_at(args, timestep: float) -> dict:
    """The task's scripted expert on ``args.expert_boards`` fresh boards with physics at ``timestep``: strict
    success with its Wilson interval, collisions and steps per episode."""
    task = build_task(args.task, args.difficulty, 32, None, {}, arm=args.arm)
    task.scene.set_physics_timestep(timestep)
    successes = collisions = steps = 0
    for seed in fresh_board_seeds(args.expert_boards):
        for _, result in expert_steps(task, seed):
            collisions += result.flags["collision"]
        successes, steps = successes + result.flags["success"], steps + task.step_count
    boards = args.expert_boards
    return {"rate": successes / boards, "ci95": wilson_interval(successes, boards), "boards": boards,
            "collisions_per_episode": collisions / boards, "steps_per_episode": steps / boards}


def timestep_sweep(args, boards: np.ndarray) -> dict:
    """The fast path at each of ``args.timesteps`` against the env's timestep and the reference path: time per
    frame in one run, the gaps one control period opens, and the scripted expert (module docstring)."""
    timesteps = sorted(dt for dt in args.timesteps if dt != PHYSICS_TIMESTEP)
    paths = {"reference": SteppedPath(args, reference=True),
             **{f"fast at {dt} s": SteppedPath(args, reference=False, timestep=dt)
                for dt in [PHYSICS_TIMESTEP, *timesteps]}}
    medians, runs = median_figures(paths, boards, args.repeats)
    reference = medians["reference"]["total_us"]
    gaps = period_gaps(args, boards, timesteps)
    rows = [{"timestep_s": dt, "substeps": round(CONTROL_PERIOD / dt),
             **{key: round(value, 1) for key, value in medians[f"fast at {dt} s"].items()},
             "of_reference": round(medians[f"fast at {dt} s"]["total_us"] / reference, 3), **gaps[dt],
             "expert": expert_at(args, dt)} for dt in [PHYSICS_TIMESTEP, *timesteps]]
    print(markdown_table([{**row, "expert_success": row["expert"]["rate"]} for row in rows],
                         ["timestep_s", "substeps", "total_us", "of_reference", "position_mm_median",
                          "position_mm_p99", "position_mm_max", "angle_deg_max", "largest_gap_action",
                          "collision_differs", "unstable_periods", "expert_success"]))
    return {"task": args.task, "arm": args.arm, "difficulty": args.difficulty,
            "frames_per_run": int(boards.shape[0] * boards.shape[1]), "repeats": args.repeats,
            "env_timestep_s": PHYSICS_TIMESTEP, "reference": {k: round(v, 1) for k, v in medians["reference"].items()},
            "rows": rows, "runs": runs, "target_ratio": TARGET_RATIO,
            "targets": None}  # it measures a choice


def run(args) -> dict:
    boards = np.random.default_rng(0).uniform(-1, 1, (max(args.frames // EPISODE_FRAMES, 1), EPISODE_FRAMES, 6))
    if args.timesteps:
        return timestep_sweep(args, boards)
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
