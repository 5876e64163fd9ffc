"""BC-initialized PPO against PPO from scratch: closed-loop success against environment frames.

The protocol (issue 10), fixed in this file before any run:
- one few-demo behaviour-cloning policy (the preset's demos and epochs); PPO from it and PPO from random weights
  with the same network, PPO settings and held-out boards, ``seeds`` seeds each;
- success = a correct verdict given while the board is localized; every curve point is a deterministic rollout
  on the same ``eval_episodes`` held-out boards, with its Wilson 95% interval;
- threshold tau = BC start + half the distance to 100%, where the start is the BC policy's success on those boards
  before any PPO frame (the rule is fixed here; its value is recorded, never tuned);
- frames-to-tau per seed (first curve point at or above tau); an arm's figure is the median over seeds;
- ratio = scratch / BC+PPO frames-to-tau. The BC arm runs first; scratch then gets a budget of
  ``scratch_budget_factor`` (>= 3) times BC+PPO's median frames-to-tau, and never less than BC+PPO's own budget.
  If scratch's median never reaches tau, the result is censored: ``ratio`` null and ``ratio_lower_bound`` = scratch
  budget / BC+PPO frames-to-tau. The ratio counting the demonstrations' frames as BC's is reported too.

Finished runs are reused (a killed benchmark resumes where it stopped). Writes
``benchmarks/results/bc_vs_scratch_<preset>.json`` and a PNG of mean and min-max success against frames.

    python benchmarks/bc_vs_scratch.py --preset cpu     # about 30 minutes on 2 CPU cores (84x84)
    python benchmarks/bc_vs_scratch.py --preset gpu     # 224x224, larger budgets, for a CUDA machine
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
from timing import describe_machine

from robot_rl.closed_loop import evaluate_policy
from robot_rl.configs import BCConfig, CollectConfig, FinetuneConfig
from robot_rl.finetune import trainer
from robot_rl.io import atomic_path, write_json
from robot_rl.options import resolve_device
from robot_rl.policy import load_actor
from robot_rl.pretrain.bc import ensure_trained, held_out_seeds
from robot_rl.pretrain.collect import collect_demos
from robot_rl.pretrain.dataset import DemoDataset
from robot_rl.tables import markdown_table

RESULTS = Path(__file__).parent / "results"

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
    """Frames at the first curve point whose success rate reaches ``threshold`` (None if none does)."""
    return next((point["frames"] for point in curve if point["success_rate"] >= threshold - 1e-9), None)


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
        return FinetuneConfig(**options, init=str(bc_dir))
    demos = preset["demos"]
    return FinetuneConfig(**{**options, **preset["scratch"]}, from_scratch=True, anchor_weight=0.0,
                          difficulty=demos.difficulty, image_size=demos.image_size)


def run_ppo(config: FinetuneConfig) -> dict:
    """Runs (or resumes, or reuses) the fine-tuning run of ``config``; returns its summary."""
    return trainer.ensure_trained(config, progress=False)


def start_success(bc_dir: Path, ppo: FinetuneConfig, difficulty: str, image_size: int, device: str) -> dict:
    """The BC policy on the PPO runs' held-out boards, before any PPO frame (what tau is computed from)."""
    device = resolve_device(device)
    actor, _, _ = load_actor(bc_dir, device)
    seeds = held_out_seeds(ppo.eval_seed, ppo.eval_episodes, set())
    metrics, _ = evaluate_policy(actor, seeds, difficulty=difficulty, image_size=image_size, num_envs=8,
                                 device=device)
    return metrics


def _point(curve_point: dict) -> dict:
    return {"rate": curve_point["success_rate"], "ci95": curve_point["success_ci95"]}


