"""kill -9 at random moments, then the same command or --resume: every run comes back whole.

Each trial starts a ``robot-rl`` command in a subprocess on small settings, sends ``kill -9`` to its main process
after a seeded random delay within the first half of that command's measured duration (the
out-of-memory killer and ``kill -9`` hit one process; the benchmark records whether any child process outlived
it and then ends them), then runs the recovery: the same command again, or ``--resume RUN_DIR`` for pretrain and
finetune (the same command where the kill came before the run had claimed its folder). Checked after every
trial: the recovery exits 0; a dataset holds exactly the episodes asked for; every checkpoint loads (``last.pt``,
``best.pt``, the policy); an evaluation report, right after the kill and after the recovery, is absent or
complete; exported files load; no temporary file or directory (``.NAME.*.tmp``) is left anywhere. A last trial
sends Ctrl-C (SIGINT to the whole process group, as a terminal does) to a finetune with ``--collector process``
and records how it stops.

Then the preemptions: SIGTERM (what Slurm, Kubernetes, systemd and Ray send before they kill) to the whole process
group of a pretrain and of a finetune with the direct and the process collector, 1-5 s after each claimed its run
folder (mid-epoch, mid-iteration or mid-check): each must
exit 143 with one resume line, and ``--resume`` must finish the run. Two writers: two collect-demos started
together on one new dataset, and two appending to one existing dataset: one is refused (exit 2, one line naming
the other's pid) and the dataset holds exactly what the other wrote. Bad inputs: each probe of ``BAD_INPUTS`` must
end in one line on stderr and exit 2, leaving no temporary folder. A full disk (a small tmpfs, where this machine
lets the benchmark mount one): collect-demos and pretrain end in one line and exit 1, and the same command
finishes once the tmpfs is made larger.

The reference runs (one uninterrupted run of each command) come first; they time the commands and make the
inputs of later ones (demos for pretrain, a BC run for finetune, evaluate and export). Writes
``benchmarks/results/kill_resume.json``.

    python benchmarks/kill_resume.py            # about 30 minutes on 2 CPU cores
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from harness import Benchmark, Variant
from results_file import read_results

from robot_rl.tables import markdown_table

RESULTS = Path(__file__).parent / "results"
CLI = [sys.executable, "-m", "robot_rl.cli"]
TINY_PPO = ["--total-frames", "256", "--frames-per-batch", "64", "--num-envs", "2", "--minibatch-size", "32",
            "--ppo-epochs", "2", "--eval-every", "2", "--eval-episodes", "2", "--checkpoint-every", "2",
            "--critic-hidden", "32", "--critic-warmup", "3", "--shaping", "0"]
TINY_BC = ["--epochs", "2", "--batch-size", "16", "--steps-per-epoch", "12", "--eval-every", "1",
           "--eval-episodes", "2", "--num-envs", "2", "--hidden", "32"]
DEMO_EPISODES = 24
EVAL_EPISODES = 6
# The pipeline at its quick preset's wiring on tiny budgets (the same as its end-to-end test).
PIPELINE = """
import sys
from robot_rl.pipeline import PRESETS, run_pipeline
tiny = PRESETS["quick"].updated(
    collect={"episodes": 6, "num_envs": 1},
    pretrain={"epochs": 1, "batch_size": 8, "steps_per_epoch": 4, "eval_episodes": 1, "eval_envs": 1, "hidden": 16},
    finetune={"total_frames": 128, "frames_per_batch": 64, "num_envs": 2, "minibatch_size": 32, "ppo_epochs": 1,
              "eval_every": 0, "eval_episodes": 1, "checkpoint_every": 1},
    evaluate={"episodes": 2, "num_envs": 2, "videos": 1, "failure_videos": 1, "video_height": 64,
              "video_quality": "fast"})
