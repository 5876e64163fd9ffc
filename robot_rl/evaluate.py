"""``robot-rl evaluate``: a policy on inspection episodes, with metrics (report.json, report.md) and videos.

Videos are recorded while the metrics' episodes run (the first ``videos`` episodes and every failed one), so
each MP4 shows exactly an episode that was counted. A video that fails to encode is reported as a warning; the
metrics are kept. With ``--perturbations`` the same boards are run again under each shift of
``robot_rl.envs.randomization.PERTURBATIONS`` (and nominally, without randomization), one failure video per shift.
"""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path

from tqdm import tqdm

from robot_rl import compute, keys
from robot_rl.artefact_files import REPORT
from robot_rl.checkpoints import run_folder_of
from robot_rl.closed_loop import run_episodes
from robot_rl.configs import EvaluateConfig
from robot_rl.envs.randomization import (
    NONE,
    PERTURBATIONS,
    Randomization,
    describe,
    get_randomization,
    in_cell_of,
    with_camera_of,
    with_exposure,
)
from robot_rl.envs.tasks import get_task
from robot_rl.episodes import aggregate, summarize_episode
from robot_rl.io import write_json, write_text
from robot_rl.locks import exclusive
from robot_rl.policy_io import load_actor
from robot_rl.provenance import Provenance
from robot_rl.tables import markdown_table
from robot_rl.video import VideoRecorder


def report_markdown(metrics: dict, summaries: list[dict], info: dict) -> str:
    """A readable report: headline metrics, confusion matrix, reward terms, per-episode table."""
    lo, hi = metrics["success_ci95"]
    headline = [
        {"metric": "episodes", "value": metrics["episodes"]},
        {"metric": "success rate (correct verdict, board localized)",
         "value": f"{metrics['success_rate']:.1%} (95% CI {lo:.1%}-{hi:.1%}, {metrics['episodes']} boards)"},
        {"metric": "guesses (verdict without the board localized)",
         "value": f"{metrics['guesses']} of {metrics['episodes']} episodes"},
        {"metric": "verdict accuracy", "value": "-" if metrics["verdict_accuracy"] is None
         else f"{metrics['verdict_accuracy']:.1%} of {metrics['verdicts_given']} verdicts"},
        {"metric": "collisions per episode", "value": f"{metrics['collisions_per_episode']:.2f}"},
        {"metric": "steps to localize (localized episodes)", "value": metrics["steps_to_localize"]},
        {"metric": "episode length", "value": metrics["episode_length"]},
        {"metric": "return", "value": metrics["return"]},
        {"metric": "timed out / unstable", "value": f"{metrics['timed_out']} / {metrics['unstable']}"},
    ]
    failures = [{"failed episodes": kind.replace("_", " "), "count": count}
                for kind, count in metrics["failures"].items()]
    defects = [{"defect": defect, "episodes": row["episodes"], "success": f"{row['success_rate']:.1%}",
                "guesses": row["guesses"], **{kind.replace("_", " "): n for kind, n in row["failures"].items()}}
               for defect, row in metrics["by_defect"].items()]
    confusion = [{"board": truth, **counts} for truth, counts in metrics["confusion"].items()]
    terms = [{"reward term": name, "mean per episode": value} for name, value in metrics["reward_terms"].items()]
    episodes = [{k: s[k] for k in ("episode", "episode_seed", "defect", "verdict", "success", "failure", "steps",
                                   "return", "collision_steps", "steps_to_localize")} for s in summaries]
    return "\n\n".join([
        f"# Evaluation of `{info['checkpoint']}`",
        f"task {info.get('task', 'pcb-inspect')}, {info['difficulty']} boards, "
        f"{info['image_size']}x{info['image_size']} pixels, "
        f"randomization {info.get('randomization', 'none')}{_camera_text(info)}, "
        f"arm {info.get('arm', 'ur5e_like')}, "
        f"{'stochastic' if info['stochastic'] else 'deterministic'} policy, board seeds "
        f"{info['seeds'][0]}-{info['seeds'][-1]}.",
        markdown_table(headline), "## Why episodes failed",
        "guess: a verdict away from the inspection view; wrong verdict: a wrong one at the view; no verdict at "
        "view: the board localized at some step, no verdict there; view never found: never localized, no verdict.",
        markdown_table(failures), "## By defect", markdown_table(defects),
        "## Verdicts (rows: the board; columns: the verdict given)",
        markdown_table(confusion, ["board", "pass", "rework", "none"]), "## Reward terms", markdown_table(terms),
        "## Episodes", markdown_table(episodes),
    ]) + "\n"


