"""Errors that end a command with a one-line message and exit code 2 (bad input, not a bug)."""


class UsageError(Exception):
    """Bad user input: an option value, a missing or corrupt file. The message names the culprit."""


class RunStopped(Exception):
    """A training run stopped by Ctrl-C after checkpointing; ``--resume`` continues it (the CLI exits 130)."""

    def __init__(self, run_dir, command: str):
        super().__init__(f"{run_dir}: stopped, checkpoint saved")
        self.run_dir, self.command = run_dir, command