run_pipeline(tiny, sys.argv[1], progress=False)
"""

BENCHMARK = Benchmark("kill_resume", __doc__, variants=(
    Variant("all", (), "reference runs, kills, Ctrl-C, then SIGTERM, two writers, bad inputs, full disk"),
    Variant("ctrl-c", ("--ctrl-c-only",), "the Ctrl-C trial again on the kept scratch folder"),
    Variant("lifecycle", ("--lifecycle-only",), "the SIGTERM, two-writer, bad-input and full-disk trials again"),
))


def collect_args(out: Path | str, episodes: int = DEMO_EPISODES, seed: bool = True) -> list[str]:
    """``robot-rl collect-demos`` arguments of the trials' datasets (seed 7 unless ``seed`` is False)."""
    return ["collect-demos", "--out", str(out), "--episodes", str(episodes), "--difficulty", "easy", "--image-size",
            "48", "--num-envs", "2", "--episodes-per-commit", "4", *(["--seed", "7"] if seed else [])]


def commands(work: Path, trial: str) -> dict[str, dict]:
    """Each command of a trial folder: its argv, what ``--resume`` would name, and how to check its output."""
    root = work / trial
    base = work / "base"
    finetune = CLI + ["finetune", "--policy", str(base / "bc"), "--out", str(root / "ppo"), *TINY_PPO]
    return {
        "collect-demos": {"argv": CLI + collect_args(root / "demos")},
        "pretrain": {"argv": CLI + ["pretrain", "--data", str(base / "demos"), "--out", str(root / "bc"),
                                    *TINY_BC], "run_dir": root / "bc"},
        "finetune (direct)": {"argv": finetune, "run_dir": root / "ppo"},
        "finetune (process)": {"argv": finetune + ["--collector", "process", "--workers", "2"],
                               "run_dir": root / "ppo"},
        "evaluate": {"argv": CLI + ["evaluate", "--policy", str(base / "bc"), "--out", str(root / "eval"),
                                    "--episodes", str(EVAL_EPISODES), "--num-envs", "2", "--videos", "1",
                                    "--failure-videos", "1", "--video-height", "64", "--video-quality", "fast"]},
        "export": {"argv": CLI + ["export", "--policy", str(base / "bc"), "--out", str(root / "export"),
                                  "--format", "torchscript"]},
        "pipeline": {"argv": [sys.executable, "-c", PIPELINE, str(root / "pipe")]},
    }


def temporary_leftovers(folder: Path) -> list[str]:
    """Temporary files and folders of atomic writes (``.NAME.*.tmp``) anywhere under ``folder``."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob(".*.tmp"))


def report_state(report_dir: Path, episodes: int) -> str:
    """'absent', 'complete' or what is wrong with an evaluation report folder."""
    report = report_dir / "report.json"
    if not report.exists():
        return "absent"
    try:
        data = json.loads(report.read_text())
    except json.JSONDecodeError:
        return "unreadable report.json"
    if len(data.get("episodes", [])) != episodes or not (report_dir / "report.md").is_file():
        return "incomplete"
    return "complete"


def check_output(name: str, root: Path, code: int) -> list[str]:
    """What is wrong with a trial's output after a recovery that exited ``code`` (empty when nothing is)."""
    import torch

    from robot_rl.checkpoints import load_checkpoint
    from robot_rl.dataset import DemoDataset
    from robot_rl.policy_io import load_actor
    from robot_rl.run_folder import RunFolder

    if code != 0:
        return [f"recovery exited {code}"]
    problems = []
    if name == "collect-demos":
        episodes = len(DemoDataset.open(root / "demos").episodes)
        if episodes != DEMO_EPISODES:
            problems.append(f"dataset holds {episodes} episodes, not {DEMO_EPISODES}")
    elif name.startswith(("pretrain", "finetune")):
        folder = RunFolder(root / ("bc" if name == "pretrain" else "ppo"))
        if not folder.finished:
            problems.append("no summary.json")
        for checkpoint in ("last", "best"):
            if folder.checkpoint(checkpoint).exists():
                load_checkpoint(folder.checkpoint(checkpoint))
        load_actor(folder.path)
    elif name == "evaluate":
        state = report_state(root / "eval", EVAL_EPISODES)
        if state != "complete":
            problems.append(f"report {state}")
    elif name == "export":
        torch.jit.load(str(root / "export" / "policy.torchscript.pt"))
        json.loads((root / "export" / "policy.json").read_text())
    elif name == "pipeline":
        if report_state(root / "pipe" / "eval", 2) != "complete" or not (root / "pipe" / "pipeline.json").is_file():
            problems.append("pipeline report incomplete")
    return problems


