"""What a training run folder is, for behaviour cloning and PPO alike.

::

    RUN_DIR/
      config.json            the resolved options (a resumed run continues with these)
      checkpoints/last.pt    written before the first step, every epoch (BC) / every few iterations (PPO), at
                             the end and on Ctrl-C: what --resume continues from
      checkpoints/best.pt    the policy of the best held-out closed-loop check so far (BC: the same file as
                             last.pt, a hard link, while the latest check is the best)
      logs/                  scalars (CSV always; TensorBoard, W&B or MLflow with --logger), through TorchRL's loggers
      demos/                 BC on a LeRobot dataset: the demos read into robot_rl's format (reused on resume)
      summary.json           written when the run has finished; a folder without it is unfinished

A folder given where a policy is expected (``evaluate``, ``export``, ``--policy`` of ``pretrain``, ``dagger`` and
``finetune``, the pipeline) means its ``last.pt``, the policy the run ended with, or with ``--checkpoint-kind best``
its ``best.pt`` (``policy_checkpoint``, the one rule). A new run refuses a folder that already holds another one;
the same command again on a folder whose run it started and did not finish continues that run (as ``--resume``
does), and on a finished one changes nothing. ``--resume DIR`` works on DIR wherever it now lives (a copied or moved
folder: the ``run_dir`` stored in its config is replaced by DIR, and nothing is written to the stored path);
resuming a finished run changes nothing. The first Ctrl-C or SIGTERM lets the current step finish and checkpoint
(``last.pt``), then stops without ``summary.json``; a second one aborts at once (``robot_rl.stop``: one request per
process, which a nested run never drops). One process at a time writes a run folder (``robot_rl.locks``). Every file
is written to a temporary name and renamed, and a new run writes ``last.pt`` before ``config.json``, so a killed
run, at any moment, leaves a folder that is either unclaimed or resumable.

This module is the folder's side of a run's lifecycle (claim, continue, resume, the stop signal, finish); the
lifecycle itself, written once for every kind of run, is ``robot_rl.training_run``. The files are read and written
by ``robot_rl.checkpoints``, the logs by ``robot_rl.run_logs``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from robot_rl.artefact_files import IMPORTED_DEMOS  # noqa: F401 - where stages look for it
from robot_rl.artefact_files import RUN_SUMMARY as SUMMARY_FILE
from robot_rl.checkpoints import (
    CHECKPOINT_DIR,
    CONFIG_FILE,
    link_checkpoint,
    load_checkpoint,
    load_config,
    save_checkpoint,
    save_config,
)
from robot_rl.errors import RunStopped, UsageError
from robot_rl.io import remove_orphaned_temporaries, write_json
from robot_rl.locks import exclusive
from robot_rl.stop import STOPPED_BY, StopOnInterrupt, stop_requested


# -- lifecycle ----------------------------------------------------------------------------------------------
class RunFolder:
    """Paths and files of one run folder (see the module docstring)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def checkpoint(self, name: str = "last") -> Path:
        return self.path / CHECKPOINT_DIR / f"{name}.pt"

    @property
    def started(self) -> bool:
        return (self.path / CONFIG_FILE).is_file()

    @property
    def finished(self) -> bool:
        return (self.path / SUMMARY_FILE).is_file()

    def check_new(self, config: Any) -> bool:
        """Whether a new run of ``config`` here continues the folder's unfinished run instead (the same options:
        the same command run again after a kill); refuses a folder that holds any other run. Call before building
        anything for a new run."""
        if not self.started:
            return False
        if not self.finished and self.holds(config):
            tqdm.write(f"{self.path}: continuing its unfinished run (the same options)")
            return True
        raise UsageError(f"{self.path} already holds a {'finished' if self.finished else 'different'} run; "
                         f"use --resume {self.path} or another --out")

    def holds(self, config: Any) -> bool:
        """Whether the folder's run has the options of ``config`` (wherever the folder now lives)."""
        # The stored options as this version reads them (what an older run predates filled in as it ran).
        stored = json.loads(json.dumps(dataclasses.asdict(load_config(self.path / CONFIG_FILE, type(config)))))
        given = json.loads(json.dumps(dataclasses.asdict(config)))
        stored["run_dir"] = given.get("run_dir")  # the folder may have moved since it was stored
        return stored == given

    def start(self, config: Any, checkpoint: dict | None) -> None:
        """Claims the folder for a new run: ``last.pt`` (the run before its first step), then ``config.json``,
        so a folder with a config always has a checkpoint to resume from. ``checkpoint`` None: a run that
        commits its progress in files of its own (DAgger), with no ``last.pt``."""
        if self.started:
            raise UsageError(f"{self.path} already holds a run; use --resume {self.path} or another --out")
        if checkpoint is not None:
            self.save(checkpoint)
        save_config(self.path / CONFIG_FILE, config)

    def config(self, config_cls: type) -> Any:
        """The stored config of the run (for --resume), with this folder as its ``run_dir``: a copied or moved
        folder continues where it is now, never where it was."""
        config = load_config(self.path / CONFIG_FILE, config_cls)
        return dataclasses.replace(config, run_dir=str(self.path)) if hasattr(config, "run_dir") else config

    def save(self, payload: dict, best: bool = False, last_too: bool = False) -> None:
        """Writes ``last.pt`` (or ``best.pt``). ``best`` and ``last_too``: ``last.pt`` then becomes a second name
        of the new ``best.pt`` (one file on disk instead of two copies of the same weights); a kill between the
        two leaves ``last.pt`` one step behind, which a resumed run redoes."""
        save_checkpoint(self.checkpoint("best" if best else "last"), payload)
        if best and last_too:
            link_checkpoint(self.checkpoint("best"), self.checkpoint("last"))

    def load_last(self, map_location: str | torch.device = "cpu") -> dict:
        """``last.pt``, for a resumed run; removes what writes killed in the folder left behind first."""
        remove_orphaned_temporaries(self.path)
        return load_checkpoint(self.checkpoint("last"), map_location=map_location)

    def finish(self, summary: dict) -> None:
        write_json(self.path / SUMMARY_FILE, summary)

    def summary(self) -> dict | None:
        return json.loads((self.path / SUMMARY_FILE).read_text()) if self.finished else None


