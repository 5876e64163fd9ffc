"""The start policy as PPO samples it against the deterministic policy, on the same fresh boards.

Closed-loop success of the sampled policy under fine-tuning's exploration settings, before any PPO frame.

PPO improves the policy it samples; the checks and the last-policy readings run the deterministic one. Where the
two differ by much, PPO trains on failures the deterministic policy never makes. Each setting is a set of
``FinetuneConfig`` overrides building the actor exactly as ``robot-rl finetune`` would from the preset's start
(``finetune.models``); every row runs the same ``--boards`` fresh boards (those of every last-policy reading),
sampled with torch seed 0. Writes ``benchmarks/results/sampled_start_PRESET.json``.

    python benchmarks/sampled_start.py --variant lead-flat     # after bc_vs_scratch.py --variant lead-flat-bc
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch
from harness import Benchmark, Variant
from protocols import LOW_NOISE, PRESETS, RESULTS, ci_cell, fresh_board_seeds, ppo_config, prepare_bc

from robot_rl.closed_loop import evaluate_policy
from robot_rl.compute import of_config
from robot_rl.finetune.models import env_options, make_models, starting_point
from robot_rl.tables import markdown_table

# name -> FinetuneConfig overrides, from fine-tuning's defaults to the least noise the settings reach.
SETTINGS = {
    "fine-tuning's defaults": {},
    "answer temperature 0.1, no continue floor": {"answer_temperature": 0.1, "continue_floor": 0.0},
    "the same, a tenth of the learned pose scale": {"answer_temperature": 0.1, "continue_floor": 0.0,
                                                    "pose_scale_factor": 0.1},
    "the same, pose scale floor 0.02 (lead-flat-low-noise's)": LOW_NOISE,
}

BENCHMARK = Benchmark("sampled_start", __doc__, variants=(
    Variant("lead-flat", ("--preset", "lead-flat"), "the lead task's start with DAgger until its check stops rising"),
    Variant("demo", ("--preset", "demo"), "the start make demo builds"),
), common={"boards": 100, "device": "auto"}, results_path=lambda args: RESULTS / f"sampled_start_{args.preset}.json")


def options(parser) -> None:
    parser.add_argument("--preset", choices=[name for name, p in PRESETS.items() if "ppo" in p or "bc" in p],
                        default="lead-flat", help="the bc_vs_scratch preset whose start is read")


def _row(name: str, overrides: dict, metrics: dict, seconds: float) -> dict:
    return {"setting": name, "overrides": overrides, "rate": metrics["success_rate"], "ci95": metrics["success_ci95"],
            "boards": metrics["episodes"], "guesses": metrics["guesses"], "failures": metrics["failures"],
            "episode_length": metrics["episode_length"], "seconds": round(seconds, 1)}


def run(args) -> dict:
    preset = PRESETS[args.preset]
    bc_dir, _ = prepare_bc(preset, args.device)
    boards, rows = fresh_board_seeds(args.boards), []
    for name, overrides in {**SETTINGS, "deterministic": {}}.items():
        config = ppo_config(preset, "bc", preset["seeds"][0], Path("runs/sampled-start"), bc_dir, args.device,
                            **overrides)  # built, never run: its run folder is not written
        start = starting_point(config)
        env_kwargs, compute = env_options(config, start.provenance), of_config(config)
        actor = make_models(config, start, env_kwargs, compute)[0]
        torch.manual_seed(0)
        t0 = time.perf_counter()
        metrics, _ = evaluate_policy(actor, boards, num_envs=8, deterministic=name == "deterministic",
                                     device=compute.torch_device, **env_kwargs)
        rows.append(_row(name, overrides, metrics, time.perf_counter() - t0))
        print(f"{name}: {ci_cell(metrics['success_rate'], metrics['success_ci95'])}, "
              f"{metrics['guesses']} guesses", file=sys.stderr)
    table = [{"policy": r["setting"], f"success ({r['boards']} boards)": ci_cell(r["rate"], r["ci95"]),
              "guesses": r["guesses"], "view never found": r["failures"]["view_never_found"],
              "at the view, no verdict": r["failures"]["no_verdict_at_view"],
              "mean length": f"{r['episode_length']:.0f}"} for r in rows]
    print(markdown_table(table))
    return {"preset": args.preset, "start": str(bc_dir), "settings": rows, "table": table}


if __name__ == "__main__":
    sys.exit(BENCHMARK.main(run, options))