# How the report's header names a meter (exposure.METERS); the centre's mean is the camera's default, unnamed.
_METERING_TEXT = {"centre": "", "highlights": " from its highlights"}


def _camera_text(info: dict) -> str:
    """How the report's camera set its exposure, as the report's header says it ('' for the policy's fixed one)."""
    if info.get("auto_exposure"):
        metering = info.get("metering", "centre")
        return f" (its camera setting its own exposure{_METERING_TEXT.get(metering, f' metering {metering}')})"
    return " (its camera at a fixed exposure)" if info.get("camera_exposure") == "fixed" else ""


def _run_boards(actor, provenance: Provenance, config: EvaluateConfig, out_dir: Path, device, progress: bool,
                desc: str = "evaluate") -> tuple[dict, list[dict], list[str]]:
    """One episode per board seed of ``config`` in the env ``provenance`` describes; returns (aggregate metrics,
    per-episode summaries, videos)."""
    seeds = list(range(config.seed, config.seed + config.episodes))
    num_envs = min(config.num_envs, config.episodes)
    env = provenance.make_env(num_envs=num_envs, parallel=False, episode_seeds=seeds, device=device)
    recorder = VideoRecorder(env, config, out_dir, num_envs)
    bar = tqdm(total=config.episodes, unit="ep", desc=desc, disable=not progress)

    def on_step(slot, step):
        recorder.on_step(slot, step)
        if bool(step.get((keys.NEXT, keys.DONE))):
            bar.update(1)

    try:
        rollouts = run_episodes(env, actor, config.episodes, deterministic=not config.stochastic,
                                callback=on_step)
    finally:
        bar.close()
        env.close()
    summaries = [{"episode": k, **summarize_episode(r, provenance.task)} for k, r in enumerate(rollouts)]
    return aggregate(summaries), summaries, recorder.written


def perturbation_suite(actor, provenance: Provenance, config: EvaluateConfig, out_dir: Path, device,
                       nominal: tuple[dict, list[str]] | None = None, progress: bool = True,
                       shifts: dict[str, Randomization] | None = None, cell: Randomization = NONE) -> list[dict]:
    """The same boards without randomization and under each fixed shift of ``shifts`` (None: ``PERTURBATIONS``);
    one row per setting (success with its Wilson interval, guesses, collisions, a failure video). ``nominal``
    reuses an evaluation already run without randomization: (metrics, videos). ``cell`` is the randomization
    the policy was trained in, with the deployed camera's exposure: a calibrated cell stays calibrated, and a camera
    that sets its own exposure keeps doing so, under every shift."""
    suite_config = replace(config, videos=0, failure_videos=min(1, config.failure_videos))
    rows = []
    for name, shift in {"none": NONE, **(PERTURBATIONS if shifts is None else shifts)}.items():
        folder = out_dir / "perturbations" / name
        setting = with_camera_of(shift, cell) if name == "none" else in_cell_of(shift, cell)
        if name == "none" and nominal is not None:
            metrics, videos, folder = nominal[0], nominal[1][:1], out_dir
        else:
            # The suite's shifts by name, as a run's record spells a randomization; a caller's, or one in a
            # calibrated cell, by value.
            by_name = setting is shift and (name == "none" or shifts is None)
            metrics, _, videos = _run_boards(actor, replace(provenance, randomization=name if by_name else setting),
                                             suite_config, folder, device, progress, desc=f"evaluate {name}")
        rows.append({"shift": name, "change": describe(setting), "episodes": metrics["episodes"],
                     "success_rate": metrics["success_rate"], "success_ci95": metrics["success_ci95"],
                     "guesses": metrics["guesses"], "collisions_per_episode": metrics["collisions_per_episode"],
                     "failures": metrics["failures"], "by_defect": metrics["by_defect"],
                     "video": str((folder / videos[0]).relative_to(out_dir)) if videos else None})
    return rows


