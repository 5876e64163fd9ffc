"""The robot-rl command line: one subcommand per pipeline stage, plus info (what a folder holds) and list (names).

Each subcommand imports its stage lazily, so ``robot-rl --help`` stays fast. ``main`` is the one exception
boundary: bad input (an option value, a path that is a file, too long, not writable) ends with a one-line error
naming the culprit and exit code 2; a full disk with one line naming the folder and exit code 1; Ctrl-C and SIGTERM
with 128 + the signal's number (a training run checkpoints first and says how to resume); anything else is a bug
and keeps its traceback.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import signal
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from robot_rl.errors import Interrupted, NoSpaceLeft, RunStopped, TrainingStopped, UsageError
from robot_rl.io import DISK_FULL
from robot_rl.locks import refuse_if_locked, waiting_for_locks
from robot_rl.stop import clear_stop_request, stop_deferred, stop_requested, stop_signals_interrupt


def _print_next(*commands: str) -> None:
    """What to run next once a stage has ended: ``next: robot-rl ...`` (the first command; the others as
    alternatives), every one a command line this parser takes (a test parses them)."""
    alternatives = "".join(f" (or {command})" for command in commands[1:])
    print(f"next: {commands[0]}{alternatives}", flush=True)


def _run_dir(args: argparse.Namespace) -> str:
    return args.resume or args.run_dir


def _print_policy(source: str, kind: str) -> None:
    """Prints which checkpoint ``source`` means (``checkpoints.policy_checkpoint``, the one rule)."""
    from robot_rl.checkpoints import describe_policy
    from robot_rl.policy_io import WEIGHTS_FILE

    weights = Path(source) / WEIGHTS_FILE
    print(f"policy: {weights} (exported weights)" if weights.is_file() else describe_policy(source, kind),
          flush=True)


def _print_recipe(command: str, config, recipe: str) -> None:
    """Says which recipe a training run runs: the measured one (the defaults) or which options differ from it."""
    import dataclasses

    from robot_rl.configs import NOT_RECIPE, OPTION_GROUPS
    from robot_rl.options import flag_of

    excluded = {"seed", "eval_seed", *(name for title in NOT_RECIPE for name in OPTION_GROUPS[title])}
    changed = [f"{flag_of(f)} {getattr(config, f.name)}" for f in dataclasses.fields(config)
               if f.name not in excluded and getattr(config, f.name) != f.default]
    print(f"robot-rl {command}: {recipe}" + (f", except {', '.join(changed)}" if changed else ""), flush=True)


def _cmd_demo(args: argparse.Namespace) -> int:
    from robot_rl.configs import DemoConfig
    from robot_rl.demo import run_expert_demo
    from robot_rl.io import write_json
    from robot_rl.options import config_from_args
    from robot_rl.tables import markdown_table

    config = config_from_args(DemoConfig, args)
    _output_folder(config.out)
    summaries = run_expert_demo(config.out, episodes=config.episodes, difficulty=config.difficulty,
                                image_size=config.image_size, seed=config.seed, frames_per_episode=config.frames,
                                arm=config.arm, task=config.task)
    columns = ["episode", "episode_seed", "defect", "verdict", "success", "steps", "return", "collision_steps",
               "steps_to_localize"]
    successes = sum(s["success"] for s in summaries)
    metrics = Path(config.out) / "metrics.json"
    write_json(metrics, {"task": config.task, "arm": config.arm, "difficulty": config.difficulty,
                         "image_size": config.image_size, "board_seed": config.seed,
                         "expert_success": successes / len(summaries), "episodes": summaries})
    print(markdown_table(summaries, columns))
    print(f"\nexpert success {successes}/{len(summaries)}; frames in {config.out}/frames/, metrics in {metrics}")
    return 0


def _cmd_collect_demos(args: argparse.Namespace) -> int:
    from robot_rl.configs import CollectConfig
    from robot_rl.options import config_from_args, given_options
    from robot_rl.pretrain.collect import collect_demos

    summary = collect_demos(config_from_args(CollectConfig, args), given=given_options(args))
    run = summary["run"]
    print(f"{summary['dataset']}: {summary['episodes']} episodes, {summary['frames']} frames "
          f"(this run: seed {run['seed']}, {run['episodes']} episodes in {run['seconds']:.0f} s); "
          f"expert success {summary['expert_success']:.1%}")
    _print_next(f"robot-rl pretrain --data {summary['dataset']} --out runs/bc")
    return 0


def _train_command(args: argparse.Namespace, command: str, config_cls: type, start, resume,
                   recipe: str = "") -> dict | None:
    """A pretrain, dagger or finetune run, new or ``--resume``d; its summary, or None when it stopped on a failure
    (printed as one line; the caller exits 1). Ctrl-C or SIGTERM raises RunStopped (exit 130 or 143). Prints the
    policy it starts from and, for a recipe, the options that differ from it."""
    from robot_rl.options import check_resume_options, config_from_args
    from robot_rl.run_folder import RunFolder

    config = RunFolder(args.resume).config(config_cls) if args.resume else config_from_args(config_cls, args)
    if args.resume:
        check_resume_options(config, args, args.resume)
    if getattr(config, "init", ""):  # pretrain-encoder starts from no policy
        _print_policy(config.init, config.checkpoint_kind)
    if recipe:
        _print_recipe(command, config, recipe)
    try:
        summary = resume(args.resume) if args.resume else start(config)
    except TrainingStopped as err:
        print(f"robot-rl {command}: stopped: {err}", file=sys.stderr)
        return None
    if not summary["finished"]:
        from robot_rl.stop import STOPPED_BY

        raise RunStopped(_run_dir(args), command, summary.get(STOPPED_BY, signal.SIGINT))
    return summary


def _cmd_pretrain(args: argparse.Namespace) -> int:
    from robot_rl.configs import BCConfig
    from robot_rl.pretrain import bc

    summary = _train_command(args, "pretrain", BCConfig, bc.pretrain, bc.resume,
                             recipe="the README's measured BC recipe (benchmarks/bc_quality.py)")
    if summary is None:
        return 1
    final = summary["final_eval"] or {}
    print(f"best closed-loop success {summary['best_success']:.1%}; final: success "
          f"{final.get('success_rate', 0):.1%}, guesses {final.get('guesses')}, verdict accuracy "
          f"{final.get('verdict_accuracy')}, "
          f"collisions/episode {final.get('collisions_per_episode')}")
    run_dir = _run_dir(args)
    _print_next(f"robot-rl finetune --policy {run_dir} --out runs/ppo", f"robot-rl dagger --policy {run_dir}",
                f"robot-rl evaluate --policy {run_dir}")
    return 0


def _cmd_pretrain_encoder(args: argparse.Namespace) -> int:
    from robot_rl.configs import EncoderPretrainConfig
    from robot_rl.pretrain import encoder_pretrain

    summary = _train_command(args, "pretrain-encoder", EncoderPretrainConfig, encoder_pretrain.pretrain_encoder,
                             encoder_pretrain.resume)
    if summary is None:
        return 1
    final = {k.removeprefix("val/"): round(v, 3) for k, v in (summary["final_val"] or {}).items()
             if not k.startswith("val/loss")}
    run_dir = _run_dir(args)
    print(f"{summary['views']} views ({summary['views_per_s']:.0f} views/s rendered), {summary['epochs']} epochs; "
          f"held-out views: {final}")
    print(f"encoder weights: {run_dir}/encoder.pt")
    _print_next(f"robot-rl pretrain --encoder-weights {run_dir} --data data/demos --out runs/bc")
    return 0


def _cmd_dagger(args: argparse.Namespace) -> int:
    from robot_rl.configs import DAggerConfig
    from robot_rl.pretrain import dagger
    from robot_rl.tables import markdown_table

    summary = _train_command(args, "dagger", DAggerConfig, dagger.dagger, dagger.resume)
    if summary is None:
        return 1
    rows = [{"round": r["round"], "beta": "-" if r["beta"] is None else f"{r['beta']:.2f}",
             "aggregate frames": r["aggregate_frames"],
             "check success (95% CI)": "{:.1%} ({:.1%}-{:.1%})".format(r["success_rate"], *r["success_ci95"]),
             "guesses": r["guesses"], "collisions / episode": r["collisions_per_episode"]}
            for r in summary["rounds"]]
    print(markdown_table(rows))
    print(f"\npolicy: {summary['policy']}")
    _print_next(f"robot-rl finetune --policy {dagger.final_policy_run(summary)} --out runs/ppo")
    return 0


def _cmd_finetune(args: argparse.Namespace) -> int:
    from robot_rl.configs import FinetuneConfig
    from robot_rl.finetune import trainer

    summary = _train_command(args, "finetune", FinetuneConfig, trainer.finetune, trainer.resume,
                             recipe="the README's measured fine-tuning design (the pipeline's quick preset)")
    if summary is None:
        return 1
    curve = summary["curve"]
    if curve:
        def point(p: dict) -> str:
            return "{:.1%} (95% CI {:.1%}-{:.1%}, guesses {:.0%})".format(p["success_rate"], *p["success_ci95"],
                                                                          p["guess_rate"])

        print(f"{summary['frames']} frames, {summary['iterations']} iterations; closed-loop success "
              f"{point(curve[0])} at the start, {point(curve[-1])} at the end")
    _print_next(f"robot-rl evaluate --policy {_run_dir(args)} --episodes 100")
    return 0


def _output_folder(path: str) -> None:
    """Refuses an output folder that is a file, before any work (the writes at the end would fail on it)."""
    if path and Path(path).exists() and not Path(path).is_dir():
        raise UsageError(f"--out {path}: not a folder")


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from robot_rl.configs import EvaluateConfig
    from robot_rl.evaluate import evaluate
    from robot_rl.options import config_from_args

    config = config_from_args(EvaluateConfig, args)
    _output_folder(config.out)
    _print_policy(config.checkpoint, config.checkpoint_kind)
    result = evaluate(config)
    print((Path(result["out_dir"]) / "report.md").read_text())
    print(f"report and {len(result['videos'])} videos in {result['out_dir']}")
    _print_next(f"robot-rl export --policy {config.checkpoint} --format onnx")
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from robot_rl.configs import ExportConfig
    from robot_rl.export import export
    from robot_rl.options import config_from_args

    config = config_from_args(ExportConfig, args)
    _output_folder(config.out)
    _print_policy(config.checkpoint, config.checkpoint_kind)
    for name, path in export(config).items():
        print(f"{name}: {path}")
    return 0


def _cmd_export_dataset(args: argparse.Namespace) -> int:
    from robot_rl.configs import ExportDatasetConfig
    from robot_rl.options import config_from_args
    from robot_rl.pretrain.lerobot_export import export_dataset

    config = config_from_args(ExportDatasetConfig, args)
    summary = export_dataset(config.data, config.out or f"{config.data.rstrip('/')}-lerobot",
                             video_codec=config.video_codec, crf=config.crf)
    print(f"{summary['out']}: LeRobot v3.0 dataset, {summary['episodes']} episodes, {summary['frames']} frames, "
          f"{summary['files']} files, {summary['bytes'] / 2**20:.1f} MiB")
    return 0


def _cmd_pipeline(args: argparse.Namespace) -> int:
    from robot_rl.configs import PipelineConfig
    from robot_rl.options import config_from_args
    from robot_rl.pipeline import for_options, result_table, run_pipeline

    config = config_from_args(PipelineConfig, args)
    preset, root = for_options(config)
    result = run_pipeline(preset, root, device=config.device, precision=config.precision)
    print("\n" + result_table(result))
    policy = Path(root) / preset.finetune.run_dir
    _print_next(f"robot-rl export --policy {policy} --format onnx",
                f"robot-rl evaluate --policy {policy} --episodes 100")
    return 0


def _cmd_info(args: argparse.Namespace) -> int:
    from robot_rl.info import describe, format_lines

    print(format_lines(describe(args.path)))
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    from robot_rl.info import catalog

    for title, rows in catalog().items():
        print(f"{title}:")
        width = max(len(name) for name, _ in rows)
        for name, text in rows:
            print(f"  {name:<{width}}  {text}".rstrip())
        print()
    return 0


class OneLineErrors(argparse.ArgumentParser):
    """argparse's parser whose errors are one line naming the command (``robot-rl pretrain: error: ...``, exit 2)
    instead of the usage block; ``--help`` shows the usage. Subcommand parsers are of the same class."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}; see {self.prog} --help\n")


