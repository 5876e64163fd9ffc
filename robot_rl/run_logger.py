"""Metrics of a run through TorchRL's loggers: CSV always, TensorBoard when it is installed."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path

from torchrl.record.loggers import CSVLogger, Logger


class RunLogger:
    """Logs namespaced scalars (``train/...``, ``eval/...``, ``reward/<term>``) to every available backend."""

    def __init__(self, run_dir: str | Path, name: str = "logs"):
        self.log_dir = Path(run_dir)
        self.loggers: list[Logger] = [CSVLogger(exp_name=name, log_dir=str(self.log_dir))]
        if importlib.util.find_spec("tensorboard") is not None:
            from torchrl.record.loggers import TensorboardLogger

            self.loggers.append(TensorboardLogger(exp_name=f"{name}-tb", log_dir=str(self.log_dir)))
        self.csv_dir = self.log_dir / name / "scalars"

    def log(self, metrics: Mapping[str, float | None], step: int) -> None:
        for name, value in metrics.items():
            if value is None:
                continue
            for logger in self.loggers:
                logger.log_scalar(name, float(value), step=step)

    def truncate_after(self, step: int) -> None:
        """Drops CSV rows logged after ``step`` (by a run killed after its last checkpoint), before resuming."""
        for csv in self.csv_dir.rglob("*.csv"):
            rows = [line for line in csv.read_text().splitlines() if line and int(line.split(",")[0]) <= step]
            csv.write_text("".join(f"{row}\n" for row in rows))


def read_scalar(run_dir: str | Path, name: str, logs: str = "logs") -> list[tuple[int, float]]:
    """One scalar a ``RunLogger`` wrote in ``run_dir``, as (step, value) pairs in logging order."""
    path = Path(run_dir) / logs / "scalars" / f"{name}.csv"
    if not path.is_file():
        return []
    return [(int(step), float(value)) for step, value in (line.split(",") for line in path.read_text().split())]