def perturbation_markdown(rows: list[dict]) -> str:
    """The suite as a table: success (Wilson 95% CI) per shift, next to nominal."""
    table = [{"shift": r["shift"], "change": r["change"],
              "success": f"{r['success_rate']:.0%} ({r['success_ci95'][0]:.0%}-{r['success_ci95'][1]:.0%})",
              "guesses": r["guesses"], "collisions / episode": f"{r['collisions_per_episode']:.2f}",
              "failed episodes": failure_text(r.get("failures", {})), "failure video": r["video"] or "-"}
             for r in rows]
    return (f"## Perturbations (the same boards under every shift: {rows[0]['episodes']})\n\n"
            + markdown_table(table, ["shift", "change", "success", "guesses", "collisions / episode",
                                     "failed episodes", "failure video"]))


def failure_text(failures: dict[str, int]) -> str:
    """'wrong verdict 6, guess 2': the kinds that failed an episode, most first ('-' where none did)."""
    counted = sorted(((n, kind) for kind, n in failures.items() if n), reverse=True)
    return ", ".join(f"{kind.replace('_', ' ')} {n}" for n, kind in counted) or "-"


def evaluate(config: EvaluateConfig, progress: bool = True, shifts: dict[str, Randomization] | None = None) -> dict:
    """Runs the evaluation; writes report.json, report.md, videos/ and contact_sheet.png (and, with
    ``--perturbations``, the suite under perturbations/: the shifts of ``PERTURBATIONS``, or of ``shifts``, by
    name); returns the metrics."""
    context = compute.of_config(config)
    context.apply()
    device = context.torch_device
    actor, trained_in, checkpoint = load_actor(config.checkpoint, device=device, trust_code=config.trust_code,
                                               task=config.task, precision=context.precision,
                                               checkpoint_kind=config.checkpoint_kind)
    # Other boards and randomizations than the policy's are what evaluation is for; another arm is not.
    provenance = trained_in.inherit(str(checkpoint), may_change=("difficulty", "randomization"), arm=config.arm,
                                    difficulty=config.difficulty, randomization=config.randomization)
    run_dir = run_folder_of(checkpoint)
    out_dir = Path(config.out) if config.out else run_dir / "eval"
    # The policy's camera comes with it (its exposure loop, if it has one), unless the deployment names its own.
    cell = with_exposure(get_randomization(trained_in.randomization), config.camera_exposure)
    asked = get_randomization(provenance.randomization)
    seen = with_exposure(with_camera_of(asked, cell), config.camera_exposure)
    with exclusive(out_dir, "evaluation folder"):  # one writer of its report and videos at a time
        seeds = list(range(config.seed, config.seed + config.episodes))
        metrics, summaries, videos = _run_boards(actor, provenance if seen is asked else replace(
            provenance, randomization=seen), config, out_dir, device, progress)
        info = {"checkpoint": str(checkpoint), "checkpoint_kind": config.checkpoint_kind,
                "difficulty": provenance.difficulty, "image_size": provenance.image_size,
                "randomization": provenance.randomization, "auto_exposure": seen.auto_exposure,
                **({"metering": seen.metering} if seen.auto_exposure else {}),
                "camera_exposure": config.camera_exposure,
                "arm": provenance.arm, "task": provenance.task,
                "stochastic": config.stochastic, "seeds": [seeds[0], seeds[-1]], "precision": context.precision,
                "defect_types": list(get_task(provenance.task).defect_types)}
        report = {"metrics": metrics, "info": info, "config": asdict(config), "compute": context.record(),
                  "videos": videos, "episodes": summaries}
        markdown = report_markdown(metrics, summaries, info)
        if config.perturbations:
            nominal = (metrics, [v for v in videos if "failure" in v]) if provenance.randomization == "none" else None
            report["perturbations"] = perturbation_suite(actor, provenance, config, out_dir, device, nominal,
                                                           progress, shifts, cell)
            markdown += "\n" + perturbation_markdown(report["perturbations"]) + "\n"
        write_json(out_dir / REPORT, report)
        write_text(out_dir / "report.md", markdown)
    return {"metrics": metrics, "out_dir": str(out_dir), "videos": videos, "info": info,
            "perturbations": report.get("perturbations")}
