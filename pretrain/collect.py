"""``robot-rl collect-demos``: run the scripted expert in several envs and write whole episodes to a dataset.

A TorchRL ``Collector`` yields complete trajectories (``trajs_per_batch``), which are written and committed a
batch at a time: a killed collection keeps what it committed, and running the same command again resumes the
run (same seed) with the episodes still missing, or does nothing when the run is complete. One collection per
dataset at a time: a second one is refused while the first holds the dataset's lock (``robot_rl.locks``). A run
that fails before its first commit leaves no temporary folder behind.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import asdict

import torch
from tensordict import TensorDictBase
from torchrl.collectors import Collector
from tqdm import tqdm

from robot_rl import keys
from robot_rl.configs import CollectConfig
from robot_rl.envs.expert_policy import ExpertPolicy
from robot_rl.envs.task import TaskConfig
from robot_rl.envs.tasks import get_task
from robot_rl.errors import UsageError
from robot_rl.locks import exclusive
from robot_rl.pretrain.dataset import MASKS_FIELD, DemoDataset, EpisodeRecord
from robot_rl.processes import workers_ignore_stop_signals
from robot_rl.provenance import Provenance


def _plan_run(dataset: DemoDataset, config: CollectConfig) -> dict:
    """The run to do: resume an interrupted one with this seed, or start a new one."""
    runs = dataset.meta["runs"]
    seed = config.seed
    if seed < 0:
        unfinished = [r for r in runs if not r["complete"]]
        seed = unfinished[-1]["seed"] if unfinished else 1 + max((r["seed"] for r in runs), default=-1)
    previous = next((r for r in runs if r["seed"] == seed), None)
    if previous is None:
        run = {"seed": seed, "target_episodes": config.episodes, "episodes": 0, "pose_noise": config.pose_noise,
               "complete": False, "seconds": 0.0}
        runs.append(run)
        return run
    if previous["complete"] and previous["target_episodes"] != config.episodes:
        raise UsageError(f"--seed {seed}: this dataset already holds that run's {previous['target_episodes']} "
                         f"episodes; use another seed")
    return previous  # unfinished: resumed; finished with the same count: the same command again, nothing to do


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


def collect_demos(config: CollectConfig, progress: bool = True) -> dict:
    """Collects ``config.episodes`` expert episodes into ``config.out``, holding the dataset's lock; returns a
    summary of the run."""
    # The user's own --task (an unknown name exits 2 before the dataset is touched).
    task = get_task(config.task, trust_code=True)
    # A user's task given as module:Class is recorded so: later stages import it again from there. The arm's
    # digest (its content): the dataset refuses to mix demos of an edited arm file.
    provenance = Provenance.new(task=config.task, difficulty=config.difficulty, image_size=config.image_size,
                                randomization=config.randomization, arm=config.arm)
    info = provenance.record()
    if config.masks:  # absent = no masks (datasets from before the option)
        info[MASKS_FIELD] = True
    with exclusive(config.out, "dataset"):
        dataset = DemoDataset.open_for_append(config.out, info)
        try:
            return _collect(dataset, config, task, provenance, progress)
        finally:
            dataset.discard()  # only does something if nothing was ever committed


def _collect(dataset: DemoDataset, config: CollectConfig, task, provenance: Provenance, progress: bool) -> dict:
    """The run ``_plan_run`` picks, collected into ``dataset`` a commit at a time; returns the summary."""
    run = _plan_run(dataset, config)
    if run["complete"]:
        return _summary(dataset, run, config)
    remaining = run["target_episodes"] - run["episodes"]
    num_envs = config.num_envs or os.cpu_count() or 1
    # Resumed runs draw from a fresh stream, so they do not repeat the boards already collected.
    env_seed = run["seed"] * 1_000_003 + run["episodes"]
    policy = ExpertPolicy(TaskConfig(image_size=config.image_size), pose_noise=config.pose_noise, seed=env_seed,
                          task=task)
    with workers_ignore_stop_signals():  # env workers: this process stops them, after its last commit
        env = provenance.make_env(num_envs=num_envs, seed=env_seed, parallel=num_envs > 1,
                                  segmentation=config.masks)
        collector = Collector(env, policy, frames_per_batch=16 * num_envs, total_frames=-1,
                              trajs_per_batch=min(config.episodes_per_commit, remaining), traj_format="cat")
    start_time, frames = time.perf_counter(), 0
    bar = tqdm(total=remaining, unit="ep", desc="collect-demos", disable=not progress)
    try:
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
    finally:
        bar.close()
        collector.shutdown()
    return _summary(dataset, run, config)


def _summary(dataset: DemoDataset, run: dict, config: CollectConfig) -> dict:
    successes = sum(r.success for r in dataset.episodes)
    return {"dataset": str(dataset.root), "run": dict(run), "episodes": len(dataset.episodes),
            "frames": dataset.frames, "expert_success": successes / len(dataset.episodes), "config": asdict(config)}