def _group_members(pgid: int) -> list[dict]:
    """The processes of group ``pgid`` (pid, state, command), zombies included: ``kill(0)`` cannot tell them
    apart, and a zombie is only a process-table entry its new parent has not reaped yet."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[3]) == pgid:
                command = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                members.append({"pid": int(stat.parent.name), "state": fields[0], "command": command[:200]})
        except (OSError, ValueError, IndexError):
            continue
    return members


def _end_group(pgid: int) -> list[dict]:
    """The processes of the group still running (not zombies) 5 s after its main one ended; ends them all."""
    deadline = time.monotonic() + 5
    while any(m["state"] != "Z" for m in _group_members(pgid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    outlived = [m for m in _group_members(pgid) if m["state"] != "Z"]
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    return outlived


def _terminal_sigint() -> None:
    """In the child before exec: SIGINT as a terminal's foreground job gets it. A shell's background job (how
    this benchmark may be started) hands its children SIGINT ignored, and Python then installs no Ctrl-C
    handler."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_whole(argv: list[str], log: Path, timeout: int = 900) -> tuple[int, float]:
    start = time.perf_counter()
    with open(log, "ab") as out:
        code = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, timeout=timeout).returncode
    return code, time.perf_counter() - start


def recovery_argv(command: dict, resume: bool) -> list[str]:
    """The recovery of a stopped command: ``python -m robot_rl.cli COMMAND --resume RUN_DIR`` when ``resume``, else
    the same command."""
    return command["argv"][:4] + ["--resume", str(command["run_dir"])] if resume else command["argv"]


def run_killed(argv: list[str], delay: float, log: Path, sig: int = signal.SIGKILL, group: bool = False,
               after: Path | None = None) -> dict:
    """Starts ``argv`` in its own process group, sends ``sig`` after ``delay`` seconds (counted from when the file
    ``after`` appears, when given) to the main process, or the group; returns what happened."""
    with open(log, "ab") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                   preexec_fn=_terminal_sigint)
        while after is not None and not after.exists() and process.poll() is None:
            time.sleep(0.05)
        try:
            code = process.wait(timeout=delay)
            return {"finished_before_the_signal": True, "exit_code": code, "children_outlived_it": False,
                    "outlived": []}
        except subprocess.TimeoutExpired:
            pass
        sent = time.perf_counter()
        (os.killpg if group else os.kill)(process.pid, sig)
        try:
            code = process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()
            code = process.wait()
        stopped = time.perf_counter() - sent
    outlived = _end_group(process.pid)
    return {"finished_before_the_signal": False, "exit_code": code, "seconds_to_stop": round(stopped, 2),
            "children_outlived_it": bool(outlived), "outlived": outlived}


def ctrl_c_trial(work: Path, delay: float) -> dict:
    """Ctrl-C with the process collector: SIGINT to the whole group, as a terminal sends it (the child takes SIGINT
    as a foreground job does, even when this benchmark runs as a background job)."""
    name, trial = "finetune (process)", "ctrl-c"
    command = commands(work, trial)[name]
    stopped = run_killed(command["argv"], delay, work / f"{trial}.log", sig=signal.SIGINT, group=True)
    claimed = (command["run_dir"] / "config.json").exists()
    code, seconds = run_whole(recovery_argv(command, claimed), work / f"{trial}.log")
    problems = check_output(name, work / trial, code)
    if not stopped["finished_before_the_signal"] and stopped["exit_code"] != 130:
        problems.append(f"Ctrl-C ended it with exit code {stopped['exit_code']}, not 130")
    problems += [f"outlived Ctrl-C: {m['command']}" for m in stopped["outlived"]]
    ctrl_c = {"trial": trial, "command": name, "sigint_after_s": delay, **stopped, "claimed": claimed,
              "exit_code_130": stopped["exit_code"] == 130, "recovery_exit_code": code,
              "recovery_s": round(seconds, 1), "problems": problems, "ok": not problems}
    print(ctrl_c, file=sys.stderr)
    return ctrl_c


