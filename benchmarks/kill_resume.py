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

The reference runs (one uninterrupted run of each command) come first; they time the commands and make the
inputs of later ones (demos for pretrain, a BC run for finetune, evaluate and export). Writes
``benchmarks/results/kill_resume.json``.

    python benchmarks/kill_resume.py            # about 15 minutes on 2 CPU cores
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from timing import describe_machine

from robot_rl.io import write_json
from robot_rl.tables import markdown_table

RESULTS = Path(__file__).parent / "results"
CLI = [sys.executable, "-m", "robot_rl.cli"]
TINY_PPO = ["--total-frames", "256", "--frames-per-batch", "64", "--num-envs", "2", "--minibatch-size", "32",
            "--ppo-epochs", "2", "--eval-every", "2", "--eval-episodes", "2", "--checkpoint-every", "2",
            "--critic-hidden", "32"]
TINY_BC = ["--epochs", "2", "--batch-size", "16", "--steps-per-epoch", "12", "--eval-every", "1",
           "--eval-episodes", "2", "--eval-envs", "2", "--hidden", "32"]
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


def commands(work: Path, trial: str) -> dict[str, dict]:
    """Each command of a trial folder: its argv, what ``--resume`` would name, and how to check its output."""
    root = work / trial
    base = work / "base"
    return {
        "collect-demos": {"argv": CLI + ["collect-demos", "--out", str(root / "demos"), "--episodes",
                                         str(DEMO_EPISODES), "--difficulty", "easy", "--image-size", "48",
                                         "--num-envs", "2", "--episodes-per-commit", "4", "--seed", "7"]},
        "pretrain": {"argv": CLI + ["pretrain", "--data", str(base / "demos"), "--run-dir", str(root / "bc"),
                                    *TINY_BC], "run_dir": root / "bc"},
        "finetune (direct)": {"argv": CLI + ["finetune", "--init", str(base / "bc"), "--run-dir", str(root / "ppo"),
                                             *TINY_PPO], "run_dir": root / "ppo"},
        "finetune (process)": {"argv": CLI + ["finetune", "--init", str(base / "bc"), "--run-dir", str(root / "ppo"),
                                              *TINY_PPO, "--collector", "process", "--workers", "2"],
                               "run_dir": root / "ppo"},
        "evaluate": {"argv": CLI + ["evaluate", "--checkpoint", str(base / "bc"), "--out", str(root / "eval"),
                                    "--episodes", str(EVAL_EPISODES), "--num-envs", "2", "--videos", "1",
                                    "--failure-videos", "1", "--video-height", "64", "--video-quality", "fast"]},
        "export": {"argv": CLI + ["export", "--checkpoint", str(base / "bc"), "--out", str(root / "export"),
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


def check_output(name: str, root: Path) -> list[str]:
    """What is wrong with a trial's output after its recovery (empty when nothing is)."""
    import torch

    from robot_rl.policy import load_actor
    from robot_rl.pretrain.dataset import DemoDataset
    from robot_rl.run_folder import RunFolder, load_checkpoint

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
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
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


def run_killed(argv: list[str], delay: float, log: Path, sig: int = signal.SIGKILL, group: bool = False) -> dict:
    """Starts ``argv`` in its own process group, sends ``sig`` after ``delay`` seconds (to the main process, or
    the group); returns what happened."""
    with open(log, "ab") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                   preexec_fn=_terminal_sigint)
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


def ctrl_c_trial(work: Path, durations: dict, delay: float) -> dict:
    """Ctrl-C with the process collector: SIGINT to the whole group, as a terminal sends it (the child takes SIGINT
    as a foreground job does, even when this benchmark runs as a background job)."""
    name, trial = "finetune (process)", "ctrl-c"
    command = commands(work, trial)[name]
    stopped = run_killed(command["argv"], delay, work / f"{trial}.log", sig=signal.SIGINT, group=True)
    claimed = (command["run_dir"] / "config.json").exists()
    again = command["argv"][:4] + ["--resume", str(command["run_dir"])] if claimed else command["argv"]
    code, seconds = run_whole(again, work / f"{trial}.log")
    problems = ([] if code == 0 else [f"recovery exited {code}"]) + (check_output(name, work / trial) if code == 0
                                                                       else [])
    if not stopped["finished_before_the_signal"] and stopped["exit_code"] != 130:
        problems.append(f"Ctrl-C ended it with exit code {stopped['exit_code']}, not 130")
    problems += [f"outlived Ctrl-C: {m['command']}" for m in stopped["outlived"]]
    ctrl_c = {"trial": trial, "command": name, "sigint_after_s": delay, **stopped, "claimed": claimed,
              "exit_code_130": stopped["exit_code"] == 130, "recovery_exit_code": code,
              "recovery_s": round(seconds, 1), "problems": problems, "ok": not problems}
    print(ctrl_c, file=sys.stderr)
    return ctrl_c


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0, help="seed of the kill moments and of which recovery")
    parser.add_argument("--work", default="runs/kill-resume", help="scratch folder (emptied first)")
    parser.add_argument("--ctrl-c-only", action="store_true",
                        help="rerun only the Ctrl-C trial, at its recorded moment, on the kept scratch folder; "
                             "the kill trials of the results file are kept")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    work = Path(args.work)
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    os.environ.update(env)
    if args.ctrl_c_only:
        previous = json.loads((RESULTS / "kill_resume.json").read_text())
        shutil.rmtree(work / "ctrl-c", ignore_errors=True)
        ctrl_c = ctrl_c_trial(work, previous["reference_seconds"],
                              previous["ctrl_c_process_collector"]["sigint_after_s"])
        parts = {**previous.get("parts_wall_seconds", {"reference runs and kills": previous["wall_seconds"]}),
                 "ctrl-c rerun": round(time.perf_counter() - start)}
        return write_results(args.seed, previous["trials"], ctrl_c, previous["reference_seconds"], parts)
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
        again = command["argv"]
        if recovery == "--resume":  # python -m robot_rl.cli COMMAND --resume RUN_DIR
            again = command["argv"][:4] + ["--resume", str(command["run_dir"])]
        if killed["finished_before_the_signal"]:
            recovery, (code, seconds) = "none (it finished before the kill)", (killed["exit_code"], 0.0)
        else:
            code, seconds = run_whole(again, log)
        problems = [] if code == 0 else [f"recovery exited {code}"]
        if code == 0:
            problems += check_output(name, work / trial)
        left = temporary_leftovers(work / trial)
        problems += [f"temporary file left: {p}" for p in left]
        if after_kill.get("report") not in (None, "absent", "complete"):
            problems.append(f"report after the kill: {after_kill['report']}")
        trials.append({"trial": trial, "command": name, "kill_after_s": delay,
                       "reference_s": durations[name], **killed, "after_kill": after_kill, "recovery": recovery,
                       "recovery_exit_code": code, "recovery_s": round(seconds, 1), "problems": problems,
                       "ok": not problems})
        print(trials[-1], file=sys.stderr)

    delay = round(rng.uniform(0.3 * durations["finetune (process)"], 0.5 * durations["finetune (process)"]), 2)
    ctrl_c = ctrl_c_trial(work, durations, delay)
    return write_results(args.seed, trials, ctrl_c, durations, {"all": round(time.perf_counter() - start)})


def write_results(seed: int, trials: list[dict], ctrl_c: dict, durations: dict, parts: dict) -> int:
    rows = [{"trial": t["trial"], "command": t["command"], "kill after (s)": t["kill_after_s"],
             "of (s)": t["reference_s"], "claimed": t["after_kill"].get("claimed", ""),
             "children outlived": t["children_outlived_it"], "recovery": t["recovery"].split(" (")[0],
             "ok": t["ok"], "problems": "; ".join(t["problems"])} for t in trials]
    print(markdown_table(rows))
    result = {"seed": seed, "trials": trials, "ctrl_c_process_collector": ctrl_c,
              "all_ok": all(t["ok"] for t in trials) and ctrl_c["ok"], "reference_seconds": durations,
              "table": rows, "machine": describe_machine(), "wall_seconds": sum(parts.values()),
              "parts_wall_seconds": parts}
    write_json(RESULTS / "kill_resume.json", result)
    print(f"wrote {RESULTS / 'kill_resume.json'}; all ok: {result['all_ok']}")
    return 0 if result["all_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
