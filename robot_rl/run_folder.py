"""What a training run folder is, for behaviour cloning and PPO alike.

::

    RUN_DIR/
      config.json            the resolved options (a resumed run continues with these)
      checkpoints/last.pt    written before the first step, every epoch (BC) / every few iterations (PPO), at
                             the end and on Ctrl-C: what --resume continues from
      checkpoints/best.pt    the policy of the best held-out closed-loop check so far
      logs/                  scalars (CSV always; TensorBoard, W&B or MLflow with --logger), through TorchRL's loggers
      demos/                 BC on a LeRobot dataset: the demos read into robot_rl's format (reused on resume)
      summary.json           written when the run has finished; a folder without it is unfinished

A folder given where a policy is expected (``evaluate``, ``export``, ``--policy`` of ``pretrain``, ``dagger`` and
``finetune``, the pipeline) means its ``last.pt``, the policy the run ended with, or with ``--checkpoint-kind best``
its ``best.pt`` (``policy_checkpoint``, the one rule). A new run refuses a folder that already holds another one;
the same command again on a folder whose run it started and did not finish continues that run (as ``--resume``
does). ``--resume DIR`` works on DIR wherever it now lives (a copied or moved folder: the ``run_dir`` stored in its
config is replaced by DIR, and nothing is written to the stored path); resuming a finished run changes nothing. The
first Ctrl-C or SIGTERM (what Slurm, Kubernetes, systemd and Ray send before they kill) lets the current step finish
and checkpoint (``last.pt``), then stops without ``summary.json``; a second one aborts at once. One process at a
time writes a run folder (``robot_rl.locks``). Every file is written to a temporary name and renamed, and a new run
writes ``last.pt`` before ``config.json``, so a killed run, at any moment, leaves a folder that is either unclaimed
or resumable.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import os
import pickle
import random
import shutil
import signal
import threading
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torchrl.record.loggers import CSVLogger, Logger
from tqdm import tqdm

from robot_rl.configs import CHECKPOINT_KINDS
from robot_rl.errors import Interrupted, NoSpaceLeft, RunStopped, UsageError
from robot_rl.io import atomic_path, check_space, remove_orphaned_temporaries, write_json
from robot_rl.locks import exclusive

CONFIG_FILE = "config.json"
IMPORTED_DEMOS = "demos"
CHECKPOINT_DIR = "checkpoints"
SUMMARY_FILE = "summary.json"
LOGS = "logs"
DAGGER_ROUNDS = "rounds"  # a DAgger run folder holds one BC run folder per round here (robot_rl.pretrain.dagger)


# -- checkpoints ------------------------------------------------------------------------------------------------
def rng_state() -> dict:
    """States of Python's, NumPy's and torch's (CPU and CUDA) global generators, as torch.save-able values."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {
        "python": random.getstate(),
        "numpy": (kind, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, cached),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    """Restores what ``rng_state`` captured."""
    random.setstate(state["python"])
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(path: str | Path, payload: dict) -> None:
    """Writes ``payload`` with torch.save to a temporary file, then renames it over ``path``. A disk without room
    for it raises NoSpaceLeft (``path`` unchanged)."""
    folder, needed = Path(path).parent, _tensor_bytes(payload)
    check_space(folder, needed)
    try:
        with atomic_path(path) as tmp:
            torch.save(payload, tmp)
    except RuntimeError:
        # torch's writer reports a failed write as a RuntimeError that names no cause; a disk that filled up
        # while it wrote has about the checkpoint's size free again once the temporary file is gone.
        if shutil.disk_usage(folder).free < needed + (needed >> 4) + 2**20:
            raise NoSpaceLeft(folder, needed) from None
        raise