def options(parser) -> None:
    parser.add_argument("--seed", type=int, default=0, help="seed of the kill moments and of which recovery")
    parser.add_argument("--work", default="runs/kill-resume", help="scratch folder (emptied first)")
    parser.add_argument("--ctrl-c-only", action="store_true",
                        help="rerun only the Ctrl-C trial, at its recorded moment, on the kept scratch folder; "
                             "the kill trials of the results file are kept")
    parser.add_argument("--lifecycle-only", action="store_true",
                        help="rerun only the SIGTERM, two-writer, bad-input and full-disk trials on the kept "
                             "scratch folder's reference runs; the kill and Ctrl-C trials of the results file are kept")


def run(args) -> int:
    start = time.perf_counter()
    work = Path(args.work)
    os.environ.setdefault("MUJOCO_GL", "egl")
    if args.ctrl_c_only:
        previous = read_results(RESULTS / "kill_resume.json")
        shutil.rmtree(work / "ctrl-c", ignore_errors=True)
        ctrl_c = ctrl_c_trial(work, previous["ctrl_c_process_collector"]["sigint_after_s"])
        parts = {**(previous["parts"] or {"reference runs and kills": previous["wall_s"]}),
                 "ctrl-c rerun": round(time.perf_counter() - start)}
        return write_report(args.seed, previous["trials"], ctrl_c, previous["reference_seconds"], parts)
    if args.lifecycle_only:
        previous = read_results(RESULTS / "kill_resume.json")
        lifecycle = lifecycle_trials(work, random.Random(args.seed + 1))
        parts = {**(previous["parts"] or {"reference runs, kills and ctrl-c": previous["wall_s"]}),
                 "sigterm, two writers, bad inputs, disk full": round(time.perf_counter() - start)}
        return write_report(args.seed, previous["trials"], previous["ctrl_c_process_collector"],
                            previous["reference_seconds"], parts, lifecycle)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    rng = random.Random(args.seed)

    # Reference runs: each command once, uninterrupted (the base demos and BC run feed the later commands).
    reference = commands(work, "base")
    durations = {}
    for name in ("collect-demos", "pretrain", "finetune (direct)", "finetune (process)", "evaluate", "export",
                 "pipeline"):
        if name == "finetune (process)":
            shutil.rmtree(work / "base" / "ppo", ignore_errors=True)
        code, seconds = run_whole(reference[name]["argv"], work / "reference.log")
        if code != 0:
            raise SystemExit(f"reference run of {name} failed (exit {code}); see {work / 'reference.log'}")
        durations[name] = round(seconds, 1)
        print(f"reference {name}: {seconds:.1f} s", file=sys.stderr)

    # Kills: ten, spread over the commands, each at a random moment of that command's reference duration.
    plan = ["collect-demos", "collect-demos", "pretrain", "pretrain", "finetune (direct)", "finetune (direct)",
            "finetune (process)", "evaluate", "export", "pipeline"]
    trials = []
    for k, name in enumerate(plan):
        trial = f"kill{k:02d}"
        command = commands(work, trial)[name]
        # Within the first half of the reference run: a rerun is faster than the first run of a command (its
        # reference finished collect-demos' rerun in under 60% of the time), and a kill after the end tests nothing.
        delay = round(rng.uniform(0.5, 0.5 * durations[name]), 2)
        resumable = "run_dir" in command
        recovery = "--resume" if resumable and rng.random() < 0.5 else "the same command"
        log = work / f"{trial}.log"
        killed = run_killed(command["argv"], delay, log)
        after_kill = {"leftovers": temporary_leftovers(work / trial) if (work / trial).exists() else []}
        if name == "evaluate":
            after_kill["report"] = report_state(work / trial / "eval", EVAL_EPISODES)
        if resumable:
            after_kill["claimed"] = (command["run_dir"] / "config.json").exists()
        if recovery == "--resume" and not after_kill.get("claimed"):
            recovery = "the same command (killed before the run claimed its folder: nothing to resume)"
        if killed["finished_before_the_signal"]:
            recovery, (code, seconds) = "none (it finished before the kill)", (killed["exit_code"], 0.0)
        else:
            code, seconds = run_whole(recovery_argv(command, recovery == "--resume"), log)
        problems = check_output(name, work / trial, code)
        problems += [f"temporary file left: {p}" for p in temporary_leftovers(work / trial)]
        if after_kill.get("report") not in (None, "absent", "complete"):
            problems.append(f"report after the kill: {after_kill['report']}")
        trials.append({"trial": trial, "command": name, "kill_after_s": delay,
                       "reference_s": durations[name], **killed, "after_kill": after_kill, "recovery": recovery,
                       "recovery_exit_code": code, "recovery_s": round(seconds, 1), "problems": problems,
                       "ok": not problems})
        print(trials[-1], file=sys.stderr)

    delay = round(rng.uniform(0.3 * durations["finetune (process)"], 0.5 * durations["finetune (process)"]), 2)
    ctrl_c = ctrl_c_trial(work, delay)
    parts = {"reference runs, kills and ctrl-c": round(time.perf_counter() - start)}

    lifecycle_start = time.perf_counter()
    lifecycle = lifecycle_trials(work, rng)
    parts["sigterm, two writers, bad inputs, disk full"] = round(time.perf_counter() - lifecycle_start)
    return write_report(args.seed, trials, ctrl_c, durations, parts, lifecycle)