@dataclass(frozen=True)
class Command:
    """One stage's command, declared once: its parser, its start-up line and how it continues after a stop all
    read this."""

    name: str
    help: str  # one line: ``robot-rl --help`` and the start-up line
    example: str
    title: str  # of the group of the command's own options
    config: str  # its options' class in ``robot_rl.configs`` (imported when the parser is built)
    func: Callable[[argparse.Namespace], int]
    resumable: bool = False  # takes --resume RUN_DIR
    writes: tuple[str, str] | None = None  # (option, kind) of the folder it writes and locks: takes --wait-lock
    continues: bool = False  # after a stop, the same command line continues its output


COMMANDS = {command.name: command for command in (
    Command("demo", "roll out the scripted expert: PNG frames and each episode's metrics (metrics.json)",
            "robot-rl demo --episodes 3 --out runs/demo", "demo", "DemoConfig", _cmd_demo),
    Command("collect-demos", "record scripted-expert demonstrations to a dataset",
            "robot-rl collect-demos --out data/demos --episodes 1200", "collection", "CollectConfig",
            _cmd_collect_demos, writes=("out", "dataset"), continues=True),
    Command("pretrain", "behaviour-clone the vision policy on demonstrations; the defaults are the README's measured "
            "recipe", "robot-rl pretrain --data data/demos --out runs/bc", "behaviour cloning", "BCConfig",
            _cmd_pretrain, resumable=True, writes=("run_dir", "run folder"), continues=True),
    Command("pretrain-encoder", "train the policy's image encoder on rendered views labelled by the simulator (for "
            "pretrain --encoder-weights)", "robot-rl pretrain-encoder --randomization surfaces --out runs/encoder",
            "encoder pretraining", "EncoderPretrainConfig", _cmd_pretrain_encoder, resumable=True,
            writes=("run_dir", "run folder"), continues=True),
    Command("dagger", "DAgger: roll out the BC policy, label with the task's expert, train again",
            "robot-rl dagger --policy runs/bc --out runs/dagger", "DAgger", "DAggerConfig", _cmd_dagger,
            resumable=True, writes=("run_dir", "run folder"), continues=True),
    Command("finetune", "fine-tune the policy with PPO (from BC or from scratch); the defaults are the measured "
            "design", "robot-rl finetune --policy runs/bc --out runs/ppo", "PPO", "FinetuneConfig", _cmd_finetune,
            resumable=True, writes=("run_dir", "run folder"), continues=True),
    Command("evaluate", "run a policy on inspection episodes: metrics, report and videos",
            "robot-rl evaluate --policy runs/ppo --episodes 100", "evaluation", "EvaluateConfig", _cmd_evaluate,
            writes=("out", "evaluation folder")),
    Command("export", "export the actor as TorchScript / torch.export / ONNX / safetensors",
            "robot-rl export --policy runs/ppo --format onnx", "export", "ExportConfig", _cmd_export),
    Command("export-dataset", "write a demo dataset as a LeRobot dataset (v3.0: parquet + MP4)",
            "robot-rl export-dataset --data data/demos --out data/demos-lerobot", "export", "ExportDatasetConfig",
            _cmd_export_dataset),
    Command("pipeline",
            "collect-demos -> [pretrain-encoder] -> pretrain -> [dagger] -> finetune -> evaluate, in order",
            "robot-rl pipeline --preset quick", "pipeline", "PipelineConfig", _cmd_pipeline,
            writes=("root", "pipeline root"), continues=True),
)}
POLICY_RULE = ("A run folder given as --policy means its checkpoints/last.pt, the policy the run ended with "
               "(--checkpoint-kind best: its best.pt); the command prints which file it took.")