def run_to_completion(run_cls: type, config: Any, resume: bool = False, progress: bool = True) -> dict:
    """Builds ``run_cls(config, resume)`` (a ``TrainingRun``), runs it and closes it, holding the run folder's lock
    throughout; returns its summary. Resuming a finished run returns its summary and changes nothing."""
    folder = RunFolder(config.run_dir)
    if folder.path.exists() and not folder.path.is_dir():
        raise UsageError(f"{folder.path}: not a folder (a run folder is a directory)")
    # One learner of several (torchrun) locks for all of them: rank 0, the one that writes the folder.
    lock = exclusive(folder.path, "run folder") if os.environ.get("RANK", "0") == "0" else contextlib.nullcontext()
    with lock:
        # The same command again after its run finished (a job requeued after a late SIGTERM): nothing to do.
        if folder.finished and (resume or folder.holds(config)):
            tqdm.write(f"{folder.path}: the run has finished; nothing to resume (summary.json unchanged)")
            return folder.summary()
        run = run_cls(config, resume=resume)
        try:
            return run.run(progress)
        finally:
            close = getattr(run, "close", None)
            if close is not None:
                # A stop signal now (the run is over) lets the workers' shutdown finish; a second one aborts it.
                with StopOnInterrupt("finishing the shutdown of the collection workers"):
                    close()


def ensure_finished(run_dir: str | Path, command: str, start: Callable[[], dict],
                    resume: Callable[[Path], dict]) -> dict:
    """The summary of the run in ``run_dir``: read when it has finished, else the run is resumed (a started
    folder) or started (``start()``). Raises RunStopped when Ctrl-C or SIGTERM stopped it (for pipelines and
    benchmarks, which must not go on with an unfinished run)."""
    folder = RunFolder(run_dir)
    if folder.finished:
        return folder.summary()
    summary = resume(folder.path) if folder.started else start()
    if not summary.get("finished"):
        raise RunStopped(folder.path, command, summary.get(STOPPED_BY, signal.SIGINT))
    return summary


def stop_point(path: str | Path, command: str) -> None:
    """A safe point between two pieces of work (a pipeline's stages, a benchmark's arms): raises ``RunStopped``
    when Ctrl-C or SIGTERM asked this process to stop, even if the piece it reached finished first."""
    signum = stop_requested()
    if signum is not None:
        raise RunStopped(path, command, signum)