def lifecycle_trials(work: Path, rng: random.Random) -> dict:
    """SIGTERM at a random moment 1-5 s after each training command claimed its folder, two writers, bad inputs,
    a full disk."""
    return {
        "sigterm": [sigterm_trial(work, name, round(rng.uniform(1.0, 5.0), 2))
                    for name in ("pretrain", "finetune (direct)", "finetune (process)")],
        "two_writers": [two_writers_trial(work, append) for append in (False, True)],
        "bad_inputs": bad_inputs_trial(work),
        "disk_full": disk_full_trial(work),
    }


def tally(trials: list[dict], ctrl_c: dict, lifecycle: dict) -> dict:
    """The headline counts of the results file."""
    sigterm, writers, bad = lifecycle["sigterm"], lifecycle["two_writers"], lifecycle["bad_inputs"]
    killed = [t for t in trials if not t["finished_before_the_signal"]]
    disk = lifecycle["disk_full"]
    return {
        "kills": len(killed), "kills_survived": sum(t["ok"] for t in killed),
        "preemptions_sigterm": len(sigterm), "preemptions_survived": sum(t["ok"] for t in sigterm),
        "preemptions_mid_run": sum(t["exit_code"] == 143 for t in sigterm),
        "ctrl_c_survived": ctrl_c["ok"],
        "bad_inputs_tried": len(bad), "bad_inputs_one_line_exit_2": sum(p["one_line_exit_2"] for p in bad),
        "concurrent_writers": 2 * len(writers), "concurrent_writers_refused": sum(t["refused"] for t in writers),
        "disk_full_trials": len(disk.get("trials", [])), "disk_full_ok": sum(t["ok"] for t in disk.get("trials", [])),
        "nothing_lost": all(t["ok"] for t in trials + sigterm + writers) and ctrl_c["ok"]
                        and all(t["ok"] for t in disk.get("trials", [])),
    }


def write_report(seed: int, trials: list[dict], ctrl_c: dict, durations: dict, parts: dict,
                 lifecycle: dict | None = None) -> int:
    rows = [{"trial": t["trial"], "command": t["command"], "kill after (s)": t["kill_after_s"],
             "of (s)": t["reference_s"], "claimed": t["after_kill"].get("claimed", ""),
             "children outlived": t["children_outlived_it"], "recovery": t["recovery"].split(" (")[0],
             "ok": t["ok"], "problems": "; ".join(t["problems"])} for t in trials]
    print(markdown_table(rows))
    lifecycle = lifecycle or {"sigterm": [], "two_writers": [], "bad_inputs": [], "disk_full": {}}
    summary = tally(trials, ctrl_c, lifecycle)
    print(json.dumps(summary, indent=2))
    all_ok = (summary["nothing_lost"] and summary["bad_inputs_one_line_exit_2"] == summary["bad_inputs_tried"]
              and summary["concurrent_writers_refused"] == len(lifecycle["two_writers"]))
    result = {"summary": summary,
              "argv": [sys.executable, *sys.argv],
              "seed": seed, "trials": trials, "ctrl_c_process_collector": ctrl_c, **lifecycle,
              "all_ok": all_ok, "reference_seconds": durations, "table": rows}
    BENCHMARK.write(result, out=RESULTS / "kill_resume.json", wall_s=sum(parts.values()), parts=parts)
    print(f"wrote {RESULTS / 'kill_resume.json'}; all ok: {result['all_ok']}")
    return 0 if result["all_ok"] else 1


