"""One training run's lifecycle, written once for behaviour cloning, DAgger, encoder pretraining and PPO.

A run class (``BCRun``, ``DAggerRun``, ``EncoderRun``, ``PPORun``) subclasses ``TrainingRun`` and supplies only
what is its own: ``build`` (data, models, loss, optimizer, logger), ``checkpoint`` / ``restore`` (what
``last.pt`` holds), its ``train_step`` (an epoch, a PPO iteration, a DAgger round) and what follows a step
(``end_step``: checks, logs, checkpoints at its cadence) and ``summary``. The rest is here, the same for every run:

- one loop (``train``) owns the steps: ``begin`` (what comes before the first step: views rendered, the starting
  policy checked), steps until the run's ``total`` (or ``until``), ``finish`` once the last is done; a stop
  request ends it after the current step (a step may return early, at a safe point); a loss or gradient that
  is not finite (``gradient_step``, the one optimizer step every run takes) ends it with the step's position and
  the checkpoint it keeps; checks fall due by one rule (``due``) and one rule says which check is the best
  (``improves``);

- resolve the run's compute context once (``robot_rl.compute``: device, precision, threads, workers), apply it to
  the process and record it in the summary;
- claim the run folder, or continue its unfinished run when the options are the same (``RunFolder.check_new``
  refuses any other run in one line);
- a new run writes ``last.pt`` (the run before its first step) and ``config.json``; a resumed one restores
  ``last.pt``;
- the loop runs under ``StopOnInterrupt``: the first Ctrl-C or SIGTERM lets the current step finish, then
  ``last.pt`` is written and the run returns unfinished (the CLI exits 130 or 143); a second one aborts;
- ``summary.json`` once the run has finished; the logs closed whatever happened;
- ``start`` / ``resume`` / ``ensure_trained``: new run, ``--resume``, and "the finished run, reused, resumed or
  started" (pipelines and benchmarks), each holding the folder's lock (``run_folder.run_to_completion``).

The folder's files are ``robot_rl.run_folder``'s, the stop request ``robot_rl.stop``'s (one per process: a run
nested in another, a DAgger round's BC, answers it and the outer loop sees it too).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import torch

from robot_rl import compute
from robot_rl.errors import TrainingDiverged
from robot_rl.run_folder import RunFolder, ensure_finished, run_to_completion
from robot_rl.run_logs import RunLogger
from robot_rl.stop import StopOnInterrupt


class TrainingRun:
    """One training run in a run folder (see the module docstring); subclasses fill in the hooks below."""

    command: ClassVar[str]  # the CLI command that runs it (messages, ``RunStopped``)
    config_cls: ClassVar[type]  # its options, as stored in config.json
    # False for a run that commits its progress elsewhere (DAgger: its aggregate and round folders): no last.pt.
    checkpointed: ClassVar[bool] = True

    device: torch.device  # the compute context's, set before build
    is_main = True  # the process that writes the folder (rank 0 when several learners run)
    logger: RunLogger | None = None

    def __init__(self, config: Any, resume: bool = False):
        self.config, self.folder = config, RunFolder(config.run_dir)
        self.run_dir = self.folder.path
        # Before anything is built: a folder holding another run is refused at once.
        resume = resume or self.folder.check_new(config)
        self.compute = compute.of_config(config)
        self.compute.apply()
        self.device = self.compute.torch_device
        self.stop = StopOnInterrupt()
        self.build(resume)
        if resume and self.checkpointed:
            self.restore(self.folder.load_last(map_location=self.device))
        elif not resume and self.is_main:  # every rank checked the folder above; one writes it
            self.folder.start(config, self.checkpoint() if self.checkpointed else None)

    # -- what a run supplies --------------------------------------------------------------------------------
    def build(self, resume: bool) -> None:
        """Creates data, models, loss, optimizer and logger; ``resume``: the weights will come from last.pt."""
        raise NotImplementedError

    def checkpoint(self) -> dict:
        """What ``last.pt`` holds: every state needed to continue exactly."""
        raise NotImplementedError

    def restore(self, state: dict) -> None:
        """Continues from ``state`` (a ``checkpoint()`` read back on the run's device)."""
        raise NotImplementedError

    steps_option: ClassVar[str]  # the option that counts the run's steps: "epochs", "iterations", "rounds"
    counter: ClassVar[str]  # the attribute that counts the steps done (restored on resume): "epoch", "iteration"

    @property
    def total(self) -> int:
        """Steps of the whole run (epochs, iterations, rounds); a run with a stop rule may end it sooner (read
        again after every step)."""
        return getattr(self.config, self.steps_option)

    @property
    def done(self) -> int:
        """Steps done so far."""
        return getattr(self, self.counter)

    def begin(self, progress: bool, last: int) -> bool:
        """What comes before the first step of this process (``last``: the step it will stop after); False when
        a stop request ended it, and no step is to run."""
        return True

    def train_step(self, progress: bool) -> dict | None:
        """One step (an epoch, an iteration, a round); its metrics, or None when a stop request ended it part-way
        (at a point it checkpointed or can redo). A ``TrainingDiverged`` it raises names what was not finite."""
        raise NotImplementedError

    def end_step(self, metrics: dict, progress: bool, last: int) -> None:
        """After a step: checks when due, logs, checkpoints at the run's cadence (and counts the step done, where
        ``train_step`` did not: an epoch ends here, a PPO iteration is counted once its update is applied)."""
        raise NotImplementedError

    def finish(self) -> None:
        """Once the last step of the run is done, before ``summary.json`` (e.g. the encoder's weights file)."""

    def end(self) -> None:
        """After the loop, however it ended (progress bars, iterators)."""

    def position(self) -> str | None:
        """Where a step that diverged was, for its message ("epoch 2, step 5"); None: the step's own message
        stands (a DAgger round's BC names its own position)."""
        return None

    def summary(self) -> dict:
        """The run's summary; ``finished`` says whether it is complete."""
        raise NotImplementedError

    def close(self) -> None:
        """Releases what the run holds beyond its own process (collection workers, process groups)."""

    # -- the loop -------------------------------------------------------------------------------------------
    def train(self, progress: bool, until: int | None) -> None:
        """The one training loop: ``begin``, then steps until ``total`` (or ``until`` steps done) unless a stop is
        requested (after the current step), then ``finish`` when the run is complete."""
        last = min(self.total, until or self.total)
        try:
            if not self.begin(progress, last):
                return
            while self.done < min(last, self.total) and not self.stop.requested:
                try:
                    metrics = self.train_step(progress)
                except TrainingDiverged as err:
                    if self.position() is None:
                        raise
                    raise TrainingDiverged(f"{self.position()}: {err}; update skipped, last checkpoint kept "
                                           f"({self.folder.checkpoint()})") from None
                if metrics is None:
                    break
                self.end_step(metrics, progress, last)
            if self.done == self.total:
                self.finish()
        finally:
            self.end()

    # -- the lifecycle --------------------------------------------------------------------------------------
    def save(self) -> None:
        """Writes ``last.pt`` (on the process that writes the folder)."""
        if self.is_main and self.checkpointed:
            self.folder.save(self.checkpoint())

    def run(self, progress: bool = True, until: int | None = None) -> dict:
        """Trains to the end (or to ``until``, to stop early and continue later); returns the summary, written to
        ``summary.json`` once the run has finished. A stop signal ends it after the current step with ``last.pt``
        written and the signal in the summary it returns. A finished folder's summary is returned as it is."""
        if self.folder.finished:
            return self.folder.summary()
        try:
            with self.stop:
                self.train(progress, until)
                if self.stop.requested:
                    self.save()
        finally:
            if self.logger is not None:
                self.logger.close()
        summary = {**self.summary(), "compute": self.compute.record()}
        if summary["finished"] and self.is_main:
            self.folder.finish(summary)
        return self.stop.stopped(summary)

    # -- the commands ---------------------------------------------------------------------------------------
    @classmethod
    def start(cls, config: Any, progress: bool = True) -> dict:
        """Starts a new run in ``config.run_dir`` (or continues its unfinished run of the same options: the same
        command again after a kill) and runs it to the end, holding the folder's lock; returns its summary."""
        return run_to_completion(cls, config, progress=progress)

    @classmethod
    def resume(cls, run_dir: str | Path, progress: bool = True) -> dict:
        """Continues the run in ``run_dir`` (wherever it now lives) from its last checkpoint, with its stored
        options; a finished run is left as it is."""
        return run_to_completion(cls, RunFolder(run_dir).config(cls.config_cls), resume=True, progress=progress)

    @classmethod
    def ensure_trained(cls, config: Any, progress: bool = True) -> dict:
        """The finished run of ``config.run_dir``: reused, resumed or started (for pipelines, benchmarks and
        scripts); raises ``RunStopped`` when a stop signal ended it unfinished."""
        return ensure_finished(config.run_dir, cls.command, lambda: cls.start(config, progress),
                               lambda path: cls.resume(path, progress))


def gradient_step(loss: torch.Tensor, optimizer: torch.optim.Optimizer, parameters, grad_clip: float,
                  what: str, terms: dict | None = None, check_finite=None) -> float:
    """The optimizer step every run takes: ``loss`` backward, gradients clipped to ``grad_clip``, one step;
    returns the gradient norm. A loss or norm that is not finite raises ``TrainingDiverged`` ("``what`` loss is
    nan (the ``terms`` that are not)") before anything is stepped. ``check_finite``: the test (default: every
    element finite; several learners agree on one)."""
    check_finite = check_finite or (lambda value: bool(torch.isfinite(value.detach()).all()))
    if not check_finite(loss):
        bad = [name for name, value in ({} if terms is None else terms).items()
               if not torch.isfinite(value.detach()).all()]
        raise TrainingDiverged(f"{what} loss is {loss.item()}" + (f" ({', '.join(bad)})" if bad else ""))
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(parameters, grad_clip)
    if not check_finite(norm):
        raise TrainingDiverged(f"{what} gradient norm is {norm.item()}")
    optimizer.step()
    return float(norm)


def due(count: int, every: int, end: int) -> bool:
    """Whether a periodic check falls due after step ``count``: every ``every`` steps (0: never) and at ``end``."""
    return count == end or bool(every and count % every == 0)


def improves(success_rate: float, best: float | None) -> bool:
    """The one best.pt rule: a held-out check improves on the best so far when its success is higher than every
    earlier check's (the first check always does, so a run's first policy checked is its first best)."""
    return best is None or success_rate > best