def summarize(curves: dict[str, list[list[dict]]], seeds, threshold: float, budgets: dict, demo_frames: int,
              warmup_frames: int) -> dict:
    """The results JSON's top level: ratio (or its lower bound), threshold, start/final success per seed with CI,
    frames-to-threshold per arm and seed, and the targets of issue 10 checked."""
    arms = {}
    for arm, runs in curves.items():
        reached = [frames_to_threshold(c, threshold) for c in runs]
        arms[arm] = {
            "frames_to_threshold": dict(zip(map(str, seeds), reached)),
            "median_frames_to_threshold": median_or_none(reached),
            "start_success": {str(s): _point(c[0]) for s, c in zip(seeds, runs)},
            "final_success": {str(s): _point(c[-1]) for s, c in zip(seeds, runs)},
            "lowest_after_warmup": {str(s): min((p["success_rate"] for p in c if p["frames"] > warmup_frames),
                                                default=None) for s, c in zip(seeds, runs)},
            "final_guess_rate": {str(s): c[-1]["guess_rate"] for s, c in zip(seeds, runs)},
            "budget_frames": budgets[arm],
        }
    bc, scratch = arms["bc"]["median_frames_to_threshold"], arms["scratch"]["median_frames_to_threshold"]
    ratio = bound = ratio_demos = bound_demos = None
    if bc is not None and bc > 0:
        if scratch is not None:
            ratio, ratio_demos = scratch / bc, scratch / (bc + demo_frames)
        else:
            bound, bound_demos = budgets["scratch"] / bc, budgets["scratch"] / (bc + demo_frames)
    bc_runs = curves["bc"]
    lifts = [c[-1]["success_rate"] - c[0]["success_rate"] for c in bc_runs]
    targets = {
        "lift_20_points_every_seed": all(lift >= 0.2 for lift in lifts),
        "end_ci_above_start_ci_every_seed": all(c[-1]["success_ci95"][0] > c[0]["success_ci95"][1] for c in bc_runs),
        "no_seed_below_start_minus_10_after_warmup": all(
            lowest is None or lowest >= c[0]["success_rate"] - 0.10
            for lowest, c in zip(arms["bc"]["lowest_after_warmup"].values(), bc_runs)),
        "ratio_at_least_3": (ratio or bound or 0) >= 3,
    }
    return {"ratio": ratio, "ratio_lower_bound": bound, "threshold": threshold,
            "ratio_counting_demo_frames": ratio_demos, "ratio_lower_bound_counting_demo_frames": bound_demos,
            "start_success": arms["bc"]["start_success"], "final_success": arms["bc"]["final_success"],
            "frames_to_threshold": {arm: a["frames_to_threshold"] for arm, a in arms.items()},
            "bc_lift_points": dict(zip(map(str, seeds), [round(100 * lift, 1) for lift in lifts])),
            "targets": targets, "arms": arms, "demo_frames": demo_frames}


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