# -- preemption, concurrent writers, bad inputs, a full disk ----------------------------------------------------
def log_lines(log: Path) -> list[str]:
    """The lines of a log, progress bars' carriage returns counted as line ends."""
    return log.read_text(errors="replace").replace("\r", "\n").splitlines() if log.is_file() else []


def sigterm_trial(work: Path, name: str, delay: float) -> dict:
    """SIGTERM to the whole process group of ``name`` (as Slurm and systemd send it) ``delay`` s after it claimed
    its run folder (mid-epoch or mid-iteration: the reference durations, measured once, are no clock for that):
    exit 143 with one resume line, then ``--resume`` finishes."""
    trial = "sigterm-" + name.replace(" (", "-").rstrip(")")
    command = commands(work, trial)[name]
    log = work / f"{trial}.log"
    shutil.rmtree(work / trial, ignore_errors=True)
    log.unlink(missing_ok=True)
    stopped = run_killed(command["argv"], delay, log, sig=signal.SIGTERM, group=True,
                         after=command["run_dir"] / "config.json")
    claimed = (command["run_dir"] / "config.json").exists()
    resume_lines = [line for line in log_lines(log) if "continue with robot-rl" in line]
    if stopped["finished_before_the_signal"]:
        code, seconds = stopped["exit_code"], 0.0
    else:
        code, seconds = run_whole(recovery_argv(command, claimed), log)
    problems = check_output(name, work / trial, code)
    # A signal that comes once the run has finished (while its workers shut down) leaves it finished: exit 0.
    after_the_end = stopped["exit_code"] == 0 and (command["run_dir"] / "summary.json").is_file()
    if not stopped["finished_before_the_signal"] and not after_the_end:
        if stopped["exit_code"] != 143:
            problems.append(f"SIGTERM ended it with exit code {stopped['exit_code']}, not 143")
        if claimed and len(resume_lines) != 1:
            problems.append(f"{len(resume_lines)} resume lines, not 1")
    problems += [f"outlived SIGTERM: {m['command']}" for m in stopped["outlived"]]
    problems += [f"temporary file left: {p}" for p in temporary_leftovers(work / trial)]
    result = {"trial": trial, "command": name, "sigterm_after_claim_s": delay, **stopped,
              "signal_after_the_run_finished": after_the_end, "claimed": claimed,
              "resume_line": resume_lines[0] if resume_lines else None, "recovery_exit_code": code,
              "recovery_s": round(seconds, 1), "problems": problems, "ok": not problems}
    print(result, file=sys.stderr)
    return result


def dataset_problems(folder: Path, episodes: int) -> list[str]:
    """What is wrong with a dataset that should hold ``episodes`` episodes, each labelled as meta.json says."""
    from robot_rl import keys
    from robot_rl.dataset import DemoDataset

    dataset = DemoDataset.open(folder)
    problems = [] if len(dataset.episodes) == episodes else [f"{len(dataset.episodes)} episodes, not {episodes}"]
    if sum(run["episodes"] for run in dataset.meta["runs"]) != len(dataset.episodes):
        problems.append("runs in meta.json do not add up to its episodes")
    seeds = dataset.data.get(keys.EPISODE_SEED).reshape(dataset.frames, -1)[:, 0]
    wrong = sum(int(seeds[e.start]) != e.seed for e in dataset.episodes)
    if wrong:
        problems.append(f"{wrong} episodes whose frames' seeds disagree with meta.json")
    return problems


