"""``robot-rl info PATH`` (what a run folder, dataset, report or export holds) and ``robot-rl list`` (the names the
options take: tasks, arms, difficulties, randomization presets, perturbations).

Each kind of artefact (``ARTEFACT_KINDS``: checkpoint or encoder weights, export, run folder of any stage, dataset,
LeRobot dataset, pipeline root, evaluation report) is recognised by its marker file (``robot_rl.artefact_files``)
and described by its own function; ``describe`` tries them in order.

Reading a folder changes nothing in it and imports no code it names. Each artefact is read with the checks of the
command that reads it (a dataset as training opens it, a run folder as ``--resume`` does, an export as
``load_actor`` does), so what info prints is what that command would use; an artefact those checks refuse gets the
refusal, one line naming the file and why (exit 2).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from pathlib import Path

from robot_rl.artefact_files import (
    CHECKPOINTS,
    DAGGER_AGGREGATE,
    DATASET_META,
    EXPORT_RECORD,
    LEROBOT_INFO,
    PIPELINE_PRESET,
    PIPELINE_RESULT,
    REPORT,
    RUN_CONFIG,
    RUN_SUMMARY,
    dagger_round_records,
)
from robot_rl.artefact_schema import EXPORT_FORMAT
from robot_rl.envs.errors import file_problem
from robot_rl.errors import UsageError
from robot_rl.io import read_json_object
from robot_rl.learning_curves import stop_text, where_it_stops
from robot_rl.provenance import Provenance

Lines = list[tuple[str, str]]  # (label, value) rows, printed aligned
RUN_CONFIG_MARKERS = (("rounds", "dagger"), ("total_frames", "finetune"), ("views", "encoder"))  # else BC


def _env_lines(provenance: Provenance) -> Lines:
    """Task, arm, difficulty, randomization and image size of an artefact's checked record."""
    size = provenance.image_size
    return [("task", provenance.task), ("arm", provenance.arm), ("difficulty", provenance.difficulty),
            ("randomization", provenance.randomization), ("image size", f"{size} x {size}")]


def _rate(rate: float, ci95=None) -> str:
    return f"{rate:.0%}" + ("" if not ci95 else f" (95% CI {ci95[0]:.0%}-{ci95[1]:.0%})")


def _checked_rate(values: object, source: Path, rate_key: str = "success_rate") -> str:
    """``values``' success rate (and its 95% CI where given) as text, refused unless each is a number in [0, 1]."""
    def is_rate(value) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 1

    rate = values.get(rate_key) if isinstance(values, dict) else None
    ci95 = values.get("success_ci95") if isinstance(values, dict) else None
    if not is_rate(rate):
        raise UsageError(f"{source}: corrupt, {rate_key} must be a number in [0, 1], got {rate!r}")
    if ci95 is not None and not (isinstance(ci95, list) and len(ci95) == 2 and all(map(is_rate, ci95))):
        raise UsageError(f"{source}: corrupt, success_ci95 must be two numbers in [0, 1], got {ci95!r}")
    return _rate(rate, ci95)


def _count(values: dict, key: str, source: Path, low: int = 0, required: bool = False):
    """``values[key]``, refused unless an integer >= ``low`` (None where absent, unless ``required``)."""
    value = values.get(key)
    if (value is not None or required) and not (isinstance(value, int) and not isinstance(value, bool)
                                                and value >= low):
        raise UsageError(f"{source}: corrupt, {key} must be an integer >= {low}, got {value!r}")
    return value


def describe_dataset(root: Path) -> Lines:
    """A demo dataset, opened as training opens it (meta.json bounded and consistent, storage plain and whole)."""
    from robot_rl.dataset import META_FILE, DemoDataset

    dataset = DemoDataset.open(root)
    meta = dataset.meta
    provenance = Provenance.of_dataset(meta, root / META_FILE)
    episodes, runs = meta["episodes"], meta.get("runs", [])
    successes = sum(1 for row in episodes if row[-1])
    unfinished = [str(r.get("seed")) for r in runs if not r.get("complete")]
    return [("stage", "demo dataset (collect-demos)"), *_env_lines(provenance),
            ("progress", f"{len(episodes)} episodes, {meta['frames']} frames, {len(runs)} collection run(s)"
                         + (f"; unfinished: seed {', '.join(unfinished)} (collect-demos resumes it)"
                            if unfinished else "")),
            ("expert success", f"{successes}/{len(episodes)}" if episodes else "-"),
            ("at the board", _decisions(dataset, root) if episodes else "-")]


