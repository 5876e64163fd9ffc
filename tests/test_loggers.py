"""--logger backends: each writes a scalar through TorchRL's logger and it is read back from the run folder."""

from __future__ import annotations

import time

import pytest

from robot_rl.errors import UsageError
from robot_rl.run_logs import RunLogger, read_scalar


def _log_one(tmp_path, backend: str):
    run = tmp_path / "run"
    run.mkdir()
    logger = RunLogger(run, backend=backend)
    logger.log({"eval/success_rate": 0.75, "train/skipped": None}, step=3)
    logger.close()
    assert read_scalar(run, "eval/success_rate") == [(3, 0.75)]  # the CSV record is always there
    return run


def test_tensorboard_events_hold_the_scalar(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = _log_one(tmp_path, "tensorboard")
    events = EventAccumulator(str(run / "logs-tb"))
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars("eval/success_rate")] == [(3, 0.75)]


def test_mlflow_file_store_holds_the_scalar(tmp_path):
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    run = _log_one(tmp_path, "mlflow")
    client = MlflowClient((run / "mlruns").resolve().as_uri())
    (experiment,) = [e for e in client.search_experiments() if e.name == "run"]
    (mlflow_run,) = client.search_runs([experiment.experiment_id])
    history = client.get_metric_history(mlflow_run.info.run_id, "eval/success_rate")
    assert [(m.step, m.value) for m in history] == [(3, 0.75)]


def test_wandb_offline_run_holds_the_scalar(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run = _log_one(tmp_path, "wandb")
    (record,) = run.glob("wandb/offline-run-*/run-*.wandb")  # wandb 0.31 has no Python reader of its log:
    # the history record carries the key and the value's JSON as text; wandb's service process may still be writing
    # it when the run has finished, so the file is read again for a bounded while.
    deadline = time.monotonic() + 30
    data = record.read_bytes()
    while not (b"eval/success_rate" in data and b"0.75" in data) and time.monotonic() < deadline:
        time.sleep(0.2)
        data = record.read_bytes()
    assert b"eval/success_rate" in data and b"0.75" in data


def test_a_backend_that_is_not_installed_is_a_usage_error(tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    with pytest.raises(UsageError, match=r"--logger wandb: the wandb package is not installed"):
        RunLogger(tmp_path, backend="wandb")
