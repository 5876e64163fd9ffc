"""Stops and hostile inputs: every command stops as promised on SIGTERM and Ctrl-C, and refuses bad input in one line.

Part 1, stops: SIGTERM (to the whole process group, as Slurm sends it) and Ctrl-C (SIGINT to the process group, as
a terminal sends it) at seeded random moments of three commands at tiny sizes: ``robot-rl dagger`` (from a tiny BC
run), the pipeline with its pretrain-encoder and DAgger stages on (``--dagger on --encoder on``; the CLI has no
option to shrink its stages, so the quick preset's stages are shrunk in the process that runs ``robot_rl.cli.main``,
which gives the exit codes and lines) and ``robot-rl collect-demos``. The moments are spread over each command's
duration, measured in one uninterrupted reference run first (one moment drawn in each of N equal slices). Each
trial records the exit code (143 after SIGTERM, 130 after Ctrl-C; 0 only when the work was complete when the
signal came: "finished before the signal"), the seconds from the signal to the exit (at most ``STOP_BOUND_S``),
whether the last line says how to continue, whether a child process outlived it, and then runs the same command
again: it must exit 0 with exact counts (the dataset holds the episodes asked for; DAgger's aggregate holds the
demos plus rounds x episodes per round, every round's record and summary.json; the pipeline's pipeline.json names
every stage and its report is whole) and leave no temporary file (``.NAME.*.tmp``).

Part 2, hostile inputs: over a hundred bad options and crafted files across every command (``bad_inputs`` of
kill_resume.py; non-finite floats for every float option; huge sizes; non-zip, truncated and empty ``.pt`` files;
run folders and datasets whose JSON lies; arm files whose MJCF leads outside their folder; LeRobot columns of the
wrong type; tasks that are no module; contradicting reruns and appends), each run through the real CLI and checked:
exit code 2 (``info`` on an export folder: 0), exactly one line on stderr naming the culprit (the "starting" line
the CLI prints first is not counted), no traceback, no temporary leftovers.

Writes ``benchmarks/results/promises.json`` with the targets, fixed here before any run, met or missed.

    python benchmarks/promises.py                   # every stop and every probe (over an hour on 2 CPU cores)
    python benchmarks/promises.py --variant smoke   # 2 stops per command and 10 probes
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from harness import Benchmark, Variant
from kill_resume import (
    CLI,
    PIPELINE,
    TINY_PPO,
    bad_inputs,
    collect_args,
    dataset_problems,
    log_lines,
    report_state,
    run_killed,
    run_whole,
    temporary_leftovers,
)
from results_file import STARTED_FROM

from robot_rl.artefact_files import DATASET_META, dagger_round
from robot_rl.tables import markdown_table

# -- what is promised, fixed before any run -----------------------------------------------------------------------
STOP_BOUND_S = 30.0  # from the signal to the exit: one step of these tiny sizes, with room for a loaded machine
PROBE_TIMEOUT_S = 120  # a probe still running by then did not refuse: it is ended and counted as a silent wrong
CONTINUE_PHRASES = ("continue with", "the same command continues it")
EXPECTED_STOP_CODE = {signal.SIGTERM: 128 + signal.SIGTERM, signal.SIGINT: 128 + signal.SIGINT}
TARGETS = {
    "stop_exit_code": "143 after SIGTERM, 130 after Ctrl-C; 0 only when the work was complete when the signal came",
    "stop_seconds_max": STOP_BOUND_S,
    "stop_continue_line": "the last line of a stopped command says how to continue it",
    "stop_children": "no child process outlives the command",
    "stop_rerun": "the same command exits 0 with exact counts and no temporary leftovers",
    "inputs": "exit 2 (info on an export: 0), one line on stderr naming the culprit, no traceback, no leftovers",
}

# -- the stopped commands, at tiny sizes ----------------------------------------------------------------------------
DEMO_EPISODES = 8  # the base demos the BC run learns from
COLLECT_EPISODES = 12  # collect-demos' stop trials
TINY_BC = ["--epochs", "1", "--batch-size", "16", "--steps-per-epoch", "4", "--eval-every", "0", "--eval-episodes",
           "2", "--num-envs", "2", "--hidden", "32"]
DAGGER_ROUNDS, DAGGER_EPISODES_PER_ROUND = 2, 3
TINY_DAGGER = ["--rounds", str(DAGGER_ROUNDS), "--episodes-per-round", str(DAGGER_EPISODES_PER_ROUND),
               "--epochs-per-round", "1", "--eval-episodes", "2", "--num-envs", "2"]
# kill_resume.py's tiny pipeline, run by the CLI's own main with the DAgger and pretrain-encoder stages on: the
# quick preset's stages are replaced by the tiny ones in that process (the CLI can only pick a preset).
_RUN_TINY = "run_pipeline(tiny, sys.argv[1], progress=False)"
_CLI_MAIN = """
from robot_rl import cli, pipeline
from robot_rl.configs import DAggerConfig, EncoderPretrainConfig
pipeline.PRESETS["quick"] = tiny
pipeline.DAGGER_STAGES["quick"] = DAggerConfig(init=pipeline.BC, run_dir=pipeline.DAGGER, rounds=1,
                                               episodes_per_round=2, epochs_per_round=1, eval_episodes=1, num_envs=1)