def prepare_bc(preset: dict, device: str) -> tuple[Path, BCConfig]:
    """The few-demo demonstrations and BC run of ``preset`` (reused when already there)."""
    demos = preset["demos"]
    if not (Path(demos.out) / "meta.json").is_file():
        collect_demos(demos, progress=False)
    bc_dir = Path(preset["bc"].run_dir)
    bc_config = replace(preset["bc"], data=demos.out, device=device)
    ensure_trained(bc_config, progress=False)
    return bc_dir, bc_config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--preset", choices=list(PRESETS), default="cpu", help="budget and image size")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="PPO seeds (default: the preset's)")
    parser.add_argument("--device", default="auto", help="learner device")
    args = parser.parse_args(argv)
    preset = PRESETS[args.preset]
    seeds = tuple(args.seeds or preset["seeds"])
    root = Path(preset["bc"].run_dir).parent
    start = time.perf_counter()

    # Demonstrations and behaviour cloning, then the start and the threshold (before any PPO frame)
    bc_dir, bc_config = prepare_bc(preset, args.device)
    demos = preset["demos"]
    reference = ppo_config(preset, "bc", seeds[0], root, bc_dir, args.device)
    start_metrics = start_success(bc_dir, reference, demos.difficulty, demos.image_size, args.device)
    threshold = threshold_rule(start_metrics["success_rate"])
    print(f"BC start {start_metrics['success_rate']:.0%} on {start_metrics['episodes']} boards "
          f"(guesses {start_metrics['guesses']}); threshold tau = {threshold:.0%}", file=sys.stderr)

    # PPO from BC, then from scratch with a budget of at least 3x what BC+PPO needed; the same settings otherwise
    curves: dict[str, list[list[dict]]] = {"bc": [], "scratch": []}
    seconds: dict[str, list[float]] = {"bc": [], "scratch": []}
    budgets = {"bc": preset["bc_frames"]}
    for arm in ("bc", "scratch"):
        if arm == "scratch":
            bc_median = median_or_none([frames_to_threshold(c, threshold) for c in curves["bc"]])
            budgets["scratch"] = scratch_budget(preset, bc_median)
        for seed in seeds:
            t0 = time.perf_counter()
            summary = run_ppo(ppo_config(preset, arm, seed, root, bc_dir, args.device, frames=budgets[arm]))
            seconds[arm].append(round(time.perf_counter() - t0))
            curves[arm].append(summary["curve"])
            print(f"{arm} seed {seed}: success {summary['curve'][0]['success_rate']:.0%} -> "
                  f"{summary['curve'][-1]['success_rate']:.0%} in {summary['frames']} frames", file=sys.stderr)

    result = summarize(curves, seeds, threshold, budgets, DemoDataset.open(demos.out).frames,
                       reference.critic_warmup * reference.frames_per_batch)
    rows = [{"arm": "PPO from few-demo BC" if arm == "bc" else "PPO from scratch", "seed": seed,
             "start": f"{c[0]['success_rate']:.0%}", "final": f"{c[-1]['success_rate']:.0%}",
             "final 95% CI": "{:.0%}-{:.0%}".format(*c[-1]["success_ci95"]),
             "final guesses": f"{c[-1]['guess_rate']:.0%}", f"frames to {threshold:.0%}":
             result["frames_to_threshold"][arm][str(seed)], "budget": budgets[arm]}
            for arm, runs in curves.items() for seed, c in zip(seeds, runs)]
    print(markdown_table(rows))
    if result["ratio"] is not None:
        print(f"\nratio (scratch / BC+PPO median frames to tau): {result['ratio']:.1f}x")
    elif result["ratio_lower_bound"] is not None:
        print(f"\nscratch never reached tau in {budgets['scratch']} frames: ratio >= "
              f"{result['ratio_lower_bound']:.1f}x (censored)")
    else:
        print(f"\nBC+PPO's median seed did not reach tau within {budgets['bc']} frames: no ratio")
    print("targets: " + ", ".join(f"{k} {'met' if v else 'MISSED'}" for k, v in result["targets"].items()))
    result.update({
        "preset": args.preset, "seeds": list(seeds), "threshold_rule": "BC start + (1 - BC start) / 2",
        "bc_start_metrics": {k: start_metrics[k] for k in ("success_rate", "success_ci95", "episodes", "guesses",
                                                           "verdict_accuracy", "collisions_per_episode",
                                                           "episode_length", "timed_out")},
        "curves": curves, "run_seconds": seconds, "machine": describe_machine(),
        "wall_seconds": round(time.perf_counter() - start), "demo_config": asdict(demos),
        "bc_config": asdict(bc_config), "ppo_config": asdict(reference), "scratch_options": preset["scratch"],
    })
    out = RESULTS / f"bc_vs_scratch_{args.preset}.json"
    write_json(out, result)
    plot(curves, threshold, RESULTS / f"bc_vs_scratch_{args.preset}.png",
         f"{args.preset} preset: {demos.episodes} demos, {demos.difficulty} boards, {demos.image_size}x"
         f"{demos.image_size}")
    print(f"wrote {out} and the learning-curve PNG beside it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
