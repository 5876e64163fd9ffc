"""Which behaviour-cloning terms and inputs the BC policy needs: one change at a time.

The BC stage of the quick preset as it was until issue 18 (1,000 demos on easy boards, 64x64, 4 epochs, seed 0;
the quick preset now uses fewer demos, to leave PPO room), trained once per variant on
the same demos, each ``best.pt`` evaluated deterministically on the same 50 fresh boards: strict success with its
Wilson 95% interval, guesses, collisions, episode length. Variants (``VARIANTS``): the preset itself (``full``),
then one BC option changed each, all else as the preset.

    python benchmarks/bc_loss_ablation.py   # about 7 minutes per variant on 2 CPU cores
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

from harness import Benchmark, Variant
from protocols import ci_cell, evaluate_fresh, final_metrics

from robot_rl.configs import BCConfig, CollectConfig
from robot_rl.pretrain.bc import ensure_trained
from robot_rl.pretrain.collect import collect_demos
from robot_rl.tables import markdown_table

# The setting (the quick preset's BC stage until issue 18).
COLLECT = CollectConfig(out="demos", episodes=1000, difficulty="easy", image_size=64)
PRETRAIN = BCConfig(data="demos", run_dir="bc", epochs=4, batch_size=64, eval_every=0, eval_episodes=20)
VARIANTS = {
    "full": {},
    "likelihood only": {"mode_weight": 0.0},
    "joint velocities read": {"joint_velocities": True},
    "no locator": {"locate_weight": 0.0},
}

BENCHMARK = Benchmark("bc_loss_ablation", __doc__, variants=(
    Variant("all", (), "the four BC variants on the same 1,000 easy demos, 50 fresh boards each"),
), common={"boards": (50, "fresh evaluation boards per variant"), "out": None})


def options(parser) -> None:
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--root", default="runs/bc-loss-ablation", help="demos and run folders (reused)")


def run(args) -> dict:
    root = Path(args.root)
    collect = replace(COLLECT, out=str(root / "demos"), seed=0)
    if not (root / "demos" / "meta.json").is_file():
        collect_demos(collect, progress=False)
    rows, results = [], {}
    for name in args.variants:
        run_dir = root / name.replace(" ", "-")
        start = time.perf_counter()
        ensure_trained(replace(PRETRAIN, **VARIANTS[name], data=str(root / "demos"), run_dir=str(run_dir),
                               seed=0), progress=False)
        train_s = time.perf_counter() - start
        metrics = evaluate_fresh(run_dir, args.boards, run_dir / "eval-fresh", checkpoint_kind="best")["metrics"]
        results[name] = {"options": VARIANTS[name], "train_s": round(train_s, 1), **final_metrics(metrics)}
        rows.append({"variant": name, "success (95% CI)": ci_cell(metrics["success_rate"], metrics["success_ci95"]),
                     "boards": metrics["episodes"], "guesses": metrics["guesses"],
                     "collisions / episode": metrics["collisions_per_episode"],
                     "episode length": metrics["episode_length"], "BC seconds": round(train_s)})
        print(f"{name}: {metrics['success_rate']:.0%}", file=sys.stderr)
        payload = {"setting": {"collect": COLLECT, "pretrain": PRETRAIN, "seed": 0,
                               "eval_seeds": [30_000_000, 30_000_000 + args.boards - 1]}, "variants": results}
        BENCHMARK.write(payload, out=args.out)  # after every variant: an interrupted run keeps what it measured
    print(markdown_table(rows))
    return payload


if __name__ == "__main__":
    sys.exit(BENCHMARK.main(run, options))
