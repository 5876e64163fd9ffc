"""BC-initialized PPO against PPO from scratch: closed-loop success against environment frames.

The protocol (issues 10 and 18), fixed in this file before any run:
- one few-demo behaviour-cloning policy (the preset's demos and epochs); PPO from it and PPO from random weights
  with the same network, PPO settings and check boards, ``seeds`` seeds each;
- success = a correct verdict given while the board is localized; every curve point is a deterministic rollout
  on the same ``eval_episodes`` held-out check boards, with its Wilson 95% interval;
- threshold tau = BC start + half the distance to 100%, where the start is the BC policy's success on those boards
  before any PPO frame (the rule is fixed here; its value is recorded, never tuned);
- frames-to-tau per seed: the first of two consecutive checks at or above tau (one 50-board check is +-13 points);
  an arm's figure is the median over seeds;
- ratio = scratch / BC+PPO frames-to-tau. The BC arm runs first; scratch then gets a budget of
  ``scratch_budget_factor`` (>= 3) times BC+PPO's median frames-to-tau, and never less than BC+PPO's own budget.
  If scratch's median never reaches tau, the result is censored: ``ratio`` null and ``ratio_lower_bound`` = scratch
  budget / BC+PPO frames-to-tau. The ratio counting the demonstrations' frames as BC's is reported too;
- the final success of a run is its **last** policy (last.pt) on ``--fresh-boards`` boards no run has seen, with
  best.pt beside it; the lift is measured against the BC policy on the same fresh boards.
Targets (issue 18): every seed's last policy >= 80% and >= 40 points above the start, its interval above the
start's; no check more than 10 points below the running best after tau; ratio (or censored bound) >= 3.

Finished runs are reused (a killed benchmark resumes where it stopped), and ``--arms`` runs the benchmark in parts
(the BC arm first; scratch's budget follows from it). Writes ``benchmarks/results/bc_vs_scratch_<preset>.json``
(each run's minutes in ``run_seconds``) and a PNG of mean and min-max success against frames.

    python benchmarks/bc_vs_scratch.py --preset few --arms bc        # BC arm: 3 x 65,536 frames
    python benchmarks/bc_vs_scratch.py --preset few --arms scratch   # then scratch, >= 3x BC's frames to tau
    python benchmarks/bc_vs_scratch.py --preset lead-few --arms bc   # the few protocol on the lead task, one seed
    python benchmarks/bc_vs_scratch.py --preset lead-dagger --arms bc  # the lead task, BC + DAgger start, 3 seeds
    python benchmarks/bc_vs_scratch.py --preset lead-residual --arms bc  # the same start, PPO on a residual (ResiP)
    python benchmarks/bc_vs_scratch.py --preset gpu                  # 224x224, larger budgets, for a CUDA machine
    python benchmarks/bc_vs_scratch.py --preset few --arms bc --seeds 0 --precision bf16   # the encoder in bf16

``--precision fp32|bf16`` runs BC, PPO and every evaluation in that precision, in folders and a results file of
their own (``..._bf16``); the demos are shared. Without it (``auto``) the precision follows the machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
from timing import describe_machine, provenance

from robot_rl.closed_loop import evaluate_policy, held_out_seeds
from robot_rl.configs import PRECISIONS, BCConfig, CollectConfig, DAggerConfig, FinetuneConfig
from robot_rl.finetune import trainer
from robot_rl.io import atomic_path, write_json
from robot_rl.options import resolve_device
from robot_rl.policy_io import load_actor
from robot_rl.precision import describe
from robot_rl.pretrain import dagger
from robot_rl.pretrain.bc import ensure_trained
from robot_rl.pretrain.collect import collect_demos
from robot_rl.pretrain.dataset import DemoDataset
from robot_rl.run_folder import RunFolder
from robot_rl.tables import markdown_table

RESULTS = Path(__file__).parent / "results"
FRESH_BOARDS_SEED = 40_000_000  # boards for last.pt / best.pt: neither demos, BC checks nor PPO checks use them

# The CPU presets' PPO: frozen encoder (features cached at collection), privileged critic, shaping for both arms;
# 16 PPO iterations of 1,024 frames for BC+PPO, scratch gets 3x what BC+PPO needed; three seeds each.
CPU_PPO = {
    "ppo": dict(frames_per_batch=1024, num_envs=8, ppo_epochs=8, minibatch_size=256, eval_every=2,
                eval_episodes=50, critic_warmup=2, checkpoint_every=2, shaping=1.0),
    "bc_frames": 16_384,
    "scratch_budget_factor": 3,
    "scratch": dict(continue_prob=0.97),
    "seeds": (0, 1, 2),
}

PRESETS = {
    "cpu": {
        # The few-demo setting of the old BC loss (README, "A few-demo BC policy"): 400 demos on easy boards,
        # 6 epochs left BC in a partly working state; benchmarks/few_demo_bc.py measures it beside two others.
        "demos": CollectConfig(out="data/bench-cpu-demos", episodes=400, difficulty="easy", image_size=84),
        "bc": BCConfig(run_dir="runs/bench-cpu/bc", epochs=6, batch_size=64, eval_every=2, eval_episodes=50),
        **CPU_PPO,
    },
    "few": {
        # Fewer demos for the fixed BC recipe (mode loss, locator, keypoints), whose 1,000-demo quick setting
        # reaches 100%: 150 easy demos at 64x64, 8 epochs; a development run of this setting gave 46% strict
        # success on 50 fresh boards.
        "demos": CollectConfig(out="data/bench-few-demos", episodes=150, difficulty="easy", image_size=64),
        "bc": BCConfig(run_dir="runs/bench-few/bc", epochs=8, batch_size=64, eval_every=2, eval_episodes=50),
        **CPU_PPO,
        # Issue 18: the lift took 49k frames with the old design, so the BC arm gets 65,536; a check every 4
        # iterations (4,096 frames), the same schedule for both arms (a scratch check runs 80-step timeouts).
        "ppo": {**CPU_PPO["ppo"], "eval_every": 4, "checkpoint_every": 4},
        "bc_frames": 65_536,
    },
    "lead-few": {
        # The few preset's protocol on the lead-inspection task (issue: arm and task API; one seed): 150 easy
        # demos at 64x64, the same BC recipe and PPO.
        "demos": CollectConfig(out="data/bench-lead-few-demos", episodes=150, difficulty="easy", image_size=64,
                               task="lead-inspect"),
        "bc": BCConfig(run_dir="runs/bench-lead-few/bc", epochs=8, batch_size=64, eval_every=2, eval_episodes=50),
        **CPU_PPO,
        "ppo": {**CPU_PPO["ppo"], "eval_every": 4, "checkpoint_every": 4},
        "bc_frames": 65_536,
        "seeds": (0,),
    },
    "lead-dagger": {
        # The lead task's few-demo start made to localize some of the time: the lead-few demos and BC, then DAgger
        # rounds with the task's expert (rollouts of the current policy labelled by it), before PPO.
        "demos": CollectConfig(out="data/bench-lead-few-demos", episodes=150, difficulty="easy", image_size=64,
                               task="lead-inspect"),
        "bc": BCConfig(run_dir="runs/bench-lead-dagger/bc", epochs=8, batch_size=64, eval_every=2, eval_episodes=50),
        "dagger": DAggerConfig(rounds=2, episodes_per_round=150, epochs_per_round=4, eval_episodes=50,
                               checkpoint_kind="best"),  # from BC's best.pt, as the other presets' PPO
        **CPU_PPO,
        "ppo": {**CPU_PPO["ppo"], "eval_every": 4, "checkpoint_every": 4},
        "bc_frames": 65_536,
    },
    "lead-residual": {
        # lead-dagger's start (the same demos, BC and DAgger folders), then PPO on a residual of the frozen
        # policy's pose (finetune --residual-scale) instead of its heads; the verdict stays DAgger's.
        "demos": CollectConfig(out="data/bench-lead-few-demos", episodes=150, difficulty="easy", image_size=64,
                               task="lead-inspect"),
        "bc": BCConfig(run_dir="runs/bench-lead-dagger/bc", epochs=8, batch_size=64, eval_every=2, eval_episodes=50),
        "dagger": DAggerConfig(rounds=2, episodes_per_round=150, epochs_per_round=4, eval_episodes=50,
                               checkpoint_kind="best"),
        **CPU_PPO,
        "ppo": {**CPU_PPO["ppo"], "eval_every": 4, "checkpoint_every": 4, "residual_scale": 0.1},
        "ppo_root": "runs/bench-lead-residual",
        "bc_frames": 65_536,
    },
    "gpu": {
        "demos": CollectConfig(out="data/bench-gpu-demos", episodes=1000, difficulty="default", image_size=224),
        "bc": BCConfig(run_dir="runs/bench-gpu/bc", epochs=6, batch_size=256, eval_every=2, eval_episodes=100),
        "ppo": dict(frames_per_batch=8192, num_envs=32, workers=16, ppo_epochs=8, minibatch_size=1024,
                    eval_every=1, eval_episodes=100, critic_warmup=2, checkpoint_every=2, shaping=1.0),
        "bc_frames": 131_072,
        "scratch_budget_factor": 3,
        "scratch": dict(continue_prob=0.97),
        "seeds": (0, 1, 2),
    },
}


def threshold_rule(start: float) -> float:
    """tau: the BC start plus half its distance to 100%."""
    return start + (1.0 - start) / 2


def frames_to_threshold(curve: list[dict], threshold: float) -> int | None:
    """Frames at the first of two consecutive curve points whose success rates reach ``threshold`` (None if no
    two do): one 50-board check has a +-13-point interval, so one lucky check is not convergence."""
    reached = [point["success_rate"] >= threshold - 1e-9 for point in curve]
    return next((curve[i]["frames"] for i in range(len(curve) - 1) if reached[i] and reached[i + 1]), None)


def largest_fall_after(curve: list[dict], frames: int) -> float:
    """The largest fall of a check below the running best of the checks before it, from ``frames`` on."""
    best, fall = 0.0, 0.0
    for point in curve:
        if point["frames"] > frames:
            fall = max(fall, best - point["success_rate"])
        best = max(best, point["success_rate"])
    return round(fall, 4)


def on_fresh_boards(checkpoint: str | Path, boards: int, device: str, precision: str = "auto") -> dict:
    """A policy checkpoint (or run folder) on ``boards`` boards no run has seen (not the check boards): success
    with its Wilson interval, guesses (and how many came after the board had been localized), timeouts, verdict
    accuracy."""
    device = resolve_device(device)
    actor, provenance, _ = load_actor(checkpoint, device, precision=precision)
    metrics, episodes = evaluate_policy(actor, held_out_seeds(FRESH_BOARDS_SEED, boards, set()), num_envs=8,
                                        device=device, **provenance.env_kwargs())
    return {"rate": metrics["success_rate"], "ci95": metrics["success_ci95"], "boards": metrics["episodes"],
            "guesses": metrics["guesses"], "timed_out": metrics["timed_out"],
            "verdict_accuracy": metrics["verdict_accuracy"],
            # Guesses given after the board had been localized: the policy was there and left before answering.
            "guesses_after_localizing": sum(e["guess"] and e["steps_to_localize"] is not None for e in episodes)}


def fresh_board_success(run_dir: Path, boards: int, device: str, precision: str = "auto") -> dict:
    """last.pt and best.pt of a PPO run on fresh boards (``on_fresh_boards``)."""
    return {name: on_fresh_boards(Path(run_dir) / "checkpoints" / f"{name}.pt", boards, device, precision)
            for name in ("last", "best")}


def bc_curves_of_preset(preset: dict, root: Path, bc_dir: Path, device: str, curves: list[list[dict]],
                        seeds) -> list[list[dict]]:
    """The BC arm's check curves over all the preset's seeds: those of this part, and the finished runs of the
    others."""
    by_seed = dict(zip(seeds, curves))
    for seed in preset["seeds"]:
        if seed not in by_seed:
            folder = RunFolder(ppo_config(preset, "bc", seed, root, bc_dir, device).run_dir)
            if folder.finished:
                by_seed[seed] = folder.summary()["curve"]
    return list(by_seed.values())


def median_or_none(values: list[int | None]) -> float | None:
    """Median over seeds, where a seed that never reached the threshold counts as +infinity (None if the median
    itself is censored)."""
    ranked = sorted(values, key=lambda v: float("inf") if v is None else v)
    middle = ranked[(len(ranked) - 1) // 2: len(ranked) // 2 + 1]
    return None if any(v is None for v in middle) else float(statistics.mean(middle))


def scratch_budget(preset: dict, bc_median_frames: float | None) -> int:
    """Scratch's frame budget: ``scratch_budget_factor`` x BC+PPO's median frames-to-tau, at least BC+PPO's budget
    (a whole number of PPO iterations)."""
    batch = preset["ppo"]["frames_per_batch"]
    needed = preset["scratch_budget_factor"] * (bc_median_frames or 0)
    return max(preset["bc_frames"], int(-(-needed // batch)) * batch)


def ppo_config(preset: dict, arm: str, seed: int, root: Path, bc_dir: Path, device: str, frames: int | None = None,
               **overrides) -> FinetuneConfig:
    """The fine-tuning config of one arm and seed: identical PPO settings, only the start (and budget) differ."""
    options = {**preset["ppo"], "total_frames": frames or preset["bc_frames"], "seed": seed, "device": device,
               "run_dir": str(root / f"{arm}-seed{seed}"), **overrides}
    if arm == "bc":
        return FinetuneConfig(**options, init=str(bc_dir), checkpoint_kind="best")  # as measured: BC's best.pt
    demos = preset["demos"]
    return FinetuneConfig(**{**options, **preset["scratch"]}, from_scratch=True, anchor_weight=0.0,
                          difficulty=demos.difficulty, image_size=demos.image_size, task=demos.task)


def run_ppo(config: FinetuneConfig) -> dict:
    """Runs (or resumes, or reuses) the fine-tuning run of ``config``; returns its summary."""
    return trainer.ensure_trained(config, progress=False)


def start_success(bc_dir: Path, ppo: FinetuneConfig, difficulty: str, image_size: int, device: str) -> dict:
    """The BC policy on the PPO runs' held-out boards, before any PPO frame (what tau is computed from)."""
    device = resolve_device(device)
    actor, provenance, _ = load_actor(bc_dir, device, precision=ppo.precision, checkpoint_kind=ppo.checkpoint_kind)
    seeds = held_out_seeds(ppo.eval_seed, ppo.eval_episodes, set())
    # In the env PPO's checks run in: the BC run's.
    metrics, _ = evaluate_policy(actor, seeds, num_envs=8, device=device,
                                 **provenance.env_kwargs(difficulty=difficulty, image_size=image_size))
    return metrics


