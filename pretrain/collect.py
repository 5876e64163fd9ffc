"""``robot-rl collect-demos``: run the scripted expert in several envs and write whole episodes to a dataset.

A TorchRL ``Collector`` yields complete trajectories (``trajs_per_batch``), which are written and committed a
batch at a time: a killed collection keeps what it committed, and running the same command again resumes the
run (same seed) with the episodes still missing, or does nothing when the run is complete. One collection per
dataset at a time: a second one is refused while the first holds the dataset's lock (``robot_rl.locks``). A run
that fails before its first commit leaves no temporary folder behind.

What is written always agrees with ``meta.json``: a resumed run keeps the options it was started with (its target
and pose noise), and the demos appended to a dataset share its task, arm, difficulty, image size, randomization and
masks. An option the user did not give takes the stored value; one given with another value is refused in one line
(``robot_rl.options.conflicting_options``, the rule ``--resume`` follows too). The disk space a run may need is
checked before it starts.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Collection, Iterator
from dataclasses import asdict, fields, replace
from pathlib import Path

import torch
from tensordict import TensorDictBase
from torchrl.collectors import Collector
from tqdm import tqdm

from robot_rl import compat, keys
from robot_rl.configs import CollectConfig
from robot_rl.dataset import DATASET_OPTIONS, MASKS_FIELD, DemoDataset, EpisodeRecord, read_meta
from robot_rl.envs.expert_policy import ExpertPolicy
from robot_rl.envs.task import TaskConfig
from robot_rl.envs.tasks import get_task
from robot_rl.errors import RunStopped, UsageError
from robot_rl.locks import exclusive
from robot_rl.options import conflicting_options
from robot_rl.processes import workers_ignore_stop_signals
from robot_rl.provenance import Provenance
from robot_rl.stop import StopOnInterrupt

# A frame's entries besides its pixels and mask: ~250 bytes with the 6-joint arm; a bound for any arm.
LOW_DIM_FRAME_BYTES = 1024


def _pick_seed(runs: list[dict], seed: int) -> int:
    """The seed of the run to do: ``seed``, or for -1 the last unfinished run's (resumed), else the next unused."""
    if seed >= 0:
        return seed
    unfinished = [r for r in runs if not r["complete"]]
    return unfinished[-1]["seed"] if unfinished else 1 + max((r["seed"] for r in runs), default=-1)


def resolve_options(config: CollectConfig, meta: dict | None, given: Collection[str]) -> CollectConfig:
    """The options a collection into a dataset (``meta``: its meta.json, None for a new one) runs with: the seed
    picked, the dataset's shared options (task, arm, difficulty, ...) where not ``given``, and the stored target
    and pose noise of a run that exists. A run's option given with another value is a UsageError; a shared one is
    refused where the dataset is opened (``DemoDataset.open_for_append``)."""
    runs = meta.get("runs", []) if meta else []
    seed = _pick_seed(runs, config.seed)
    if meta:
        shared = compat.dataset_meta(meta)
        config = replace(config, **{option: shared[field] for field, option in DATASET_OPTIONS.items()
                                    if option not in given and field in shared})
    run = next((r for r in runs if r["seed"] == seed), None)
    if run is None:
        return replace(config, seed=seed)
    stored = {"episodes": run["target_episodes"], "pose_noise": run.get("pose_noise", config.pose_noise)}
    conflicts = conflicting_options(CollectConfig, asdict(config), stored, given)
    if conflicts and run["complete"]:
        raise UsageError(f"{config.out}: --seed {seed}: this dataset already holds that run's {run['episodes']} "
                         f"episodes; conflicting options: {', '.join(conflicts)}; use another --seed (or --out) for a "
                         "new run")
    if conflicts:
        raise UsageError(f"{config.out}: run seed {seed} is unfinished ({run['episodes']} of "
                         f"{run['target_episodes']} episodes) and continues with its stored options; conflicting "
                         f"options: {', '.join(conflicts)}; run the same command without them to finish it, or use "
                         "another --seed (or --out) for a new run")
    return replace(config, seed=seed, **stored)


