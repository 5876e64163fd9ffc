"""``robot-rl pipeline``: collect-demos -> pretrain -> finetune -> evaluate, each stage feeding the next
(with pretrain-encoder before pretrain, which ``--encoder auto`` runs for every task, and DAgger after it: rounds
while its checks say the policy needs them).

A stage whose output is complete is skipped; one that was interrupted is resumed. So running the same command
again after a crash picks up where it stopped; a root made with other preset options is refused, and so is a
root another pipeline is running in (``robot_rl.locks``). Presets:
``quick`` (the README's first command, about a quarter of an hour on two CPU cores: easy boards, 64x64 images,
150 demos and 8 BC epochs, which leave the policy partly working, then 65,536 PPO frames that lift it) and
``full`` (default difficulty at 84x84, a budget meant for a GPU box). On a GPU, either preset's fine-tuning steps
its envs in worker processes on the machine's cores (``sized_for``); the root records the recipe, not that layout,
so it resumes on another machine. The BC policy and the fine-tuned one are evaluated on the same held-out boards,
for the closing table. Which checkpoint of the BC and PPO runs is fine-tuned and evaluated
follows the one rule of ``checkpoints.policy_checkpoint``: ``last.pt`` (``--checkpoint-kind best``: ``best.pt``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from robot_rl import compat, compute
from robot_rl.artefact_files import PIPELINE_PRESET, PIPELINE_RESULT, RECIPE_STAGES, REPORT
from robot_rl.checkpoints import policy_checkpoint
from robot_rl.configs import (
    BCConfig,
    CollectConfig,
    DAggerConfig,
    EncoderPretrainConfig,
    EvaluateConfig,
    FinetuneConfig,
    PipelineConfig,
)
from robot_rl.dataset import META_FILE, DemoDataset
from robot_rl.envs.defaults import DEFAULT_ARM, DEFAULT_TASK
from robot_rl.envs.tasks import get_task
from robot_rl.errors import UsageError
from robot_rl.finetune import trainer
from robot_rl.io import write_json
from robot_rl.locks import exclusive
from robot_rl.pretrain import bc, dagger, encoder_pretrain
from robot_rl.pretrain.collect import collect_demos
from robot_rl.recipe import Recipe
from robot_rl.run_folder import RunFolder
from robot_rl.tables import markdown_table

# Where each stage writes, under the pipeline's root; the stages are linked through these.
DEMOS, ENCODER, BC, DAGGER, PPO = "demos", "encoder", "bc", "dagger", "ppo"
EVAL_BC, EVAL_DAGGER, EVAL = "eval-bc", "eval-dagger", "eval"
# The stages of a recipe, in order, as pipeline.json's seconds name them (a stage that did not run, or whose
# output was there before any record of it, has no row).
PIPELINE_STAGES = ("collect-demos", "pretrain-encoder", "pretrain", "evaluate BC", "dagger", "evaluate DAgger",
                   "finetune", "evaluate")
# Fields that link stages or pick the device: set by the pipeline, not options of a preset.
WIRING = {"collect": ("out",), "encoder": ("run_dir", "device", "precision"),
          "pretrain": ("data", "run_dir", "device", "precision"),
          "dagger": ("init", "run_dir", "device", "precision"),
          "finetune": ("init", "run_dir", "device", "precision"),
          "evaluate": ("checkpoint", "out", "device", "precision")}

STAGE_CONFIGS = {"collect": CollectConfig, "encoder": EncoderPretrainConfig, "pretrain": BCConfig,
                 "dagger": DAggerConfig, "finetune": FinetuneConfig, "evaluate": EvaluateConfig}
# The optional stages as ``Preset.updated`` adds them to a preset without them.
OPTIONAL_STAGES = {"encoder": EncoderPretrainConfig(run_dir=ENCODER), "dagger": DAggerConfig(init=BC, run_dir=DAGGER)}


@dataclass(frozen=True)
class Preset:
    """Each stage's options as that command's config; paths are relative to the pipeline's root. ``encoder``
    (None: no such stage) pretrains the policy's encoder on labelled views before pretrain, which then loads it;
    ``dagger`` (None: no DAgger stage) runs between pretrain and finetune, which then starts from DAgger's policy."""

    collect: CollectConfig
    pretrain: BCConfig
    finetune: FinetuneConfig
    evaluate: EvaluateConfig
    dagger: DAggerConfig | None = None
    encoder: EncoderPretrainConfig | None = None

    def updated(self, **stages: dict) -> Preset:
        """A copy with some stages' options updated, e.g. ``updated(pretrain={"epochs": 1})``; ``dagger=...`` or
        ``encoder=...`` on a preset without the stage adds it with its command's defaults."""
        def stage_config(name: str):
            return getattr(self, name) or OPTIONAL_STAGES[name]

        return replace(self, **{name: replace(stage_config(name), **values) for name, values in stages.items()})

    def options(self) -> dict:
        """Every stage's options (wiring left out), as JSON values: what ``preset.json`` records (no ``dagger``
        entry without the stage)."""
        return json.loads(json.dumps({stage: {k: v for k, v in asdict(getattr(self, stage)).items()
                                              if k not in WIRING[stage]}
                                      for stage in WIRING if getattr(self, stage) is not None}))


