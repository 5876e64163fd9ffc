"""The README's first command as a new user runs it: a fresh clone, then ``make demo``, timed.

Clones the committed HEAD into a temporary folder and runs ``make demo`` there (set-up, then ``robot-rl pipeline
--preset quick``); records the set-up seconds, each stage's seconds and the closing table (success with its Wilson
interval, guesses, collisions, episode length of the BC and the fine-tuned policy on the same boards). ``--repeats
N`` runs N demos from empty roots in the one clone: the file keeps each, its top level is the middle run by
pipeline seconds. Targets, fixed before the runs: every run's pipeline within 15 minutes and its last policy >= 80%
on >= 50 boards (the goal: 10 minutes where the CPU runs bf16 natively). ``--task`` runs ``make demo TASK=...``
(``quick_demo_TASK.json``); ``--own-task`` the own-task guide's example module, written into the clone (target:
>= 80%). ``--against REF`` times HEAD's and REF's ``make demo`` in alternation, set-up excluded
(``quick_demo_against.json``; target: HEAD's median no slower, ratio <= 1.0).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import RESULTS_DIR, Benchmark, Variant
from protocols import final_metrics

from robot_rl.configs import PipelineConfig
from robot_rl.envs.defaults import DEFAULT_TASK
from robot_rl.pipeline import RESULT_FILE, for_options, result_table
from robot_rl.precision import describe

REPO = Path(__file__).resolve().parent.parent

BENCHMARK = Benchmark("quick_demo", __doc__, variants=(
    Variant("fresh-clone", ("--repeats", "3"), "make demo 3 times in a fresh clone of HEAD, timed"),
    Variant("lead-fresh-clone", ("--task", "lead-inspect"), "make demo TASK=lead-inspect in a fresh clone, timed"),
    Variant("own-task", ("--own-task",), "make demo on the own-task guide's example task, in a fresh clone, timed"),
    Variant("against-previous", ("--against", "HEAD~1", "--repeats", "3"),
            "make demo of HEAD against the commit before it, alternated, median of 3 each"),
), common={"out": None})


def options(parser) -> None:
    parser.add_argument("--keep", action="store_true", help="keep the clone (its path is printed)")
    parser.add_argument("--task", default=DEFAULT_TASK, help="the pipeline's task (make demo TASK=...)")
    parser.add_argument("--own-task", action="store_true",
                        help="the own-task guide's example task (sets --task; see the docstring)")
    parser.add_argument("--against", default="", help="a commit to time make demo against (see the docstring)")
    parser.add_argument("--repeats", type=_positive_int, default=None,
                        help="demos in the clone (default 1), or with --against demos of each side (default 3)")


def _positive_int(text: str) -> int:
    """``--repeats``: a median needs at least one demo of each side (argparse reports the error, exit 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: must be at least 1")
    return value


def results_path(args, stem: str) -> Path:
    """``--out``, or ``results/STEM.json`` (``STEM_TASK.json`` for another task than the default). The harness
    fills ``--out`` with ``results/quick_demo.json`` when it is not given, so that value counts as not given."""
    if args.out is not None and Path(args.out) != RESULTS_DIR / "quick_demo.json":
        return Path(args.out)
    suffix = "" if args.task == DEFAULT_TASK else "_" + args.task.replace(":", "-")
    return RESULTS_DIR / f"{stem}{suffix}.json"


def make_demo(task: str) -> list[str]:
    """The README's command for ``task``: ``make demo``, with ``TASK=...`` for another task than the default."""
    return ["make", "demo"] + ([] if task == DEFAULT_TASK else [f"TASK={task}"])


def clean_env() -> dict:
    """This environment without the caller's virtual environment: a clone's make uses its own."""
    return {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}


def clone_at(ref: str, folder: Path) -> str:
    """Clones this repository into ``folder`` at ``ref``; returns the commit."""
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(folder)], check=True)
    commit = subprocess.run(["git", "rev-parse", ref], cwd=REPO, capture_output=True, text=True,
                            check=True).stdout.strip()
    subprocess.run(["git", "checkout", "--quiet", commit], cwd=folder, check=True)
    return commit


class NoResult(Exception):
    """A ``make demo`` that exited 0 without writing its pipeline.json where the task's pipeline writes it."""