def _add_command(commands, command: Command) -> None:
    """A subcommand whose options are the fields of its config class, in argument groups (plus ``--resume RUN_DIR``,
    and ``--wait-lock`` for a command that holds its output folder's lock), with a description and an example."""
    import dataclasses

    from robot_rl import configs
    from robot_rl.options import HelpFormatter, add_options, flag_of

    config_cls = getattr(configs, command.config)
    reads_policy = any(flag_of(f) == "--policy" for f in dataclasses.fields(config_cls))
    paragraphs = [command.help[0].upper() + command.help[1:] + ".", *([POLICY_RULE] if reads_policy else [])]
    description = "\n\n".join(textwrap.fill(paragraph, 100) for paragraph in paragraphs)
    parser = commands.add_parser(command.name, help=command.help, description=description,
                                 formatter_class=HelpFormatter, epilog=f"example:\n  {command.example}")
    add_options(parser, config_cls, configs.OPTION_GROUPS, main_group=f"{command.title} options")
    if command.resumable:
        parser.add_argument("--resume", metavar="RUN_DIR", default="",
                            help="continue the run in RUN_DIR with its stored options")
    if command.writes:
        parser.add_argument("--wait-lock", action="store_true",
                            help="wait for another process writing the same output folder to end, instead of "
                                 "refusing to start")
    parser.set_defaults(func=command.func, writes=command.writes, parser=parser)