def two_writers_trial(work: Path, append: bool) -> dict:
    """Two collect-demos started together on one dataset (new, or an existing one both append to with the default
    seed): one is refused with one line naming the other's pid and exit 2, the dataset holds exactly the other's."""
    trial = "two-writers-" + ("append" if append else "new")
    out = work / trial / "demos"
    shutil.rmtree(work / trial, ignore_errors=True)
    out.parent.mkdir(parents=True)
    if append:
        shutil.copytree(work / "base" / "demos", out)
    before = DEMO_EPISODES if append else 0
    episodes = 12
    argv = CLI + collect_args(out, episodes, seed=not append)
    logs = [work / f"{trial}-{k}.log" for k in range(2)]
    start = time.perf_counter()
    processes = [subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=open(log, "w")) for log in logs]
    codes = [p.wait(timeout=900) for p in processes]
    seconds = time.perf_counter() - start
    errors = [[line for line in log_lines(log) if line.startswith("robot-rl")] for log in logs]
    refused = sorted(codes) == [0, 2]
    problems = [] if refused else [f"exit codes {codes}, not one 0 and one 2"]
    if refused:
        winner, loser = (0, 1) if codes[0] == 0 else (1, 0)
        if len(errors[loser]) != 1 or f"pid {processes[winner].pid}" not in errors[loser][0]:
            problems.append(f"the refusal is not one line naming pid {processes[winner].pid}: {errors[loser]}")
    problems += dataset_problems(out, before + episodes)
    problems += [f"temporary file left: {p}" for p in temporary_leftovers(work / trial)]
    result = {"trial": trial, "exit_codes": codes, "refused": refused,
              "refusal": next((e[0] for e, c in zip(errors, codes) if c == 2 and e), None),
              "episodes_expected": before + episodes, "seconds": round(seconds, 1), "problems": problems,
              "ok": not problems}
    print(result, file=sys.stderr)
    return result


def _unwritable_folder(root: Path) -> Path:
    """A folder this process cannot create files in: a read-only one, or for root (who ignores permissions) a
    place the kernel refuses (/sys)."""
    if os.geteuid() != 0:
        folder = root / "read-only"
        folder.mkdir()
        folder.chmod(0o555)
        return folder
    return Path("/sys")


def bad_inputs(work: Path) -> list[tuple[str, list[str], str]]:
    """(what, robot-rl arguments, what the one line must name) of each bad-input probe."""
    root, base = work / "bad-inputs", work / "base"
    regular, long = root / "a-file", "x" * 300
    shutil.rmtree(root, ignore_errors=True)
    regular.parent.mkdir(parents=True)
    regular.write_text("not a folder\n")
    unwritable = _unwritable_folder(root)
    demos, bc = str(base / "demos"), str(base / "bc")
    tiny_collect = ["--episodes", "2", "--difficulty", "easy", "--image-size", "48", "--num-envs", "1"]
    return [
        ("negative seed", ["finetune", "--seed", "-5", "--from-scratch", "--out", str(root / "neg")], "--seed"),
        ("run dir is a regular file", ["pretrain", "--data", demos, "--out", str(regular)], str(regular)),
        ("run dir under a regular file", ["pretrain", "--data", demos, "--out", str(regular / "run")],
         str(regular)),
        ("resume a regular file", ["pretrain", "--resume", str(regular)], str(regular)),
        ("300-character dataset name", ["collect-demos", "--out", str(root / long), *tiny_collect], long),
        ("300-character folder in a run dir", ["finetune", "--policy", bc, "--out", str(root / long / "ppo")],
         long),
        ("300-character data path", ["pretrain", "--data", str(root / long), "--out", str(root / "bc")], long),
        ("unwritable dataset folder", ["collect-demos", "--out", str(unwritable / "demos"), *tiny_collect],
         str(unwritable)),
        ("unwritable run folder", ["pretrain", "--data", demos, "--out", str(unwritable / "bc")],
         str(unwritable)),
        ("collect with an unknown arm", ["collect-demos", "--out", str(root / "armless"), "--arm", "no-such-arm",
                                         *tiny_collect], "no-such-arm"),
        ("export into a regular file", ["export", "--policy", bc, "--out", str(regular)], str(regular)),
        ("dataset is a regular file", ["collect-demos", "--out", str(regular), *tiny_collect], str(regular)),
    ]


