"""``robot-rl dagger``: DAgger (Ross, Gordon and Bagnell, 2011) with the task's own scripted expert.

Behaviour cloning learns the expert's actions on the expert's states; the policy then drifts into states the
demos never showed and compounds its errors. DAgger rolls out the current policy, labels every state it visited
with the expert's action, adds those frames to the data and trains again. Every task here ships an expert that is
a stateless function of the privileged state (``robot_rl.envs.expert_policy.ExpertPolicy``), so labelling any
visited state is free in simulation. Why written here: ``imitation``'s ``SimpleDAggerTrainer`` is built on
Stable-Baselines3 policies and Gymnasium envs; TorchRL has no DAgger. This module uses TorchRL's collector for
the rollouts, the demo format for the aggregate and ``robot-rl pretrain``'s BC for the training.

A round: (a) ``episodes_per_round`` rollouts of the current policy (its deterministic mode) on fresh training
boards, the expert's action executed instead with probability beta (``beta x beta_decay^(k-1)`` in round k; 0 is
plain DAgger); (b) every visited frame labelled with the expert's pose and verdict; (c) the frames appended to
the aggregate; (d) BC continued from the current policy on the whole aggregate (the init run's BC options,
``epochs_per_round`` epochs, a fresh optimizer and cosine schedule); (e) a closed-loop check on held-out boards
(the BC run's final check), logged as ``dagger/...`` at step k (step 0: the init policy).

::

    RUN_DIR/
      config.json           the options (a resumed run continues with these)
      aggregate/            the demo-format dataset: the init run's demos, then every round's rollouts
                            (``export-dataset`` and ``pretrain`` read it)
      rounds/round-KK/      round K's BC run folder (pretrain's layout); its checkpoints/last.pt is the policy
      rounds/round-KK.json  round K's check, written once it is logged (round-00: the init policy)
      logs/                 dagger/success_rate, dagger/aggregate_frames, ... per round
      summary.json          written when the last round is done: every round's check and the final policy

Everything is committed whole (aggregate episodes a batch at a time, BC by its own checkpoints), so after a kill
the same command, or ``--resume RUN_DIR``, continues with exactly the frames recorded so far.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import torch
from tensordict import TensorDictBase
from tensordict.nn import InteractionType, set_interaction_type
from torchrl.collectors import Collector
from tqdm import tqdm

from robot_rl import keys
from robot_rl.artefact_files import DAGGER_AGGREGATE, dagger_round, dagger_round_records
from robot_rl.checkpoints import CONFIG_FILE, load_checkpoint, policy_checkpoint
from robot_rl.closed_loop import evaluate_policy, held_out_seeds
from robot_rl.configs import BCConfig, DAggerConfig
from robot_rl.dataset import META_FILE, DemoDataset, EpisodeRecord
from robot_rl.envs.expert_policy import ExpertPolicy
from robot_rl.envs.task import TaskConfig
from robot_rl.envs.tasks import get_task
from robot_rl.errors import RunStopped, UsageError
from robot_rl.io import write_json
from robot_rl.policy_io import load_actor
from robot_rl.pretrain import bc
from robot_rl.pretrain.collect import add_whole_episodes
from robot_rl.processes import workers_ignore_stop_signals
from robot_rl.provenance import Provenance
from robot_rl.run_folder import IMPORTED_DEMOS, RunFolder
from robot_rl.run_logs import RunLogger
from robot_rl.training_run import TrainingRun

EPISODES_PER_COMMIT = 8
CHECK_METRICS = ("success_rate", "success_ci95", "episodes", "guesses", "verdict_accuracy", "collisions_per_episode",
                 "episode_length", "timed_out")


class DAggerPolicy:
    """The rollout policy of a round: the learner's deterministic action, labelled with the expert's.

    Writes the expert's clean pose and verdict under ``keys.EXPERT_POSE`` / ``keys.EXPERT_VERDICT`` (the labels
    BC clones) and executes, per env and step, the expert's action with probability ``beta``, else the learner's.
    """

    def __init__(self, actor, expert: ExpertPolicy, beta: float, seed: int):
        self.actor, self.expert, self.beta = actor, expert, beta
        self.device = next(actor.parameters()).device
        self._rng = np.random.default_rng(seed)

    def __call__(self, tensordict: TensorDictBase) -> TensorDictBase:
        with torch.no_grad(), set_interaction_type(InteractionType.DETERMINISTIC):
            acted = self.actor(tensordict.select(keys.PIXELS, keys.JOINT_STATE).to(self.device))
        pose = acted.get(keys.POSE).to(tensordict.device)
        verdict = acted.get(keys.VERDICT).to(tensordict.device)
        tensordict = self.expert(tensordict)  # the labels, and the expert's action as the executed one
        draws = torch.as_tensor(self._rng.random(tuple(tensordict.batch_size)))  # a scalar for an unbatched env
        expert_acts = (draws < self.beta).to(tensordict.device)
        tensordict.set(keys.POSE, torch.where(expert_acts.unsqueeze(-1), tensordict.get(keys.POSE), pose))
        tensordict.set(keys.VERDICT, torch.where(expert_acts, tensordict.get(keys.VERDICT), verdict))
        return tensordict


def _init_run(config: DAggerConfig) -> tuple[BCConfig, Path, Path]:
    """The init BC run's config, its policy checkpoint and its demo folder; one-line errors for anything else."""
    folder = RunFolder(config.init)
    if not (folder.path / CONFIG_FILE).is_file():
        raise UsageError(f"--policy {config.init}: not a BC run folder (no {CONFIG_FILE})")
    checkpoint = policy_checkpoint(folder.path, config.checkpoint_kind)
    if load_checkpoint(checkpoint).get("kind") != "bc":
        raise UsageError(f"--policy {config.init}: not a BC run (DAgger continues behaviour cloning)")
    bc_config = folder.config(BCConfig)
    imported = folder.path / IMPORTED_DEMOS  # a LeRobot source, read into the BC run folder
    demos = imported if (imported / META_FILE).is_file() else Path(bc_config.data)
    return bc_config, checkpoint, demos


