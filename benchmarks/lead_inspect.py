"""The lead task with the built-in arm (or another, ``--robot-arm``): the README's BC recipe, BC trained longer,
BC + DAgger, and both from an encoder pretrained on the simulator's labels.

The protocol, fixed in this file before any run:
- task ``lead-inspect``, arm ``ur5e_like`` (``--robot-arm``; another arm's demos, runs and results file are its
  own: ``data/demos-lead-ARM``, ``runs/lead-inspect-ARM``, ``results/lead_inspect_ARM.json``), ``default``
  difficulty, 84x84, no randomization; one demo folder of ``--episodes`` expert demonstrations (seed 0) shared by
  every arm and every training seed (``--seed``: the encoder's, BC's and DAgger's; another seed's runs and results
  file are its own, ``-seedN``);
- arm ``recipe``: the README's BC recipe as it is (6 epochs, batch 64, closed-loop checks every 2 epochs), with the
  options a robot arm needs besides (``ARM_BC_OPTIONS``: the Panda's answer timing);
- arm ``bc-longer``: the same BC trained 3x as long (18 epochs, checks every 6);
- arm ``dagger``: ``robot-rl dagger`` from the recipe's last policy: 4 rounds of 200 rollout episodes, beta 0.5 halving
  per round, 2 BC epochs on the aggregate per round (about as many BC samples as ``bc-longer``'s extra epochs);
- arms ``encoder`` and ``encoder-dagger``: the same two from a ResNet18 trunk pretrained by ``robot-rl
  pretrain-encoder`` on 20,000 labelled views of the lead task (8 epochs, the demos' appearance: no randomization),
  loaded with BC's ``--encoder-weights``; the pretraining's seconds count in their wall time;
- every arm's **last** policy on the same 100 fresh boards (``evaluate``'s default seeds, seen by no run or check):
  strict success with its Wilson 95% interval, guesses, collisions per episode; the checks on held-out boards are
  reported beside them;
- wall time: every stage's seconds as measured when it ran (collect, encoder pretraining, each arm's training,
  evaluations). An arm's wall time counts what it needs: the collection, its training (DAgger: its BC too; the
  encoder arms: the pretraining), its evaluation;
- targets (issue 34, the same with every robot arm): last policy >= 90% on the 100 fresh boards and <= 0.1 collision
  steps per episode.

Runs in parts: each stage's folder is reused when finished and its measured seconds are kept in
``runs/lead-inspect/stages.json``, so a stopped benchmark continues with the same command; ``--arms`` picks arms.
Every invocation rewrites ``benchmarks/results/lead_inspect.json`` and a PNG of success against wall-clock seconds
(checks placed by epoch or round within their stage's measured seconds). An arm whose folders are gone (another
machine, a cleaned checkout) keeps its record from the file it rewrites, with the date and commit it came from;
an arm never run says so.

    python benchmarks/lead_inspect.py                      # every arm: about 3 hours on 2 CPU cores (bf16)
    python benchmarks/lead_inspect.py --arms recipe dagger # the recipe, then DAgger from it
    python benchmarks/lead_inspect.py --arms encoder-dagger  # the pretrained encoder, its BC, then DAgger
    python benchmarks/lead_inspect.py --variant panda      # the encoder arms with the Panda
    python benchmarks/lead_inspect.py --seed 1 --arms encoder encoder-dagger encoder-dagger-8  # another seed
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from harness import Benchmark, Variant
from protocols import ci_cell, closed_loop_checks, evaluate_fresh, final_metrics, png_figure
from results_file import RESULTS_DIR, read_results

from robot_rl.artefact_files import DATASET_META, RECIPE_STAGES
from robot_rl.configs import BCConfig, CollectConfig, DAggerConfig, EncoderPretrainConfig
from robot_rl.dataset import DemoDataset
from robot_rl.envs.arms import ARMS as ROBOT_ARMS
from robot_rl.options import resolve_device
from robot_rl.pipeline import ARM_BC_OPTIONS
from robot_rl.pipeline import ENCODER_STAGES as PIPELINE_ENCODER_STAGES
from robot_rl.precision import describe
from robot_rl.pretrain import encoder_pretrain
from robot_rl.pretrain.bc import BCRun
from robot_rl.pretrain.collect import collect_demos
from robot_rl.pretrain.dagger import DAggerRun, final_policy_run
from robot_rl.recipe import Recipe as Stages
from robot_rl.run_logs import read_scalar
from robot_rl.tables import markdown_table

TASK, ARM, DIFFICULTY, IMAGE_SIZE = "lead-inspect", "ur5e_like", "default", 84
DAGGER = {"rounds": 4, "episodes_per_round": 200, "epochs_per_round": 2, "beta": 0.5, "beta_decay": 0.5}
# The full pipeline preset's encoder stage (one place for its numbers), in the demos' cell: no randomization.
ENCODER = {"views": PIPELINE_ENCODER_STAGES["full"].views, "epochs": PIPELINE_ENCODER_STAGES["full"].epochs,
           "randomization": "none"}
TARGETS = {"last_policy_success_min": 0.90, "collisions_per_episode_max": 0.1, "fresh_boards": 100}


@dataclass(frozen=True)
class Recipe:
    """One arm: its BC run (folder name under ``--root``, epochs, checks), from the pretrained encoder or not,
    followed by DAgger (in a folder named after the arm) or not."""

    bc_run: str
    epochs: int
    eval_every: int
    encoder: bool = False
    dagger: bool = False
    after: str = ""  # the DAgger arm whose last round this arm's DAgger continues (its beta schedule continued)


RECIPES = {
    "recipe": Recipe("recipe", 6, 2),
    "dagger": Recipe("recipe", 6, 2, dagger=True),
    "bc-longer": Recipe("bc-longer", 18, 6),
    "encoder": Recipe("bc-encoder", 6, 2, encoder=True),
    "encoder-dagger": Recipe("bc-encoder", 6, 2, encoder=True, dagger=True),
    "encoder-dagger-8": Recipe("bc-encoder", 6, 2, encoder=True, dagger=True, after="encoder-dagger"),
}
ARMS = tuple(RECIPES)


def dagger_chain(name: str) -> list[str]:
    """The DAgger runs that make up arm ``name``, first to last (each in a folder named after its arm)."""
    recipe = RECIPES[name]
    return [*(dagger_chain(recipe.after) if recipe.after else []), name] if recipe.dagger else []

BENCHMARK = Benchmark("lead_inspect", __doc__, variants=(
    Variant("all", (), "the recipe, BC trained longer and BC + DAgger on the lead task"),
    Variant("recipe-dagger", ("--arms", "recipe", "dagger"), "the recipe, then DAgger from it"),
    Variant("encoder-dagger", ("--arms", "encoder", "encoder-dagger", "encoder-dagger-8"),
            "the pretrained encoder, the recipe from it, then 4 and 8 DAgger rounds (about 1.5 hours)"),
    Variant("panda", ("--robot-arm", "panda", "--arms", "encoder", "encoder-dagger", "encoder-dagger-8"),
            "the same encoder arms with the Panda, in its own folders and results file"),
    Variant("encoder-dagger-8-seed1", ("--seed", "1", "--arms", "encoder", "encoder-dagger", "encoder-dagger-8"),
            "the encoder arms again with training seed 1 (the collision target hangs on one board of 100; about "
            "2 hours)"),
), targets=TARGETS, common={"boards": (100, "boards per check and in the final evaluation"), "device": "auto",
                            "precision": "auto", "out": (None, "JSON output (a PNG beside it)")})


def bc_config(args, recipe: Recipe) -> BCConfig:
    """The README's BC recipe (batch 64) on the lead demos, as ``recipe`` says, in ``--root``, with the options
    the robot arm needs (``ARM_BC_OPTIONS``)."""
    encoder = {"encoder_weights": str(args.root / "encoder")} if recipe.encoder else {}
    return BCConfig(data=str(args.data), run_dir=str(args.root / recipe.bc_run), epochs=recipe.epochs, batch_size=64,
                    eval_every=recipe.eval_every, eval_episodes=args.boards, device=args.device,
                    precision=args.precision, seed=args.seed, **encoder, **ARM_BC_OPTIONS.get(args.robot_arm, {}))


def encoder_config(args) -> EncoderPretrainConfig:
    """The lead task's encoder pretraining: its views in the demos' cell, the policy's trunk and keypoints."""
    return EncoderPretrainConfig(task=TASK, arm=args.robot_arm, difficulty=DIFFICULTY, image_size=IMAGE_SIZE,
                                 run_dir=str(args.root / "encoder"), device=args.device, precision=args.precision,
                                 seed=args.seed, **ENCODER)


