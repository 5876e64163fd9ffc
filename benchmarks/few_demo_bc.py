"""Few-demo behaviour cloning: which (demos, difficulty, epochs) leaves room for RL, and what errors BC makes there.

For each setting: collect the demos and run BC (reused when their folders already hold finished runs), then run
the BC policy's best checkpoint deterministically on the same 50 held-out boards the PPO benchmark evaluates on,
and break its episodes down: success (a correct verdict while localized, Wilson 95% CI), guesses (verdicts without
the board localized; right or wrong), wrong verdicts at the board, timeouts, collisions, and where the camera was
when it answered. Writes ``benchmarks/results/few_demo_bc.json``.

    python benchmarks/few_demo_bc.py        # about 40 minutes on 2 CPU cores when nothing is reused
"""

from __future__ import annotations

import sys
from pathlib import Path

import mujoco
import numpy as np
import torch
from harness import Benchmark, Variant
from protocols import PRESETS

from robot_rl import keys
from robot_rl.closed_loop import held_out_seeds, run_episodes
from robot_rl.configs import BCConfig, CollectConfig
from robot_rl.envs import make_env
from robot_rl.envs.task import TaskConfig
from robot_rl.envs.tasks.pcb_inspect.view import inspection_geometry
from robot_rl.episodes import aggregate, summarize_episode
from robot_rl.options import resolve_device
from robot_rl.policy_io import load_actor
from robot_rl.pretrain.bc import ensure_trained
from robot_rl.pretrain.collect import collect_demos
from robot_rl.run_folder import RunFolder
from robot_rl.tables import markdown_table

_cpu = PRESETS["cpu"]
SETTINGS = {
    "500 demos, default boards, 8 epochs": (
        CollectConfig(out="data/few-demo/default-500", episodes=500, difficulty="default", image_size=84),
        BCConfig(run_dir="runs/few-demo/default-500", epochs=8, batch_size=64, eval_every=2, eval_episodes=50)),
    "1,000 demos, default boards, 6 epochs": (
        CollectConfig(out="data/few-demo/default-1000", episodes=1000, difficulty="default", image_size=84),
        BCConfig(run_dir="runs/few-demo/default-1000", epochs=6, batch_size=64, eval_every=2, eval_episodes=50)),
    "400 demos, easy boards, 6 epochs (the benchmark's)": (_cpu["demos"], _cpu["bc"]),
}

BENCHMARK = Benchmark("few_demo_bc", __doc__, variants=(
    Variant("all", (), "three few-demo BC settings and their errors on the PPO benchmark's boards"),
), common={"device": "auto"})


def _camera_error(step) -> dict:
    """Where the camera was, relative to the inspection pose, on the step that gave the verdict."""
    camera, board = step.get(keys.CAMERA_POSE).numpy().astype(np.float64), step.get(keys.BOARD_POSE).numpy()
    rotation = np.empty(9)
    mujoco.mju_quat2Mat(rotation, camera[3:])  # the pose's quaternion is wxyz, MuJoCo's order
    _, height, off_axis = inspection_geometry(camera[:3], rotation.reshape(3, 3), board[:3].astype(np.float64))
    return {"height_error_m": float(height - TaskConfig.inspection_height), "off_axis_m": float(off_axis)}


def breakdown(run_dir: str, difficulty: str, image_size: int, seeds: list[int], device) -> dict:
    """The BC policy on ``seeds``: aggregate metrics plus an error breakdown."""
    actor, _, _ = load_actor(run_dir, device, checkpoint_kind="best")
    env = make_env(num_envs=8, difficulty=difficulty, image_size=image_size, parallel=False, episode_seeds=seeds,
                   device=device)
    with torch.no_grad():
        rollouts = run_episodes(env, actor, len(seeds))
    env.close()
    summaries = [summarize_episode(r) for r in rollouts]
    metrics = aggregate(summaries)
    answered = [(s, _camera_error(r[-1])) for s, r in zip(summaries, rollouts) if s["verdict"] != "none"]
    guesses = [e for s, e in answered if s["guess"]]
    n = len(summaries)
    return {
        "success_rate": metrics["success_rate"], "success_ci95": metrics["success_ci95"], "boards": n,
        "errors": {
            "guesses": sum(s["guess"] for s in summaries),
            "right_guesses": sum(s["guess"] and s["correct_verdict"] for s in summaries),
            "wrong_verdicts_at_the_board": sum(not s["guess"] and s["verdict"] != "none" and not s["correct_verdict"]
                                               for s in summaries),
            "timeouts": metrics["timed_out"],
            "episodes_with_collision": metrics["episodes_with_collision"],
            "never_localized": n - metrics["localized_episodes"],
        },
        "collisions_per_episode": metrics["collisions_per_episode"], "episode_length": metrics["episode_length"],
        "guess_camera_median": {key: float(np.median([e[key] for e in guesses])) if guesses else None
                                for key in ("off_axis_m", "height_error_m")},
    }


def run(args) -> dict:
    device = resolve_device(args.device)
    seeds = held_out_seeds(20_000_000, 50, set())  # the PPO benchmark's held-out boards (FinetuneConfig.eval_seed)
    rows, results = [], {}
    for name, (demos, bc) in SETTINGS.items():
        if not (Path(demos.out) / "meta.json").is_file() and not RunFolder(bc.run_dir).finished:
            collect_demos(demos, progress=False)
        ensure_trained(BCConfig(**{**bc.__dict__, "data": demos.out, "device": args.device}), progress=False)
        result = breakdown(bc.run_dir, demos.difficulty, demos.image_size, seeds, device)
        results[name] = {"demos": demos.__dict__, "bc": bc.__dict__, **result}
        errors = result["errors"]
        rows.append({"setting": name, "success": f"{result['success_rate']:.0%}",
                     "95% CI": "{:.0%}-{:.0%}".format(*result["success_ci95"]),
                     "guesses (right)": f"{errors['guesses']} ({errors['right_guesses']})",
                     "wrong at the board": errors["wrong_verdicts_at_the_board"], "timeouts": errors["timeouts"],
                     "collided": errors["episodes_with_collision"],
                     "guess off-axis (median)": result["guess_camera_median"]["off_axis_m"]})
        print(rows[-1], file=sys.stderr)
    print(markdown_table(rows))
    return {"settings": results, "table": rows, "eval_board_seeds": [seeds[0], seeds[-1]]}


if __name__ == "__main__":
    sys.exit(BENCHMARK.main(run))