pipeline.ENCODER_STAGES["quick"] = EncoderPretrainConfig(run_dir=pipeline.ENCODER, views=20, epochs=1, batch_size=8,
                                                         workspace_views=2)
open(sys.argv[1] + ".imported", "w").close()  # this wrapper's own imports are done: the stop moment counts from here
sys.exit(cli.main(["pipeline", "--dagger", "on", "--encoder", "on", "--out", sys.argv[1]]))
"""
assert _RUN_TINY in PIPELINE, "kill_resume.PIPELINE changed: update promises.py's pipeline wrapper"
TINY_PIPELINE = PIPELINE.replace(_RUN_TINY, _CLI_MAIN)
PIPELINE_EPISODES, PIPELINE_EVAL_EPISODES = 6, 2  # kill_resume.PIPELINE's collect and evaluate episodes
PIPELINE_STAGES = ("collect-demos", "pretrain-encoder", "pretrain", "evaluate BC", "dagger", "finetune", "evaluate")
STOP_COMMANDS = ("dagger", "pipeline", "collect-demos")

BENCHMARK = Benchmark("promises", __doc__, variants=(
    Variant("all", (), "10 stops of each command (SIGTERM and Ctrl-C), then every hostile-input probe"),
    Variant("stops", ("--part", "stops"), "the stops only"),
    Variant("inputs", ("--part", "inputs"), "the hostile-input probes only"),
    Variant("smoke", ("--trials", "2", "--probes", "10", "--work", "runs/promises-smoke", "--out",
                      "runs/promises-smoke/promises.json"), "2 stops per command and 10 probes, out of the results"),
), targets=TARGETS, common={"out": None})


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--part", choices=("all", "stops", "inputs"), default="all", help="which part to run")
    parser.add_argument("--seed", type=int, default=0, help="seed of the stop moments and signals")
    parser.add_argument("--trials", type=int, default=10, help="stops per command (half SIGTERM, half Ctrl-C)")
    parser.add_argument("--commands", nargs="+", choices=STOP_COMMANDS, default=list(STOP_COMMANDS),
                        help="the commands stopped")
    parser.add_argument("--probes", type=int, default=0, help="at most this many probes, taken across their groups "
                                                              "in turn (0 = all)")
    parser.add_argument("--work", default="runs/promises", help="scratch folder (emptied first)")


def run(args) -> int:
    os.environ.setdefault("MUJOCO_GL", "egl")
    os.environ["PYTHONUNBUFFERED"] = "1"  # the commands' output in the order written: the last line is the last
    work = Path(args.work).resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    parts = {}
    start = time.perf_counter()
    make_base(work)
    parts["base demos and BC run"] = round(time.perf_counter() - start)
    stops = probes = None
    if args.part in ("all", "stops"):
        start = time.perf_counter()
        stops = stop_trials(work, args.commands, args.trials, random.Random(args.seed))
        parts["stops"] = round(time.perf_counter() - start)
    if args.part in ("all", "inputs"):
        start = time.perf_counter()
        probes = [run_probe(probe, work) for probe in pick(build_probes(work), args.probes)]
        parts["hostile inputs"] = round(time.perf_counter() - start)
    return write_report(args, stops, probes, parts)


def make_base(work: Path) -> None:
    """The base demos and the tiny BC run the DAgger trials and the probes start from."""
    base = work / "base"
    for argv in (collect_args(base / "demos", DEMO_EPISODES),
                 ["pretrain", "--data", str(base / "demos"), "--out", str(base / "bc"), *TINY_BC]):
        code, _ = run_whole(CLI + argv, work / "base.log")
        if code != 0:
            raise SystemExit(f"base run failed (exit {code}): {' '.join(argv)}; see {work / 'base.log'}")


# -- part 1: stops --------------------------------------------------------------------------------------------------
def stop_argv(work: Path, name: str, root: Path) -> list[str]:
    """The command line of ``name`` writing under ``root``."""
    if name == "collect-demos":
        return CLI + collect_args(root / "demos", COLLECT_EPISODES)
    if name == "dagger":
        return CLI + ["dagger", "--policy", str(work / "base" / "bc"), "--out", str(root / "dagger"), *TINY_DAGGER]
    return [sys.executable, "-c", TINY_PIPELINE, str(root / "pipe")]


def output_problems(name: str, root: Path) -> list[str]:
    """What is wrong with a command's output under ``root`` once it should be complete (empty when nothing is)."""
    from robot_rl.dataset import DemoDataset
    from robot_rl.pipeline import RESULT_FILE

    try:
        if name == "collect-demos":
            return dataset_problems(root / "demos", COLLECT_EPISODES)
        if name == "dagger":
            run_dir = root / "dagger"
            problems = [] if (run_dir / "summary.json").is_file() else ["no summary.json"]
            expected = DEMO_EPISODES + DAGGER_ROUNDS * DAGGER_EPISODES_PER_ROUND
            episodes = len(DemoDataset.open(run_dir / "aggregate").episodes)
            if episodes != expected:
                problems.append(f"aggregate holds {episodes} episodes, not {expected}")
            records = [dagger_round(run_dir, k, record=True) for k in range(DAGGER_ROUNDS + 1)]
            return problems + [f"no {path.name}" for path in records if not path.is_file()]
        result_file = root / "pipe" / RESULT_FILE
        if not result_file.is_file():
            return [f"no {RESULT_FILE}"]
        result = json.loads(result_file.read_text())
        problems = [f"{RESULT_FILE} lacks stage {stage}" for stage in PIPELINE_STAGES if stage not in result["seconds"]]
        problems += [] if result.get("after_dagger") and result.get("encoder") else ["no DAgger or encoder result"]
        problems += dataset_problems(root / "pipe" / "demos", PIPELINE_EPISODES)
        state = report_state(root / "pipe" / "eval", PIPELINE_EVAL_EPISODES)
        return problems + ([] if state == "complete" else [f"report {state}"])
    except Exception as err:  # a half-made output that cannot be read is what this check looks for
        return [f"unreadable output ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})"]


