"""A run's scalar logs: always CSV in the run folder (checks, benchmarks and resume read it), and TorchRL's
TensorBoard, W&B or MLflow logger besides with ``--logger``, each imported only when chosen."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from pathlib import Path

from torchrl.record.loggers import CSVLogger, Logger

from robot_rl.errors import UsageError

LOGS = "logs"
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