def build_parser() -> argparse.ArgumentParser:
    from robot_rl import __version__
    from robot_rl.options import HelpFormatter

    parser = OneLineErrors(prog="robot-rl", description=__doc__.splitlines()[0],
                                     formatter_class=HelpFormatter,
                                     epilog="example:\n  robot-rl pipeline --preset quick\n\n"
                                            "robot-rl COMMAND --help lists a command's options and defaults.")
    parser.add_argument("--version", action="version", version=f"robot-rl {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS.values():
        _add_command(commands, command)
    info = commands.add_parser("info", help="what a run folder, dataset, report or export holds",
                               description="What PATH holds: its stage, task, arm, randomization, progress, last "
                                           "check, and which checkpoint evaluate would take.",
                               formatter_class=HelpFormatter, epilog="example:\n  robot-rl info runs/ppo")
    info.add_argument("path", metavar="PATH", help="a run folder, demo dataset, pipeline root, evaluation report "
                                                   "folder, export folder or checkpoint .pt file")
    info.set_defaults(func=_cmd_info, writes=None, parser=info)
    listing = commands.add_parser("list", help="tasks, arms, difficulties, randomization presets, perturbations",
                                  description="The names --task, --arm, --difficulty, --randomization and evaluate "
                                              "--perturbations take, each with what it means.",
                                  formatter_class=HelpFormatter, epilog="example:\n  robot-rl list")
    listing.set_defaults(func=_cmd_list, writes=None, parser=listing)
    return parser


# OSErrors that mean the user gave a path this command cannot use: one line naming it, exit 2.
BAD_PATH = (errno.ENOTDIR, errno.EISDIR, errno.EEXIST, errno.ENAMETOOLONG, errno.EACCES, errno.EPERM, errno.EROFS)


def _disk_full(err: BaseException | None) -> OSError | None:
    """The full-disk OSError behind ``err`` (itself, or what it was raised from or during), if any."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OSError) and err.errno in DISK_FULL:
            return err
        err = err.__cause__ or err.__context__
    return None


def _no_space_line(err: OSError) -> str:
    """``no space left on device writing FOLDER (needs ~N MB)``, the size when known."""
    folder = err.folder if isinstance(err, NoSpaceLeft) else os.path.dirname(err.filename or "")
    needed = getattr(err, "needed", None)
    size = f" (needs ~{max(1, round(needed / 2**20))} MB)" if needed else ""
    return f"no space left on device{f' writing {folder}' if folder else ''}{size}"


# Most of a command's start-up, imported before its work with a stop signal deferred (``stop_deferred``).
START_UP_IMPORTS = ("torch", "torchrl", "mujoco")


def _starting(args: argparse.Namespace) -> None:
    """Before the slow start-up (torch, MuJoCo, the task): a line saying what the command does, and a refusal at
    once when another process holds the folder it writes (the command takes the lock itself later)."""
    if args.command in ("info", "list"):
        return
    if args.writes and not getattr(args, "wait_lock", False):
        field, kind = args.writes
        folder = getattr(args, "resume", "") or getattr(args, field, "")
        if folder:
            refuse_if_locked(folder, kind)
    print(f"robot-rl {args.command}: starting ({COMMANDS[args.command].help})", flush=True)
    with stop_deferred():
        for name in START_UP_IMPORTS:
            importlib.import_module(name)
    if stop_requested() is not None:  # asked during the imports: stop now, before any work
        raise Interrupted(stop_requested())


def _continue_line(args: argparse.Namespace) -> str:
    """How a command stopped by a signal before its run was under way continues."""
    command = COMMANDS.get(args.command)
    return "; the same command continues it" if command is not None and command.continues else ""


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # named by the command they were given to, not by the top-level parser
        args.parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    command = f"robot-rl {args.command}"
    clear_stop_request()  # one request per command (main may run several times in one process: tests)
    try:
        with stop_signals_interrupt(), waiting_for_locks(getattr(args, "wait_lock", False)):
            _starting(args)
            return args.func(args)
    except UsageError as err:
        print(f"{command}: error: {err}", file=sys.stderr)
        return 2
    except RunStopped as err:  # Ctrl-C or SIGTERM: the run checkpointed and stopped; exit as the signal would
        resumable = hasattr(args, "resume") and err.command == args.command  # a stage of a pipeline: the pipeline
        again = f"robot-rl {err.command} --resume {err.run_dir}" if resumable else "the same command"
        if args.command == "pipeline":
            again += " (finished stages are skipped)"
        by = "" if err.signum == signal.SIGINT else f" ({signal.Signals(err.signum).name})"
        print(f"{command}: {err}{by}; continue with {again}", file=sys.stderr)
        return 128 + err.signum
    except KeyboardInterrupt as err:  # while a command starts up, collects or evaluates, or a second signal
        signum = err.signum if isinstance(err, Interrupted) else signal.SIGINT
        what = "interrupted" if signum == signal.SIGINT else f"terminated ({signal.Signals(signum).name})"
        print(f"{command}: {what}; nothing half written{_continue_line(args)}", file=sys.stderr)
        return 128 + signum
    except Exception as err:
        full = _disk_full(err)
        if full is not None:  # nothing half-written: the same command continues once there is space
            print(f"{command}: error: {_no_space_line(full)}", file=sys.stderr)
            return 1
        if isinstance(err, OSError) and err.errno in BAD_PATH and err.filename:
            print(f"{command}: error: {err.filename}: {err.strerror}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
