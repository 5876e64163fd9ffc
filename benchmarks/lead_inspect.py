"""The lead task with the built-in arm: the README's BC recipe, BC trained longer, and BC + DAgger.

The protocol, fixed in this file before any run:
- task ``lead-inspect``, arm ``ur5e_like``, ``default`` difficulty, 84x84, no randomization; one demo folder of
  ``--episodes`` expert demonstrations (seed 0) shared by every arm;
- arm ``recipe``: the README's BC recipe as it is (6 epochs, batch 64, closed-loop checks every 2 epochs);
- arm ``bc-longer``: the same BC trained 3x as long (18 epochs, checks every 6);
- arm ``dagger``: ``robot-rl dagger`` from the recipe's last policy: 4 rounds of 200 rollout episodes, beta 0.5 halving
  per round, 2 BC epochs on the aggregate per round (about as many BC samples as ``bc-longer``'s extra epochs);
- every arm's **last** policy on the same 100 fresh boards (``evaluate``'s default seeds, seen by no run or check):
  strict success with its Wilson 95% interval, guesses, collisions per episode; the checks on held-out boards are
  reported beside them;
- wall time: every stage's seconds as measured when it ran (collect, each arm's training, evaluations). An arm's
  wall time counts what it needs: the collection, its training (DAgger: the recipe's BC too), its evaluation;
- targets (issue 34): last policy >= 90% on the 100 fresh boards and <= 0.1 collision steps per episode.

Runs in parts: each stage's folder is reused when finished and its measured seconds are kept in
``runs/lead-inspect/stages.json``, so a stopped benchmark continues with the same command; ``--arms`` picks arms.
Every invocation rewrites ``benchmarks/results/lead_inspect.json`` (arms not yet run say so) and a PNG of success
against wall-clock seconds (checks placed by epoch or round within their stage's measured seconds).

    python benchmarks/lead_inspect.py                      # every arm: about 2 hours on 2 CPU cores (bf16)
    python benchmarks/lead_inspect.py --arms recipe dagger # the recipe, then DAgger from it
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from harness import Benchmark, Variant
from protocols import ci_cell, closed_loop_checks, evaluate_fresh, final_metrics, png_figure

from robot_rl.configs import BCConfig, CollectConfig, DAggerConfig
from robot_rl.errors import RunStopped
from robot_rl.io import write_json
from robot_rl.options import resolve_device
from robot_rl.precision import describe
from robot_rl.pretrain.bc import ensure_trained
from robot_rl.pretrain.collect import collect_demos
from robot_rl.pretrain.dagger import dagger
from robot_rl.pretrain.dataset import DemoDataset
from robot_rl.tables import markdown_table

ARMS = ("recipe", "dagger", "bc-longer")
TASK, ARM, DIFFICULTY, IMAGE_SIZE = "lead-inspect", "ur5e_like", "default", 84
RECIPE_EPOCHS, LONGER_EPOCHS = 6, 18
DAGGER = {"rounds": 4, "episodes_per_round": 200, "epochs_per_round": 2, "beta": 0.5, "beta_decay": 0.5}
TARGETS = {"last_policy_success_min": 0.90, "collisions_per_episode_max": 0.1, "fresh_boards": 100}

BENCHMARK = Benchmark("lead_inspect", __doc__, variants=(
    Variant("all", (), "the recipe, BC trained longer and BC + DAgger on the lead task"),
    Variant("recipe-dagger", ("--arms", "recipe", "dagger"), "the recipe, then DAgger from it"),
), targets=TARGETS, common={"boards": (100, "boards per check and in the final evaluation"), "device": "auto",
                            "precision": "auto", "out": (None, "JSON output (a PNG beside it)")})


class Stages:
    """Each stage's measured seconds, kept across the parts of the benchmark (``stages.json`` in the work folder).

    A stage may run in several parts (stopped by Ctrl-C or SIGTERM, resumed by the next invocation): each part's
    seconds and the machine's load average at its end are kept, and the stage's seconds are their sum. A part
    killed with kill -9 leaves no record (its work is kept by the run folder, its time is lost). A stage that
    finished in an earlier part keeps the seconds measured then."""

    def __init__(self, path: Path):
        self.path = path
        self.stages = json.loads(path.read_text()) if path.is_file() else {}

    def seconds(self, name: str) -> float:
        return self.stages[name]["seconds"]

    def run(self, name: str, work, done: bool):
        """Runs ``work()`` (reusing a finished folder is cheap); records the part unless the stage was ``done``
        and timed before."""
        if done and self.stages.get(name, {}).get("finished"):
            return work()
        start, finished = time.perf_counter(), False
        try:
            result = work()
            finished = True
            return result
        finally:
            stage = self.stages.setdefault(name, {"seconds": 0.0, "parts": []})
            # Another load on the machine slows a stage: its load average is kept beside its seconds.
            stage["parts"].append({"seconds": round(time.perf_counter() - start, 1), "finished": finished,
                                   "load_average_1min": round(os.getloadavg()[0], 2),
                                   "ended": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
            stage["seconds"] = round(sum(part["seconds"] for part in stage["parts"]), 1)
            stage["finished"] = finished
            write_json(self.path, self.stages)


def bc_config(args, name: str, epochs: int, eval_every: int) -> BCConfig:
    """The README's BC recipe (batch 64) on the lead demos, in ``--root``/``name``, for ``epochs``."""
    return BCConfig(data=str(args.data), run_dir=str(args.root / name), epochs=epochs, batch_size=64,
                    eval_every=eval_every, eval_episodes=args.boards, device=args.device, precision=args.precision)