PRESETS = {
    "quick": Preset(
        # The project's story in one run: few demos leave BC partly working, PPO lifts it (benchmarks/quick_demo.py).
        # benchmarks/protocols.py builds its few preset (bc_vs_scratch's BC arm) from this recipe: 64 PPO iterations.
        # PPO samples close to a start whose own check already works and as widely as fine-tuning's defaults
        # otherwise (--exploration auto: the rule protocols.py fixed before the less-noise runs on both tasks).
        collect=CollectConfig(out=DEMOS, episodes=150, difficulty="easy", image_size=64),
        pretrain=BCConfig(data=DEMOS, run_dir=BC, epochs=8, batch_size=64, eval_every=0, eval_episodes=20),
        finetune=FinetuneConfig(init=BC, run_dir=PPO, total_frames=65_536, frames_per_batch=1024, num_envs=8,
                                ppo_epochs=8, minibatch_size=256, eval_every=4, eval_episodes=50, critic_warmup=2,
                                checkpoint_every=4, shaping=1.0, exploration="auto"),
        evaluate=EvaluateConfig(checkpoint=PPO, out=EVAL, episodes=50, num_envs=8, videos=2, failure_videos=4),
    ),
    "full": Preset(
        # Demos on tables of any colour in a calibrated cell (the camera a little off its mount, wherever it sits,
        # its pose and lens measured there: the arm controls it where it is and every frame is rectified to the
        # nominal lens) whose camera sets its exposure from the parts' highlights, kept with their segmentation
        # masks; BC from the encoder pretrained on the cell's labelled views (``--encoder auto``), recolouring each
        # frame's table, board and background. Each lever adopted by benchmarks/perception.py's rule (no
        # significant nominal cost over three seeds): the surfaces recipe, its calibrated cell, then that cell's
        # highlight-metering camera.
        collect=CollectConfig(out=DEMOS, episodes=1200, difficulty="default", image_size=84,
                              randomization="highlights", masks=True),
        pretrain=BCConfig(data=DEMOS, run_dir=BC, epochs=12, batch_size=64, eval_every=3, eval_episodes=100,
                          recolour="table,board,background"),
        finetune=FinetuneConfig(init=BC, run_dir=PPO, total_frames=500_000, frames_per_batch=4096, num_envs=16,
                                workers=16, ppo_epochs=4, minibatch_size=256, eval_every=5, eval_episodes=100,
                                critic_warmup=3, checkpoint_every=5, shaping=0.0),
        evaluate=EvaluateConfig(checkpoint=PPO, out=EVAL, episodes=200, num_envs=8, videos=8),
    ),
}


