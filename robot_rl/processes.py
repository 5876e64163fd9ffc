"""Worker processes that end with the process that started them, and only then.

Stop signals are for the main process: a terminal's Ctrl-C reaches the whole process group, and SIGTERM from
Slurm, systemd or ``kill -- -PGID`` reaches every process of a job, but a worker that died of either would fail
the step the main process was asked to finish and checkpoint (``workers_ignore_stop_signals``).

Python's multiprocessing reaps its children on a clean exit only. A parent killed with -9 (the out-of-memory
killer, a cluster scheduler, ``kill -9``) left collect-demos' and the process collector's env workers running: a
reliability probe (``benchmarks/results/kill_resume.json``) found them still stepping 5 s after the kill. No library
here sets the flag that fixes it, so this module does, for every process ``robot_rl`` is imported in that
multiprocessing started.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Iterator

_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent() -> None:
    """In a process that multiprocessing started (a ``ParallelEnv`` or collector worker, which imports robot_rl
    to unpickle its env factory): ask Linux to SIGKILL it when its parent dies, and end it now if the parent is
    already gone. Nothing happens in a main process or off Linux. (Linux sends the signal when the thread that
    started the worker ends: every worker here is started from a main thread.)"""
    parent = multiprocessing.parent_process()
    # parent_process() is set only once a child runs its target; a spawned child imports robot_rl before that
    # (its parent's main module, its pickled target), when only its interpreter's command line tells.
    spawned = sys.orig_argv[-1:] == ["--multiprocessing-fork"]
    if (parent is None and not spawned) or not sys.platform.startswith("linux"):
        return
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() == 1 or (parent is not None and os.getppid() != parent.pid):  # the parent is already gone
        os._exit(1)


STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}


@contextlib.contextmanager
def workers_ignore_stop_signals() -> Iterator[None]:
    """Worker processes started inside never see Ctrl-C or SIGTERM: they are blocked while the workers start, and
    a blocked signal stays blocked across fork and exec, so theirs stays pending for good. This process gets a
    signal sent meanwhile when the block ends (ignoring the signals instead lost a Ctrl-C pressed then). The main
    process stops its workers itself (a collector's shutdown, which ends with SIGKILL for a worker that does not
    close), and a worker whose parent is killed dies with it (``die_with_parent``)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # multiprocessing starts its resource tracker on first need with these very signals blocked, then *unblocks*
    # them, which would end the block here before the workers start: so it starts first.
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