def _run_record(dataset: DemoDataset, config: CollectConfig) -> dict:
    """The record in ``dataset.meta`` of the run ``config`` resolves to (``resolve_options``), a new one added."""
    runs = dataset.meta.setdefault("runs", [])
    run = next((r for r in runs if r["seed"] == config.seed), None)
    if run is None:
        run = {"seed": config.seed, "target_episodes": config.episodes, "episodes": 0, "complete": False,
               "seconds": 0.0}
        runs.append(run)
    run.setdefault("pose_noise", config.pose_noise)  # runs recorded before it was
    return run


def check_disk_space(config: CollectConfig, episodes: int) -> None:
    """Refuses (UsageError) ``episodes`` more episodes of ``config`` when the file system of ``config.out`` has
    less space free than they may take: every episode at the task's step limit, every frame at its stored size."""
    frames = TaskConfig().max_steps
    frame_bytes = config.image_size**2 * (3 + config.masks) + LOW_DIM_FRAME_BYTES  # RGB, mask: uint8
    needed = episodes * frames * frame_bytes
    out = Path(config.out)
    free = shutil.disk_usage(out if out.is_dir() else out.parent).free
    if needed > free:
        raise UsageError(f"{config.out}: {episodes} episodes need up to ~{_size(needed)} of disk (up to {frames} "
                         f"frames of {frame_bytes / 1e3:.1f} kB each), {_size(free)} free there; collect fewer "
                         "--episodes or free some space")


def _size(count: int) -> str:
    return f"{count / 1e9:,.1f} GB" if count >= 1e8 else f"{count / 1e6:.3g} MB"


def episode_records(batch: TensorDictBase, first_episode: int) -> tuple[TensorDictBase, list[EpisodeRecord]]:
    """Adds ``episode`` and ``step`` entries to a flat batch of whole trajectories; returns it and their records."""
    traj_ids = batch.get(("collector", "traj_ids"))
    starts = torch.cat([torch.tensor([0]), (traj_ids[1:] != traj_ids[:-1]).nonzero().squeeze(-1) + 1])
    lengths = torch.diff(torch.cat([starts, torch.tensor([batch.shape[0]])]))
    episode = torch.repeat_interleave(torch.arange(len(starts)) + first_episode, lengths)
    step = torch.arange(batch.shape[0]) - torch.repeat_interleave(starts, lengths)
    batch.set(keys.EPISODE, episode)
    batch.set(keys.STEP, step)
    ends = starts + lengths - 1
    seeds = batch.get(keys.EPISODE_SEED)[starts].reshape(-1).tolist()
    successes = batch.get((keys.NEXT, *keys.SUCCESS))[ends].reshape(-1).tolist()
    return batch, [EpisodeRecord(-1, int(n), int(s), bool(ok)) for n, s, ok in zip(lengths, seeds, successes)]


def add_whole_episodes(collector, dataset: DemoDataset, wanted: int
                       ) -> Iterator[tuple[TensorDictBase, list[EpisodeRecord]]]:
    """Adds the collector's whole trajectories to ``dataset`` (not yet committed) until ``wanted`` episodes are
    in, yielding each batch's frames and records once added; the caller commits."""
    for batch in collector:
        batch, records = episode_records(batch, first_episode=len(dataset.episodes))
        if len(records) > wanted:  # the last batch may bring more than needed
            keep = sum(r.length for r in records[:wanted])
            batch, records = batch[:keep], records[:wanted]
        dataset.add_episodes(batch, records)
        wanted -= len(records)
        yield batch, records
        if wanted == 0:
            return