def _tensor_bytes(value: Any) -> int:
    """The bytes of the tensors in a nested checkpoint payload (what torch.save writes, give or take headers)."""
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, Mapping):
        return sum(_tensor_bytes(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_tensor_bytes(v) for v in value)
    return 0


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict:
    """Loads a checkpoint (plain tensors and containers only: torch's ``weights_only``); a missing or unreadable
    file, one holding pickled objects or anything but a dict is a one-line UsageError naming it."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"{path}: no such checkpoint")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError:
        # torch's own message suggests weights_only=False, i.e. running the file's code: never here.
        raise UsageError(f"{path}: not a plain checkpoint (refusing pickled objects)") from None
    except (RuntimeError, EOFError, zipfile.BadZipFile, OSError) as err:
        first_line = (str(err).strip().splitlines() or [""])[0][:200]
        raise UsageError(f"{path}: unreadable checkpoint ({type(err).__name__}: {first_line})") from None
    if not isinstance(state, dict):
        raise UsageError(f"{path}: not a robot_rl checkpoint (it holds a {type(state).__name__}, not a dict)")
    return state


def policy_checkpoint(source: str | Path, kind: str = "last") -> Path:
    """The one rule for which checkpoint a run folder means, wherever a policy is read (``evaluate``, ``export``,
    ``pretrain``/``dagger``/``finetune --policy``, the pipeline): ``kind`` "last" (the default) is
    ``checkpoints/last.pt``, the policy the run ended with, which the project reports; "best" is ``best.pt``, the
    policy of its best held-out check (``last.pt`` while the run has none). A DAgger run folder means its last
    round's run folder; a file means itself, whatever ``kind``."""
    if kind not in CHECKPOINT_KINDS:
        raise UsageError(f"--checkpoint-kind must be one of {', '.join(CHECKPOINT_KINDS)}, got {kind!r}")
    path = Path(source)
    if path.is_dir() and not (path / CHECKPOINT_DIR).is_dir():
        rounds = sorted(p for p in (path / DAGGER_ROUNDS).glob("round-*") if (p / CHECKPOINT_DIR).is_dir())
        path = rounds[-1] if rounds else path
    if path.is_dir():
        folder = path / CHECKPOINT_DIR
        path = folder / "best.pt" if kind == "best" and (folder / "best.pt").is_file() else folder / "last.pt"
    return path


def describe_policy(source: str | Path, kind: str = "last") -> str:
    """One line saying which checkpoint ``source`` means under ``policy_checkpoint``'s rule, for commands to print."""
    path = policy_checkpoint(source, kind)
    if not Path(source).is_dir():
        return f"policy: {path}"
    if path.name == "best.pt":
        return f"policy: {path} (--checkpoint-kind best: the run's best held-out check)"
    why = "the run has no best.pt yet" if kind == "best" else "--checkpoint-kind best takes best.pt"
    return f"policy: {path} (the policy the run ended with; {why})"


def run_folder_of(checkpoint: str | Path) -> Path:
    """The run folder a checkpoint file belongs to (its parent, for a file outside ``checkpoints/``)."""
    checkpoint = Path(checkpoint)
    return checkpoint.parent.parent if checkpoint.parent.name == CHECKPOINT_DIR else checkpoint.parent


# -- config and lifecycle ---------------------------------------------------------------------------------------
def save_config(path: str | Path, config: Any) -> None:
    write_json(path, dataclasses.asdict(config))


def load_config(path: str | Path, config_cls: type) -> Any:
    """The config stored at ``path``; an option the file predates takes the value in the class's
    ``ABSENT_FROM_OLDER_RUNS`` (the behaviour of that time), else its default; a renamed one (the class's
    ``RENAMED``) is read under its new name."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"{path}: missing (not a run folder of this command?)")
    try:
        renamed = getattr(config_cls, "RENAMED", {})
        stored = {renamed.get(name, name): value for name, value in json.loads(path.read_text()).items()}
        return config_cls(**{**getattr(config_cls, "ABSENT_FROM_OLDER_RUNS", {}), **stored})
    except (json.JSONDecodeError, TypeError, ValueError) as err:
        raise UsageError(f"{path}: corrupt config ({err})") from None


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
        # The stored options as this version reads them (what an older run predates filled in as it ran).
        stored = json.loads(json.dumps(dataclasses.asdict(load_config(self.path / CONFIG_FILE, type(config)))))
        given = json.loads(json.dumps(dataclasses.asdict(config)))
        stored["run_dir"] = given.get("run_dir")  # the folder may have moved since it was stored
        if not self.finished and stored == given:
            tqdm.write(f"{self.path}: continuing its unfinished run (the same options)")
            return True
        raise UsageError(f"{self.path} already holds a {'finished' if self.finished else 'different'} run; "
                         f"use --resume {self.path} or another --out")

    def start(self, config: Any, checkpoint: dict) -> None:
        """Claims the folder for a new run: ``last.pt`` (the run before its first step), then ``config.json``,
        so a folder with a config always has a checkpoint to resume from."""
        if self.started:
            raise UsageError(f"{self.path} already holds a run; use --resume {self.path} or another --out")
        self.save(checkpoint)
        save_config(self.path / CONFIG_FILE, config)

    def config(self, config_cls: type) -> Any:
        """The stored config of the run (for --resume), with this folder as its ``run_dir``: a copied or moved
        folder continues where it is now, never where it was."""
        config = load_config(self.path / CONFIG_FILE, config_cls)
        return dataclasses.replace(config, run_dir=str(self.path)) if hasattr(config, "run_dir") else config

    def save(self, payload: dict, best: bool = False) -> None:
        """Writes ``last.pt`` (or ``best.pt``)."""
        save_checkpoint(self.checkpoint("best" if best else "last"), payload)

    def load_last(self, map_location: str | torch.device = "cpu") -> dict:
        """``last.pt``, for a resumed run; removes what writes killed in the folder left behind first."""
        remove_orphaned_temporaries(self.path)
        return load_checkpoint(self.checkpoint("last"), map_location=map_location)

    def finish(self, summary: dict) -> None:
        write_json(self.path / SUMMARY_FILE, summary)

    def summary(self) -> dict | None:
        return json.loads((self.path / SUMMARY_FILE).read_text()) if self.finished else None


def run_to_completion(run_cls: type, config: Any, resume: bool = False, progress: bool = True) -> dict:
    """Builds ``run_cls(config, resume)`` (a BC or PPO run), runs it and closes it, holding the run folder's lock
    throughout; returns its summary. Resuming a finished run returns its summary and changes nothing."""
    folder = RunFolder(config.run_dir)
    if folder.path.exists() and not folder.path.is_dir():
        raise UsageError(f"{folder.path}: not a folder (a run folder is a directory)")
    # One learner of several (torchrun) locks for all of them: rank 0, the one that writes the folder.
    lock = exclusive(folder.path, "run folder") if os.environ.get("RANK", "0") == "0" else contextlib.nullcontext()
    with lock:
        if resume and folder.finished:
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


STOPPED_BY = "stopped_by_signal"  # in the summary a stopped run returns (never in summary.json): the signal


class StopOnInterrupt:
    """Within ``with``: the first Ctrl-C or SIGTERM sets ``requested`` and ``signum`` (the loop finishes its step,
    checkpoints and stops), a second one raises ``Interrupted`` (a KeyboardInterrupt). Outside the main thread it
    does nothing (signals go to that thread)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, doing: str = "stopping after this step and saving a checkpoint"):
        self.requested = False
        self.signum: int | None = None
        self.doing = doing  # what the first signal is answered with
        self._previous: dict[int, Any] = {}

    def _handle(self, signum, frame) -> None:
        if self.requested:
            raise Interrupted(signum)
        self.requested, self.signum = True, signum
        tqdm.write(f"{signal.Signals(signum).name}: {self.doing} (Ctrl-C or SIGTERM again to abort)")

    def __enter__(self) -> StopOnInterrupt:
        if threading.current_thread() is threading.main_thread() and os.name == "posix":
            self._previous = {sig: signal.signal(sig, self._handle) for sig in self.SIGNALS}
        return self

    def __exit__(self, *exc) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous = {}

    def stopped(self, summary: dict) -> dict:
        """``summary`` with the signal that stopped the run, when one did (for the CLI's exit code)."""
        if self.signum is None or summary["finished"]:
            return summary
        return {**summary, STOPPED_BY: self.signum}