def _point(curve_point: dict) -> dict:
    return {"rate": curve_point["success_rate"], "ci95": curve_point["success_ci95"]}


def summarize(curves: dict[str, list[list[dict]]], fresh: dict[str, list[dict]], start_fresh: dict, seeds,
              threshold: float, budgets: dict, demo_frames: int, warmup_frames: int,
              run_frames: dict[str, dict[str, int]] | None = None) -> dict:
    """The results JSON's top level: ratio (or its censored bound), threshold, per seed the last and best policy
    on fresh boards and frames-to-tau per arm, and the targets of issue 18 (fixed before the run) checked. An arm
    missing from ``curves`` (not run yet) leaves the ratio and its targets out."""
    arms = {}
    for arm, runs in curves.items():
        reached = [frames_to_threshold(c, threshold) for c in runs]
        arms[arm] = {
            "frames_to_threshold": dict(zip(map(str, seeds), reached)),
            "median_frames_to_threshold": median_or_none(reached),
            "start_check": {str(s): _point(c[0]) for s, c in zip(seeds, runs)},
            "last_check": {str(s): _point(c[-1]) for s, c in zip(seeds, runs)},
            "final_success": {str(s): f["last"] for s, f in zip(seeds, fresh[arm])},  # last.pt, fresh boards
            "best_pt_success": {str(s): f["best"] for s, f in zip(seeds, fresh[arm])},
            "largest_fall_below_best_after_tau": {
                str(s): largest_fall_after(c, r if r is not None else warmup_frames)
                for s, c, r in zip(seeds, runs, reached)},
            "budget_frames": budgets[arm],
            "run_frames": (run_frames or {}).get(arm, {str(s): budgets[arm] for s in seeds}),
        }
    result = {"threshold": threshold, "start_fresh_boards": start_fresh, "arms": arms, "demo_frames": demo_frames,
              "complete": set(curves) == {"bc", "scratch"}}
    if "bc" not in arms:
        return result
    bc = arms["bc"]
    result.update({"final_success": bc["final_success"], "best_pt_success": bc["best_pt_success"],
                   "frames_to_threshold": {arm: a["frames_to_threshold"] for arm, a in arms.items()},
                   "lift_points_fresh_boards": {s: round(100 * (f["rate"] - start_fresh["rate"]), 1)
                                                for s, f in bc["final_success"].items()}})
    targets = {
        "last_policy_at_least_80_percent_every_seed": all(f["rate"] >= 0.8 for f in bc["final_success"].values()),
        "last_policy_40_points_above_start_every_seed": all(
            f["rate"] >= start_fresh["rate"] + 0.4 - 1e-9 for f in bc["final_success"].values()),
        "end_ci_above_start_ci_every_seed": all(
            f["ci95"][0] > start_fresh["ci95"][1] for f in bc["final_success"].values()),
        "no_check_10_points_below_best_after_tau": all(
            fall <= 0.10 + 1e-9 for fall in bc["largest_fall_below_best_after_tau"].values()),
    }
    if "scratch" in arms:
        bc_median, scratch = bc["median_frames_to_threshold"], arms["scratch"]["median_frames_to_threshold"]
        ratio = bound = ratio_demos = bound_demos = None
        if bc_median is not None and bc_median > 0:
            if scratch is not None:
                ratio, ratio_demos = scratch / bc_median, scratch / (bc_median + demo_frames)
            else:
                # The true median is at least the median of the seeds' lower bounds (frames to tau where reached,
                # the run's budget where not): a censored bound even when the runs' budgets differ.
                lower = statistics.median(
                    r if r is not None else arms["scratch"]["run_frames"][str(s)]
                    for s, r in zip(seeds, [frames_to_threshold(c, threshold) for c in curves["scratch"]]))
                bound, bound_demos = lower / bc_median, lower / (bc_median + demo_frames)
                arms["scratch"]["median_lower_bound_frames"] = lower
        targets["ratio_or_censored_bound_at_least_3"] = (ratio or bound or 0) >= 3
        result.update({"ratio": ratio, "ratio_lower_bound": bound, "ratio_counting_demo_frames": ratio_demos,
                       "ratio_lower_bound_counting_demo_frames": bound_demos})
    result["targets"] = targets
    return result


