"""The README's behaviour-cloning recipe, end to end: collect demos, pretrain, evaluate on fresh boards.

Runs ``collect-demos`` (default boards, 84x84), ``pretrain`` with a closed-loop check on held-out boards every few
epochs, then ``evaluate`` of ``last.pt`` (what BC ends with) and ``best.pt`` (chosen by the checks) on boards seen
neither in training nor in the checks. Reports each check and the two final evaluations: strict success (a correct
verdict while the board is localized) with its Wilson 95% interval and board count, guesses, collisions per episode
and episode length; plus the wall time of each stage and the machine. Folders that already hold a finished stage are
reused (and the BC time measured when it ran kept).

    python benchmarks/bc_quality.py --list   # the named variants (--variant NAME runs one)
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from harness import Benchmark, Variant
from protocols import ci_cell, closed_loop_checks, evaluate_fresh, final_metrics

from robot_rl.artefact_files import DATASET_META
from robot_rl.configs import BCConfig, CollectConfig
from robot_rl.dataset import DemoDataset
from robot_rl.options import resolve_device
from robot_rl.precision import describe
from robot_rl.pretrain.bc import ensure_trained
from robot_rl.pretrain.collect import collect_demos
from robot_rl.run_folder import RunFolder
from robot_rl.tables import markdown_table

_PANDA = ("--arm", "panda", "--data", "data/demos-panda")
BENCHMARK = Benchmark("bc_quality", __doc__, variants=(
    Variant("recipe", (), "the README's BC recipe: 1,200 default demos at 84x84, 6 epochs (~30 min on 2 CPU cores)"),
    Variant("bf16", ("--precision", "bf16", "--run-dir", "runs/bc-quality-bf16", "--out",
                     "benchmarks/results/bc_quality_bf16.json"), "the recipe with the encoder in bf16"),
    Variant("panda", (*_PANDA, "--run-dir", "runs/bc-panda", "--out", "benchmarks/results/bc_quality_panda.json"),
            "the recipe on the Franka Panda"),
    Variant("lead-inspect", ("--task", "lead-inspect", "--data", "data/demos-lead", "--run-dir", "runs/bc-lead",
                             "--out", "benchmarks/results/bc_quality_lead_inspect.json"),
            "the recipe on the lead-inspection task"),
), common={"boards": (100, "boards per check and in the final evaluation"), "device": "auto", "precision": "auto",
           "out": None})


def options(parser) -> None:
    parser.add_argument("--episodes", type=int, default=1200, help="demonstrations")
    parser.add_argument("--epochs", type=int, default=6, help="BC epochs")
    parser.add_argument("--eval-every", type=int, default=2, help="epochs between closed-loop checks")
    parser.add_argument("--data", default="data/demos", help="demo folder (reused when complete)")
    parser.add_argument("--run-dir", default="runs/bc-quality", help="BC run folder (reused when finished)")
    parser.add_argument("--arm", default="ur5e_like", help="the arm collecting the demos (recorded in them)")
    parser.add_argument("--task", default="pcb-inspect", help="the task of the demos (recorded in them)")


def run(args) -> dict:
    collect = CollectConfig(out=args.data, episodes=args.episodes, difficulty="default", image_size=84, seed=0,
                            arm=args.arm, task=args.task)
    bc_config = BCConfig(data=args.data, run_dir=args.run_dir, epochs=args.epochs, batch_size=64,
                         eval_every=args.eval_every, eval_episodes=args.boards, device=args.device,
                         precision=args.precision)
    run_dir, seconds = Path(args.run_dir), {}

    start = time.perf_counter()
    if not (Path(args.data) / DATASET_META).is_file():
        collect_demos(collect)
    dataset = DemoDataset.open(args.data)
    seconds["collect"] = time.perf_counter() - start
    start = time.perf_counter()
    reused = RunFolder(run_dir).finished
    summary = ensure_trained(bc_config)
    seconds["pretrain"] = time.perf_counter() - start
    if reused and args.out.is_file():  # a finished run read back: keep the BC time measured when it ran
        seconds["pretrain"] = json.loads(args.out.read_text())["parts"]["pretrain"]
    start = time.perf_counter()
    # The last policy is what BC ends with; best.pt was chosen by the checks, on other boards than these.
    fresh = {name: evaluate_fresh(run_dir / "checkpoints" / f"{name}.pt", args.boards, run_dir / f"eval-fresh-{name}",
                                  device=args.device, precision=args.precision) for name in ("last", "best")}
    seconds["evaluate"] = time.perf_counter() - start

    checks = closed_loop_checks(run_dir, summary["steps"] // summary["epochs"])
    shown = [(f"epoch {c['epoch']} (BC's held-out boards)", c, c["boards"]) for c in checks]
    shown += [(f"{name}.pt on fresh boards", r["metrics"], r["metrics"]["episodes"]) for name, r in fresh.items()]
    rows = [{"check": check, "success (95% CI)": ci_cell(m["success_rate"], m["success_ci95"]), "boards": boards,
             "guesses": m["guesses"], "collisions / episode": m["collisions_per_episode"],
             "episode length": m["episode_length"]} for check, m, boards in shown]
    print(markdown_table(rows))
    val_episodes = max(1, round(len(dataset.episodes) * bc_config.val_fraction))
    return {
        "precision": describe(args.precision, resolve_device(args.device)),
        "arm": dataset.meta.get("arm", "ur5e_like"), "task": dataset.meta["env"],
        "recipe": {"demos": len(dataset.episodes), "frames": dataset.frames, "difficulty": "default",
                   "image_size": 84, "epochs": args.epochs, "batch_size": bc_config.batch_size,
                   "validation_episodes": val_episodes, "val_fraction": bc_config.val_fraction,
                   "keypoints": bc_config.keypoints, "joint_velocities": bc_config.joint_velocities,
                   "joint_scaling": bc_config.joint_scaling,
                   "continue_head": bc_config.continue_head, "timing_weight": bc_config.timing_weight,
                   "best_epoch_success": summary["best_success"]},
        "checks": checks,
        **{key: {"seeds": fresh[name]["info"]["seeds"], "checkpoint": f"{name}.pt",
                 **final_metrics(fresh[name]["metrics"])}
           for key, name in (("fresh_boards", "best"), ("fresh_boards_last", "last"))},
        "wall_s": {k: round(v, 1) for k, v in seconds.items()},
    }


if __name__ == "__main__":
    sys.exit(BENCHMARK.main(run, options))