def bad_inputs_trial(work: Path) -> list[dict]:
    """Runs every probe of ``bad_inputs``: did it end in one line naming the culprit, exit 2, and leave no
    temporary folder?"""
    results = []
    for what, argv, culprit in bad_inputs(work):
        completed = subprocess.run(CLI + argv, capture_output=True, text=True, timeout=600)
        lines = completed.stderr.strip().splitlines()
        left = temporary_leftovers(work / "bad-inputs")
        one_line = completed.returncode == 2 and len(lines) == 1 and culprit in lines[0] and not left
        results.append({"probe": what, "argv": argv, "exit_code": completed.returncode,
                        "stderr_lines": len(lines), "stderr": lines[-3:], "leftovers": left,
                        "one_line_exit_2": one_line})
        print(results[-1], file=sys.stderr)
    return results


def _mount_tmpfs(folder: Path, size: str, remount: bool = False) -> str | None:
    """Mounts (or resizes) a tmpfs at ``folder``; None on success, else why not."""
    folder.mkdir(parents=True, exist_ok=True)
    options = f"remount,size={size}" if remount else f"size={size}"
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True,
                            text=True)
    return None if result.returncode == 0 else (result.stderr.strip() or f"mount exited {result.returncode}")


def _disk_full_case(work: Path, name: str, argv: list[str], small: int, again: list[str], check) -> dict:
    """Runs ``argv`` writing into a tmpfs of ``small`` bytes: one line and exit 1 expected; then the tmpfs is made
    large and ``again`` must finish, ``check()`` returning what is wrong."""
    mount = work / f"tmpfs-{name}"
    why = _mount_tmpfs(mount, str(small))
    if why:
        return {"case": name, "skipped": why, "ok": True}
    try:
        argv, again = ([a.replace("{TMPFS}", str(mount)) for a in args] for args in (argv, again))
        full = subprocess.run(CLI + argv, capture_output=True, text=True, timeout=900)
        lines = full.stderr.strip().splitlines()
        error_lines = [line for line in lines if line.startswith("robot-rl")]
        left = temporary_leftovers(mount)
        _mount_tmpfs(mount, "2g", remount=True)
        recovered = subprocess.run(CLI + again, capture_output=True, text=True, timeout=900)
        problems = [] if full.returncode == 1 else [f"full disk: exit {full.returncode}, not 1"]
        if len(error_lines) != 1 or "no space left on device writing" not in error_lines[0]:
            problems.append(f"full disk: not one line: {lines[-3:]}")
        if "Traceback" in full.stderr:
            problems.append("full disk: a traceback")
        problems += [f"temporary file left: {p}" for p in left]
        problems += [] if recovered.returncode == 0 else [f"recovery exited {recovered.returncode}"]
        problems += check(mount) if recovered.returncode == 0 else []
        return {"case": name, "tmpfs_bytes": small, "exit_code": full.returncode, "line": error_lines[:1],
                "recovery_exit_code": recovered.returncode, "problems": problems, "ok": not problems}
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True)


def disk_full_trial(work: Path) -> dict:
    """collect-demos and pretrain on a tmpfs too small for them (pretrain: room for its first checkpoint, not for
    the next), then the same command / ``--resume`` once the tmpfs is larger."""
    checkpoint = (work / "base" / "bc" / "checkpoints" / "last.pt").stat().st_size
    collect = collect_args("{TMPFS}/demos")
    pretrain = ["pretrain", "--data", str(work / "base" / "demos"), "--out", "{TMPFS}/bc", *TINY_BC]
    trials = [
        _disk_full_case(work, "collect-demos", collect, 2 * 2**20, collect,
                        lambda mount: dataset_problems(mount / "demos", DEMO_EPISODES)),
        _disk_full_case(work, "pretrain", pretrain, int(1.6 * checkpoint), ["pretrain", "--resume", "{TMPFS}/bc"],
                        lambda mount: [] if (mount / "bc" / "summary.json").is_file() else ["no summary.json"]),
    ]
    for trial in trials:
        print(trial, file=sys.stderr)
    return {"trials": [t for t in trials if "skipped" not in t], "skipped": [t for t in trials if "skipped" in t]}


if __name__ == "__main__":
    sys.exit(BENCHMARK.main(run, options))
