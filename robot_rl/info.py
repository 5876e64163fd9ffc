"""``robot-rl info PATH`` (what a run folder, dataset, report or export holds) and ``robot-rl list`` (the names the
options take: tasks, arms, difficulties, randomization presets, perturbations).

Reading a folder changes nothing in it and imports no code it names.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from robot_rl import compat
from robot_rl.envs.defaults import DEFAULT_TASK
from robot_rl.errors import UsageError

Lines = list[tuple[str, str]]  # (label, value) rows, printed aligned


def _json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise UsageError(f"{path}: unreadable JSON ({err})") from None


def _env_lines(env: dict) -> Lines:
    """Task, arm, difficulty, randomization and image size of a dataset's meta or a checkpoint's env."""
    env = compat.dataset_meta(env)  # what older artefacts lack, as they meant it
    return [("task", str(env.get("env", DEFAULT_TASK))), ("arm", str(env["arm"])),
            ("difficulty", str(env["difficulty"])), ("randomization", str(env["randomization"])),
            ("image size", f"{env.get('image_size')} x {env.get('image_size')}")]


def _rate(rate: float, ci95=None) -> str:
    return f"{rate:.0%}" + ("" if not ci95 else f" (95% CI {ci95[0]:.0%}-{ci95[1]:.0%})")


def describe_dataset(root: Path) -> Lines:
    meta = _json(root / "meta.json")
    episodes = meta.get("episodes", [])
    successes = sum(1 for row in episodes if row[-1])
    runs = meta.get("runs", [])
    unfinished = [r["seed"] for r in runs if not r.get("complete")]
    return [("stage", "demo dataset (collect-demos)"), *_env_lines(meta),
            ("progress", f"{len(episodes)} episodes, {meta.get('frames', 0)} frames, {len(runs)} collection run(s)"
                         + (f"; unfinished: seed {', '.join(map(str, unfinished))} (collect-demos resumes it)"
                            if unfinished else "")),
            ("expert success", f"{successes}/{len(episodes)}" if episodes else "-")]


def describe_lerobot(root: Path) -> Lines:
    info = _json(root / "meta" / "info.json")
    return [("stage", f"LeRobot dataset (codebase {info.get('codebase_version', '?')})"),
            ("robot type", str(info.get("robot_type"))),
            ("progress", f"{info.get('total_episodes')} episodes, {info.get('total_frames')} frames at "
                         f"{info.get('fps')} frames/s")]


def _last_check_bc(run_dir: Path) -> str:
    from robot_rl.run_logs import read_scalar

    checks = read_scalar(run_dir, "eval/success_rate")
    if not checks:
        return "none yet"
    step, rate = checks[-1]
    boards = dict(read_scalar(run_dir, "eval/boards")).get(step)
    return f"{_rate(rate)} success at step {step}" + (f" on {int(boards)} boards" if boards else "")


def _policy_lines(run_dir: Path) -> Lines:
    from robot_rl.checkpoints import policy_checkpoint

    last, best = policy_checkpoint(run_dir, "last"), policy_checkpoint(run_dir, "best")
    lines = [("evaluate takes", f"{last} (last: the policy the run ended with)" if last.is_file()
              else f"{last}, not written yet")]
    if best.name == "best.pt":
        lines.append(("--checkpoint-kind best", f"{best} (its best held-out check)"))
    return lines


def describe_training_run(run_dir: Path, config: dict) -> Lines:
    """A pretrain or finetune run folder: its stage, env, progress, last check and policy."""
    from robot_rl.checkpoints import load_checkpoint
    from robot_rl.run_folder import SUMMARY_FILE, RunFolder

    folder = RunFolder(run_dir)
    state = load_checkpoint(folder.checkpoint("last")) if folder.checkpoint("last").is_file() else {}
    finished = (run_dir / SUMMARY_FILE).is_file()
    # The checkpoint of --policy it started from (runs from before the rule recorded none: they took best.pt).
    start = f"from {config.get('init')}, its {config.get('checkpoint_kind', 'best')}.pt"
    if "total_frames" in config:
        stage = "finetune (PPO, " + ("from scratch)" if config.get("from_scratch") else f"{start})")
        iterations = config["total_frames"] // config["frames_per_batch"]
        progress = (f"iteration {state.get('iteration', 0)} of {iterations}, {state.get('frames', 0)} of "
                    f"{config['total_frames']} frames")
        curve = state.get("curve") or []
        check = ("none yet" if not curve else
                 f"{_rate(curve[-1]['success_rate'], curve[-1].get('success_ci95'))} success at iteration "
                 f"{curve[-1]['iteration']}")
    else:
        stage = "pretrain (behaviour cloning" + (f", {start})" if config.get("init") else ")")
        progress = f"epoch {state.get('epoch', 0)} of {config['epochs']}, step {state.get('step', 0)}"
        check = _last_check_bc(run_dir)
    return [("stage", stage), *_env_lines(state.get("env") or {}),
            ("progress", progress + ("; finished" if finished else "; unfinished: --resume continues it")),
            ("last check", check), *_policy_lines(run_dir)]


def describe_dagger(run_dir: Path, config: dict) -> Lines:
    rounds = sorted((run_dir / "rounds").glob("round-*.json"))
    checks = [_json(path) for path in rounds]
    last = checks[-1] if checks else None
    finished = (run_dir / "summary.json").is_file()
    meta_path = run_dir / "aggregate" / "meta.json"
    env = _json(meta_path) if meta_path.is_file() else {}
    done = max(0, len(checks) - 1)  # round-00 is the init policy's check
    start = f"from {config.get('init')}, its {config.get('checkpoint_kind', 'best')}.pt"
    return [("stage", f"dagger ({start})"), *_env_lines(env),
            ("progress", f"round {done} of {config.get('rounds')}"
                         + ("; finished" if finished else "; unfinished: --resume continues it")),
            ("last check", "none yet" if last is None else
             f"{_rate(last['success_rate'], last.get('success_ci95'))} success (round {len(checks) - 1})"),
            *_policy_lines(run_dir)]


def describe_checkpoint(path: Path) -> Lines:
    from robot_rl.checkpoints import load_checkpoint

    state = load_checkpoint(path)
    kind = state.get("kind")
    progress = (f"epoch {state.get('epoch')}, step {state.get('step')}" if kind == "bc" else
                f"iteration {state.get('iteration')}, {state.get('frames')} frames" if kind == "ppo" else "-")
    return [("stage", f"checkpoint ({ {'bc': 'pretrain', 'ppo': 'finetune'}.get(kind, kind)})"),
            *_env_lines(state.get("env") or {}), ("progress", progress), ("evaluate takes", str(path))]


def describe_report(root: Path) -> Lines:
    report = _json(root / "report.json")
    info, metrics = report.get("info", {}), report.get("metrics", {})
    return [("stage", "evaluation report (evaluate)"),
            *_env_lines({**info, "env": info.get("task")}),
            ("policy", str(info.get("checkpoint"))),
            ("result", f"{_rate(metrics.get('success_rate', 0), metrics.get('success_ci95'))} success on "
                       f"{metrics.get('episodes')} boards (seeds {info.get('seeds')})")]


def describe_export(root: Path) -> Lines:
    policy = _json(root / "policy.json")
    return [("stage", "exported policy (export)"), *_env_lines(policy.get("env") or {}),
            ("policy", str(policy.get("checkpoint"))), ("files", ", ".join(policy.get("files", {}).values()))]


def describe_pipeline(root: Path) -> Lines:
    result_path = root / "pipeline.json"
    lines: Lines = [("stage", "pipeline root (robot-rl pipeline)"),
                    ("stages present", ", ".join(p.name for p in sorted(root.iterdir()) if p.is_dir()) or "-")]
    if result_path.is_file():
        result = _json(result_path)
        for label, key in (("after BC", "after_bc"), ("after PPO", "metrics")):
            metrics = result.get(key) or {}
            if metrics:
                lines.append((label, f"{_rate(metrics['success_rate'], metrics.get('success_ci95'))} on "
                                     f"{metrics.get('episodes')} boards"))
    else:
        lines.append(("progress", "unfinished: the same pipeline command continues it"))
    return lines


def describe(path: str | Path) -> Lines:
    """What ``path`` holds, as (label, value) rows; a path robot_rl does not know is a one-line UsageError."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path}: no such file or folder")
    if path.is_file():
        if path.suffix == ".pt":
            return describe_checkpoint(path)
        raise UsageError(f"{path}: not a checkpoint (.pt) or folder robot_rl knows")
    if (path / "config.json").is_file():
        config = _json(path / "config.json")
        return describe_dagger(path, config) if "rounds" in config else describe_training_run(path, config)
    for marker, describer in (("meta.json", describe_dataset), ("meta/info.json", describe_lerobot),
                              ("preset.json", describe_pipeline), ("report.json", describe_report),
                              ("policy.json", describe_export)):
        if (path / marker).is_file():
            return describer(path)
    raise UsageError(f"{path}: not a run folder, dataset, pipeline root, evaluation report or export of robot_rl")