def timed_demo(clone: Path, root: str, log: Path, task: str) -> dict:
    """One ``make demo`` of ``task`` in ``clone`` from an empty pipeline root: its wall seconds and pipeline.json.
    Raises NoResult when the demo wrote no pipeline.json under ``root`` (an older commit's Makefile that ignores
    ``TASK`` runs the default task, which writes elsewhere)."""
    shutil.rmtree(clone / root, ignore_errors=True)
    start = time.perf_counter()
    with open(log, "a") as log_file:
        subprocess.run(make_demo(task), cwd=clone, stdout=log_file, stderr=subprocess.STDOUT,
                       env=clean_env(), check=True)
    wall_s = round(time.perf_counter() - start, 1)
    result = clone / root / RESULT_FILE
    if not result.is_file():
        raise NoResult(f"{' '.join(make_demo(task))} in {clone} wrote no {root}/{RESULT_FILE}")
    return {"wall_s": wall_s, "result": json.loads(result.read_text())}


def set_up(clone: Path, log: Path | None = None) -> float:
    """The clone's virtual environment and install (``make demo``'s first step), seconds; its output to ``log``."""
    start = time.perf_counter()
    with open(log or os.devnull, "a") as log_file:
        subprocess.run(["make", ".venv/.installed"], cwd=clone, env=clean_env(), check=True, stdout=log_file,
                       stderr=subprocess.STDOUT)
    return round(time.perf_counter() - start, 1)


def run_against(args, root: str) -> int:
    """HEAD's make demo against ``args.against``'s, alternated (module docstring)."""
    repeats = args.repeats or 3
    folder = Path(tempfile.mkdtemp(prefix="robot-rl-demo-against-"))
    sides = {"head": folder / "head", "against": folder / "against"}
    try:
        commits = {name: clone_at("HEAD" if name == "head" else args.against, path) for name, path in sides.items()}
        for path in sides.values():  # set-up, not timed
            set_up(path)
        runs: dict[str, list] = {name: [] for name in sides}
        for repeat in range(repeats):
            order = ["head", "against"] if repeat % 2 == 0 else ["against", "head"]
            for name in order:
                runs[name].append(timed_demo(sides[name], root, folder / f"{name}.log", args.task))
                print(f"{name} ({commits[name][:7]}): {runs[name][-1]['wall_s']} s", file=sys.stderr)
    except subprocess.CalledProcessError as err:
        print(f"quick_demo: {' '.join(map(str, err.cmd))} failed (exit {err.returncode}); logs in {folder}",
              file=sys.stderr)
        return 1
    except NoResult as err:
        print(f"quick_demo: {err}; logs in {folder}", file=sys.stderr)
        return 1
    shutil.rmtree(folder, ignore_errors=True)
    medians = {name: statistics.median(run["wall_s"] for run in side) for name, side in runs.items()}
    ratio = medians["head"] / medians["against"]
    BENCHMARK.write({
        "commits": commits, "task": args.task, "repeats": repeats, "median_s": medians,
        "ratio_head_over_against": round(ratio, 3),
        "runs": {name: [{"wall_s": run["wall_s"], "stages_s": run["result"]["seconds"],
                         "after_bc": final_metrics(run["result"]["after_bc"]),
                         "after_ppo": final_metrics(run["result"]["metrics"])} for run in side]
                 for name, side in runs.items()},
        "targets": {"ratio_max": 1.0, "met": bool(ratio <= 1.0)},
    }, out=results_path(args, "quick_demo_against"), wall_s=round(sum(
        run["wall_s"] for side in runs.values() for run in side), 1))
    print(f"make demo, median of {repeats}: HEAD {medians['head']} s, {args.against} {medians['against']} s "
          f"(ratio {ratio:.3f})")
    return 0


# The own-task guide's example: its module, as the guide shows it, and the task it defines.
OWN_TASK_GUIDE, OWN_TASK = REPO / "docs" / "guides" / "own-task.md", "my_tasks:JitteryLightBoards"


def own_task_module() -> str:
    """The guide's ``my_tasks.py`` block (the code block after its ``<!-- example: my_tasks.py -->`` marker)."""
    after = OWN_TASK_GUIDE.read_text().split("<!-- example: my_tasks.py -->", 1)[1]
    return after.split("```python\n", 1)[1].split("```", 1)[0]