# -- logs -------------------------------------------------------------------------------------------------------
LOGGER_PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow"}


def _backend_logger(backend: str, run_dir: Path, name: str) -> Logger:
    """TorchRL's logger of ``backend``, writing under ``run_dir`` (W&B offline, MLflow in a local file store)."""
    package = LOGGER_PACKAGES[backend]
    if importlib.util.find_spec(package) is None:
        raise UsageError(f"--logger {backend}: the {package} package is not installed "
                         f"(pip install 'robot-rl[{backend}]')")
    from torchrl.record import loggers

    if backend == "tensorboard":
        return loggers.TensorboardLogger(exp_name=f"{name}-tb", log_dir=str(run_dir))
    if backend == "wandb":
        # Offline: the run is a folder under run_dir/wandb, uploaded later with `wandb sync` if wanted.
        return loggers.WandbLogger(exp_name=run_dir.name, offline=True, save_dir=str(run_dir), project="robot_rl",
                                   log_env_packages=False)
    # A local file store, as `mlflow ui --backend-store-uri <run_dir>/mlruns` reads (MLflow 3 wants an opt-in).
    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    return loggers.MLFlowLogger(exp_name=run_dir.name, tracking_uri=(run_dir / "mlruns").resolve().as_uri())


class RunLogger:
    """Logs namespaced scalars (``train/...``, ``eval/...``, ``reward/<term>``): always to CSV (the run folder's
    own record, which checks, benchmarks and resume read), and to ``backend`` when it is another one (TorchRL's
    TensorBoard, W&B or MLflow logger)."""

    def __init__(self, run_dir: str | Path, name: str = LOGS, backend: str = "csv"):
        self.log_dir = Path(run_dir)
        self.backend = backend
        self.loggers: list[Logger] = [CSVLogger(exp_name=name, log_dir=str(self.log_dir))]
        if backend != "csv":
            self.loggers.append(_backend_logger(backend, self.log_dir, name))
        self.csv_dir = self.log_dir / name / "scalars"

    def log(self, metrics: Mapping[str, float | None], step: int) -> None:
        for name, value in metrics.items():
            if value is None:
                continue
            for logger in self.loggers:
                logger.log_scalar(name, float(value), step=step)

    def close(self) -> None:
        """Ends the backend's run (W&B writes its summary, MLflow closes its run); the CSV needs nothing."""
        if self.backend == "wandb":
            self.loggers[1].experiment.finish()
        elif self.backend == "mlflow":
            import mlflow

            mlflow.end_run()
        elif self.backend == "tensorboard":
            self.loggers[1].experiment.close()  # its SummaryWriter

    def truncate_after(self, step: int) -> None:
        """Drops CSV rows logged after ``step`` (by a run killed after its last checkpoint), before resuming."""
        for csv in self.csv_dir.rglob("*.csv"):
            rows = [line for line in csv.read_text().splitlines() if line and int(line.split(",")[0]) <= step]
            csv.write_text("".join(f"{row}\n" for row in rows))


def read_scalar(run_dir: str | Path, name: str, logs: str = LOGS) -> list[tuple[int, float]]:
    """One scalar a ``RunLogger`` wrote in ``run_dir``, as (step, value) pairs in logging order."""
    path = Path(run_dir) / logs / "scalars" / f"{name}.csv"
    if not path.is_file():
        return []
    return [(int(step), float(value)) for step, value in (line.split(",") for line in path.read_text().split())]
