"""A recipe: stages run in order, each skipped when its output is done, resumed when a run of it was interrupted,
and timed across the invocations that ran it.

``robot-rl pipeline`` is one recipe; a benchmark chains its own from the same parts (``Recipe.stage`` for any
work, ``Recipe.collect`` for a demo dataset, ``Recipe.train`` for a training run folder, ``Recipe.evaluate`` for
an evaluation folder), so skip-if-done and the seconds a stage cost mean the same everywhere. The seconds live in
one JSON file beside the outputs (``artefact_files.RECIPE_STAGES`` in a pipeline's root; a benchmark names its
own): a stage stopped by Ctrl-C or SIGTERM and finished by a later invocation costs the sum of its parts; a stage
finished in an earlier invocation keeps the seconds measured then; a stage whose output was there before any
record of it has no seconds (reusing it is not a measurement); a stage done again because its output was removed
starts a new record.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from robot_rl.io import read_json_object, write_json
from robot_rl.run_folder import RunFolder, stop_point

if TYPE_CHECKING:
    from robot_rl.training_run import TrainingRun


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

    def stage(self, name: str, work: Callable[[], Any]) -> Any:
        """Runs ``work()`` as stage ``name``, recording the part's seconds (also when it raises: a stopped part);
        returns its result. A caller whose output is already done does not call it (reusing is not a
        measurement)."""
        start, finished = time.perf_counter(), False
        try:
            result = work()
            finished = True
            return result
        finally:
            self._record(name, {"seconds": round(time.perf_counter() - start, 1), "finished": finished,
                                # Another load on the machine slows a stage: its load average is kept beside it.
                                "load_average_1min": round(os.getloadavg()[0], 2),
                                "ended": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})

    def _record(self, name: str, part: dict) -> None:
        """Adds ``part`` to stage ``name``'s record (a new record when the stage had finished: its output was
        removed and made again) and writes the file, re-read first so that the stages another process recorded
        meanwhile are kept."""
        if self.path.is_file():
            self.stages = {**read_json_object(self.path), name: self.stages.get(name, {})}
        stage = self.stages.get(name) or {}
        if stage.get("finished"):
            stage = {}
        parts = [*stage.get("parts", []), part]
        self.stages[name] = {"seconds": round(sum(p["seconds"] for p in parts), 1), "parts": parts,
                             "finished": part["finished"]}
        write_json(self.path, self.stages)

    def collect(self, name: str, folder: str | os.PathLike, collect: Callable[[], Any], done: bool,
                label: str | None = None) -> None:
        """A demo dataset as stage ``name``: skipped when ``done`` (``folder`` holds the demos asked for), else
        ``collect()`` (which continues a dataset it had begun); a stop asked meanwhile stops the recipe."""
        label = label or name
        self.log(f"{label}: {folder} already holds the demos, skipped" if done else f"{label} -> {folder}")
        if not done:
            self.stage(name, collect)
        stop_point(folder, "collect-demos")  # (after the record: the part that finished the stage says so)

    def train(self, name: str, run: type[TrainingRun], config: Any, label: str | None = None) -> dict:
        """The training run folder ``config.run_dir`` of ``run`` (a ``TrainingRun`` class) as stage ``name``:
        skipped when finished, resumed when interrupted, started from ``config`` otherwise; returns the run's
        summary. A run stopped by Ctrl-C or SIGTERM stops the recipe (``RunStopped``) before anything uses it, and
        so does a stop asked during its last step."""
        folder = RunFolder(config.run_dir)
        label = label or name
        self.log(f"{label}: {folder.path} is finished, skipped" if folder.finished else
                 f"{label}: resuming {folder.path}" if folder.started else f"{label} -> {folder.path}")
        summary = folder.summary() if folder.finished else self.stage(
            name, lambda: run.ensure_trained(config, progress=self.progress))
        stop_point(folder.path, run.command)  # (after the record: the part that finished the stage says so)
        return summary

    def evaluate(self, name: str, report: str | os.PathLike, run: Callable[[], Any], label: str | None = None) -> dict:
        """An evaluation as stage ``name``: ``run()`` writes its ``report`` (an evaluation's report.json) unless it
        exists; returns the report."""
        report, label = Path(report), label or name
        if report.is_file():
            self.log(f"{label}: {report} exists, skipped")
            return read_json_object(report)

        def work() -> dict:
            run()
            return read_json_object(report)

        return self.stage(name, work)