def _decisions(dataset, root: Path) -> str:
    """Where the expert decides: frames at the board labelled "continue" per verdict frame, and the median joint
    speed of each. Many waiting frames at a slow speed teach BC never to answer from the joint angles alone (the
    own-arm guide's case for reading joint velocities)."""
    import torch

    from robot_rl import keys
    from robot_rl.dataset_checks import DatasetError

    data = dataset.data
    if keys.LOCALIZED not in data.keys(include_nested=True):
        return "not recorded (no localized flag in this dataset)"
    localized, verdict, joint_state = data[keys.LOCALIZED], data[keys.EXPERT_VERDICT], data[keys.JOINT_STATE]
    frames = dataset.frames
    if (localized.dtype != torch.bool or localized.numel() != frames or verdict.numel() != frames
            or verdict.is_floating_point() or joint_state.dim() != 2 or not joint_state.is_floating_point()
            or joint_state.shape[1] % 2):
        raise DatasetError(f"{root}: corrupt storage, the localized flag, expert verdict and joint state must be one "
                           "bool, one whole number and angles then velocities per frame")
    localized, verdict = localized.reshape(-1), verdict.reshape(-1)
    speed = joint_state[:, joint_state.shape[1] // 2:].norm(dim=1)
    waiting, deciding = localized & (verdict == 0), verdict > 0

    def median_speed(frames: torch.Tensor) -> str:
        return f"{float(speed[frames].median()):.3f}" if frames.any() else "-"

    if not deciding.any():
        return f"no verdict frames; {int(waiting.sum())} frames labelled continue"
    return (f"{int(waiting.sum()) / int(deciding.sum()):.2f} frames labelled continue per verdict frame "
            f"(median joint speed {median_speed(waiting)} rad/s waiting, {median_speed(deciding)} at the verdict)")


def describe_lerobot(root: Path) -> Lines:
    """A LeRobot dataset, checked as ``pretrain --data`` checks it (no code it names is imported)."""
    from robot_rl.pretrain.lerobot_import import LeRobotSource
    from robot_rl.pretrain.lerobot_layout import INFO_PATH

    source = LeRobotSource(root)
    frames = sum(row["length"] for row in source.episodes)
    return [("stage", f"LeRobot dataset (codebase {source.info['codebase_version']})"),
            ("robot type", str(source.info.get("robot_type"))),
            *_env_lines(Provenance.of_dataset(source.meta, root / INFO_PATH)),
            ("progress", f"{len(source.episodes)} episodes, {frames} frames at {source.info['fps']} frames/s")]


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


def _run_config(run_dir: Path) -> tuple[str, dict]:
    """The kind of run a folder holds and its config, read and checked as ``--resume`` reads it."""
    from robot_rl.checkpoints import CONFIG_FILE
    from robot_rl.configs import BCConfig, DAggerConfig, EncoderPretrainConfig, FinetuneConfig
    from robot_rl.run_folder import RunFolder

    stored = read_json_object(run_dir / CONFIG_FILE)
    kind = next((kind for key, kind in RUN_CONFIG_MARKERS if key in stored), "pretrain")
    config_cls = {"dagger": DAggerConfig, "finetune": FinetuneConfig, "encoder": EncoderPretrainConfig,
                  "pretrain": BCConfig}[kind]
    return kind, dataclasses.asdict(RunFolder(run_dir).config(config_cls))


def _run_state(run_dir: Path, kinds: tuple[str, ...]) -> tuple[dict, Lines]:
    """The run's ``last.pt`` (read as ``--resume`` reads it) and the env lines of its record; ({}, a line saying
    so) before the first checkpoint. A checkpoint of another kind of run is refused."""
    from robot_rl.checkpoints import CONFIG_FILE, load_checkpoint
    from robot_rl.run_folder import RunFolder

    path = RunFolder(run_dir).checkpoint("last")
    if not (path.exists() or path.is_symlink()):
        return {}, [("env", "not recorded yet (no checkpoint)")]
    state = load_checkpoint(path)
    if state.get("kind") not in kinds:
        raise UsageError(f"{path}: not a checkpoint of this run (kind {state.get('kind')!r}, {CONFIG_FILE} says "
                         f"{' or '.join(kinds)})")
    if "env" not in state:
        return state, []
    return state, _env_lines(Provenance.of_checkpoint(state, path))


def describe_training_run(run_dir: Path, kind: str, config: dict) -> Lines:
    """A pretrain or finetune run folder: its stage, env, progress, last check (and a PPO run's curve) and policy."""
    from robot_rl.run_folder import SUMMARY_FILE

    state, env = _run_state(run_dir, ("ppo",) if kind == "finetune" else ("bc",))
    reading: Lines = []
    last = run_dir / CHECKPOINTS / "last.pt"
    finished = (run_dir / SUMMARY_FILE).is_file()
    # The checkpoint of --policy it started from (runs from before the rule recorded none: they took best.pt).
    start = f"from {config.get('init')}, its {config.get('checkpoint_kind', 'best')}.pt"
    if kind == "finetune":
        stage = "finetune (PPO, " + ("from scratch)" if config.get("from_scratch") else f"{start})")
        iterations = config["total_frames"] // config["frames_per_batch"]
        progress = (f"iteration {_count(state, 'iteration', last) or 0} of {iterations}, "
                    f"{_count(state, 'frames', last) or 0} of {config['total_frames']} frames")
        curve = _checked_curve(state.get("curve") or [], last)
        check = ("none yet" if not curve else
                 f"{_checked_rate(curve[-1], last)} success at iteration {_count(curve[-1], 'iteration', last)}")
        if len(curve) > 1:  # where its checks stop rising: whether a larger budget would have paid
            reading = [("curve", stop_text(where_it_stops([curve], config["eval_episodes"])))]
    else:
        stage = "pretrain (behaviour cloning" + (f", {start})" if config.get("init") else ")")
        progress = (f"epoch {_count(state, 'epoch', last) or 0} of {config['epochs']}, step "
                    f"{_count(state, 'step', last) or 0}")
        check = _last_check_bc(run_dir)
    return [("stage", stage), *env,
            ("progress", progress + ("; finished" if finished else "; unfinished: --resume continues it")),
            ("last check", check), *reading, *_policy_lines(run_dir)]


def _checked_curve(curve: object, source: Path) -> list[dict]:
    """A PPO run's checks, refused unless each has a success rate in [0, 1], a frame count and whole failure
    counts."""
    if not isinstance(curve, list) or not all(isinstance(point, dict) for point in curve):
        raise UsageError(f"{source}: corrupt, curve must be a list of checks")
    for point in curve:
        _checked_rate(point, source)
        _count(point, "frames", source, required=True)
        failures = point.get("failures", {})
        if not isinstance(failures, dict):
            raise UsageError(f"{source}: corrupt, a check's failures must be counts by kind")
        for kind in failures:
            _count(failures, kind, source, required=True)
    return curve


def describe_encoder_run(run_dir: Path, config: dict) -> Lines:
    """A pretrain-encoder run folder: the env its views come from, its progress and the weights it wrote."""
    from robot_rl.encoder import ENCODER_WEIGHTS_FILE
    from robot_rl.run_folder import SUMMARY_FILE

    state, _ = _run_state(run_dir, ("encoder",))
    weights = run_dir / ENCODER_WEIGHTS_FILE
    finished = (run_dir / SUMMARY_FILE).is_file()
    env = Provenance.of_options(config)
    return [("stage", "encoder pretraining (pretrain-encoder)"), *_env_lines(env),
            ("progress", f"epoch {_count(state, 'epoch', run_dir / 'checkpoints' / 'last.pt') or 0} of "
                         f"{config['epochs']}, {config['views']} views"
                         + ("; finished" if finished else "; unfinished: --resume continues it")),
            ("--encoder-weights", str(weights) if weights.is_file() else f"{weights}, not written yet")]


def describe_dagger(run_dir: Path, config: dict) -> Lines:
    from robot_rl.dataset import read_meta

    rounds = dagger_round_records(run_dir)
    checks = [_checked_rate(read_json_object(path), path) for path in rounds]
    finished = (run_dir / RUN_SUMMARY).is_file()
    meta = read_meta(run_dir / DAGGER_AGGREGATE)
    env = (_env_lines(Provenance.of_dataset(meta, run_dir / DAGGER_AGGREGATE / DATASET_META)) if meta is not None
           else [("env", "not recorded yet (no aggregate dataset)")])
    done = max(0, len(checks) - 1)  # round 0's record is the init policy's check
    start = f"from {config.get('init')}, its {config.get('checkpoint_kind', 'best')}.pt"
    return [("stage", f"dagger ({start})"), *env,
            ("progress", f"round {done} of {config.get('rounds')}"
                         + ("; unfinished: --resume continues it" if not finished else "; finished"
                            if done == config.get("rounds") else "; finished early (--until-success, --until-flat)")),
            ("last check", "none yet" if not checks else f"{checks[-1]} success (round {len(checks) - 1})"),
            *_policy_lines(run_dir)]


def describe_checkpoint(path: Path) -> Lines:
    """A checkpoint file, read as ``evaluate`` reads one: a policy's (BC, PPO) with its recorded env, or an encoder
    run's; or encoder weights (``describe_encoder_weights``)."""
    from robot_rl.checkpoints import load_checkpoint
    from robot_rl.encoder import ENCODER_WEIGHTS_FILE, ENCODER_WEIGHTS_KIND

    state = load_checkpoint(path)
    kind = state.get("kind")
    if kind == ENCODER_WEIGHTS_KIND or (kind is None and path.name == ENCODER_WEIGHTS_FILE):
        return describe_encoder_weights(path)
    if kind not in ("bc", "ppo", "encoder"):
        raise UsageError(f"{path}: not a robot_rl checkpoint (kind {kind!r})")
    env = _env_lines(Provenance.of_checkpoint(state, path)) if kind != "encoder" else []
    progress = (f"epoch {_count(state, 'epoch', path)}, step {_count(state, 'step', path)}" if kind != "ppo" else
                f"iteration {_count(state, 'iteration', path)}, {_count(state, 'frames', path)} frames")
    stage = {"bc": "pretrain", "ppo": "finetune", "encoder": "pretrain-encoder"}[kind]
    return [("stage", f"checkpoint ({stage})"), *env, ("progress", progress),
            ("evaluate takes" if kind != "encoder" else "resumed by", str(path))]


def describe_encoder_weights(path: Path) -> Lines:
    """Encoder weights (pretrain-encoder's ``encoder.pt``), read as ``pretrain --encoder-weights`` reads them: the
    cell they record, and their keypoint count."""
    from robot_rl.encoder import KEYPOINTS_PREFIX, read_encoder_weights

    state, cell = read_encoder_weights(path)
    keypoints = state.get(f"{KEYPOINTS_PREFIX}project.bias")
    return [("stage", "encoder weights (pretrain-encoder)"),
            *(_env_lines(cell) if cell is not None else [("env", "not recorded (a plain state dict)")]),
            ("keypoints", str(keypoints.numel()) if keypoints is not None else "none (the trunk alone)"),
            ("pretrain takes", f"--encoder-weights {path}"
                               + (f" --keypoints {keypoints.numel()}" if keypoints is not None else ""))]


def describe_report(root: Path) -> Lines:
    path = root / REPORT
    report = read_json_object(path)
    info, metrics = report.get("info"), report.get("metrics")
    if not isinstance(info, dict) or not isinstance(metrics, dict):
        raise UsageError(f"{path}: corrupt, info and metrics must be objects")
    record = {"env": info.get("task"), **{k: info.get(k) for k in ("difficulty", "image_size", "arm")},
              "randomization": info.get("randomization")}
    seeds = info.get("seeds")
    if not (isinstance(seeds, list) and len(seeds) == 2 and all(isinstance(s, int) for s in seeds)):
        raise UsageError(f"{path}: corrupt, info.seeds must be [first, last], got {seeds!r}")
    return [("stage", "evaluation report (evaluate)"),
            *_env_lines(Provenance.from_record(record, path)),
            ("policy", str(info.get("checkpoint"))),
            ("result", f"{_checked_rate(metrics, path)} success on {_count(metrics, 'episodes', path, 1)} boards "
                       f"(seeds {seeds})")]


def describe_export(root: Path) -> Lines:
    """An export folder, read as ``load_actor`` reads one (``model.safetensors`` with its ``config.json``), and
    its ``policy.json``: the recorded env checked, the files it lists there."""
    from robot_rl.export import FILES
    from robot_rl.policy_io import WEIGHTS_CONFIG, WEIGHTS_FILE, read_weights

    lines: Lines = [("stage", "exported policy (export)")]
    env = None
    if (root / WEIGHTS_FILE).exists() or (root / WEIGHTS_CONFIG).exists():
        state = read_weights(root / WEIGHTS_FILE)
        env = Provenance.from_record(state["env"], root / WEIGHTS_CONFIG)
        lines += [*_env_lines(env), ("policy", str(read_json_object(root / WEIGHTS_CONFIG).get("source")))]
    path = root / EXPORT_RECORD
    if path.exists() or path.is_symlink():
        policy = read_json_object(path)
        record = Provenance.from_record(policy.get("env"), path)
        if env is None:
            lines += [*_env_lines(record), ("policy", str(policy.get("checkpoint")))]
        files = policy.get("files")
        if not isinstance(files, dict) or any(FILES.get(k) != v for k, v in files.items()):
            raise UsageError(f"{path}: corrupt, files must map formats to their files ({FILES}), got {files!r}")
        for name in files.values():
            problem = file_problem(root / name, follow_symlinks=True)
            if problem:
                raise UsageError(f"{root / name}: {problem} (listed in {path})")
        lines.append(("files", ", ".join(files.values())))
    return lines


def describe_pipeline(root: Path) -> Lines:
    """A pipeline root: each stage's folder in brief (as ``info`` describes that folder alone), then the closing
    table's rates once the pipeline has finished."""
    result_path = root / PIPELINE_RESULT
    folders = [path for path in sorted(root.iterdir()) if path.is_dir()]
    lines: Lines = [("stage", "pipeline root (robot-rl pipeline)"),
                    *((folder.name, _in_brief(folder)) for folder in folders)]
    if result_path.is_file():
        result = read_json_object(result_path)
        for label, key in (("after BC", "after_bc"), ("after DAgger", "after_dagger"), ("after PPO", "metrics")):
            metrics = result.get(key) or {}
            if metrics:
                lines.append((label, f"{_checked_rate(metrics, result_path)} on "
                                     f"{_count(metrics, 'episodes', result_path, 1)} boards"))
    else:
        lines.append(("progress", "unfinished: the same pipeline command continues it"))
    return lines


def _in_brief(folder: Path) -> str:
    """A folder's kind and where it stands, from its own description (a refused one: why)."""
    try:
        kind = next((kind for kind in ARTEFACT_KINDS if kind.is_one(folder)), None)
        if kind is None:
            return "not an artefact of robot_rl"
        rows = dict(kind.describe(folder))
    except UsageError as err:
        return f"refused: {err}"
    return "; ".join(rows[label] for label in ("stage", "progress", "result") if label in rows)


def _is_export(path: Path) -> bool:
    """Whether a folder holds an export: ``policy.json``, ``model.safetensors``, or a ``config.json`` in the
    export's format (a run folder's config.json holds options instead)."""
    from robot_rl.checkpoints import CONFIG_FILE
    from robot_rl.policy_io import WEIGHTS_FILE

    if any((path / name).exists() for name in (EXPORT_RECORD, WEIGHTS_FILE)):
        return True
    if not (path / CONFIG_FILE).is_file():
        return False
    return read_json_object(path / CONFIG_FILE).get("format") == EXPORT_FORMAT


def describe_run_folder(path: Path) -> Lines:
    """A training run folder of any stage (its kind read from the options its ``config.json`` records)."""
    kind, config = _run_config(path)
    if kind == "dagger":
        return describe_dagger(path, config)
    if kind == "encoder":
        return describe_encoder_run(path, config)
    return describe_training_run(path, kind, config)


@dataclasses.dataclass(frozen=True)
class ArtefactKind:
    """A kind of artefact robot_rl writes: how a path is recognised as one (its marker file, named in
    ``robot_rl.artefact_files``) and how ``robot-rl info`` describes it."""

    name: str
    is_one: Callable[[Path], bool]
    describe: Callable[[Path], Lines]


def _folder_with(marker: str) -> Callable[[Path], bool]:
    return lambda path: path.is_dir() and (path / marker).exists()


# In the order they are tried: an export's config.json is not a run's, so exports come before run folders.
ARTEFACT_KINDS = (
    ArtefactKind("checkpoint", lambda path: not path.is_dir() and path.suffix == ".pt", describe_checkpoint),
    ArtefactKind("export", lambda path: path.is_dir() and _is_export(path), describe_export),
    ArtefactKind("run folder", _folder_with(RUN_CONFIG), describe_run_folder),
    ArtefactKind("dataset", _folder_with(DATASET_META), describe_dataset),
    ArtefactKind("LeRobot dataset", _folder_with(LEROBOT_INFO), describe_lerobot),
    ArtefactKind("pipeline root", _folder_with(PIPELINE_PRESET), describe_pipeline),
    ArtefactKind("evaluation report", _folder_with(REPORT), describe_report),
)


def describe(path: str | Path) -> Lines:
    """What ``path`` holds, as (label, value) rows, read with the checks of the command that reads it; a path
    robot_rl does not know, or one those checks refuse, is a one-line UsageError naming the file and why."""
    path = Path(path)
    if not (path.exists() or path.is_symlink()):
        raise UsageError(f"{path}: no such file or folder")
    kind = next((kind for kind in ARTEFACT_KINDS if kind.is_one(path)), None)
    if kind is not None:
        return kind.describe(path)
    if not path.is_dir():
        raise UsageError(f"{path}: not a checkpoint (.pt) or folder robot_rl knows")
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