def dagger_config(args, name: str, bc_dir: Path) -> DAggerConfig:
    """The DAgger run of arm ``name``: from its BC run's last policy, or continuing the last round of the arm it
    comes ``after`` (that run's aggregate is its D0; beta goes on halving from where the chain left it)."""
    earlier = dagger_chain(name)[:-1]
    init = bc_dir
    if earlier:
        init = final_policy_run(json.loads((args.root / earlier[-1] / "summary.json").read_text()))
    beta = DAGGER["beta"] * DAGGER["beta_decay"] ** (DAGGER["rounds"] * len(earlier))
    return DAggerConfig(init=str(init), checkpoint_kind="last", run_dir=str(args.root / name),
                        eval_episodes=args.boards, device=args.device, precision=args.precision, seed=args.seed,
                        **{**DAGGER, "beta": beta})


def last_on_fresh_boards(run_dir: Path, checkpoint: Path, boards: int, device: str, precision: str) -> dict:
    """The last policy on ``boards`` fresh boards (``evaluate``'s own seeds), its report kept in ``run_dir`` (and
    read back from there when it exists), with the episodes that collided or failed: a per-episode target
    (collision steps) can hang on one board."""
    report = run_dir / "eval-fresh-last" / "report.json"
    if not report.is_file():
        evaluate_fresh(checkpoint, boards, report.parent, device=device, precision=precision)
    result = json.loads(report.read_text())
    faults = [{k: episode[k] for k in ("episode_seed", "success", "collision_steps", "timed_out", "guess")}
              for episode in result["episodes"] if episode["collision_steps"] or not episode["success"]]
    return {"checkpoint": str(checkpoint), "seeds": result["info"]["seeds"], **final_metrics(result["metrics"]),
            "episodes_at_fault": faults}