def plot(curves: dict[str, list[list[dict]]], threshold: float, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=120)
    for (name, runs), colour in zip(curves.items(), ("tab:blue", "tab:orange")):
        length = min(len(c) for c in runs)
        frames = np.array([p["frames"] for p in runs[0][:length]])
        success = np.array([[p["success_rate"] for p in c[:length]] for c in runs])
        label = "PPO from few-demo BC" if name == "bc" else "PPO from scratch"
        ax.plot(frames, success.mean(0), color=colour, label=f"{label} (mean of {len(runs)} seeds)")
        ax.fill_between(frames, success.min(0), success.max(0), color=colour, alpha=0.2)
    ax.axhline(threshold, color="grey", linestyle="--", linewidth=1, label=f"tau = {threshold:.0%}")
    ax.set(xlabel="environment frames (PPO)", ylabel="success on 50 held-out boards", ylim=(0, 1.02), title=title)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)


def with_precision(preset: dict, precision: str) -> dict:
    """``preset`` with BC and PPO in ``precision``, under a root folder of its own (``runs/NAME-PRECISION``); the
    demos are the preset's."""
    bc_dir = Path(preset["bc"].run_dir)
    bc_dir = bc_dir.parent.with_name(f"{bc_dir.parent.name}-{precision}") / bc_dir.name
    return {**preset, "bc": replace(preset["bc"], run_dir=str(bc_dir), precision=precision),
            "ppo": {**preset["ppo"], "precision": precision}}


