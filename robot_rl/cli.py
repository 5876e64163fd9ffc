"""The ``robot-rl`` command line: one subcommand per pipeline stage.

Each subcommand imports its stage lazily, so ``robot-rl --help`` stays fast. ``main`` is the one exception
boundary: bad input (an option value, a path that is a file, too long, not writable) ends with a one-line error
naming the culprit and exit code 2; a full disk with one line naming the folder and exit code 1; Ctrl-C and SIGTERM
with 128 + the signal's number (a training run checkpoints first and says how to resume); anything else is a bug
and keeps its traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from robot_rl.errors import Interrupted, NoSpaceLeft, RunStopped, TrainingStopped, UsageError
from robot_rl.io import DISK_FULL
from robot_rl.locks import waiting_for_locks


def _cmd_demo(args: argparse.Namespace) -> int:
    from robot_rl.configs import DemoConfig
    from robot_rl.demo import run_expert_demo
    from robot_rl.options import config_from_args
    from robot_rl.tables import markdown_table

    config = config_from_args(DemoConfig, args)
    summaries = run_expert_demo(config.out, episodes=config.episodes, difficulty=config.difficulty,
                                image_size=config.image_size, seed=config.seed, frames_per_episode=config.frames,
                                arm=config.arm, task=config.task)
    columns = ["episode", "episode_seed", "defect", "verdict", "success", "steps", "return", "collision_steps",
               "steps_to_localize"]
    print(markdown_table(summaries, columns))
    successes = sum(s["success"] for s in summaries)
    print(f"\nexpert success {successes}/{len(summaries)}; frames in {config.out}/frames/")
    return 0


def _cmd_collect_demos(args: argparse.Namespace) -> int:
    from robot_rl.configs import CollectConfig
    from robot_rl.options import config_from_args
    from robot_rl.pretrain.collect import collect_demos

    summary = collect_demos(config_from_args(CollectConfig, args))
    run = summary["run"]
    print(f"{summary['dataset']}: {summary['episodes']} episodes, {summary['frames']} frames "
          f"(this run: seed {run['seed']}, {run['episodes']} episodes in {run['seconds']:.0f} s); "
          f"expert success {summary['expert_success']:.1%}")
    return 0


def _train_command(args: argparse.Namespace, command: str, config_cls: type, start, resume) -> dict | None:
    """A pretrain or finetune run, new or ``--resume``d; its summary, or None when it stopped on a failure
    (printed as one line; the caller exits 1). Ctrl-C or SIGTERM raises RunStopped (exit 130 or 143)."""
    from robot_rl.options import check_resume_options, config_from_args
    from robot_rl.run_folder import RunFolder

    try:
        if args.resume:
            check_resume_options(RunFolder(args.resume).config(config_cls), args, args.resume)
            summary = resume(args.resume)
        else:
            summary = start(config_from_args(config_cls, args))
    except TrainingStopped as err:
        print(f"robot-rl {command}: stopped: {err}", file=sys.stderr)
        return None
    if not summary["finished"]:
        from robot_rl.run_folder import STOPPED_BY

        raise RunStopped(args.resume or args.run_dir, command, summary.get(STOPPED_BY, signal.SIGINT))
    return summary


def _cmd_pretrain(args: argparse.Namespace) -> int:
    from robot_rl.configs import BCConfig
    from robot_rl.pretrain import bc

    summary = _train_command(args, "pretrain", BCConfig, bc.pretrain, bc.resume)
    if summary is None:
        return 1
    final = summary["final_eval"] or {}
    print(f"best closed-loop success {summary['best_success']:.1%}; final: success "
          f"{final.get('success_rate', 0):.1%}, guesses {final.get('guesses')}, verdict accuracy "
          f"{final.get('verdict_accuracy')}, "
          f"collisions/episode {final.get('collisions_per_episode')}")
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
    return 0


def _cmd_finetune(args: argparse.Namespace) -> int:
    from robot_rl.configs import FinetuneConfig
    from robot_rl.finetune import trainer

    summary = _train_command(args, "finetune", FinetuneConfig, trainer.finetune, trainer.resume)
    if summary is None:
        return 1
    curve = summary["curve"]
    if curve:
        def point(p: dict) -> str:
            return "{:.1%} (95% CI {:.1%}-{:.1%}, guesses {:.0%})".format(p["success_rate"], *p["success_ci95"],
                                                                          p["guess_rate"])

        print(f"{summary['frames']} frames, {summary['iterations']} iterations; closed-loop success "
              f"{point(curve[0])} at the start, {point(curve[-1])} at the end")
    return 0


def _output_folder(path: str) -> None:
    """Refuses an output folder that is a file, before any work (the writes at the end would fail on it)."""
    if path and Path(path).exists() and not Path(path).is_dir():
        raise UsageError(f"--out {path}: not a folder")


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from robot_rl.configs import EvaluateConfig
    from robot_rl.evaluate import evaluate
    from robot_rl.options import config_from_args

    _output_folder(args.out)
    result = evaluate(config_from_args(EvaluateConfig, args))
    print((Path(result["out_dir"]) / "report.md").read_text())
    print(f"report and {len(result['videos'])} videos in {result['out_dir']}")
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from robot_rl.configs import ExportConfig
    from robot_rl.export import export
    from robot_rl.options import config_from_args

    _output_folder(args.out)
    for name, path in export(config_from_args(ExportConfig, args)).items():
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
    from robot_rl.configs import DEFAULT_ARM, DEFAULT_TASK, PipelineConfig
    from robot_rl.options import config_from_args
    from robot_rl.pipeline import PRESETS, result_table, run_pipeline

    config = config_from_args(PipelineConfig, args)
    preset = PRESETS[config.preset]
    root = config.root or f"runs/pipeline-{config.preset}"
    # Recorded in the root's preset.json: a root of another task or arm is refused.
    if config.task != DEFAULT_TASK:
        preset = preset.updated(collect={"task": config.task})
        root = f"{root}-{config.task}"
    if config.arm != DEFAULT_ARM:
        preset = preset.updated(collect={"arm": config.arm})
        root = f"{root}-{Path(config.arm).stem}"
    root = config.root or root
    result = run_pipeline(preset, root, device=config.device, precision=config.precision)
    print("\n" + result_table(result))
    return 0


def _add_command(commands, name: str, help_text: str, config_cls: type, func, resumable: bool = False,
                 writes: bool = False) -> None:
    """A subcommand whose options are the fields of ``config_cls`` (plus ``--resume RUN_DIR``, and ``--wait-lock``
    for a command that holds its output folder's lock)."""
    from robot_rl.options import add_options

    command = commands.add_parser(name, help=help_text, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_options(command, config_cls)
    if resumable:
        command.add_argument("--resume", metavar="RUN_DIR", default="", help="continue the run in RUN_DIR")
    if writes:
        command.add_argument("--wait-lock", action="store_true",
                             help="wait for another process writing the same output folder to end, instead of "
                                  "refusing to start")
    command.set_defaults(func=func)


def build_parser() -> argparse.ArgumentParser:
    from robot_rl.configs import (
        BCConfig,
        CollectConfig,
        DAggerConfig,
        DemoConfig,
        EvaluateConfig,
        ExportConfig,
        ExportDatasetConfig,
        FinetuneConfig,
        PipelineConfig,
    )

    parser = argparse.ArgumentParser(prog="robot-rl", description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_command(commands, "demo", "roll out the scripted expert: PNG frames and episode metrics", DemoConfig,
                 _cmd_demo)
    _add_command(commands, "collect-demos", "record scripted-expert demonstrations to a dataset", CollectConfig,
                 _cmd_collect_demos, writes=True)
    _add_command(commands, "pretrain", "behaviour-clone the vision policy on demonstrations", BCConfig,
                 _cmd_pretrain, resumable=True, writes=True)
    _add_command(commands, "dagger", "DAgger: roll out the BC policy, label with the task's expert, train again",
                 DAggerConfig, _cmd_dagger, resumable=True, writes=True)
    _add_command(commands, "finetune", "fine-tune the policy with PPO (from BC or from scratch)", FinetuneConfig,
                 _cmd_finetune, resumable=True, writes=True)
    _add_command(commands, "evaluate", "run a policy on inspection episodes: metrics and videos", EvaluateConfig,
                 _cmd_evaluate, writes=True)
    _add_command(commands, "export", "export the actor as TorchScript / torch.export / ONNX", ExportConfig,
                 _cmd_export)
    _add_command(commands, "export-dataset", "write a demo dataset as a LeRobot dataset (v3.0: parquet + MP4)",
                 ExportDatasetConfig, _cmd_export_dataset)
    _add_command(commands, "pipeline", "collect-demos -> pretrain -> finetune -> evaluate", PipelineConfig,
                 _cmd_pipeline, writes=True)
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


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """Within ``with``: SIGTERM raises ``Interrupted`` as Ctrl-C raises KeyboardInterrupt, so a command stopped by
    a scheduler unwinds (temporary files removed, workers shut down) and a training loop checkpoints first
    (``StopOnInterrupt`` takes both signals while it runs)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise Interrupted(signum)

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    command = f"robot-rl {args.command}"
    try:
        with _sigterm_interrupts(), waiting_for_locks(getattr(args, "wait_lock", False)):
            return args.func(args)
    except UsageError as err:
        print(f"{command}: error: {err}", file=sys.stderr)
        return 2
    except RunStopped as err:  # Ctrl-C or SIGTERM: the run checkpointed and stopped; exit as the signal would
        again = ("the same command (finished stages are skipped)" if args.command == "pipeline"
                 else f"robot-rl {err.command} --resume {err.run_dir}")
        by = "" if err.signum == signal.SIGINT else f" ({signal.Signals(err.signum).name})"
        print(f"{command}: {err}{by}; continue with {again}", file=sys.stderr)
        return 128 + err.signum
    except KeyboardInterrupt as err:  # while a command starts up, or a second one: nothing half written
        signum = err.signum if isinstance(err, Interrupted) else signal.SIGINT
        what = "interrupted" if signum == signal.SIGINT else f"terminated ({signal.Signals(signum).name})"
        print(f"{command}: {what}", file=sys.stderr)
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