def verdict_on_targets(final: dict) -> dict:
    met = {"success": final["success_rate"] >= TARGETS["last_policy_success_min"],
           "collisions": final["collisions_per_episode"] <= TARGETS["collisions_per_episode_max"]}
    return {**met, "met": all(met.values())}


def plot(arms: dict, path: Path, robot_arm: str) -> None:
    """Success against wall-clock seconds: each arm's checks (held-out boards) with their guess rate (answers
    before the board was localized), and its last policy (fresh boards)."""
    with png_figure(path) as ax:
        colours = ("tab:grey", "tab:green", "tab:blue", "tab:orange", "tab:red", "tab:purple")
        for (name, arm), colour in zip(arms.items(), colours):
            if "final" not in arm:
                continue
            checks = arm["curve"]
            ax.plot([c["wall_s"] for c in checks], [c["success_rate"] for c in checks], color=colour, marker=".",
                    label=name)
            # BC's checks count their boards as "boards", DAgger's round records as "episodes"
            guess_rates = [c["guesses"] / c.get("boards", c.get("episodes")) for c in checks]
            ax.plot([c["wall_s"] for c in checks], guess_rates, color=colour, linestyle=":")
            final = arm["final"]
            low, high = final["success_ci95"]
            ax.errorbar([arm["wall_s"]], [final["success_rate"]], color=colour, marker="s", capsize=3,
                        yerr=[[final["success_rate"] - low], [high - final["success_rate"]]])
        # what each line style means, once for every arm
        ax.plot([], [], color="black", marker=".", label="checks' success (100 held-out boards)")
        ax.plot([], [], color="black", linestyle=":", label="checks' guess rate")
        ax.plot([], [], color="black", marker="s", linestyle="", label="last policy, 100 fresh boards")
        ax.axhline(TARGETS["last_policy_success_min"], color="grey", linestyle="--", linewidth=1, label="target 90%")
        ax.set(xlabel="wall-clock seconds (collection included)", ylabel="strict success / guess rate",
               ylim=(0, 1.02), title=f"lead-inspect, {robot_arm}, default boards")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7)


def options(parser) -> None:
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS), help="arms to run in this part")
    parser.add_argument("--episodes", type=int, default=1200, help="demonstrations")
    parser.add_argument("--robot-arm", choices=list(ROBOT_ARMS), default=ARM, help="the robot arm of every stage")
    parser.add_argument("--data", type=Path, default=None,
                        help="demo folder (reused; default data/demos-lead, -ARM for another robot arm)")
    parser.add_argument("--root", type=Path, default=None,
                        help="the arms' run folders (default runs/lead-inspect, -ARM for another robot arm)")
    parser.add_argument("--seed", type=int, default=0,
                        help="training seed of every arm (encoder, BC, DAgger); the demos and the fresh boards stay "
                             "the same. Another seed has its own run folders and results file (-seedN)")
    parser.add_argument("--replot", action="store_true", help="redraw the PNG from the results file; run nothing")