def prepare_bc(preset: dict, device: str) -> tuple[Path, BCConfig]:
    """The few-demo demonstrations and BC run of ``preset``, then its DAgger rounds if it has them (each reused when
    already there); returns the run folder PPO starts from and the BC config."""
    demos = preset["demos"]
    if not (Path(demos.out) / "meta.json").is_file():
        collect_demos(demos, progress=False)
    bc_dir = Path(preset["bc"].run_dir)
    bc_config = replace(preset["bc"], data=demos.out, device=device)
    ensure_trained(bc_config, progress=False)
    if "dagger" in preset:  # PPO then starts from the policy DAgger ends with
        config = replace(preset["dagger"], init=str(bc_dir), run_dir=str(bc_dir.parent / "dagger"), device=device,
                         precision=bc_config.precision)
        bc_dir = dagger.final_policy_run(dagger.ensure_trained(config, progress=False))
    return bc_dir, bc_config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--preset", choices=list(PRESETS), default="cpu", help="budget and image size")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="PPO seeds (default: the preset's)")
    parser.add_argument("--arms", nargs="+", choices=("bc", "scratch"), default=["bc", "scratch"],
                        help="arms to run now (in parts: the other arm's finished runs are read, never started)")
    parser.add_argument("--fresh-boards", type=int, default=100, help="boards no run has seen, for last/best.pt")
    parser.add_argument("--device", default="auto", help="learner device")
    parser.add_argument("--precision", choices=PRECISIONS, default="auto",
                        help="the encoder's precision (fp32 or bf16: folders and results file of their own)")
    args = parser.parse_args(argv)
    preset = PRESETS[args.preset]
    name = args.preset
    if args.precision != "auto":
        preset, name = with_precision(preset, args.precision), f"{args.preset}_{args.precision}"
    seeds = tuple(args.seeds or preset["seeds"])
    root = Path(preset.get("ppo_root") or Path(preset["bc"].run_dir).parent)  # the PPO runs' folders
    out = RESULTS / f"bc_vs_scratch_{name}.json"
    start = time.perf_counter()

    # Demonstrations and behaviour cloning, then the start and the threshold (before any PPO frame)
    bc_dir, bc_config = prepare_bc(preset, args.device)
    demos = preset["demos"]
    reference = ppo_config(preset, "bc", seeds[0], root, bc_dir, args.device)
    start_metrics = start_success(bc_dir, reference, demos.difficulty, demos.image_size, args.device)
    threshold = threshold_rule(start_metrics["success_rate"])
    start_fresh = on_fresh_boards(bc_dir, args.fresh_boards, args.device, args.precision)  # the lift's start
    print(f"BC start {start_metrics['success_rate']:.0%} on {start_metrics['episodes']} check boards "
          f"(guesses {start_metrics['guesses']}), {start_fresh['rate']:.0%} on {start_fresh['boards']} fresh boards; "
          f"threshold tau = {threshold:.0%}", file=sys.stderr)

    # PPO from BC, then from scratch with a budget of at least 3x what BC+PPO needed; the same settings otherwise.
    # An arm not run now is read from its finished runs (a benchmark run in parts, possibly across sessions).
    curves: dict[str, list[list[dict]]] = {}
    fresh: dict[str, list[dict]] = {}
    seconds: dict[str, dict[str, float | None]] = {}
    budgets = {"bc": preset["bc_frames"]}
    run_frames: dict[str, dict[str, int]] = {}  # each run's own budget
    for arm in ("bc", "scratch"):
        if arm == "scratch":
            if "bc" not in curves:
                break  # scratch's budget follows from the BC arm's frames to tau
            # The median over the preset's seeds, whichever seeds this part runs (a part of one scratch seed
            # once took its budget from that seed's BC run alone).
            bc_median = median_or_none([frames_to_threshold(c, threshold) for c in bc_curves_of_preset(
                preset, root, bc_dir, args.device, curves["bc"], seeds)])
            budgets["scratch"] = scratch_budget(preset, bc_median)
        summaries = []
        for seed in seeds:
            config = ppo_config(preset, arm, seed, root, bc_dir, args.device, frames=budgets[arm])
            folder = RunFolder(config.run_dir)
            summary = run_ppo(config) if arm in args.arms and not folder.finished else folder.summary()
            # A finished run with another budget is kept and reported with its own (run_frames); never redone.
            if summary is None or (arm == "bc" and summary["frames"] != config.total_frames):
                break
            run_frames.setdefault(arm, {})[str(seed)] = summary["frames"]
            summaries.append((summary, fresh_board_success(Path(config.run_dir), args.fresh_boards, args.device,
                                                           args.precision)))
            print(f"{arm} seed {seed}: check success {summary['curve'][0]['success_rate']:.0%} -> "
                  f"{summary['curve'][-1]['success_rate']:.0%} in {summary['frames']} frames; last.pt "
                  f"{summaries[-1][1]['last']['rate']:.0%} on fresh boards", file=sys.stderr)
        if len(summaries) < len(seeds):
            print(f"{arm} arm: not every seed has a finished run; run --arms {arm}", file=sys.stderr)
            break
        curves[arm] = [summary["curve"] for summary, _ in summaries]
        fresh[arm] = [f for _, f in summaries]
        # wall seconds of each run (collection, updates and checks, summed over its parts; None: run before the
        # trainer recorded it)
        seconds[arm] = {str(seed): summary.get("seconds") for seed, (summary, _) in zip(seeds, summaries)}

    result = summarize(curves, fresh, start_fresh, seeds, threshold, budgets,
                       DemoDataset.open(demos.out).frames, reference.critic_warmup * reference.frames_per_batch,
                       run_frames)
    rows = [{"arm": "PPO from few-demo BC" if arm == "bc" else "PPO from scratch", "seed": seed,
             "check start": f"{c[0]['success_rate']:.0%}", "check end": f"{c[-1]['success_rate']:.0%}",
             "last.pt, fresh boards": "{:.0%} ({:.0%}-{:.0%})".format(f["last"]["rate"], *f["last"]["ci95"]),
             "best.pt, fresh boards": "{:.0%} ({:.0%}-{:.0%})".format(f["best"]["rate"], *f["best"]["ci95"]),
             "last.pt guesses": f["last"]["guesses"],
             f"frames to {threshold:.0%}": result["arms"][arm]["frames_to_threshold"][str(seed)],
             "budget": run_frames[arm][str(seed)], "minutes": round((seconds[arm][str(seed)] or 0) / 60, 1)}
            for arm, runs in curves.items() for seed, c, f in zip(seeds, runs, fresh[arm])]
    print(markdown_table(rows))
    if result.get("ratio") is not None:
        print(f"\nratio (scratch / BC+PPO median frames to tau): {result['ratio']:.1f}x")
    elif result.get("ratio_lower_bound") is not None:
        print(f"\nscratch never reached tau in {sorted(set(run_frames['scratch'].values()))} frames: ratio >= "
              f"{result['ratio_lower_bound']:.1f}x (censored)")
    elif "scratch" in curves:
        print(f"\nBC+PPO's median seed did not reach tau within {budgets['bc']} frames: no ratio")
    if "targets" in result:
        print("targets: " + ", ".join(f"{k} {'met' if v else 'MISSED'}" for k, v in result["targets"].items()))
    result.update({
        "preset": args.preset, "seeds": list(seeds),
        "threshold_rule": "BC start + (1 - BC start) / 2 on the check boards, reached at the first of two "
                          "consecutive checks at or above it",
        "bc_start_metrics": {k: start_metrics[k] for k in ("success_rate", "success_ci95", "episodes", "guesses",
                                                           "verdict_accuracy", "collisions_per_episode",
                                                           "episode_length", "timed_out")},
        "curves": curves, "run_seconds": seconds, "table": rows, **provenance(), "machine": describe_machine(),
        "precision": describe(args.precision, resolve_device(args.device)),
        "wall_seconds_this_invocation": round(time.perf_counter() - start), "demo_config": asdict(demos),
        "bc_config": asdict(bc_config), "ppo_config": asdict(reference), "scratch_options": preset["scratch"],
    })
    write_json(out, result)
    if curves:
        plot(curves, threshold, RESULTS / f"bc_vs_scratch_{name}.png",
             f"{args.preset} preset: {demos.episodes} demos, {demos.difficulty} boards, {demos.image_size}x"
             f"{demos.image_size}")
    print(f"wrote {out}" + (" and the learning-curve PNG beside it" if curves else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