# Each preset's DAgger stage, sized like its BC: quick as benchmarks/bc_vs_scratch.py's lead-encoder preset (the
# quick BC start, then 2 rounds), full as the lead task's encoder-dagger-8 arm (results/lead_inspect.json: 8
# rounds of 200 episodes on the 1,200-demo BC, beta 0.5 halving per round: its checks still rose after the fourth).
DAGGER_STAGES = {
    "quick": DAggerConfig(init=BC, run_dir=DAGGER, rounds=2, episodes_per_round=150, epochs_per_round=4,
                          eval_episodes=50),
    "full": DAggerConfig(init=BC, run_dir=DAGGER, rounds=8, episodes_per_round=200, epochs_per_round=2,
                         eval_episodes=100),
}
# ``--dagger auto``: the stage decides from its own checks, on any task (each has an expert: the demos are its):
# rounds while the policy's check is under a working policy's success and each round beats every earlier check
# (the BC start's included), so a BC start that already works runs none. Fixed before any run measured it. Its
# rounds are capped at the full stage's in every preset: those rules, not a round count, end it (with the quick
# stage's 2 the lead task's start stopped while its checks still rose).
DAGGER_AUTO_UNTIL_SUCCESS = 0.8
DAGGER_AUTO_MAX_ROUNDS = DAGGER_STAGES["full"].rounds
# Each preset's encoder pretraining, sized like its BC: full is what the lead task's encoder arms ran
# (results/lead_inspect.json), quick at half the views and epochs; the views show the demos' cell (task, arm,
# difficulty, image size and randomization are the collection's: ``for_options``).
ENCODER_STAGES = {"quick": EncoderPretrainConfig(run_dir=ENCODER, views=10_000, epochs=4),
                  "full": EncoderPretrainConfig(run_dir=ENCODER, views=20_000, epochs=8)}
# ``--encoder auto`` pretrains it for every task: each labels its own views (``InspectionTask.perception_targets``
# and ``segmentation``), and on every built-in task in both presets BC from it beat BC without it (the lead task:
# benchmarks/results/lead_inspect.json; the PCB task on full's tables: perception.json, in quick's cell:
# quick_demo_encoder-on.json, by the rule that file's benchmark fixed before its run). No list of task names:
# a task of one's own gets the stage as the built-in ones do.
# BC options an arm needs beyond a preset's recipe (DAgger continues its BC's options, PPO its policy's). The Panda
# is still settling when it reaches the board and its expert answers only at rest, so its demos hold many
# "continue" frames per verdict there (benchmarks/results/demo_decisions*.json): from the joint angles alone BC
# never answered; reading the joint velocities (scaled by the demos) with the balanced answer-now-or-wait loss it
# did (benchmarks/results/bc_quality_panda_timing_only.json, the Panda's first camera mount).
ARM_BC_OPTIONS = {"panda": {"joint_velocities": True, "joint_scaling": "demos", "timing_weight": 10.0}}


def for_options(config: PipelineConfig) -> tuple[Preset, str]:
    """The preset ``config`` asks for, with its task, arm (and the BC options it needs), DAgger stage and checkpoint
    kind, and the root it writes ('' = runs/pipeline-PRESET, plus -TASK and -ARM for another task or arm than the
    defaults)."""
    preset, root = PRESETS[config.preset], f"runs/pipeline-{config.preset}"
    if config.task != DEFAULT_TASK:
        preset, root = preset.updated(collect={"task": config.task}), f"{root}-{config.task}"
    if config.arm != DEFAULT_ARM:
        preset = preset.updated(collect={"arm": config.arm}, pretrain=ARM_BC_OPTIONS.get(config.arm, {}))
        root = f"{root}-{Path(config.arm).stem}"
    if config.dagger == "on":
        preset = replace(preset, dagger=DAGGER_STAGES[config.preset])
    elif config.dagger == "auto":
        preset = replace(preset, dagger=replace(DAGGER_STAGES[config.preset], rounds=DAGGER_AUTO_MAX_ROUNDS,
                                                until_flat=True, until_success=DAGGER_AUTO_UNTIL_SUCCESS))
    if config.encoder in ("on", "auto"):
        cell = preset.collect
        preset = replace(preset, encoder=replace(
            ENCODER_STAGES[config.preset], task=cell.task, arm=cell.arm, difficulty=cell.difficulty,
            image_size=cell.image_size, randomization=cell.randomization))
    # Recorded in the root's preset.json: a root of another task, arm, DAgger or encoder choice or checkpoint kind
    # is refused.
    return with_checkpoint_kind(preset, config.checkpoint_kind), config.root or root