def with_folders(args):
    """``args`` with the robot arm's own demo folder, run root and results file where none was given: one arm's
    runs never continue another's, nor one seed's another's (the demos are shared by the seeds)."""
    suffix = "" if args.robot_arm == ARM else f"-{args.robot_arm}"
    seed = f"-seed{args.seed}" if args.seed else ""
    args.data = args.data or Path(f"data/demos-lead{suffix}")
    args.root = args.root or Path(f"runs/lead-inspect{suffix}{seed}")
    if args.out == RESULTS_DIR / "lead_inspect.json" and (suffix or seed):
        args.out = RESULTS_DIR / f"lead_inspect{suffix}{seed}.json".replace("-", "_")
    return args


def earlier_arms(path: Path) -> tuple[dict, dict]:
    """The arms the results file at ``path`` holds, each with the date and commit it was measured at
    (``kept_from``: its own when an earlier rewrite kept it too, else the file's), and the file's stages, to keep
    those not rerun."""
    if not path.is_file():
        return {}, {}
    earlier = read_results(path)
    source = {"date": earlier.get("date"), "commit": earlier.get("commit")}
    arms = {name: {**arm, "kept_from": arm.get("kept_from") or source} for name, arm in earlier["arms"].items()}
    return arms, {**source, "stages": earlier.get("stages", {})}


def in_progress(run_dir: Path) -> dict:
    """An unfinished DAgger run's checks on held-out boards, round by round (round 0: its start)."""
    logged = {name: dict(read_scalar(run_dir, f"dagger/{name}")) for name in
              ("success_rate", "guesses", "collisions_per_episode", "aggregate_frames")}
    return {"status": "in progress", "curve": [{"round": int(r), **{k: v[r] for k, v in logged.items() if r in v}}
                                               for r in sorted(logged["success_rate"])]}


def with_earlier_record(arm: dict | None, earlier: dict, evaluated_before: bool) -> dict | None:
    """An arm's record for the file: ``arm`` as this invocation read it, or ``earlier`` (the file's) where its
    folders are gone (``arm`` None). An arm whose evaluation finished in an earlier part was measured then: it keeps
    the date and commit ``earlier`` names."""
    if earlier.get("status") != "done":
        return arm
    if arm is None:
        return earlier
    if arm["status"] == "done" and evaluated_before:
        return {**arm, "kept_from": earlier["kept_from"]}
    return arm