def collect_demos(config: CollectConfig, progress: bool = True, given: Collection[str] | None = None) -> dict:
    """Collects ``config.episodes`` expert episodes into ``config.out``, holding the dataset's lock; returns a
    summary of the run. ``given`` names the options (fields) the user gave on the command line
    (``robot_rl.options.given_options``): the others take the values the dataset and the resumed run hold
    (``resolve_options``). None, a caller in Python, gives them all."""
    given = {f.name for f in fields(CollectConfig)} if given is None else given
    if "task" in given:  # the user's own --task: an unknown name exits 2 before the dataset is touched
        get_task(config.task, trust_code=True)
    with exclusive(config.out, "dataset"):
        config = resolve_options(config, read_meta(config.out), given)
        # A task the dataset names as module:Class is imported only when the user names it (--task).
        task = get_task(config.task, trust_code="task" in given, source=config.out)
        # A user's task given as module:Class is recorded so: later stages import it again from there. The arm's
        # digest (its content): the dataset refuses to mix demos of an edited arm file.
        provenance = Provenance.new(task=config.task, difficulty=config.difficulty, image_size=config.image_size,
                                    randomization=config.randomization, arm=config.arm, trust_code="task" in given)
        info = provenance.record()
        if config.masks:  # absent = no masks (datasets from before the option)
            info[MASKS_FIELD] = True
        dataset = DemoDataset.open_for_append(config.out, info)
        try:
            return _collect(dataset, config, task, provenance, progress)
        finally:
            dataset.discard()  # only does something if nothing was ever committed


def _collect(dataset: DemoDataset, config: CollectConfig, task, provenance: Provenance, progress: bool) -> dict:
    """The run ``config`` resolves to, collected into ``dataset`` a commit at a time; returns the summary."""
    run = _run_record(dataset, config)
    if run["complete"]:
        return _summary(dataset, run, config)
    remaining = run["target_episodes"] - run["episodes"]
    check_disk_space(config, remaining)
    num_envs = config.num_envs or os.cpu_count() or 1
    # Resumed runs draw from a fresh stream, so they do not repeat the boards already collected.
    env_seed = run["seed"] * 1_000_003 + run["episodes"]
    policy = ExpertPolicy(TaskConfig(image_size=config.image_size), pose_noise=run["pose_noise"], seed=env_seed,
                          task=task)
    # Ctrl-C or SIGTERM: the batch under way is committed, then the workers are shut down and the run stops (an
    # exception raised inside the collector would leave the workers' pipes broken mid-message).
    with StopOnInterrupt("stopping after this batch of episodes is committed") as stop:
        with workers_ignore_stop_signals():  # env workers: this process stops them, after its last commit
            env = provenance.make_env(num_envs=num_envs, seed=env_seed, parallel=num_envs > 1,
                                      segmentation=config.masks)
            collector = Collector(env, policy, frames_per_batch=16 * num_envs, total_frames=-1,
                                  trajs_per_batch=min(config.episodes_per_commit, remaining), traj_format="cat")
        _commit_batches(collector, dataset, run, remaining, stop, progress)
    if not run["complete"]:
        raise RunStopped(dataset.root, "collect-demos", stop.signum, kept="committed episodes kept")
    return _summary(dataset, run, config)


def _commit_batches(collector, dataset: DemoDataset, run: dict, remaining: int, stop: StopOnInterrupt,
                    progress: bool) -> None:
    """Commits the collector's whole episodes into ``dataset`` a batch at a time, updating ``run``, until
    ``remaining`` are in or a stop is asked for; shuts the collector down."""
    start_time, frames = time.perf_counter(), 0
    bar = tqdm(total=remaining, unit="ep", desc="collect-demos", disable=not progress)
    try:
        if stop.requested:
            return
        for batch, records in add_whole_episodes(collector, dataset, remaining):
            run["episodes"] += len(records)
            run["seconds"] = round(run["seconds"] + time.perf_counter() - start_time, 2)
            start_time = time.perf_counter()
            remaining -= len(records)
            run["complete"] = remaining == 0
            dataset.commit()
            frames += batch.shape[0]
            bar.update(len(records))
            bar.set_postfix(frames=dataset.frames, fps=f"{frames / max(bar.format_dict['elapsed'], 1e-9):.0f}")
            if stop.requested:
                return
    finally:
        bar.close()
        collector.shutdown()


def _summary(dataset: DemoDataset, run: dict, config: CollectConfig) -> dict:
    successes = sum(r.success for r in dataset.episodes)
    return {"dataset": str(dataset.root), "run": dict(run), "episodes": len(dataset.episodes),
            "frames": dataset.frames, "expert_success": successes / len(dataset.episodes), "config": asdict(config)}
