"""Errors that end a command with a one-line message: exit code 2 for bad input, 1 for a run that stopped on a
failure it cannot go on from, 130 for Ctrl-C (none of them a bug)."""


class UsageError(Exception):
    """Bad user input: an option value, a missing or corrupt file. The message names the culprit."""


class RunStopped(Exception):
    """A training run stopped by Ctrl-C after checkpointing; ``--resume`` continues it (the CLI exits 130)."""

    def __init__(self, run_dir, command: str):
        super().__init__(f"{run_dir}: stopped, checkpoint saved")
        self.run_dir, self.command = run_dir, command


class TrainingStopped(RuntimeError):
    """A training run stopped on a failure (the message says which) with its last checkpoint intact and named in
    the message; the CLI exits 1. ``--resume`` continues from that checkpoint once the cause is fixed."""


class TrainingDiverged(TrainingStopped):
    """A loss or gradient became NaN or inf; the update was not applied."""


class CollectionFailed(TrainingStopped):
    """A collection worker died (killed, crashed)."""