def last_on_fresh_boards(run_dir: Path, checkpoint: Path, boards: int, device: str, precision: str) -> dict:
    """The last policy on ``boards`` fresh boards (``evaluate``'s own seeds), its report kept in ``run_dir`` (and
    read back from there when it exists)."""
    report = run_dir / "eval-fresh-last" / "report.json"
    result = (json.loads(report.read_text()) if report.is_file() else
              evaluate_fresh(checkpoint, boards, report.parent, device=device, precision=precision))
    return {"checkpoint": str(checkpoint), "seeds": result["info"]["seeds"], **final_metrics(result["metrics"])}


def verdict_on_targets(final: dict) -> dict:
    met = {"success": final["success_rate"] >= TARGETS["last_policy_success_min"],
           "collisions": final["collisions_per_episode"] <= TARGETS["collisions_per_episode_max"]}
    return {**met, "met": all(met.values())}


def plot(arms: dict, path: Path) -> None:
    """Success against wall-clock seconds: each arm's checks (held-out boards) and its last policy (fresh boards)."""
    with png_figure(path) as ax:
        for (name, arm), colour in zip(arms.items(), ("tab:grey", "tab:green", "tab:blue")):
            if "final" not in arm:
                continue
            checks = arm["curve"]
            ax.plot([c["wall_s"] for c in checks], [c["success_rate"] for c in checks], color=colour, marker=".",
                    label=f"{name}: checks (100 held-out boards)")
            final = arm["final"]
            low, high = final["success_ci95"]
            ax.errorbar([arm["wall_s"]], [final["success_rate"]], color=colour, marker="s", capsize=3,
                        yerr=[[final["success_rate"] - low], [high - final["success_rate"]]],
                        label=f"{name}: last policy, 100 fresh boards")
        ax.axhline(TARGETS["last_policy_success_min"], color="grey", linestyle="--", linewidth=1, label="target 90%")
        ax.set(xlabel="wall-clock seconds (collection included)", ylabel="strict success", ylim=(0, 1.02),
               title="lead-inspect, ur5e_like, default boards")
        ax.legend(loc="upper left", fontsize=7)


def options(parser) -> None:
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS), help="arms to run in this part")
    parser.add_argument("--episodes", type=int, default=1200, help="demonstrations")
    parser.add_argument("--data", type=Path, default=Path("data/demos-lead"), help="demo folder (reused)")
    parser.add_argument("--root", type=Path, default=Path("runs/lead-inspect"), help="the arms' run folders")


