"""One stop request per process: what Ctrl-C and SIGTERM mean to every loop of every command.

The first Ctrl-C or SIGTERM (what Slurm, Kubernetes, systemd and Ray send before they kill) is a *request*, kept
for the whole process: every loop (a training run's steps, DAgger's rounds and rollouts, a pipeline's stages)
checks it at its next safe point, commits what it has and returns; the command then exits 128 + the signal's
number with the line that continues it. A second signal aborts at once (``Interrupted``, a KeyboardInterrupt, so
``finally`` blocks still remove temporary files).

Why the request is kept for the process and not per loop: a run nested inside another (a DAgger round's BC, a
pipeline's stages) used to install its own handler, and a signal that reached the inner run during its last step
was answered ("stopping after this step") and then forgotten when the inner run returned finished: the outer run
carried on. Here the inner run answers it, finishes its step, and the outer loop sees the same request at its next
check. Outside any training loop (collection, evaluation, start-up) ``stop_signals_interrupt`` makes SIGTERM unwind
at once, as Ctrl-C does, and records the request too.

The request lasts until the process ends: a Python caller that catches a stopped run and goes on in the same
process (a notebook, a script running several runs) calls ``clear_stop_request()`` first, or every later loop stops
at its first safe point, which is what a scheduler's SIGTERM asks for.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator

from tqdm import tqdm

from robot_rl.errors import Interrupted

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

_request: dict[str, int | None] = {"signum": None}  # the process's stop request: the first signal's number


def stop_requested() -> int | None:
    """The signal that asked this process to stop (``signal.SIGINT`` or ``signal.SIGTERM``), or None."""
    return _request["signum"]


def clear_stop_request() -> None:
    """Forgets the request (a new command in the same process: the CLI's ``main``, tests)."""
    _request["signum"] = None


def _record(signum: int) -> None:
    if _request["signum"] is None:
        _request["signum"] = int(signum)


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread() and os.name == "posix"


class StopOnInterrupt:
    """Within ``with``: the first Ctrl-C or SIGTERM of the process sets the request (``requested``, ``signum``;
    the loop finishes its step, checkpoints and returns), a second one raises ``Interrupted``. A request made
    before ``with`` (by an outer loop, or while nothing listened) holds inside it too. Outside the main thread it
    installs nothing (signals go to that thread)."""

    def __init__(self, doing: str = "stopping after this step and saving a checkpoint"):
        self.doing = doing  # what the first signal is answered with

    @property
    def requested(self) -> bool:
        return stop_requested() is not None

    @property
    def signum(self) -> int | None:
        return stop_requested()

    def _handle(self, signum, frame) -> None:
        if self.requested:
            raise Interrupted(signum)
        _record(signum)
        tqdm.write(f"{signal.Signals(signum).name}: {self.doing} (Ctrl-C or SIGTERM again to abort)")

    def __enter__(self) -> StopOnInterrupt:
        self._installed = _handled(self._handle)
        self._installed.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._installed.__exit__(*exc)

    def stopped(self, summary: dict) -> dict:
        """``summary`` with the signal that stopped the run, when one did (for the CLI's exit code)."""
        if self.signum is None or summary["finished"]:
            return summary
        return {**summary, STOPPED_BY: self.signum}


STOPPED_BY = "stopped_by_signal"  # in the summary a stopped run returns (never in summary.json): the signal


@contextlib.contextmanager
def _handled(handler, signals: tuple[int, ...] = STOP_SIGNALS) -> Iterator[None]:
    """Within ``with``: ``handler`` takes ``signals`` (in the main thread; elsewhere nothing is installed, as
    signals go to that thread), the previous handlers come back after."""
    if not _in_main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def stop_signals_interrupt() -> contextlib.AbstractContextManager:
    """Within ``with`` (a whole command): SIGTERM raises ``Interrupted`` as Ctrl-C raises KeyboardInterrupt, so a
    command stopped outside a training loop unwinds at once (temporary files removed, workers shut down), and
    records the request. ``StopOnInterrupt`` takes both signals while a training loop runs."""
    def interrupt(signum, frame):
        _record(signum)
        raise Interrupted(signum)

    # Ctrl-C keeps Python's own handler (a KeyboardInterrupt): a background job that ignores SIGINT must go on
    # ignoring it.
    return _handled(interrupt, (signal.SIGTERM,))


def stop_deferred() -> contextlib.AbstractContextManager:
    """Within ``with``: Ctrl-C and SIGTERM are recorded, not raised; the caller acts on ``stop_requested()`` after.
    For a command's start-up imports: an import interrupted half way leaves a broken module (MuJoCo's raised
    ImportError) and marks the interpreter to die of SIGINT at exit whatever the command returns."""
    return _handled(lambda signum, frame: _record(signum))