def with_checkpoint_kind(preset: Preset, kind: str) -> Preset:
    """``preset`` with every stage that reads a run folder's policy taking ``kind`` ("last" or "best")."""
    stages = {"finetune": {"checkpoint_kind": kind}, "evaluate": {"checkpoint_kind": kind}}
    if preset.dagger is not None:
        stages["dagger"] = {"checkpoint_kind": kind}
    return preset.updated(**stages)


# preset.json: the recipe; pipeline.json: where each stage wrote, the table's metrics, each stage's seconds.
PRESET_FILE, RESULT_FILE = PIPELINE_PRESET, PIPELINE_RESULT


def _check_preset(root: Path, preset: Preset) -> None:
    """Records the preset's options under ``root``; refuses a root whose stages were made with other options
    (finished stages are skipped on a rerun, so a changed preset would silently mix old and new outputs)."""
    wanted = preset.options()
    path = root / PRESET_FILE
    if not path.is_file():
        write_json(path, wanted)
        return
    defaults = {stage: {f.name: f.default for f in fields(STAGE_CONFIGS[stage])} for stage in WIRING}
    stored = {stage: {k: v for k, v in options.items() if k not in WIRING[stage]}
              for stage, options in compat.preset_options(json.loads(path.read_text()), defaults).items()}
    changed = [f"{stage}.{name}: {stored.get(stage, {}).get(name)!r} -> {options.get(name)!r}"
               for stage, options in {**{stage: {} for stage in stored}, **wanted}.items()
               for name in sorted(set(options) | set(stored.get(stage, {})))
               if stored.get(stage, {}).get(name) != options.get(name)]
    if changed:
        raise UsageError(f"{root} holds a pipeline run made with other options ({'; '.join(changed)}); "
                         f"remove it or choose another --out")


def _evaluate(options: EvaluateConfig, checkpoint: Path, out_dir: Path, device: str, precision: str,
              progress: bool, log, label: str) -> dict:
    """Evaluates ``checkpoint`` (a run folder: its ``options.checkpoint_kind`` checkpoint) into ``out_dir``
    (report.json and the rest); returns the metrics."""
    from robot_rl.evaluate import evaluate

    log(f"{label}: {policy_checkpoint(checkpoint, options.checkpoint_kind)} -> {out_dir}")
    config = replace(options, checkpoint=str(checkpoint), out=str(out_dir), device=device, precision=precision)
    return evaluate(config, progress=progress)["metrics"]