def run(args) -> dict:
    args.root.mkdir(parents=True, exist_ok=True)
    stages = Stages(args.root / "stages.json")
    device = resolve_device(args.device)

    collect = CollectConfig(out=str(args.data), episodes=args.episodes, difficulty=DIFFICULTY, image_size=IMAGE_SIZE,
                            seed=0, arm=ARM, task=TASK)
    stages.run("collect", lambda: collect_demos(collect), done=(args.data / "meta.json").is_file())
    dataset = DemoDataset.open(args.data)

    recipe, longer = bc_config(args, "recipe", RECIPE_EPOCHS, 2), bc_config(args, "bc-longer", LONGER_EPOCHS, 6)
    dagger_config = DAggerConfig(init=recipe.run_dir, checkpoint_kind="last", run_dir=str(args.root / "dagger"),
                                 eval_episodes=args.boards, device=args.device, precision=args.precision, **DAGGER)
    arms: dict[str, dict] = {}
    for name in ARMS:
        wanted = name in args.arms or (name == "recipe" and "dagger" in args.arms)
        bc_run = recipe if name in ("recipe", "dagger") else longer
        bc_dir = Path(bc_run.run_dir)
        if wanted:
            stages.run(f"train:{bc_dir.name}", lambda config=bc_run: ensure_trained(config, progress=False),
                       done=(bc_dir / "summary.json").is_file())
        if name == "dagger" and wanted:
            finished = (Path(dagger_config.run_dir) / "summary.json").is_file()
            stages.run("train:dagger", lambda finished=finished: None if finished else
                       dagger(dagger_config, progress=False), done=finished)
        run_dir = Path(dagger_config.run_dir) if name == "dagger" else bc_dir
        if not (run_dir / "summary.json").is_file():
            arms[name] = {"status": "not run yet"}
            continue
        summary = json.loads((run_dir / "summary.json").read_text())
        checkpoint = Path(summary["policy"]) if name == "dagger" else bc_dir / "checkpoints" / "last.pt"
        final = stages.run(f"evaluate:{name}", lambda run_dir=run_dir, checkpoint=checkpoint:
                           last_on_fresh_boards(run_dir, checkpoint, args.boards, args.device, args.precision),
                           done=(run_dir / "eval-fresh-last" / "report.json").is_file())
        bc_seconds = stages.seconds(f"train:{bc_dir.name}")
        start = stages.seconds("collect")
        bc_summary = json.loads((bc_dir / "summary.json").read_text())
        curve = [{**c, "wall_s": round(start + bc_seconds * c["epoch"] / bc_summary["epochs"], 1)}
                 for c in closed_loop_checks(bc_dir, bc_summary["steps"] // bc_summary["epochs"])]
        train_s = bc_seconds
        if name == "dagger":
            dagger_s, rounds = stages.seconds("train:dagger"), summary["rounds"]
            train_s += dagger_s
            curve += [{"round": r["round"], **{k: r[k] for k in ("success_rate", "success_ci95", "episodes",
                                                                  "guesses", "collisions_per_episode")},
                       "aggregate_frames": r["aggregate_frames"],
                       "wall_s": round(start + bc_seconds + dagger_s * r["round"] / len(rounds[1:]), 1)}
                      for r in rounds[1:]]
        arms[name] = {"status": "done", "curve": curve, "final": final, "targets": verdict_on_targets(final),
                      "seconds": {"collect": start, "train": round(train_s, 1),
                                  "evaluate": stages.seconds(f"evaluate:{name}")},
                      "wall_s": round(start + train_s, 1)}
    arms["recipe"]["config"] = {"epochs": RECIPE_EPOCHS, "eval_every": 2}
    arms["bc-longer"]["config"] = {"epochs": LONGER_EPOCHS, "eval_every": 6}
    arms["dagger"]["config"] = DAGGER

    rows = [{"arm": name, "last policy, fresh boards": ci_cell(a["final"]["success_rate"], a["final"]["success_ci95"]),
             "boards": a["final"]["episodes"], "guesses": a["final"]["guesses"],
             "collisions / episode": a["final"]["collisions_per_episode"], "wall s": a["wall_s"],
             "target met": a["targets"]["met"]} for name, a in arms.items() if a["status"] == "done"]
    if rows:
        print(markdown_table(rows))
    plot(arms, args.out.with_suffix(".png"))
    return {
        "precision": describe(args.precision, device), "task": TASK, "arm": ARM, "difficulty": DIFFICULTY,
        "image_size": IMAGE_SIZE, "demos": {"episodes": len(dataset.episodes), "frames": dataset.frames},
        "arms": arms, "stages": stages.stages,
        "note": "checks are placed on the wall-clock axis by epoch (BC) or round (DAgger) within their stage's "
                "measured seconds; the final points are measured",
        "wall_s": {name: stage["seconds"] for name, stage in stages.stages.items()},  # every part of every stage
    }


if __name__ == "__main__":
    try:
        sys.exit(BENCHMARK.main(run, options))
    except RunStopped as stopped:  # Ctrl-C or SIGTERM: the stage checkpointed and its part is recorded
        print(f"lead_inspect: {stopped}; the same command continues it", file=sys.stderr)
        sys.exit(128 + stopped.signum)
