"""Visual robustness: the BC recipe trained without and with domain randomization, under the perturbation suite.

Each arm collects the README's BC demos (1,200 default boards, 84x84) with its ``--randomization``, pretrains with
the BC recipe (6 epochs, held-out checks every 2), then ``evaluate --perturbations`` runs ``best.pt`` on the same
fresh boards nominally (no randomization) and under every fixed shift of ``PERTURBATIONS``, each outside the
``default`` ranges. Reported per arm and shift: strict success (correct verdict with the board localized) with
its Wilson 95% interval and board count, guesses, collisions per episode.

Targets, fixed before the first run: with ``randomization=default`` (and later ``wide``), success >= 90% under every
shift and >= 95% nominal; shifts that geometry alone rules out (``unpassable_shifts``) are reported apart. The
``none`` arm's folders default to ``benchmarks/bc_quality.py``'s (the same recipe), which are reused when finished,
like every other finished stage here.

    python benchmarks/robustness.py --list   # the named variants (--variant NAME runs one)
    # about 35 minutes per arm trained on 2 CPU cores; writes benchmarks/results/robustness.json
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from harness import Benchmark, Variant
from protocols import perturbation_suite, suite_rows
from results_file import read_results

from robot_rl.configs import BCConfig, CollectConfig
from robot_rl.pretrain.bc import ensure_trained
from robot_rl.pretrain.collect import collect_demos
from robot_rl.tables import markdown_table

TARGET_SHIFT_SUCCESS = 0.90  # with randomization=default, under every shift of the suite
TARGET_NOMINAL_SUCCESS = 0.95  # with randomization=default, without any shift
# arm: (training randomization, demos, BC run folder, epochs; None = --epochs)
ARMS = {"none": ("none", "data/demos", "runs/bc-quality", None),
        "default": ("default", "data/demos-randomized", "runs/bc-randomized", None),
        # Added after the first run, which missed the targets with the randomized checks still climbing at epoch
        # 6: the same randomized demos trained twice as long. Reported apart (robustness_12_epochs.json).
        "default-12-epochs": ("default", "data/demos-randomized", "runs/bc-randomized-12-epochs", 12),
        # Added with the ``wide`` preset (tables of any colour, four solder masks, marks): the 12-epoch recipe.
        "wide-12-epochs": ("wide", "data/demos-wide", "runs/bc-wide-12-epochs", 12),
        # Added after the wide arm missed: wide's surfaces, default's camera mount range (one change at a time).
        "surfaces-12-epochs": ("surfaces", "data/demos-surfaces", "runs/bc-surfaces-12-epochs", 12)}
# Shifts that no policy centring the board in its image can pass, by geometry alone (the retired shifted_camera
# benchmark, measured without any policy): reported, and left out of the targets.
GEOMETRY = Path(__file__).parent / "results" / "shifted_camera.json"

BENCHMARK = Benchmark("robustness", __doc__, variants=(
    Variant("none-default", (), "the recipe without and with default randomization, under the suite"),
    Variant("default-12-epochs", ("--arms", "default-12-epochs", "--out",
                                  "benchmarks/results/robustness_12_epochs.json"),
            "the randomized demos trained 12 epochs"),
    Variant("wide", ("--arms", "wide-12-epochs", "default-12-epochs", "--out",
                     "benchmarks/results/robustness_wide.json"), "the wide preset beside default, 12 epochs"),
    Variant("surfaces", ("--arms", "surfaces-12-epochs", "--out", "benchmarks/results/robustness_surfaces.json"),
            "wide's surfaces with default's camera range, 12 epochs"),
), common={"boards": (100, "boards per check and per shift"), "device": "auto", "out": None})


def unpassable_shifts(geometry: Path = GEOMETRY) -> list[str]:
    """The shifts the geometry measurement found no policy can pass (none without its results file)."""
    return read_results(geometry)["unpassable_shifts"] if geometry.is_file() else []


def train_arm(randomization: str, data: str, run_dir: str, epochs: int, args) -> dict:
    """Collects and pretrains one arm (finished stages reused); returns the stage wall times."""
    seconds = {}
    start = time.perf_counter()
    if not (Path(data) / "meta.json").is_file():
        collect_demos(CollectConfig(out=data, episodes=args.episodes, difficulty="default", image_size=84, seed=0,
                                    randomization=randomization))
    meta = json.loads((Path(data) / "meta.json").read_text())
    if meta.get("randomization", "none") != randomization or len(meta["episodes"]) != args.episodes:
        raise SystemExit(f"{data}: holds {len(meta['episodes'])} demos with randomization "
                         f"{meta.get('randomization', 'none')}, this arm needs {args.episodes} with {randomization}")
    seconds["collect"] = time.perf_counter() - start
    start = time.perf_counter()
    ensure_trained(BCConfig(data=data, run_dir=run_dir, epochs=epochs, batch_size=64, eval_every=2,
                            eval_episodes=args.boards, device=args.device))
    seconds["pretrain"] = time.perf_counter() - start
    return seconds


def options(parser) -> None:
    parser.add_argument("--arms", nargs="+", default=["none", "default"], choices=list(ARMS), help="arms to run")
    parser.add_argument("--episodes", type=int, default=1200, help="demonstrations per arm")
    parser.add_argument("--epochs", type=int, default=6, help="BC epochs")


def run(args) -> dict:
    arms, rows = {}, []
    for arm in args.arms:
        randomization, data, run_dir, epochs = ARMS[arm]
        seconds = train_arm(randomization, data, run_dir, epochs or args.epochs, args)
        start = time.perf_counter()
        suite = perturbation_suite(Path(run_dir) / "checkpoints" / "best.pt", args.boards,
                                   Path(run_dir) / "eval-perturbations", args.device)
        seconds["evaluate"] = time.perf_counter() - start
        arms[arm] = {"randomization": randomization, "epochs": epochs or args.epochs, "data": data,
                     "run_dir": run_dir, "suite": suite, "wall_s": {k: round(v, 1) for k, v in seconds.items()}}
        rows += [{**row, "collisions / episode": shift["collisions_per_episode"]}
                 for row, shift in zip(suite_rows(arm, suite), suite)]
    print(markdown_table(rows))
    targets, excluded = {}, unpassable_shifts()
    for arm, result in arms.items():
        if result["randomization"] == "none":
            continue
        suite = result["suite"]
        kept = [r for r in suite[1:] if r["shift"] not in excluded]
        targets[arm] = {"nominal_success": TARGET_NOMINAL_SUCCESS, "shift_success": TARGET_SHIFT_SUCCESS,
                        "excluded_by_geometry": excluded,
                        "nominal_met": suite[0]["success_rate"] >= TARGET_NOMINAL_SUCCESS,
                        "shifts_met": [r["shift"] for r in kept if r["success_rate"] >= TARGET_SHIFT_SUCCESS],
                        "shifts_missed": [r["shift"] for r in kept if r["success_rate"] < TARGET_SHIFT_SUCCESS]}
        print(f"targets ({arm}): nominal >= {TARGET_NOMINAL_SUCCESS:.0%}: "
              f"{'met' if targets[arm]['nominal_met'] else 'missed'}; every shift >= {TARGET_SHIFT_SUCCESS:.0%}"
              f"{' but ' + ', '.join(excluded) if excluded else ''}: "
              f"missed on {', '.join(targets[arm]['shifts_missed']) or 'none'}")
    return {"recipe": {"demos": args.episodes, "difficulty": "default", "image_size": 84, "epochs": args.epochs,
                       "boards": args.boards, "checkpoint": "best.pt", "evaluation_seeds_from": 30_000_000},
            "arms": arms, "targets": targets or None}


if __name__ == "__main__":
    sys.exit(BENCHMARK.main(run, options))