def sized_for(finetune: FinetuneConfig, context: compute.ComputeContext) -> FinetuneConfig:
    """A preset's fine-tuning with its collection laid out for the machine of ``context``
    (``compute.collection_layout``: on a GPU box, env workers on its cores and a batch that grows with the envs;
    on a CPU, the options as they are). Whole iterations: the frame budget rounds up to a batch, and the critic's
    warm-up keeps at least the recipe's frames. The other cadences (checks, checkpoints) count iterations: with a
    larger batch they come every more frames, and fewer of them."""
    workers, num_envs, frames = compute.collection_layout(
        finetune.frames_per_batch, finetune.num_envs, finetune.workers, context.device,
        compute.Machine(context.cores, context.gpus))
    if (workers, num_envs, frames) == (finetune.workers, finetune.num_envs, finetune.frames_per_batch):
        return finetune
    return replace(finetune, workers=workers, num_envs=num_envs, frames_per_batch=frames,
                   total_frames=-(-finetune.total_frames // frames) * frames,
                   critic_warmup=-(-finetune.critic_warmup * finetune.frames_per_batch // frames))


def run_pipeline(preset: Preset, root: str | Path, device: str = "auto", progress: bool = True,
                 log=print, precision: str = "auto") -> dict:
    """Runs (or resumes) every stage under ``root``, holding the root's lock (one pipeline per root at a time),
    with the fine-tuning sized for this machine (``sized_for``); returns where each stage wrote, the metrics of
    the BC and the fine-tuned policy on the same held-out boards, and the fine-tuning's compute context."""
    # The caller's own task: a module:Class is imported here, and every stage then finds it registered by name.
    get_task(preset.collect.task, trust_code=True)
    context = compute.resolve(device, precision)
    with exclusive(root, "pipeline root"):
        return _run_stages(preset, Path(root), device, progress, log, precision, context)


def _run_stages(preset: Preset, root: Path, device: str, progress: bool, log, precision: str,
                context: compute.ComputeContext) -> dict:
    data, bc_dir, ppo_dir = root / preset.collect.out, root / preset.pretrain.run_dir, root / preset.finetune.run_dir
    bc_eval_dir, eval_dir = root / EVAL_BC, root / preset.evaluate.out
    _check_preset(root, preset)  # the recipe, not its layout on this machine: a root resumes on another machine
    recipe = Recipe(root / RECIPE_STAGES, log, progress)

    def evaluate_stage(name: str, label: str, checkpoint: Path, out_dir: Path, options: EvaluateConfig) -> dict:
        return recipe.evaluate(name, out_dir / REPORT, lambda: _evaluate(
            options, checkpoint, out_dir, device, precision, progress, log, label), label)["metrics"]

    collect = replace(preset.collect, out=str(data))
    recipe.collect("collect-demos", data, lambda: collect_demos(collect, progress=progress),
                   done=(data / META_FILE).is_file() and len(DemoDataset.open(data).episodes) >= collect.episodes,
                   label="[1/5] collect-demos")

    encoder = {}
    if preset.encoder is not None:  # BC starts from a trunk trained on labelled views of the demos' cell
        encoder_dir = root / preset.encoder.run_dir
        recipe.train("pretrain-encoder", encoder_pretrain.EncoderRun, replace(
            preset.encoder, run_dir=str(encoder_dir), device=device, precision=precision), "[2a/5] pretrain-encoder")
        encoder = {"encoder_weights": str(encoder_dir)}

    recipe.train("pretrain", bc.BCRun, replace(
        preset.pretrain, data=str(data), run_dir=str(bc_dir), device=device, precision=precision, **encoder),
        "[2/5] pretrain")

    # The BC policy on the boards the fine-tuned one is evaluated on, without videos: the table's first row.
    bc_options = replace(preset.evaluate, videos=0, failure_videos=0)
    after_bc = evaluate_stage("evaluate BC", "[3/5] evaluate BC", bc_dir, bc_eval_dir, bc_options)

    start_dir, after_dagger, dagger_rounds = bc_dir, None, None
    if preset.dagger is not None:  # PPO starts from the policy DAgger ends with (a BC run folder of its own)
        dagger_dir = root / preset.dagger.run_dir
        recipe.train("dagger", dagger.DAggerRun, replace(
            preset.dagger, init=str(bc_dir), run_dir=str(dagger_dir), device=device, precision=precision),
            "[3b/5] dagger")
        summary = RunFolder(dagger_dir).summary()
        start_dir, dagger_rounds = dagger.final_policy_run(summary), len(summary["rounds"]) - 1
        if summary.get("final_round", dagger_rounds):
            after_dagger = evaluate_stage("evaluate DAgger", "[3c/5] evaluate DAgger", start_dir,
                                          root / EVAL_DAGGER, bc_options)
        else:  # no round run, or none checked better than the BC policy
            log(f"[3b/5] dagger: {dagger_rounds} round(s), none needed or better than the BC policy's check "
                f"({summary['rounds'][0]['success_rate']:.0%}): fine-tuning starts from BC")

    recipe.train("finetune", trainer.PPORun, replace(
        sized_for(preset.finetune, context), init=str(start_dir), run_dir=str(ppo_dir), device=device,
        precision=precision), f"[4/5] finetune from {policy_checkpoint(start_dir, preset.finetune.checkpoint_kind)}")

    # By default the policy PPO ended with (last.pt), as fine-tuning is designed to end (README, "Fine-tuning
    # design"); best.pt, the best of PPO's own held-out checks, stays beside it.
    after_ppo = evaluate_stage("evaluate", "[5/5] evaluate", ppo_dir, eval_dir, preset.evaluate)
    kind = preset.evaluate.checkpoint_kind
    ppo_summary = RunFolder(ppo_dir).summary() or {}
    result = {"demos": str(data), "encoder": encoder.get("encoder_weights"),
              "pretrain": str(bc_dir), "finetune": str(ppo_dir), "report": str(eval_dir),
              "bc_report": str(bc_eval_dir), "after_bc": after_bc, "after_dagger": after_dagger,
              "dagger_rounds": dagger_rounds,
              "metrics": after_ppo, "checkpoint_kind": kind,
              "policies": {"bc": str(policy_checkpoint(bc_dir, kind)), "ppo": str(policy_checkpoint(ppo_dir, kind))},
              "ppo_best": ppo_summary.get("best"),
              "exploration": ppo_summary.get("exploration"),  # what --exploration auto resolved to
              # Each stage's seconds over the invocations that ran it (a stage finished earlier: what it cost then).
              "seconds": {name: recipe.seconds(name) for name in PIPELINE_STAGES if recipe.seconds(name) is not None},
              # The fine-tuning's own (its workers and threads); a run folder finished before runs recorded one:
              # this process's.
              "compute": ppo_summary.get("compute") or context.record()}
    write_json(root / RESULT_FILE, result)
    return result


def result_table(result: dict) -> str:
    """The pipeline's closing lines: success (Wilson 95% CI), guesses, collisions and episode length after BC
    (and DAgger) and after PPO on the same boards, then where the report, videos and contact sheet are."""
    kind = result.get("checkpoint_kind", "last")
    rows, best = [], result.get("ppo_best") if kind == "last" else None
    stages = [("after BC", result["after_bc"]), ("after DAgger", result.get("after_dagger")),
              (f"after PPO ({kind}.pt)", result["metrics"])]
    for stage, metrics in ((stage, metrics) for stage, metrics in stages if metrics is not None):
        lo, hi = metrics["success_ci95"]
        rows.append({"policy": stage,
                     "success (95% CI)": f"{metrics['success_rate']:.0%} ({lo:.0%}-{hi:.0%}), "
                                         f"{metrics['episodes']} boards",
                     "guesses": metrics["guesses"],
                     "collisions / episode": f"{metrics['collisions_per_episode']:.2f}",
                     "episode length": f"{metrics['episode_length']:.1f}"})
    report = Path(result["report"])
    note = [] if best is None else [
        f"best.pt beside it: iteration {best['iteration']}, the best of PPO's own held-out checks"
        + ("" if best["iteration"] else " (none beat the BC start)")
        + f"; robot-rl evaluate --policy {result['finetune']} --checkpoint-kind best", ""]
    return "\n".join([markdown_table(rows), "", *note,
                      f"report:        {report / 'report.md'} (BC: {Path(result['bc_report']) / 'report.md'})",
                      f"videos:        {report / 'videos'}/",
                      f"contact sheet: {report / 'contact_sheet.png'}",
                      "seconds per stage: " + ", ".join(f"{k} {v:.0f}" for k, v in result["seconds"].items())])