def _last_line(log: Path) -> str:
    """The last non-blank line of a log (progress bars' carriage returns counted as line ends)."""
    return next((line.strip() for line in reversed(log_lines(log)) if line.strip()), "")


def stop_trial(work: Path, name: str, trial: int, sig: int, delay: float) -> dict:
    """``sig`` to the process group of ``name`` after ``delay`` s, then the same command again; what happened."""
    root = work / "stops" / f"{name}-{trial:02d}"
    root.mkdir(parents=True)
    argv, log = stop_argv(work, name, root), root / "output.log"
    # The pipeline runs through a wrapper whose imports (torch, TorchRL) precede the CLI's handlers; a stop during
    # them would test the wrapper, so its moment counts from the marker the wrapper writes once they are done.
    after = root / "pipe.imported" if name == "pipeline" else None
    stopped = run_killed(argv, delay, log, sig=sig, group=True, after=after)
    last, traceback = _last_line(log), "Traceback" in log.read_text(errors="replace")
    code, seconds = stopped["exit_code"], stopped.get("seconds_to_stop", 0.0)
    # Exit 0 is a stop only when the work was already complete: the signal came after its last step. A command
    # whose work was complete may also die of the signal while the interpreter shuts down (-sig here; a shell
    # reports 128 + sig, as for a stopped command).
    complete = code in (0, -sig) and not output_problems(name, root)
    finished = stopped["finished_before_the_signal"] or (complete and seconds <= STOP_BOUND_S)
    outcome = "finished before the signal" if finished else "stopped"
    problems, rerun_problems = [], []
    if outcome == "stopped":
        if code != EXPECTED_STOP_CODE[sig]:
            problems.append(f"exit code {code}, not {EXPECTED_STOP_CODE[sig]}")
        if not any(phrase in last for phrase in CONTINUE_PHRASES):
            problems.append(f"the last line does not say how to continue: {last[:200]!r}")
    elif code not in (0, -sig):
        problems.append(f"exit code {code} after finishing")
    if seconds > STOP_BOUND_S:
        problems.append(f"{seconds} s from the signal to the exit, over {STOP_BOUND_S}")
    problems += [f"outlived the command: {m['command'][:120]}" for m in stopped["outlived"]]
    problems += ["a traceback"] if traceback else []
    rerun_code, rerun_seconds = run_whole(argv, log)
    rerun_problems = [f"the same command again exited {rerun_code}"] if rerun_code else output_problems(name, root)
    rerun_problems += [f"temporary file left: {p}" for p in temporary_leftovers(root)]
    problems += rerun_problems
    result = {"command": name, "trial": trial, "signal": signal.Signals(sig).name, "delay_s": delay,
              "exit_code": code, "outcome": outcome, "seconds_to_exit": seconds,
              "within_bound": seconds <= STOP_BOUND_S, "last_line": last[:300],
              "names_how_to_continue": any(phrase in last for phrase in CONTINUE_PHRASES),
              "children_outlived_it": stopped["children_outlived_it"], "traceback": traceback,
              "rerun_exit_code": rerun_code, "rerun_s": round(rerun_seconds, 1), "rerun_whole": not rerun_problems,
              "problems": problems,
              "ok": not problems}
    print(result, file=sys.stderr)
    return result


