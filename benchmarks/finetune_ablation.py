"""Ablation of the fine-tuning design: each lever of ``robot-rl finetune`` switched off (or back to the old
setting) in turn, PPO from the same few-demo BC policy as ``bc_vs_scratch.py --preset cpu``.

Every variant runs the BC arm's budget with the same seeds and held-out boards; the table gives start and final
success (Wilson 95% CI, 50 boards), final guesses, the mean success of the sampled-action episodes PPO collected,
and frames to the benchmark's threshold tau (the same rule: BC start + half the distance to 100%). Finished runs
are reused. Writes ``benchmarks/results/finetune_ablation.json``.

    python benchmarks/finetune_ablation.py            # after bc_vs_scratch.py --preset cpu (reuses its BC run)
"""

from __future__ import annotations

import sys
from pathlib import Path

from harness import Benchmark, Variant
from protocols import PRESETS, bc_start, prepare_bc, run_bc_variant

from robot_rl.run_logs import read_scalar
from robot_rl.tables import markdown_table

# name -> FinetuneConfig overrides; "full" is the design as shipped.
VARIANTS = {
    "full": {},
    "no verdict cross-entropy": {"verdict_ce_weight": 0.0},
    "pose log-prob kept on verdict steps": {"mask_verdict_pose": False},
    "anchor on the pose only, decaying 0.8^k": {"anchor_pose_only": True, "anchor_decay": 0.8},
    "no anchor": {"anchor_weight": 0.0},
    "BC's pose noise (scale floor 0.3)": {"pose_min_scale": 0.3},
    "no shaping": {"shaping": 0.0},
    "old learning rates (3e-5, annealed to 0)": {"lr": 3e-5, "anneal_lr": True},
    "end-to-end encoder (lr 1e-5, 2 PPO epochs)": {"encoder_lr": 1e-5, "ppo_epochs": 2},
    "4x the frames (65,536)": {"total_frames": 65_536},
}

BENCHMARK = Benchmark("finetune_ablation", __doc__, variants=(
    Variant("all", (), "each lever of the fine-tuning design off in turn, from the cpu preset's BC policy"),
), common={"seeds": ([0], "PPO seeds per variant"), "device": "auto"})


def options(parser) -> None:
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))


def run(args) -> dict:
    preset = PRESETS["cpu"]
    bc_dir, _ = prepare_bc(preset, args.device)
    root = Path(preset["bc"].run_dir).parent / "ablation"
    reference, start_metrics, threshold = bc_start(preset, bc_dir, root, args.seeds[0], args.device)

    def sampled_success(run_dir: Path, curve: list[dict], reached: int | None) -> dict:
        return {"sampled_success_per_iteration": [round(v, 4) for _, v in read_scalar(run_dir, "train/success_rate")]}

    rows, results = [], {}
    for name in args.variants:
        results[name] = []
        for seed in args.seeds:
            slug = "".join(c if c.isalnum() else "-" for c in name.split(" (")[0].split(",")[0]).strip("-")
            # "full" is the benchmark's own BC+PPO run of that seed (the same config): reused, not repeated.
            runs = root.parent if name == "full" else root / slug
            results[name].append({"seed": seed, **run_bc_variant(preset, seed, runs, bc_dir, args.device,
                                                                 VARIANTS[name], threshold, sampled_success)})
            curve, sampled = results[name][-1]["curve"], results[name][-1]["sampled_success_per_iteration"]
            final = curve[-1]
            rows.append({"variant": name, "seed": seed, "start": f"{curve[0]['success_rate']:.0%}",
                         "final": f"{final['success_rate']:.0%}",
                         "final 95% CI": "{:.0%}-{:.0%}".format(*final["success_ci95"]),
                         "final guesses": f"{final['guess_rate']:.0%}",
                         "sampled-action success (mean)": f"{sum(sampled) / len(sampled):.0%}",
                         f"frames to {threshold:.0%}": results[name][-1]["frames_to_threshold"]})
            print(f"{name} seed {seed}: {curve[0]['success_rate']:.0%} -> {final['success_rate']:.0%}",
                  file=sys.stderr)
    print(markdown_table(rows))
    return {"threshold": threshold, "threshold_rule": "BC start + (1 - BC start) / 2",
            "bc_start": start_metrics["success_rate"], "budget_frames": reference.total_frames,
            "variants": results, "table": rows}


if __name__ == "__main__":
    sys.exit(BENCHMARK.main(run, options))