class DAggerRun(TrainingRun):
    """One DAgger run folder (see the module docstring; the lifecycle is ``TrainingRun``'s)."""

    command, config_cls = "dagger", DAggerConfig
    steps_option = "rounds"
    checkpointed = False  # everything is committed whole: the aggregate a batch at a time, BC by its checkpoints

    def build(self, resume: bool) -> None:
        config = self.config
        self.bc_config, self.init_checkpoint, demos_dir = _init_run(config)
        self.demos = DemoDataset.open(demos_dir)
        self.precision = self.compute.precision  # device and threads: TrainingRun's context
        meta_path = self.demos.root / META_FILE
        self.provenance = Provenance.of_dataset(self.demos.meta, meta_path).verified(meta_path, config.trust_code)
        self.task = get_task(self.provenance.task, trust_code=config.trust_code, source=str(meta_path))
        self.aggregate_dir = self.run_dir / DAGGER_AGGREGATE
        self.logger = RunLogger(self.run_dir)
        self.aggregate: DemoDataset | None = None
        self.records: list[dict] = []  # every round's check so far (round 0: the init policy)

    # -- where things are -------------------------------------------------------------------------------------
    def round_dir(self, round_index: int) -> Path:
        return dagger_round(self.run_dir, round_index)

    def policy_of(self, round_index: int) -> Path:
        """The policy round ``round_index`` ended with (round 0: the init run's)."""
        return self.init_checkpoint if round_index == 0 else RunFolder(self.round_dir(round_index)).checkpoint()

    # -- the aggregate ----------------------------------------------------------------------------------------
    def _open_aggregate(self) -> DemoDataset:
        return DemoDataset.open_for_append(self.aggregate_dir, {**self.provenance.record(), "dagger": True})

    def _copy_demos(self, aggregate: DemoDataset) -> DemoDataset:
        """Copies the init run's demos into the aggregate (DAgger's D0), a batch of episodes per commit."""
        entry = next((r for r in aggregate.meta["runs"] if r.get("round") == 0), None)
        if entry is None:
            entry = {"round": 0, "source": str(self.demos.root), "seed": self.config.seed * 1_000, "beta": 1.0,
                     "target_episodes": len(self.demos.episodes), "episodes": 0, "complete": False}
            aggregate.meta["runs"].append(entry)
        episodes = self.demos.episodes
        bar = tqdm(total=len(episodes), initial=entry["episodes"], unit="ep", desc="aggregate: the demos",
                   leave=False)
        while entry["episodes"] < len(episodes):
            chunk = episodes[entry["episodes"]:entry["episodes"] + 4 * EPISODES_PER_COMMIT]
            first, last = chunk[0].start, chunk[-1].start + chunk[-1].length
            # Without their masks: the rollouts have none, and a dataset holds masks for all frames or none.
            aggregate.add_episodes(self.demos.data[first:last].exclude(keys.SEGMENTATION).clone(),
                                   [EpisodeRecord(-1, e.length, e.seed, e.success) for e in chunk])
            entry["episodes"] += len(chunk)
            entry["complete"] = entry["episodes"] == len(episodes)
            aggregate.commit()
            bar.update(len(chunk))
            if self.stop.requested:
                break
        bar.close()
        return aggregate

    def _rollouts(self, aggregate: DemoDataset, round_index: int) -> None:
        """Round ``round_index``'s labelled rollouts of the previous round's policy, appended and committed a
        batch of whole episodes at a time (a resumed round rolls out only the episodes still missing)."""
        config = self.config
        entry = next((r for r in aggregate.meta["runs"] if r.get("round") == round_index), None)
        if entry is None:
            entry = {"round": round_index, "seed": config.seed * 1_000 + round_index,
                     "beta": config.beta_of(round_index - 1), "policy": str(self.policy_of(round_index - 1)),
                     "target_episodes": config.episodes_per_round, "episodes": 0, "complete": False}
            aggregate.meta["runs"].append(entry)
        remaining = entry["target_episodes"] - entry["episodes"]
        if remaining <= 0:
            return
        num_envs = min(config.num_envs or os.cpu_count() or 1, remaining)
        # A resumed round draws fresh boards and beta draws, so it never repeats the episodes it already has.
        stream = entry["seed"] * 1_000_003 + entry["episodes"]
        actor, _, _ = load_actor(self.policy_of(round_index - 1), device=self.device,
                                 trust_code=self.config.trust_code, precision=self.precision)
        policy = DAggerPolicy(actor, ExpertPolicy(TaskConfig(image_size=self.provenance.image_size), task=self.task),
                              beta=entry["beta"], seed=stream)
        with workers_ignore_stop_signals():  # env workers: this process stops them, after its last commit
            env = self.provenance.make_env(num_envs=num_envs, seed=stream, parallel=num_envs > 1)
            collector = Collector(env, policy, frames_per_batch=16 * num_envs, total_frames=-1,
                                  trajs_per_batch=min(EPISODES_PER_COMMIT, remaining), traj_format="cat")
        bar = tqdm(total=entry["target_episodes"], initial=entry["episodes"], unit="ep",
                   desc=f"round {round_index}/{config.rounds}: rollouts (beta {entry['beta']:.2f})", leave=False)
        try:
            for _, records in add_whole_episodes(collector, aggregate, remaining):
                entry["episodes"] += len(records)
                remaining -= len(records)
                entry["complete"] = remaining == 0
                aggregate.commit()
                bar.update(len(records))
                if remaining == 0 or self.stop.requested:
                    break
        finally:
            bar.close()
            collector.shutdown()

    # -- training and checks ----------------------------------------------------------------------------------
    def round_bc_config(self, round_index: int) -> BCConfig:
        """Round ``round_index``'s BC: the init run's options on the aggregate, from the previous round's policy."""
        return replace(self.bc_config, data=str(self.aggregate_dir), run_dir=str(self.round_dir(round_index)),
                       init=str(self.policy_of(round_index - 1)), epochs=self.config.epochs_per_round,
                       eval_every=0, eval_episodes=self.config.eval_episodes, eval_seed=self.config.eval_seed,
                       device=self.config.device, precision=self.config.precision,
                       seed=self.config.seed * 1_000 + round_index, logger="csv",
                       recolour="",  # the aggregate has no segmentation masks (the rollouts record none)
                       trust_code=self.bc_config.trust_code or self.config.trust_code)

    def _init_check(self, aggregate: DemoDataset) -> dict:
        """The init policy on the boards every round's BC check uses (BC's own rule for them)."""
        actor, _, _ = load_actor(self.init_checkpoint, device=self.device, trust_code=self.config.trust_code,
                                 precision=self.precision)
        seeds = held_out_seeds(self.config.eval_seed, self.config.eval_episodes, aggregate.episode_seeds())
        metrics, _ = evaluate_policy(actor, seeds, num_envs=os.cpu_count() or 1, device=self.device,
                                     **self.provenance.env_kwargs())
        return metrics

    def _record(self, round_index: int, check: Callable[[], dict], aggregate: DemoDataset) -> dict:
        """Round ``round_index``'s record: read when it exists, else ``check()`` is run, logged and recorded."""
        path = dagger_round(self.run_dir, round_index, record=True)
        if path.is_file():
            return json.loads(path.read_text())
        check = check()
        record = {"round": round_index, "aggregate_frames": aggregate.frames,
                  "aggregate_episodes": len(aggregate.episodes),
                  "beta": self.config.beta_of(round_index - 1) if round_index else None,
                  "policy": str(self.policy_of(round_index)), **{k: check.get(k) for k in CHECK_METRICS}}
        self.logger.truncate_after(round_index - 1)  # rows of a round killed between its log and its record
        self.logger.log({"dagger/success_rate": check["success_rate"], "dagger/guesses": check["guesses"],
                         "dagger/collisions_per_episode": check["collisions_per_episode"],
                         "dagger/episode_length": check["episode_length"],
                         "dagger/aggregate_frames": aggregate.frames}, step=round_index)
        write_json(path, record)
        return record

    # -- the loop's parts (the loop is TrainingRun's): a round is a step ---------------------------------------
    @property
    def done(self) -> int:
        return max(len(self.records) - 1, 0)  # round 0's record is the init policy's check

    @property
    def total(self) -> int:
        """``rounds``, or the rounds done once a check meets ``until_success`` or ``until_flat``."""
        return self.config.rounds_wanted([record["success_rate"] for record in self.records])

    def begin(self, progress: bool, last: int) -> bool:
        """The aggregate (the init run's demos first), the rounds recorded so far and the init policy's check;
        False when a stop request came while the demos were copied."""
        self.aggregate = self._open_aggregate()
        if self.config.include_demos:
            self.aggregate = self._copy_demos(self.aggregate)
        if self.stop.requested:
            return False
        done = dagger_round_records(self.run_dir)
        self.records = [self._record(0, lambda: self._init_check(self.aggregate), self.aggregate),
                        *(json.loads(path.read_text()) for path in done[1:])]
        return True

    def train_step(self, progress: bool) -> dict | None:
        """The next round: its rollouts, appended to the aggregate, then BC on the aggregate from the previous
        round's policy; None at the first safe point after a stop request (a commit, a round BC's checkpoint)."""
        round_index = self.done + 1
        self._rollouts(self.aggregate, round_index)
        if self.stop.requested:
            return None
        try:
            summary = bc.ensure_trained(self.round_bc_config(round_index), progress=progress)
        except RunStopped:  # the round's BC checkpointed and returned unfinished; the request is this run's too
            return None
        return summary["final_eval"]

    def end_step(self, check: dict, progress: bool, last: int) -> None:
        """The round's record (its check, logged)."""
        round_index = self.done + 1
        self.records.append(self._record(round_index, lambda: check, self.aggregate))
        if progress:
            tqdm.write(f"DAgger round {round_index}/{self.config.rounds}: {self.aggregate.frames} frames, "
                       f"check success {self.records[-1]['success_rate']:.1%}"
                       + ("" if self.total == self.config.rounds else "; no more rounds (--until-success, "
                          "--until-flat)"))

    @property
    def final_round(self) -> int:
        """The round whose policy the run ends with: the last one, or, when a stop rule ended the run early, the
        one with the best check (the earliest of equals; 0: the init policy)."""
        if not self.records or self.total == self.config.rounds:
            return self.done
        successes = [record["success_rate"] for record in self.records]
        return successes.index(max(successes))

    def summary(self) -> dict:
        final = self.final_round  # 0 with no record yet: stopped while the demos were copied
        return {"rounds": self.records, "final_round": final, "policy": str(self.policy_of(final)),
                "aggregate": {"episodes": len(self.aggregate.episodes), "frames": self.aggregate.frames},
                "precision": self.precision, "config": asdict(self.config),
                "finished": bool(self.records) and self.done == self.total}


# The commands: a new run (or the same command again after a kill), --resume, and the finished run for scripts.
dagger, resume, ensure_trained = DAggerRun.start, DAggerRun.resume, DAggerRun.ensure_trained


def final_policy_run(summary: dict) -> Path:
    """The BC run folder of the round a finished DAgger run ends with (``final_round``: the init run when it ran
    none): what ``finetune --policy`` starts from."""
    return Path(summary["policy"]).parent.parent
