"""BC-initialized PPO against PPO from scratch: closed-loop success against environment frames.

The protocol, fixed in this file before any run:
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
Targets: every seed's last policy >= 80% and >= 40 points above the start, its interval above the
start's; no check more than 10 points below the running best after tau; ratio (or censored bound) >= 3. A budget
preset (``few-1m``, ``lead-encoder-1m``) checks its own before them (``protocols.budget_targets``).

Finished runs are reused (a killed benchmark resumes where it stopped), and ``--arms`` runs the benchmark in parts
(the BC arm first; scratch's budget follows from it). Writes ``benchmarks/results/bc_vs_scratch_<preset>.json``
(each run's minutes in ``run_seconds``) and a PNG of mean and min-max success against frames.

    python benchmarks/bc_vs_scratch.py --list   # the named variants (--variant NAME runs one)
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
from harness import Benchmark, Variant
from protocols import (
    PRESETS,
    RESULTS,
    bc_curves_of_preset,
    bc_start,
    budget_targets,
    ci_cell,
    dagger_dir,
    frames_to_threshold,
    fresh_board_success,
    largest_fall_after,
    median_or_none,
    on_fresh_boards,
    png_figure,
    ppo_config,
    prepare_bc,
    scratch_budget,
    what_ppo_trained_on,
)
from results_file import read_results

from robot_rl.dataset import DemoDataset
from robot_rl.finetune import trainer
from robot_rl.learning_curves import stop_text, where_it_stops
from robot_rl.options import resolve_device
from robot_rl.precision import describe
from robot_rl.run_folder import RunFolder
from robot_rl.tables import markdown_table

# Each arm's name in tables and figures; the BC start is whatever the preset builds, so its label names no recipe.
ARM_LABELS = {"bc": "PPO from the BC start", "scratch": "PPO from scratch"}

BENCHMARK = Benchmark("bc_vs_scratch", __doc__, variants=(
    Variant("cpu", ("--preset", "cpu"), "the old BC loss's few-demo start (400 easy demos, 84x84), both arms"),
    Variant("few-bc", ("--preset", "few", "--arms", "bc"), "the quick recipe's start: the BC arm, 3 x 65,536 frames"),
    Variant("few-scratch", ("--preset", "few", "--arms", "scratch"), "then scratch, >= 3x BC's frames to tau"),
    Variant("lead-encoder-bc", ("--preset", "lead-encoder", "--arms", "bc"),
            "the quick pipeline's lead start (pretrained encoder, BC, 2 DAgger rounds), then PPO; 3 seeds"),
    Variant("few-1m-bc", ("--preset", "few-1m", "--arms", "bc"),
            "the demo's start to 1,048,576 frames, 3 seeds (about 2 h per seed on 2 CPU cores; resumes in parts)"),
    Variant("few-1m-scratch", ("--preset", "few-1m", "--arms", "scratch"),
            "then scratch, at least as many frames (up to 3x)"),
    Variant("lead-encoder-1m-bc", ("--preset", "lead-encoder-1m", "--arms", "bc"),
            "the lead task's quick-pipeline start to 1,048,576 frames, 3 seeds (about 2 h per seed on 2 CPU cores)"),
    Variant("lead-encoder-1m-scratch", ("--preset", "lead-encoder-1m", "--arms", "scratch"),
            "then scratch, at least as many frames (up to 3x)"),
    Variant("lead-dwell-1m-bc", ("--preset", "lead-dwell-1m", "--arms", "bc"),
            "the lead start to 1,048,576 frames with waiting at the view costing 0.05 a step, 3 seeds"),
    Variant("lead-guess-1m-bc", ("--preset", "lead-guess-1m", "--arms", "bc"),
            "the same, 'continue' taught on every guess (--guess-ce-weight 1), 3 seeds"),
    Variant("demo-bc", ("--preset", "demo", "--arms", "bc"),
            "make demo's start as it is built today (encoder, BC, DAgger auto), PPO at 65,536 frames, 3 seeds"),
    Variant("lead-flat-bc", ("--preset", "lead-flat", "--arms", "bc"),
            "the lead task's quick start with DAgger auto's rounds until its check stops rising (up to 8), then "
            "the pipeline's PPO at 65,536 frames, 3 seeds"),
    Variant("lead-flat-dwell-bc", ("--preset", "lead-flat-dwell", "--arms", "bc"),
            "the same start, waiting at the view costing 0.05 a step, 3 seeds"),
    Variant("lead-flat-anchor-bc", ("--preset", "lead-flat-anchor", "--arms", "bc"),
            "the same with a KL anchor to the start policy (weight 1, not decaying), 3 seeds"),
    Variant("lead-flat-low-noise-bc", ("--preset", "lead-flat-low-noise", "--arms", "bc"),
            "the dwell runs' start with less exploration noise (answer-now temperature 0.1, a tenth of the learned "
            "pose scale), 3 seeds"),
    Variant("demo-dwell-bc", ("--preset", "demo-dwell", "--arms", "bc"),
            "make demo's start with lead-flat's DAgger stage, PPO with waiting at the view costing 0.05 a step"),
    Variant("lead-quick-low-noise-bc", ("--preset", "lead-quick-low-noise", "--arms", "bc"),
            "the quick pipeline's lead start (round 2 of lead-flat's DAgger stage), PPO as lead-flat-low-noise's"),
    Variant("demo-low-noise-bc", ("--preset", "demo-low-noise", "--arms", "bc"),
            "make demo's start (demo-dwell's), PPO as lead-flat-low-noise's, 3 seeds"),
    Variant("demo-low-noise-small-step-bc", ("--preset", "demo-low-noise-small-step", "--arms", "bc"),
            "the same with the actor's learning rate scaled by the pose scale factor (a tenth), 3 seeds"),
    Variant("lead-flat-low-noise-small-step-bc", ("--preset", "lead-flat-low-noise-small-step", "--arms", "bc"),
            "lead-flat-low-noise with the actor's learning rate scaled by the pose scale factor (a tenth), 3 seeds"),
), common={"seeds": (None, "PPO seeds (default: the preset's)"), "device": ("auto", "learner device")},
   results_path=lambda args: RESULTS / f"bc_vs_scratch_{args.preset}.json")


def _point(curve_point: dict) -> dict:
    return {"rate": curve_point["success_rate"], "ci95": curve_point["success_ci95"]}


def summarize(curves: dict[str, list[list[dict]]], fresh: dict[str, list[dict]], start_fresh: dict, seeds,
              threshold: float, budgets: dict, demo_frames: int, warmup_frames: int,
              run_frames: dict[str, dict[str, int]] | None = None, check_boards: int = 50) -> dict:
    """The results JSON's top level: ratio (or its censored bound), threshold, per seed the last and best policy
    on fresh boards and frames-to-tau per arm, where each arm's curve stops rising and its failures by kind at its
    start and over its last quarter, and the protocol's targets (fixed before the run) checked. An arm missing
    from ``curves`` (not run yet) leaves the ratio and its targets out."""
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
            "stops_rising": where_it_stops(runs, check_boards),
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
                lower = statistics.median(r if r is not None else arms["scratch"]["run_frames"][s]
                                          for s, r in arms["scratch"]["frames_to_threshold"].items())
                bound, bound_demos = lower / bc_median, lower / (bc_median + demo_frames)
                arms["scratch"]["median_lower_bound_frames"] = lower
        targets["ratio_or_censored_bound_at_least_3"] = (ratio or bound or 0) >= 3
        result.update({"ratio": ratio, "ratio_lower_bound": bound, "ratio_counting_demo_frames": ratio_demos,
                       "ratio_lower_bound_counting_demo_frames": bound_demos})
    result["targets"] = targets
    return result


def dagger_rounds(preset: dict) -> dict | None:
    """The start's DAgger stage: its checks round by round (round 0: the BC policy it began from; success, guesses,
    the aggregate's frames), the round it ended with and the round PPO starts from; None for a start without the
    stage."""
    if "dagger" not in preset:
        return None
    summary = RunFolder(dagger_dir(preset)).summary()
    return {"final_round": summary["final_round"],
            "ppo_start_round": preset.get("dagger_round", summary["final_round"]),
            "checks": [{key: record.get(key) for key in ("round", "success_rate", "guesses", "aggregate_frames")}
                       for record in summary["rounds"]]}


def plot(curves: dict[str, list[list[dict]]], threshold: float, path: Path, title: str) -> None:
    """Each arm's check success against PPO frames: the mean over seeds, their min-max band, and tau; beside it
    the share of episodes answered before the board was localized (guesses), mean over seeds."""
    with png_figure(path) as ax:
        for (name, runs), colour in zip(curves.items(), ("tab:blue", "tab:orange")):
            length = min(len(c) for c in runs)
            frames = np.array([p["frames"] for p in runs[0][:length]])
            success = np.array([[p["success_rate"] for p in c[:length]] for c in runs])
            guesses = np.array([[p["guess_rate"] for p in c[:length]] for c in runs])
            label = ARM_LABELS[name]
            ax.plot(frames, success.mean(0), color=colour, label=f"{label}: success (mean of {len(runs)} seeds)")
            ax.fill_between(frames, success.min(0), success.max(0), color=colour, alpha=0.2)
            ax.plot(frames, guesses.mean(0), color=colour, linestyle=":", label=f"{label}: guess rate (mean)")
        ax.axhline(threshold, color="grey", linestyle="--", linewidth=1, label=f"tau = {threshold:.0%}")
        ax.set(xlabel="environment frames (PPO)", ylabel="share of 50 held-out boards", ylim=(0, 1.02),
               title=title)
        ax.legend(loc="lower right", fontsize=8)


def options(parser) -> None:
    parser.add_argument("--preset", choices=list(PRESETS), default="cpu", help="budget and image size")
    parser.add_argument("--arms", nargs="+", choices=("bc", "scratch"), default=["bc", "scratch"],
                        help="arms to run now (in parts: the other arm's finished runs are read, never started)")
    parser.add_argument("--fresh-boards", type=int, default=100, help="boards no run has seen, for last/best.pt")
    parser.add_argument("--replot", action="store_true", help="redraw the PNG from the results file; run nothing")


def run(args) -> int:
    preset = PRESETS[args.preset]
    seeds = tuple(args.seeds or preset["seeds"])
    root = Path(preset.get("ppo_root") or Path(preset["bc"].run_dir).parent)  # the PPO runs' folders
    out = BENCHMARK.results_path(args)
    demos = preset["demos"]
    title = (f"{args.preset} preset: {demos.episodes} demos, {demos.difficulty} boards, {demos.image_size}x"
             f"{demos.image_size}")
    if args.replot:
        metrics = read_results(out)
        plot(metrics["curves"], metrics["threshold"], out.with_suffix(".png"), title)
        print(f"wrote {out.with_suffix('.png')} from {out}")
        return 0
    start = time.perf_counter()

    # Demonstrations and behaviour cloning, then the start and the threshold (before any PPO frame)
    bc_dir, bc_config = prepare_bc(preset, args.device)
    reference, start_metrics, threshold = bc_start(preset, bc_dir, root, seeds[0], args.device)
    start_fresh = on_fresh_boards(bc_dir, args.fresh_boards, args.device)  # the lift's start
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
    trained_on: dict[str, dict[str, dict]] = {}  # each run's sampled episodes and actor steps, from its logs
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
            summary = (trainer.ensure_trained(config, progress=False) if arm in args.arms and not folder.finished
                       else folder.summary())
            # A finished run with another budget is kept and reported with its own (run_frames); never redone.
            if summary is None or (arm == "bc" and summary["frames"] != config.total_frames):
                break
            run_frames.setdefault(arm, {})[str(seed)] = summary["frames"]
            trained_on.setdefault(arm, {})[str(seed)] = what_ppo_trained_on(Path(config.run_dir))
            summaries.append((summary, fresh_board_success(Path(config.run_dir), args.fresh_boards, args.device)))
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
                       run_frames, reference.eval_episodes)
    if "targets" in result and "budget_targets" in preset:  # a budget preset's own first, then the protocol's
        result["targets"] = {**budget_targets(preset["budget_targets"], start_fresh, result["final_success"]),
                             **result["targets"]}
    rows = [{"arm": ARM_LABELS[arm], "seed": seed,
             "check start": f"{c[0]['success_rate']:.0%}", "check end": f"{c[-1]['success_rate']:.0%}",
             "last.pt, fresh boards": ci_cell(f["last"]["rate"], f["last"]["ci95"]),
             "best.pt, fresh boards": ci_cell(f["best"]["rate"], f["best"]["ci95"]),
             "last.pt guesses": f["last"]["guesses"],
             f"frames to {threshold:.0%}": result["arms"][arm]["frames_to_threshold"][str(seed)],
             "budget": run_frames[arm][str(seed)], "minutes": round((seconds[arm][str(seed)] or 0) / 60, 1)}
            for arm, runs in curves.items() for seed, c, f in zip(seeds, runs, fresh[arm])]
    print(markdown_table(rows))
    for arm, record in result["arms"].items():
        print(f"{arm}: {stop_text(record['stops_rising'])}")
    if result.get("ratio") is not None:
        print(f"\nratio (scratch / BC+PPO median frames to tau): {result['ratio']:.1f}x")
    elif result.get("ratio_lower_bound") is not None:
        print(f"\nscratch never reached tau in {sorted(set(run_frames['scratch'].values()))} frames: ratio >= "
              f"{result['ratio_lower_bound']:.1f}x (censored)")
    elif "scratch" in curves:
        print(f"\nBC+PPO's median seed did not reach tau within {budgets['bc']} frames: no ratio")
    if "targets" in result:
        print("targets: " + ", ".join(f"{k} {'met' if v else 'MISSED'}" for k, v in result["targets"].items()))
    targets = result.pop("targets", None)
    result.update({
        "preset": args.preset, "seeds": list(seeds),
        "threshold_rule": "BC start + (1 - BC start) / 2 on the check boards, reached at the first of two "
                          "consecutive checks at or above it",
        "bc_start_metrics": {k: start_metrics[k] for k in ("success_rate", "success_ci95", "episodes", "guesses",
                                                           "verdict_accuracy", "collisions_per_episode",
                                                           "episode_length", "timed_out")},
        "curves": curves, "run_seconds": seconds, "trained_on": trained_on, "table": rows,
        "precision": describe("auto", resolve_device(args.device)),
        "demo_config": asdict(demos), "bc_config": asdict(bc_config), "ppo_config": asdict(reference),
        "scratch_options": preset["scratch"],
        # Whether the start had a DAgger stage; it ran rounds where PPO's init is not the BC run itself.
        "dagger_config": asdict(preset["dagger"]) if "dagger" in preset else None,
        "dagger_rounds": dagger_rounds(preset),
    })
    # The benchmark runs in parts (--arms, --seeds): each run's own seconds are in run_seconds.
    BENCHMARK.write(result, out=out, wall_s=round(time.perf_counter() - start), targets=targets,
                    notes={"wall_s_scope": "this invocation"})
    if curves:
        plot(curves, threshold, out.with_suffix(".png"), title)
    print(f"wrote {out}" + (" and the learning-curve PNG beside it" if curves else ""))
    return 0


if __name__ == "__main__":
    sys.exit(BENCHMARK.main(run, options))