def run(args) -> int:
    if args.own_task:
        args.task = OWN_TASK
    preset, root = for_options(PipelineConfig(task=args.task))  # what make demo runs, where
    if args.against:
        return run_against(args, root)
    out = results_path(args, "quick_demo")  # another task's demo gets a results file of its own
    clone = Path(tempfile.mkdtemp(prefix="robot-rl-quick-demo-")) / "robot_rl"
    log = clone.parent / "make-demo.log"
    try:
        commit = clone_at("HEAD", clone)
        if args.own_task:  # where the guide says to save it: the folder robot-rl runs in
            (clone / "my_tasks.py").write_text(own_task_module())
        setup_s = set_up(clone, log)
        runs = []
        for _ in range(args.repeats or 1):
            runs.append(timed_demo(clone, root, log, args.task))
            print(f"make demo: {runs[-1]['wall_s']} s", file=sys.stderr)
    except (subprocess.CalledProcessError, NoResult) as err:
        print(f"quick_demo: {err}; see {log}", file=sys.stderr)
        args.keep = True
        return 1
    finally:
        if not args.keep:
            shutil.rmtree(clone.parent, ignore_errors=True)
        else:
            print(f"clone kept: {clone}", file=sys.stderr)
    for one in runs:
        one["pipeline_s"] = round(sum(one["result"]["seconds"].values()), 1)
    # The middle run by pipeline seconds speaks for all (the upper middle one of an even count).
    middle = sorted(runs, key=lambda one: one["pipeline_s"])[len(runs) // 2]
    result, pipeline_s = middle["result"], middle["pipeline_s"]
    every_run_succeeds = all(one["result"]["metrics"]["success_rate"] >= 0.8
                             and one["result"]["metrics"]["episodes"] >= 50 for one in runs)
    slowest_s = max(one["pipeline_s"] for one in runs)
    print(result_table(result))
    BENCHMARK.write({
        "commit": commit,  # the clone's: the code the demo ran
        "precision": describe("auto", "cpu"),
        "task": args.task,
        "preset": preset.options(),
        "after_bc": final_metrics(result["after_bc"]),
        "after_dagger": final_metrics(result["after_dagger"]) if result.get("after_dagger") else None,
        "after_ppo": final_metrics(result["metrics"]),
        # Why each stage's policy failed where it did (a pipeline from before failure kinds has none).
        "failures": stage_failures(result),
        "dagger_rounds": result.get("dagger_rounds"),  # rounds the DAgger stage ran (None: no stage)
        "exploration": result.get("exploration"),  # what fine-tuning sampled with (--exploration auto's choice)
        "runs": [{"pipeline_s": one["pipeline_s"], "wall_s": one["wall_s"], "stages_s": one["result"]["seconds"],
                  "after_bc": final_metrics(one["result"]["after_bc"]),
                  "after_dagger": (final_metrics(one["result"]["after_dagger"]) if one["result"].get("after_dagger")
                                   else None),
                  "after_ppo": final_metrics(one["result"]["metrics"]), "failures": stage_failures(one["result"]),
                  "dagger_rounds": one["result"].get("dagger_rounds")}
                 for one in runs],
        # Every run: its pipeline within the minutes, its last policy at the success on the boards.
        "targets": {"pipeline_minutes_max": 15, "success_min": 0.8, "boards_min": 50,
                    "met": bool(slowest_s <= 15 * 60 and every_run_succeeds),
                    "bf16_pipeline_minutes_goal": 10,
                    "bf16_goal_met": (bool(slowest_s <= 10 * 60)
                                      if describe("auto", "cpu")["native_bf16"] else None)},
    }, out=out, wall_s=round(setup_s + sum(one["wall_s"] for one in runs), 1),
        parts={"make_demo": round(setup_s + middle["wall_s"], 1), "setup": setup_s, "pipeline": pipeline_s,
               **result["seconds"]})
    print(f"wrote {out}")
    return 0


def stage_failures(result: dict) -> dict:
    """Each stage's failed episodes by kind, from a pipeline.json."""
    return {stage: result[key].get("failures") for stage, key in (
        ("after_bc", "after_bc"), ("after_dagger", "after_dagger"), ("after_ppo", "metrics")) if result.get(key)}


if __name__ == "__main__":
    sys.exit(BENCHMARK.main(run, options))
