"""A recipe: stages run in order, each skipped when its output is done, resumed when a run of it was interrupted,
and timed across the invocations that ran it.

``robot-rl pipeline`` is one recipe; a benchmark chains its own from the same parts (``Recipe.stage`` for any
work, ``Recipe.collect`` for a demo dataset, ``Recipe.train`` for a training run folder, ``Recipe.evaluate`` for
an evaluation folder), so skip-if-done and the seconds a stage cost mean the same everywhere. The seconds live in
one JSON file beside the outputs (``STAGES_FILE`` in the pipeline's root, a benchmark's work folder): a stage
stopped by Ctrl-C or SIGTERM and finished by a later invocation costs the sum of its parts, and a stage finished
in an earlier invocation keeps the seconds measured then instead of the instant its skip takes.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from robot_rl.io import read_json_object, write_json
from robot_rl.run_folder import RunFolder, ensure_finished, stop_point

STAGES_FILE = "stages.json"


class Recipe:
    """The stages of one recipe and the record of their seconds (``record``: a JSON file, written after every part).

    A stage may run in several parts (stopped, then continued by the next invocation): each part's seconds and the
    machine's load average at its end are kept, and the stage's seconds are their sum. A part killed with kill -9
    leaves no record (its work is kept by its folder, its time is lost)."""

    def __init__(self, record: str | os.PathLike, log: Callable[[str], Any] = print, progress: bool = True):
        self.path, self.log, self.progress = Path(record), log, progress
        self.stages: dict[str, dict] = read_json_object(self.path) if self.path.is_file() else {}

    def seconds(self, name: str) -> float | None:
        """The stage's seconds over every part recorded (None if it never ran here)."""
        return self.stages.get(name, {}).get("seconds")

    def finished(self, name: str) -> bool:
        """Whether a part of the stage finished it (in this invocation or an earlier one)."""
        return bool(self.stages.get(name, {}).get("finished"))

    def stage(self, name: str, work: Callable[[], Any], done: bool = False) -> Any:
        """Runs ``work()`` as stage ``name`` and returns its result. A stage whose output was ``done`` before and
        whose finishing part is on record runs ``work()`` (reusing the output is cheap) without a new part."""
        if done and self.finished(name):
            return work()
        start, finished = time.perf_counter(), False
        try:
            result = work()
            finished = True
            return result
        finally:
            stage = self.stages.setdefault(name, {"seconds": 0.0, "parts": []})
            # Another load on the machine slows a stage: its load average is kept beside its seconds.
            stage["parts"].append({"seconds": round(time.perf_counter() - start, 1), "finished": finished,
                                   "load_average_1min": round(os.getloadavg()[0], 2),
                                   "ended": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
            stage["seconds"] = round(sum(part["seconds"] for part in stage["parts"]), 1)
            stage["finished"] = finished
            write_json(self.path, self.stages)

    def collect(self, name: str, folder: str | os.PathLike, collect: Callable[[], Any], done: bool,
                label: str | None = None) -> None:
        """A demo dataset as stage ``name``: skipped when ``done`` (``folder`` holds the demos asked for), else
        ``collect()`` (which continues a dataset it had begun); a stop asked meanwhile stops the recipe."""
        label = label or name
        self.log(f"{label}: {folder} already holds the demos, skipped" if done else f"{label} -> {folder}")

        def work() -> None:
            if not done:
                collect()
                stop_point(folder, "collect-demos")

        self.stage(name, work, done=done)

    def train(self, name: str, command: str, run_dir: str | os.PathLike, start: Callable[..., dict],
              resume: Callable[..., dict], make_config: Callable[[], Any], label: str | None = None) -> dict:
        """A training run folder as stage ``name``: skipped when finished, resumed when interrupted, started
        (``start(make_config())``) otherwise; returns the run's summary. A run stopped by Ctrl-C or SIGTERM stops
        the recipe (``RunStopped``) before anything uses it, and so does a stop asked during its last step."""
        folder = RunFolder(run_dir)
        label = label or name
        self.log(f"{label}: {folder.path} is finished, skipped" if folder.finished else
                 f"{label}: resuming {folder.path}" if folder.started else f"{label} -> {folder.path}")

        def work() -> dict:
            summary = ensure_finished(folder.path, command, lambda: start(make_config(), progress=self.progress),
                                      lambda path: resume(path, progress=self.progress))
            stop_point(folder.path, command)
            return summary

        return self.stage(name, work, done=folder.finished)

    def evaluate(self, name: str, report: str | os.PathLike, run: Callable[[], Any], label: str | None = None) -> dict:
        """An evaluation as stage ``name``: ``run()`` writes its ``report`` (an evaluation's report.json) unless it
        exists; returns the report."""
        report, label = Path(report), label or name
        if report.is_file():
            self.log(f"{label}: {report} exists, skipped")
            return self.stage(name, lambda: read_json_object(report), done=True)

        def work() -> dict:
            run()
            return read_json_object(report)

        return self.stage(name, work)