def format_lines(lines: Lines) -> str:
    width = max(len(label) for label, _ in lines)
    return "\n".join(f"{label + ':':<{width + 1}} {value}" for label, value in lines)


def catalog() -> dict[str, Lines]:
    """The names the options take, each with a short description: tasks, arms, difficulties (per task),
    randomization presets, perturbations, pipeline presets."""
    from robot_rl.configs import PIPELINE_PRESETS
    from robot_rl.envs.arms import ARMS
    from robot_rl.envs.randomization import PERTURBATIONS, RANDOMIZATIONS
    from robot_rl.envs.randomization import describe as describe_randomization
    from robot_rl.envs.tasks import TASKS

    def first_sentence(doc: str | None) -> str:
        return re.split(r"(?<=[.?!])\s", " ".join((doc or "").split()))[0]

    difficulties = []
    for name, task in TASKS.items():
        for level, preset in task.difficulties.items():
            difficulties.append((f"{name} {level}", f"{preset.num_posts} posts, defects x{preset.defect_scale:g}, "
                                                    f"light jitter {preset.light_variation:g}, board yaw up to "
                                                    f"{preset.board_max_yaw:.2f} rad"))
    return {
        "tasks (--task; or module:Class for your own)": [(name, first_sentence(task.__doc__))
                                                         for name, task in TASKS.items()],
        "arms (--arm; or an ArmSpec .json file)": [(name, f"{len(arm.joints)} joints, camera on {arm.camera_body}")
                                                   for name, arm in ARMS.items()],
        "difficulties (--difficulty)": difficulties,
        "randomization presets (--randomization)": [(name, describe_randomization(r))
                                                    for name, r in RANDOMIZATIONS.items()],
        "perturbations (evaluate --perturbations)": [(name, describe_randomization(r))
                                                     for name, r in PERTURBATIONS.items()],
        "pipeline presets (pipeline --preset)": [(name, "") for name in PIPELINE_PRESETS],
    }