def stop_trials(work: Path, commands: list[str], trials: int, rng: random.Random) -> dict:
    """A reference run of each command, then ``trials`` stops of it: one moment drawn in each of ``trials`` equal
    slices of the reference duration, the signals half SIGTERM and half SIGINT in a seeded order."""
    durations, results = {}, []
    for name in commands:
        root = work / "stops" / f"{name}-reference"
        root.mkdir(parents=True)
        code, seconds = run_whole(stop_argv(work, name, root), root / "output.log")
        problems = [f"exit {code}"] if code else output_problems(name, root)
        if problems:
            raise SystemExit(f"reference run of {name} failed: {problems}; see {root / 'output.log'}")
        durations[name] = round(seconds, 1)
        print(f"reference {name}: {seconds:.1f} s", file=sys.stderr)
        signals = [signal.SIGTERM, signal.SIGINT] * (trials // 2) + [signal.SIGTERM] * (trials % 2)
        rng.shuffle(signals)
        for k, sig in enumerate(signals):
            delay = round(max(0.2, seconds * (k + rng.random()) / trials), 2)
            results.append(stop_trial(work, name, k, sig, delay))
    return {"reference_s": durations, "trials": results}


# -- part 2: hostile inputs -----------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Probe:
    """One hostile input: ``argv`` (robot-rl's arguments), the exit code due and what its one line must name."""

    group: str
    name: str
    argv: tuple[str, ...]
    culprit: str
    expected: int = 2


BANNER = re.compile(r"^robot-rl [\w-]+: starting \(")  # the CLI's first line, before its slow start-up
NON_FINITE = ("inf", "nan", "-inf")
FLOAT_COMMANDS = ("collect-demos", "pretrain", "pretrain-encoder", "finetune", "dagger", "evaluate")


def float_options() -> dict[str, list[str]]:
    """Every float option of the commands of ``FLOAT_COMMANDS``, read from the CLI's parser."""
    from robot_rl.cli import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    return {name: [a.option_strings[0] for a in commands[name]._actions if a.type is float] for name in FLOAT_COMMANDS}


def tiny_args(command: str, base: Path, out: Path) -> list[str]:
    """Valid tiny options of ``command`` writing to ``out``: a probe that is not refused ends soon."""
    demos, bc = str(base / "demos"), str(base / "bc")
    return {
        "collect-demos": ["--out", str(out), "--episodes", "2", "--difficulty", "easy", "--image-size", "48",
                          "--num-envs", "1"],
        "demo": ["--out", str(out), "--episodes", "1", "--frames", "1", "--image-size", "48"],
        "pretrain": ["--data", demos, "--out", str(out), *TINY_BC],
        "pretrain-encoder": ["--out", str(out), "--views", "8", "--epochs", "1", "--batch-size", "4",
                             "--workspace-views", "2", "--image-size", "48"],
        "finetune": ["--policy", bc, "--out", str(out), *TINY_PPO],
        "dagger": ["--policy", bc, "--out", str(out), "--rounds", "1", "--episodes-per-round", "1",
                   "--epochs-per-round", "1", "--eval-episodes", "1", "--num-envs", "1"],
        "evaluate": ["--policy", bc, "--out", str(out), "--episodes", "1", "--num-envs", "1", "--videos", "0",
                     "--failure-videos", "0"],
        "export": ["--policy", bc, "--out", str(out), "--format", "safetensors"],
        "export-dataset": ["--data", demos, "--out", str(out), "--video-codec", "none"],
    }[command]


def _with(args: list[str], option: str, value: str) -> list[str]:
    """``args`` with ``option`` set to ``value`` (``--option=value``: argparse reads ``-inf`` as an option)."""
    kept, k = [], 0
    while k < len(args):
        if args[k] == option:
            k += 2
            continue
        kept.append(args[k])
        k += 1
    return [*kept, f"{option}={value}"]


def craft(work: Path) -> dict[str, Path]:
    """The crafted files of the probes, made once under ``work/inputs``."""
    from robot_rl.envs.arms import ur5e_like

    base, root = work / "base", work / "inputs"
    root.mkdir(parents=True)
    files = {"regular": root / "a-file.txt", "not_zip": root / "hello.pt", "empty": root / "empty.pt",
             "truncated": root / "truncated.pt"}
    files["regular"].write_text("not a folder\n")
    files["not_zip"].write_text("hello")
    files["empty"].write_bytes(b"")
    checkpoint = (base / "bc" / "checkpoints" / "last.pt").read_bytes()
    files["truncated"].write_bytes(checkpoint[:len(checkpoint) // 2])
    for kind in ("safetensors", "torchscript"):
        files[f"export_{kind}"] = root / f"export-{kind}"
        _must(["export", "--policy", str(base / "bc"), "--out", str(files[f"export_{kind}"]), "--format", kind], work)
    files["lerobot"] = root / "lerobot"
    _must(["export-dataset", "--data", str(base / "demos"), "--out", str(files["lerobot"]), "--video-codec", "none"],
          work)
    # An interrupted collection (its run marked unfinished, 4 episodes short) and a dataset to append to.
    files["unfinished"] = _edited_copy(base / "demos", root / "demos-unfinished", DATASET_META,
                                       lambda m: m["runs"][0].update(target_episodes=DEMO_EPISODES + 4, complete=False))
    files["append"] = _edited_copy(base / "demos", root / "demos-append", DATASET_META, lambda m: None)
    # Arm files: the shipped MJCF beside them, and MJCF paths leading out of their folder.
    arms = root / "arms" / "inside"
    arms.mkdir(parents=True)
    xml = Path(ur5e_like.__file__).with_name("ur5e_like.xml").read_text()
    (arms.parent / "outside.xml").write_text(xml)
    (arms / "arm.xml").write_text(xml)
    (arms / "link.xml").symlink_to(arms.parent / "outside.xml")
    (arms / "zero.xml").symlink_to("/dev/zero")
    spec = {k: v for k, v in dataclasses.asdict(ur5e_like.UR5E_LIKE).items() if k not in ("mjcf", "mjcf_builder")}
    for name, mjcf in (("valid", "arm.xml"), ("outside", "../outside.xml"), ("passwd", "../../../etc/passwd"),
                       ("absolute", "/etc/passwd"), ("symlink", "link.xml"), ("dev-zero", "zero.xml")):
        files[f"arm_{name}"] = arms / f"{name}.json"
        files[f"arm_{name}"].write_text(json.dumps({**spec, "name": "probe_arm", "mjcf": mjcf}))
    files["arm_list"] = arms / "list.json"
    files["arm_list"].write_text("[1, 2]")
    return files


def _must(argv: list[str], work: Path) -> None:
    code, _ = run_whole(CLI + argv, work / "inputs.log")
    if code != 0:
        raise SystemExit(f"making a probe's file failed (exit {code}): {' '.join(argv)}; see {work / 'inputs.log'}")


def _edited_copy(source: Path, copy: Path, name: str, edit) -> Path:
    """A copy of folder ``source`` whose JSON file ``name`` is edited in place by ``edit``, or replaced by the text
    ``edit`` returns (a string)."""
    shutil.copytree(source, copy)
    data = json.loads((copy / name).read_text())
    edited = edit(data)
    text = edited if isinstance(edited, str) else json.dumps(data)
    (copy / name).write_text(text)
    return copy


def _lerobot_column(source: Path, copy: Path, column: str, values) -> Path:
    """A copy of LeRobot folder ``source`` whose data column ``column`` holds ``values(n)`` instead."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    shutil.copytree(source, copy)
    for path in sorted((copy / "data").rglob("*.parquet")):
        table = pq.read_table(path)
        table = table.set_column(table.column_names.index(column), column, pa.array(values(len(table))))
        pq.write_table(table, path)
    return copy


META_LIES = {  # name -> edit of a dataset's meta.json
    "negative frames": lambda m: m.update(frames=-5),
    "absurd frames": lambda m: m.update(frames=10**15),
    "frames a string": lambda m: m.update(frames=str(m["frames"])),
    "no episodes key": lambda m: m.pop("episodes"),
    "episodes a dict": lambda m: m.update(episodes={"0": 1}),
    "absurd image size": lambda m: m.update(image_size=10**6),
    "negative episode length": lambda m: m["episodes"][0].__setitem__(1, -14),
    "runs a string": lambda m: m.update(runs="all"),
    "a JSON list": lambda m: "[1, 2]",
    "not JSON": lambda m: "{not json",
}
RUN_CONFIG_LIES = {"not JSON": "{not json", "a JSON list": "[1, 2]", "an empty object": "{}"}


def build_probes(work: Path) -> list[Probe]:
    """Every probe, its files crafted first; the groups in the order ``pick`` takes them."""
    files, base = craft(work), work / "base"
    count = iter(range(10**6))

    def out() -> Path:
        return work / "inputs" / "out" / f"{next(count):03d}"

    probes = [Probe("kill_resume", what, tuple(argv), culprit) for what, argv, culprit in bad_inputs(work)]
    for command, flags in float_options().items():
        for flag in flags:
            probes += [Probe("non-finite", f"{command} {flag}={value}",
                             (command, *_with(tiny_args(command, base, out()), flag, value)), flag)
                       for value in NON_FINITE]
    huge = [("collect-demos", "--episodes", "100000000000"), ("demo", "--episodes", "100000000000"),
            ("evaluate", "--episodes", "100000000000"), ("dagger", "--episodes-per-round", "100000000000"),
            ("pretrain-encoder", "--views", "100000000000"), ("finetune", "--total-frames", "100000000000"),
            *((command, "--num-envs", "100000") for command in ("collect-demos", "pretrain", "finetune", "dagger",
                                                                 "evaluate"))]
    probes += [Probe("huge", f"{command} {flag} {value}", (command, *_with(tiny_args(command, base, out()), flag,
                                                                             value)), flag)
               for command, flag, value in huge]
    probes += [Probe(kind, f"{command} {flag} {files[kind].name}", (command, *_with(tiny_args(command, base, out()),
                                                                                     flag, str(files[kind]))),
                     str(files[kind]))
               for kind in ("not_zip", "truncated", "empty")
               for command, flag in (("export", "--policy"), ("evaluate", "--policy"), ("finetune", "--policy"),
                                     ("pretrain", "--policy"), ("dagger", "--policy"),
                                     ("pretrain", "--encoder-weights"))]
    probes += [Probe(kind, f"info {files[kind].name}", ("info", str(files[kind])), str(files[kind]))
               for kind in ("not_zip", "truncated", "empty")]
    for what, text in RUN_CONFIG_LIES.items():
        run = _edited_copy(base / "bc", work / "inputs" / f"bc-config-{what.replace(' ', '-')}", "config.json",
                           lambda c, text=text: text)
        probes += [Probe("run-config", f"config.json {what}: {' '.join(argv[:2])}", argv, str(run))
                   for argv in (("pretrain", "--resume", str(run)), ("info", str(run)),
                                ("dagger", "--policy", str(run), "--out", str(out()), *TINY_DAGGER))]
    for k, (what, edit) in enumerate(META_LIES.items()):
        data = _edited_copy(base / "demos", work / "inputs" / f"demos-lie-{k:02d}", DATASET_META, edit)
        commands = [("pretrain", "--data", str(data), "--out", str(out()), *TINY_BC), ("info", str(data))]
        if k < 3:
            commands += [("export-dataset", "--data", str(data), "--out", str(out())),
                         ("collect-demos", *tiny_args("collect-demos", base, data))]
        probes += [Probe("meta-lies", f"meta.json {what}: {argv[0]}", argv, str(data)) for argv in commands]
    for kind in ("arm_outside", "arm_passwd", "arm_absolute", "arm_symlink", "arm_dev-zero", "arm_list"):
        probes += [Probe("arm-file", f"{kind[4:]} arm: {command}", (command, *tiny_args(command, base, out()),
                                                                    "--arm", str(files[kind])), str(files[kind]))
                   for command in ("collect-demos", "demo")]
    # The control: the same arm file with its MJCF inside its folder works (so the refusals are the MJCF's path's).
    probes.append(Probe("arm-file", "valid arm: demo", ("demo", *tiny_args("demo", base, out()), "--arm",
                                                      str(files["arm_valid"])), "", expected=0))
    probes += [Probe("info", f"info on a {kind} export", ("info", str(files[f"export_{kind}"])), "", expected=0)
               for kind in ("safetensors", "torchscript")]
    probes.append(Probe("info", "info on a text file", ("info", str(files["regular"])), str(files["regular"])))
    probes.append(Probe("info", "info on no such path", ("info", str(work / "inputs" / "nothing")),
                        str(work / "inputs" / "nothing")))
    for column, values in (("observation.state", lambda n: ["x"] * n), ("action", lambda n: ["x"] * n),
                           ("index", lambda n: [float(i) + 0.5 for i in range(n)]),
                           ("episode_index", lambda n: ["e"] * n)):
        data = _lerobot_column(files["lerobot"], work / "inputs" / f"lerobot-{column}", column, values)
        probes.append(Probe("lerobot", f"LeRobot column {column} of the wrong type",
                            ("pretrain", "--data", str(data), "--out", str(out()), *TINY_BC), column))
    probes += [Probe("task", f"--task {task}: {command}", (command, *tiny_args(command, base, out()), "--task", task),
                     task)
               for task in ("nosuchmodule:Class", "os:getcwd", "no-such-task")
               for command in ("collect-demos", "demo", "pretrain-encoder")]
    probes += [Probe("task", "--task nosuchmodule:Class: pipeline",
                     ("pipeline", "--out", str(out()), "--task", "nosuchmodule:Class"), "nosuchmodule:Class"),
               Probe("task", "--task nosuchmodule:Class: finetune --from-scratch",
                     ("finetune", "--from-scratch", "--out", str(out()), *TINY_PPO, "--task", "nosuchmodule:Class"),
                     "nosuchmodule:Class")]
    probes += [
        Probe("rerun", "interrupted collect-demos again with another --pose-noise",
              ("collect-demos", "--out", str(files["unfinished"]), "--pose-noise", "0.3", "--num-envs", "1"),
              "--pose-noise"),
        Probe("rerun", "append demos of another --difficulty",
              ("collect-demos", "--out", str(files["append"]), "--difficulty", "default", "--episodes", "2",
               "--seed", "9", "--num-envs", "1"), "difficulty"),
        Probe("rerun", "append demos of another --image-size",
              ("collect-demos", "--out", str(files["append"]), "--image-size", "64", "--episodes", "2", "--seed",
               "9", "--num-envs", "1"), "image"),
    ]
    probes += [
        Probe("misc", "demo --image-size 500", ("demo", *_with(tiny_args("demo", base, out()), "--image-size", "500")),
              "--image-size"),
        Probe("misc", "export a dataset as a policy", ("export", "--policy", str(base / "demos"), "--out", str(out())),
              str(base / "demos")),
        Probe("misc", "evaluate a dataset as a policy", ("evaluate", *_with(tiny_args("evaluate", base, out()),
                                                                           "--policy", str(base / "demos"))),
              str(base / "demos")),
        Probe("misc", "dagger from a dataset", ("dagger", *_with(tiny_args("dagger", base, out()), "--policy",
                                                                 str(base / "demos"))), str(base / "demos")),
        Probe("misc", "pretrain on a run folder", ("pretrain", "--data", str(base / "bc"), "--out", str(out()),
                                                   *TINY_BC), str(base / "bc")),
        Probe("misc", "evaluate no such policy", ("evaluate", *_with(tiny_args("evaluate", base, out()), "--policy",
                                                                     str(work / "inputs" / "nothing"))),
              str(work / "inputs" / "nothing")),
        Probe("misc", "export-dataset of no dataset", ("export-dataset", "--data", str(work / "inputs" / "nothing"),
                                                       "--out", str(out())), str(work / "inputs" / "nothing")),
        Probe("misc", "export-dataset into a regular file", ("export-dataset", "--data", str(base / "demos"),
                                                             "--out", str(files["regular"])), str(files["regular"])),
        Probe("misc", "pipeline with an unknown arm", ("pipeline", "--out", str(out()), "--arm", "no-such-arm"),
              "no-such-arm"),
        Probe("misc", "pipeline into a regular file", ("pipeline", "--out", str(files["regular"])),
              str(files["regular"])),
    ]
    probes += [Probe("argparse", "collect-demos --episodes abc", ("collect-demos", "--episodes", "abc"), "--episodes"),
               Probe("argparse", "pretrain --no-such-option", ("pretrain", "--no-such-option"), "--no-such-option"),
               Probe("argparse", "export --format bogus", ("export", *_with(tiny_args("export", base, out()),
                                                                            "--format", "bogus")), "--format")]
    return probes


def pick(probes: list[Probe], limit: int) -> list[Probe]:
    """At most ``limit`` probes (0: all), taken from each group in turn, in the order they were built."""
    if not limit:
        return probes
    groups: dict[str, list[Probe]] = {}
    for probe in probes:
        groups.setdefault(probe.group, []).append(probe)
    taken, depth = [], 0
    while len(taken) < min(limit, len(probes)):
        taken += [members[depth] for members in groups.values() if depth < len(members)][:limit - len(taken)]
        depth += 1
    return taken


def run_probe(probe: Probe, work: Path) -> dict:
    """Runs ``probe`` through the CLI (its own process group, ended after ``PROBE_TIMEOUT_S``) and checks it."""
    before = set(_leftovers(work))
    process = subprocess.Popen(CLI + list(probe.argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=PROBE_TIMEOUT_S)
        timed_out = False
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        timed_out = True
    with contextlib.suppress(ProcessLookupError):  # a child left running by the probe
        os.killpg(process.pid, signal.SIGKILL)
    code = None if timed_out else process.returncode
    lines = [line for line in stderr.splitlines() if line.strip() and not BANNER.match(line)]
    traceback = "Traceback" in stdout + stderr
    left = sorted(set(_leftovers(work)) - before)
    refused = code == 2
    named = refused and len(lines) == 1 and probe.culprit in lines[0]
    if probe.expected == 2:
        ok = named and not traceback and not left
    else:
        ok = code == probe.expected and not traceback and not left
    result = {"group": probe.group, "probe": probe.name, "argv": list(probe.argv), "expected_exit_code": probe.expected,
              "exit_code": code, "timed_out": timed_out, "stderr_lines": len(lines), "stderr": lines[-3:],
              "culprit": probe.culprit, "names_culprit": named, "traceback": traceback, "leftovers": left,
              "silent_wrong": probe.expected == 2 and (code == 0 or timed_out), "ok": ok,
              "verdict": "ok" if ok else _verdict(probe, code, timed_out, lines, traceback, left)}
    print({k: result[k] for k in ("probe", "exit_code", "stderr_lines", "verdict")}, file=sys.stderr)
    return result


def _leftovers(work: Path) -> list[str]:
    return [str(Path(folder) / p) for folder in ("inputs", "bad-inputs") if (work / folder).is_dir()
            for p in temporary_leftovers(work / folder)]


def _verdict(probe: Probe, code, timed_out: bool, lines: list[str], traceback: bool, left: list[str]) -> str:
    """What is wrong with a probe's outcome, in a few words."""
    if timed_out:
        return f"still running after {PROBE_TIMEOUT_S} s (not refused)"
    if traceback:
        return f"traceback (exit {code})"
    if code != probe.expected:
        return ("accepted: exit 0 where a refusal was due" if code == 0 else f"exit {code}, not {probe.expected}")
    if probe.expected == 2 and len(lines) != 1:
        return f"{len(lines)} lines on stderr, not 1"
    if probe.expected == 2 and probe.culprit not in lines[0]:
        return f"the line does not name {probe.culprit}"
    return f"temporary files left: {left}"


# -- the report -----------------------------------------------------------------------------------------------------
def tally(stops: dict | None, probes: list[dict] | None) -> dict:
    """The headline counts of each part that ran."""
    summary = {}
    if stops is not None:
        trials = stops["trials"]
        summary["stops"] = {
            "trials": len(trials), "ok": sum(t["ok"] for t in trials),
            "finished_before_the_signal": sum(t["outcome"] != "stopped" for t in trials),
            "wrong_exit_codes": sum(t["outcome"] == "stopped" and t["exit_code"] != EXPECTED_STOP_CODE[
                signal.Signals[t["signal"]]] for t in trials),
            "over_the_bound": sum(not t["within_bound"] for t in trials),
            "no_continue_line": sum(t["outcome"] == "stopped" and not t["names_how_to_continue"] for t in trials),
            "children_outlived": sum(t["children_outlived_it"] for t in trials),
            "tracebacks": sum(t["traceback"] for t in trials),
            "reruns_not_whole": sum(not t["rerun_whole"] for t in trials),
            "max_seconds_to_exit": max((t["seconds_to_exit"] for t in trials), default=0.0),
        }
    if probes is not None:
        due = [p for p in probes if p["expected_exit_code"] == 2]
        summary["inputs"] = {
            "probes": len(probes), "ok": sum(p["ok"] for p in probes),
            "tracebacks": sum(p["traceback"] for p in probes),
            "wrong_exit_codes": sum(p["exit_code"] != p["expected_exit_code"] for p in probes),
            "multi_line_refusals": sum(p["exit_code"] == 2 and p["stderr_lines"] > 1 for p in due),
            "culprit_not_named": sum(p["exit_code"] == 2 and p["stderr_lines"] == 1 and not p["names_culprit"]
                                     for p in due),
            "silent_wrong_behaviours": sum(p["silent_wrong"] for p in due),
            "leftovers": sum(bool(p["leftovers"]) for p in probes),
        }
    return summary


def targets_met(summary: dict) -> dict:
    """Each target of ``TARGETS`` with the value measured and whether it was met (parts that did not run: absent)."""
    targets = {}
    if "stops" in summary:
        s = summary["stops"]
        targets |= {
            "stop_exit_code": {"target": TARGETS["stop_exit_code"], "value": s["wrong_exit_codes"],
                               "met": s["wrong_exit_codes"] == 0},
            "stop_seconds_max": {"target": f"<= {STOP_BOUND_S} s", "value": s["max_seconds_to_exit"],
                                 "met": s["over_the_bound"] == 0},
            "stop_continue_line": {"target": TARGETS["stop_continue_line"], "value": s["no_continue_line"],
                                   "met": s["no_continue_line"] == 0},
            "stop_children": {"target": TARGETS["stop_children"], "value": s["children_outlived"],
                              "met": s["children_outlived"] == 0},
            "stop_rerun": {"target": TARGETS["stop_rerun"], "value": s["reruns_not_whole"],
                           "met": s["reruns_not_whole"] == 0},
        }
    if "inputs" in summary:
        s = summary["inputs"]
        targets["inputs"] = {"target": TARGETS["inputs"], "value": f"{s['ok']}/{s['probes']}",
                             "met": s["ok"] == s["probes"]}
    return targets


def earlier_part(out: Path, name: str) -> tuple[dict | list | None, dict | None]:
    """Part ``name`` ("stops" or "probes") of the results file at ``out`` and where it was measured (date and
    commit), for a run of the other part alone: the file then holds both, each with its own provenance."""
    if not Path(out).is_file():
        return None, None
    earlier = json.loads(Path(out).read_text())
    kept = earlier["metrics"].get(name)
    measured = earlier["metrics"].get("measured", {}).get(name) or {"date": earlier["date"],
                                                                     "commit": earlier["commit"]}
    return kept, (measured if kept is not None else None)


def write_report(args, stops: dict | None, probes: list[dict] | None, parts: dict) -> int:
    now = {"date": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()), "commit": STARTED_FROM.get("commit")}
    measured = {"stops": now if stops is not None else None, "probes": now if probes is not None else None}
    if stops is None:
        stops, measured["stops"] = earlier_part(args.out, "stops")
    if probes is None:
        probes, measured["probes"] = earlier_part(args.out, "probes")
    if stops is not None:
        print(markdown_table([{"command": t["command"], "signal": t["signal"], "after (s)": t["delay_s"],
                               "exit": t["exit_code"], "outcome": t["outcome"], "to exit (s)": t["seconds_to_exit"],
                               "ok": t["ok"], "problems": "; ".join(t["problems"])[:160]} for t in stops["trials"]]))
    if probes is not None:
        print(markdown_table([{"probe": p["probe"][:60], "exit": p["exit_code"], "lines": p["stderr_lines"],
                               "traceback": p["traceback"], "verdict": p["verdict"][:80]}
                              for p in probes if not p["ok"]] or [{"probe": "every probe ok"}]))
    summary = tally(stops, probes)
    targets = targets_met(summary)
    print(json.dumps(summary, indent=2))
    print("targets: " + ", ".join(f"{k} {'met' if v['met'] else 'MISSED'}" for k, v in targets.items()))
    payload = {"summary": summary, "seed": args.seed, "stop_bound_s": STOP_BOUND_S, "stops": stops,
               "probes": probes, "measured": measured, "all_met": all(v["met"] for v in targets.values())}
    path = BENCHMARK.write(payload, out=args.out, wall_s=parts, targets=targets)
    print(f"wrote {path}; all targets met: {payload['all_met']}")
    return 0 if payload["all_met"] else 1


if __name__ == "__main__":
    sys.exit(BENCHMARK.main(run, options))
