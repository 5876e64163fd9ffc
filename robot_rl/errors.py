"""Errors that end a command with a one-line message: exit code 2 for bad input, 1 for a run that stopped on a
failure it cannot go on from (a full disk included), 128 + the signal's number for Ctrl-C (130) and SIGTERM (143)
(none of them a bug)."""

import errno
import signal

# Defined with the envs, which raise it too (an unknown task or arm) and import nothing of the rest of robot_rl;
# re-exported here, so ``except UsageError`` catches the envs' errors as well.
from robot_rl.envs.errors import UsageError

__all__ = ["CollectionFailed", "Interrupted", "NoSpaceLeft", "RunStopped", "TrainingDiverged", "TrainingStopped",
           "UsageError"]


class RunStopped(Exception):
    """A run stopped by Ctrl-C or SIGTERM after committing its work (``kept`` says what: a training run's
    checkpoint, a collection's episodes); ``--resume`` or the same command continues it (the CLI exits 128 +
    ``signum``: 130 for Ctrl-C, 143 for SIGTERM)."""

    def __init__(self, run_dir, command: str, signum: int = signal.SIGINT, kept: str = "checkpoint saved"):
        super().__init__(f"{run_dir}: stopped, {kept}")
        self.run_dir, self.command, self.signum = run_dir, command, int(signum)


class Interrupted(KeyboardInterrupt):
    """A stop signal that ends a command at once (SIGTERM outside a training loop, a second Ctrl-C or SIGTERM
    inside one); ``finally`` blocks still run, so temporary files are removed. The CLI exits 128 + ``signum``."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)


class NoSpaceLeft(OSError):
    """A write that the disk (or the user's quota) has no room for; nothing was half-written. ``needed`` is the
    number of bytes the write asked for, when known. The same command continues once space is free."""

    def __init__(self, folder, needed: int | None = None, errno_value: int | None = None):
        super().__init__(errno_value or errno.ENOSPC, "No space left on device", str(folder))
        self.folder, self.needed = folder, needed


class TrainingStopped(RuntimeError):
    """A training run stopped on a failure (the message says which) with its last checkpoint intact and named in
    the message; the CLI exits 1. ``--resume`` continues from that checkpoint once the cause is fixed."""


class TrainingDiverged(TrainingStopped):
    """A loss or gradient became NaN or inf; the update was not applied."""


class CollectionFailed(TrainingStopped):
    """A collection worker died (killed, crashed)."""