def run_arm(name: str, args, stages: Stages) -> dict | None:
    """Trains (or reuses) the arm ``name`` and evaluates its last policy; None when it is not run and has no
    folder. Its wall time counts the collection, the encoder pretraining it starts from, its BC and DAgger."""
    recipe = RECIPES[name]
    bc_run = bc_config(args, recipe)
    bc_dir = Path(bc_run.run_dir)
    wanted = name in args.arms or any(RECIPES[a].bc_run == recipe.bc_run for a in args.arms)
    if wanted and recipe.encoder:
        encoder = encoder_config(args)
        stages.train("train:encoder", encoder_pretrain.EncoderRun, encoder)
    if wanted:
        stages.train(f"train:{bc_dir.name}", BCRun, bc_run)
    for link in dagger_chain(name) if name in args.arms else ():
        stages.train(f"train:{link}", DAggerRun, dagger_config(args, link, bc_dir))
    run_dir = args.root / name if recipe.dagger else bc_dir
    if not (run_dir / "summary.json").is_file():
        # A DAgger run stopped between rounds (to continue later): its checks so far, from its log.
        return in_progress(run_dir) if recipe.dagger and (run_dir / "logs").is_dir() else None
    summary = json.loads((run_dir / "summary.json").read_text())
    checkpoint = Path(summary["policy"]) if recipe.dagger else bc_dir / "checkpoints" / "last.pt"
    def final_policy():
        return last_on_fresh_boards(run_dir, checkpoint, args.boards, args.device, args.precision)

    # (an evaluation done before is read back: reusing it is not a measurement)
    evaluated = (run_dir / "eval-fresh-last" / "report.json").is_file()
    final = final_policy() if evaluated else stages.stage(f"evaluate:{name}", final_policy)
    # Demos another root collected (another seed's share them) cost this root nothing.
    collect_s = stages.seconds("collect") or 0.0
    start = collect_s + (stages.seconds("train:encoder") if recipe.encoder else 0.0)
    bc_seconds = stages.seconds(f"train:{bc_dir.name}")
    bc_summary = json.loads((bc_dir / "summary.json").read_text())
    curve = [{**c, "wall_s": round(start + bc_seconds * c["epoch"] / bc_summary["epochs"], 1)}
             for c in closed_loop_checks(bc_dir, bc_summary["steps"] // bc_summary["epochs"])]
    seconds = {"collect": collect_s, "train": bc_seconds}
    if recipe.encoder:
        seconds["encoder"] = stages.seconds("train:encoder")
    elapsed = start + bc_seconds
    for link_index, link in enumerate(dagger_chain(name)):
        dagger_s = stages.seconds(f"train:{link}")
        rounds = json.loads((args.root / link / "summary.json").read_text())["rounds"][1:]
        curve += [{"round": r["round"] + link_index * DAGGER["rounds"],
                   **{k: r[k] for k in ("success_rate", "success_ci95", "episodes", "guesses",
                                        "collisions_per_episode")},
                   "aggregate_frames": r["aggregate_frames"],
                   "wall_s": round(elapsed + dagger_s * r["round"] / len(rounds), 1)} for r in rounds]
        elapsed += dagger_s
        seconds["train"] = round(seconds["train"] + dagger_s, 1)
    seconds["evaluate"] = stages.seconds(f"evaluate:{name}")
    return {"status": "done", "curve": curve, "final": final, "targets": verdict_on_targets(final),
            "seconds": seconds, "wall_s": round(start + seconds["train"], 1)}


def run(args) -> dict | int:
    args = with_folders(args)
    if args.replot:
        plot(read_results(args.out)["arms"], args.out.with_suffix(".png"), args.robot_arm)
        print(f"wrote {args.out.with_suffix('.png')} from {args.out}")
        return 0
    args.root.mkdir(parents=True, exist_ok=True)
    stages = Stages(args.root / RECIPE_STAGES, progress=False)
    device = resolve_device(args.device)
    kept, kept_from = earlier_arms(args.out)

    collect = CollectConfig(out=str(args.data), episodes=args.episodes, difficulty=DIFFICULTY, image_size=IMAGE_SIZE,
                            seed=0, arm=args.robot_arm, task=TASK)
    stages.collect("collect", args.data, lambda: collect_demos(collect), done=(args.data / DATASET_META).is_file())
    dataset = DemoDataset.open(args.data)

    evaluated_before = {name for name, stage in stages.stages.items() if stage.get("finished")}
    arms: dict[str, dict] = {}
    for name, recipe in RECIPES.items():
        arm = with_earlier_record(run_arm(name, args, stages), kept.get(name, {}),
                                  f"evaluate:{name}" in evaluated_before)
        arms[name] = arm or {"status": "not run yet"}
        arms[name]["config"] = {"epochs": recipe.epochs, "eval_every": recipe.eval_every,
                                **ARM_BC_OPTIONS.get(args.robot_arm, {}),
                                **({"encoder": ENCODER} if recipe.encoder else {}),
                                **({"dagger": DAGGER} if recipe.dagger else {}),
                                **({"continues": recipe.after} if recipe.after else {})}

    rows = [{"arm": name, "last policy, fresh boards": ci_cell(a["final"]["success_rate"], a["final"]["success_ci95"]),
             "boards": a["final"]["episodes"], "guesses": a["final"]["guesses"],
             "collisions / episode": a["final"]["collisions_per_episode"], "wall s": a["wall_s"],
             "target met": a["targets"]["met"]} for name, a in arms.items() if a["status"] == "done"]
    if rows:
        print(markdown_table(rows))
    plot(arms, args.out.with_suffix(".png"), args.robot_arm)
    # Stages measured in earlier parts whose folders are gone stay on record beside this part's.
    all_stages = {**kept_from.get("stages", {}), **stages.stages}
    return {
        "precision": describe(args.precision, device), "task": TASK, "arm": args.robot_arm, "difficulty": DIFFICULTY,
        "image_size": IMAGE_SIZE, "demos": {"episodes": len(dataset.episodes), "frames": dataset.frames},
        "arms": arms, "stages": all_stages,
        "note": "checks are placed on the wall-clock axis by epoch (BC) or round (DAgger) within their stage's "
                "measured seconds; the final points are measured",
        "wall_s": {name: stage["seconds"] for name, stage in all_stages.items()},  # every part of every stage
    }


if __name__ == "__main__":
    sys.exit(BENCHMARK.main(run, options))
