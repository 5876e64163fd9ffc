"""benchmarks/quick_demo.py ``--against REF``: both sides run the asked task's ``make demo`` and the results go to
a file of their own; ``--repeats`` below 1 is refused; without ``--against``, ``--repeats`` demos in one clone, the
median run speaking for them and the targets holding only for every run. No clone and no demo runs:
``clone_at``, ``timed_demo`` and the set-up's ``make`` are stand-ins."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import harness  # noqa: E402  (benchmarks/ is not a package: its scripts import each other by name)
import quick_demo  # noqa: E402
from protocols import FINAL_METRICS  # noqa: E402

from robot_rl.envs.defaults import DEFAULT_TASK  # noqa: E402
from robot_rl.pipeline import RESULT_FILE  # noqa: E402

OTHER_TASK = "lead-inspect"
METRICS = {key: 0 for key in FINAL_METRICS}


def _pipeline_result() -> dict:
    return {"seconds": {"collect": 1.0, "bc": 2.0}, "after_bc": METRICS, "metrics": METRICS}


@pytest.fixture
def stand_ins(tmp_path, monkeypatch):
    """Results under tmp_path; clones are empty folders, the set-up's make does nothing, each demo takes 10 s
    (HEAD) or 12 s (REF). Returns the demos' calls, (side, root, task)."""
    monkeypatch.setattr(harness, "RESULTS_DIR", tmp_path / "results")
    monkeypatch.setattr(quick_demo, "RESULTS_DIR", tmp_path / "results")

    def clone_at(ref, folder):
        folder.mkdir(parents=True)
        return "a" * 40 if ref == "HEAD" else "b" * 40

    demos = []

    def timed_demo(clone, root, log, task):
        demos.append((clone.name, root, task))
        return {"wall_s": 10.0 if clone.name == "head" else 12.0, "result": _pipeline_result()}

    set_up = SimpleNamespace(run=lambda *args, **kwargs: None, STDOUT=subprocess.STDOUT,
                             CalledProcessError=subprocess.CalledProcessError)
    monkeypatch.setattr(quick_demo, "clone_at", clone_at)
    monkeypatch.setattr(quick_demo, "timed_demo", timed_demo)
    monkeypatch.setattr(quick_demo, "subprocess", set_up)
    return demos


def _main(argv: list[str]) -> int:
    return quick_demo.BENCHMARK.main(quick_demo.run, quick_demo.options, argv=argv)


@pytest.mark.parametrize(("task", "file"), [(DEFAULT_TASK, "quick_demo_against.json"),
                                            (OTHER_TASK, f"quick_demo_against_{OTHER_TASK}.json")])
def test_against_runs_the_tasks_demo_on_both_sides_and_writes_its_own_file(stand_ins, tmp_path, task, file):
    assert _main(["--against", "HEAD~1", "--task", task, "--repeats", "2"]) == 0
    _, root = quick_demo.for_options(quick_demo.PipelineConfig(task=task))
    assert stand_ins == [("head", root, task), ("against", root, task), ("against", root, task),
                         ("head", root, task)]  # alternated, each from the task's pipeline root
    written = json.loads((tmp_path / "results" / file).read_text())
    assert written["metrics"]["task"] == task
    assert written["metrics"]["median_s"] == {"head": 10.0, "against": 12.0}
    assert written["targets"]["met"] is True
    written_files = sorted(p.name for p in (tmp_path / "results").iterdir() if not p.name.startswith("."))
    assert written_files == [file]  # not quick_demo.json (the dot-files are the results files' locks)


def test_against_with_out_writes_there(stand_ins, tmp_path):
    out = tmp_path / "mine.json"
    assert _main(["--against", "HEAD~1", "--task", OTHER_TASK, "--repeats", "1", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["metrics"]["task"] == OTHER_TASK


@pytest.mark.parametrize("repeats", ["0", "-2", "two"])
def test_repeats_below_one_is_refused_in_one_line_with_exit_2(stand_ins, capsys, repeats):
    with pytest.raises(SystemExit) as stopped:
        _main(["--against", "HEAD~1", "--repeats", repeats])
    assert stopped.value.code == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(errors) == 1 and "--repeats" in errors[0]
    assert stand_ins == []


def test_timed_demo_passes_the_task_to_make_and_names_a_missing_result(tmp_path, monkeypatch):
    commands = []

    def make(command, cwd, **kwargs):
        commands.append(command)
        if "TASK=lead-inspect" in command:  # a Makefile that takes TASK writes the task's pipeline root
            (cwd / "runs/pipeline-quick-lead-inspect").mkdir(parents=True)
            (cwd / "runs/pipeline-quick-lead-inspect" / RESULT_FILE).write_text(json.dumps(_pipeline_result()))

    monkeypatch.setattr(quick_demo, "subprocess", SimpleNamespace(run=make, STDOUT=subprocess.STDOUT))
    monkeypatch.setattr(quick_demo, "clean_env", dict)
    demo = quick_demo.timed_demo(tmp_path, "runs/pipeline-quick-lead-inspect", tmp_path / "log", OTHER_TASK)
    assert commands == [["make", "demo", f"TASK={OTHER_TASK}"]] and demo["result"] == _pipeline_result()
    with pytest.raises(quick_demo.NoResult, match=f"make demo in {tmp_path} wrote no runs/pipeline-quick/"):
        quick_demo.timed_demo(tmp_path, "runs/pipeline-quick", tmp_path / "log", DEFAULT_TASK)
    assert commands[-1] == ["make", "demo"]


def test_repeats_in_one_clone_keep_every_run_and_the_median_speaks_for_them(stand_ins, tmp_path, monkeypatch):
    seconds, successes = iter([700.0, 500.0, 600.0]), iter([0.9, 0.78, 0.96])

    def timed_demo(clone, root, log, task):
        stand_ins.append((clone.name, root, task))
        metrics = {**METRICS, "success_rate": next(successes), "episodes": 50}
        return {"wall_s": 1.0, "result": {"seconds": {"finetune": next(seconds)}, "after_bc": METRICS,
                                          "metrics": metrics}}

    monkeypatch.setattr(quick_demo, "timed_demo", timed_demo)
    monkeypatch.setattr(quick_demo, "set_up", lambda clone, log=None: 30.0)
    monkeypatch.setattr(quick_demo, "result_table", lambda result: "")
    assert _main(["--repeats", "3"]) == 0
    assert len(stand_ins) == 3
    written = json.loads((tmp_path / "results" / "quick_demo.json").read_text())
    assert [run["pipeline_s"] for run in written["metrics"]["runs"]] == [700.0, 500.0, 600.0]
    assert written["metrics"]["after_ppo"]["success_rate"] == 0.96  # the 600 s run: the median
    assert written["parts"]["pipeline"] == 600.0 and written["parts"]["setup"] == 30.0
    # 10 minutes met by the median, but one run under 80%: neither target holds.
    assert written["targets"]["met"] is False
    assert written["targets"]["bf16_goal_met"] in (False, None)
