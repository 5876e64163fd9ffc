"""``robot-rl finetune``: PPO on the inspection task, from a behaviour-cloning checkpoint or from scratch.

One screen of structure, like TorchRL's PPO recipes: models, collector, loss, buffer, optimizers, logger, then one
loop. What keeps the behaviour-cloned skill through the first updates:

- a critic warm-up: the first ``critic_warmup`` iterations fit the value function only, actor frozen, so the
  first policy gradients use advantages from a critic that already knows the task;
- a KL anchor toward the pretrained policy, weight ``anchor_weight * anchor_decay**k`` at the k-th actor update;
- a separate critic encoder (started from the actor's), so value gradients never rewrite the actor's features.

Every iteration starts its envs from fresh boards seeded by (seed, iteration), so a resumed run collects exactly
what the uninterrupted one would have; checkpoints hold every state needed to continue the curve.
"""

from __future__ import annotations

import copy
import os
import signal
import time
from dataclasses import asdict
from pathlib import Path

import torch
from tensordict import TensorDictBase
from torchrl.data import LazyTensorStorage, SamplerWithoutReplacement, TensorDictReplayBuffer
from torchrl.objectives.value import GAE
from tqdm import tqdm

from robot_rl import keys
from robot_rl.checkpoint import load_checkpoint, rng_state, save_checkpoint, set_rng_state
from robot_rl.envs import ENV_VERSION, TASK_NAME, make_env
from robot_rl.errors import UsageError
from robot_rl.evaluation import aggregate, evaluate_policy
from robot_rl.finetune import distributed
from robot_rl.finetune.collection import make_collector, push_weights
from robot_rl.finetune.config import FinetuneConfig
from robot_rl.finetune.loss import AnchoredClipPPOLoss, anchor_parameters
from robot_rl.io import write_json
from robot_rl.options import RUN_CONFIG_FILE as CONFIG_FILE
from robot_rl.options import load_config, resolve_device, save_config
from robot_rl.policy import (
    PolicyConfig,
    actor_network,
    calibrate_batchnorm,
    checkpoint_policy_config,
    make_actor,
    make_critic,
    rewrap_actor,
    rewrap_critic,
)
from robot_rl.pretrain.bc import held_out_seeds, proof_env
from robot_rl.run_logger import RunLogger

CHECKPOINT_DIR = "checkpoints"
ANCHOR_OFF_BELOW = 1e-3  # anchor weights below this are treated as zero (and cost no forward pass)


class TrainingDiverged(RuntimeError):
    """A loss or gradient became NaN or inf; the update was not applied."""


class CollectionFailed(RuntimeError):
    """A collection worker died (killed, crashed); the run stopped with its last checkpoint intact."""


def load_pretrained(run_dir: str | Path) -> dict:
    """The best (else last) checkpoint of a behaviour-cloning run folder."""
    folder = Path(run_dir) / CHECKPOINT_DIR
    path = folder / "best.pt" if (folder / "best.pt").is_file() else folder / "last.pt"
    if not path.is_file():
        raise UsageError(f"--init {run_dir}: no checkpoints/best.pt or last.pt (not a pretrain run folder?)")
    state = load_checkpoint(path)
    if state.get("kind") != "bc":
        raise UsageError(f"{path}: not a behaviour-cloning checkpoint (kind={state.get('kind')!r})")
    return state


def episode_metrics(batch: TensorDictBase) -> list[dict]:
    """Summaries of the episodes that finished in a collected batch [envs, T] (episodes start at t = 0, since
    every iteration resets its envs): success, verdict given, steps, return, collisions, reward terms."""
    nxt = batch.get(keys.NEXT)
    done = nxt.get(keys.DONE).squeeze(-1)
    summaries = []
    for env in range(done.shape[0]):
        start = 0
        for end in done[env].nonzero().squeeze(-1).tolist():
            span = slice(start, end + 1)
            terms = {n: float(nxt.get(keys.reward_term(n))[env, span].sum()) for n in keys.REWARD_TERM_NAMES}
            summaries.append({
                "success": bool(nxt.get(keys.SUCCESS)[env, end]), "steps": end + 1 - start,
                "verdict": "pass" if terms["verdict"] != 0 else "none",  # only "was a verdict given" matters here
                "defect": "none", "return": float(nxt.get(keys.REWARD)[env, span].sum()),
                "collision_steps": int(nxt.get(keys.COLLISION)[env, span].sum()),
                "steps_to_localize": None, "timed_out": bool(nxt.get(keys.TRUNCATED)[env, end]),
                "unstable": bool(nxt.get(keys.UNSTABLE)[env, span].any()), "reward_terms": terms,
            })
            start = end + 1
    return summaries


class PPORun:
    """One fine-tuning run folder: models, collector, loss, optimizers, and the loop."""

    def __init__(self, config: FinetuneConfig, resume: bool = False):
        self.config, self.run_dir = config, Path(config.run_dir)
        self.dist = distributed.from_environment()
        self.is_main = self.dist is None or self.dist.is_main
        self.device = self.dist.device() if self.dist and config.device in ("auto", "cuda") \
            else resolve_device(config.device)
        if config.threads:
            torch.set_num_threads(config.threads)
        torch.manual_seed(config.seed)  # the same initial weights on every rank
        self.seed = config.seed + (self.dist.rank * 1_000_003 if self.dist else 0)  # collection seeds differ

        # Resolve the starting point
        pretrained_state = load_pretrained(config.init) if config.init else None
        if pretrained_state is not None:
            env_info = dict(pretrained_state["env"])
            policy_config = checkpoint_policy_config(pretrained_state)
            for name in ("difficulty", "image_size"):
                given = getattr(config, name)
                if given and given != env_info[name]:
                    raise UsageError(f"--{name.replace('_', '-')} {given} differs from the BC run's {env_info[name]}")
        else:
            env_info = {"env": TASK_NAME, "env_version": ENV_VERSION, "difficulty": config.difficulty or "default",
                        "image_size": config.image_size or 84}
            policy_config = PolicyConfig(hidden=config.hidden)
        self.env_info, self.policy_config = env_info, policy_config
        self.env_kwargs = {"difficulty": env_info["difficulty"], "image_size": env_info["image_size"],
                           "reward_weights": {"shaping": config.shaping}, "shaping_gamma": config.gamma}

        # Create models
        proof = proof_env(env_info["difficulty"], env_info["image_size"])
        self.actor = make_actor(proof.observation_spec, proof.full_action_spec, policy_config)
        self.pretrained = None
        if pretrained_state is not None:
            self.actor.load_state_dict(pretrained_state["actor"])
            if config.anchor_weight:
                self.pretrained = copy.deepcopy(self.actor).requires_grad_(False).eval().to(self.device)
        self.critic = make_critic(proof.observation_spec, policy_config, actor=self.actor)
        if pretrained_state is None:
            self._calibrate_batchnorm()
        # Eval mode throughout: BatchNorm uses fixed statistics, so the policy that collected a batch is the
        # policy whose log-probs the loss evaluates, whatever minibatch it sits in. Gradients still flow.
        self.actor.to(self.device).eval()
        self.critic.to(self.device).eval()
        if config.compile:
            self.actor.module[0].module = torch.compile(self.actor.module[0].module)
            self.critic.module = torch.compile(self.critic.module)

        # Several learners: the loss runs DDP-wrapped copies of the networks (same parameters), everything else
        # (collection, advantages, evaluation, checkpoints) the plain ones.
        self.train_actor, self.train_critic = self.actor, self.critic
        if self.dist is not None:
            self.train_actor = rewrap_actor(self.actor, self.dist.wrap(actor_network(self.actor)))
            self.train_critic = rewrap_critic(self.critic, self.dist.wrap(self.critic.module))
        torch.manual_seed(self.seed)

        # Create collector: envs on the CPU (here, in env workers, in collector processes or Ray actors)
        self.iteration, self.frames = 0, 0
        self.collector, self.env = make_collector(config, self.actor, self.env_kwargs, self.device, self.seed,
                                                  pre_collect_hook=self._seed_iteration)
        if config.collector != "direct":
            push_weights(self.collector, self.actor)  # workers start from the learner's weights

        # Create loss, advantage and buffer
        # vmap (GAE's default for evaluating root and next states together) cannot run channels-last convolutions.
        self.advantage = GAE(gamma=config.gamma, lmbda=config.gae_lambda, value_network=self.critic,
                             average_gae=False, deactivate_vmap=True)
        self.loss = AnchoredClipPPOLoss(
            self.train_actor, self.train_critic, clip_epsilon=config.clip_epsilon,
            entropy_coeff=config.entropy_coeff, critic_coeff=config.critic_coeff,
            clip_value=config.clip_value or None, normalize_advantage=True, anchor_weight=0.0,
            functional=False)  # the networks run as modules, so a DDP wrapper sees every forward
        self.buffer = TensorDictReplayBuffer(
            storage=LazyTensorStorage(config.frames_per_batch, device=self.device),
            sampler=SamplerWithoutReplacement(drop_last=True), batch_size=config.minibatch_size)

        # Create optimizers (separate, so the critic warm-up cannot move the actor)
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=config.lr)
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=config.critic_lr)
        # Linear annealing over each optimizer's own updates (the actor's start after the critic warm-up).
        actor_updates = max(1, config.iterations - config.critic_warmup)
        self.actor_scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.actor_optimizer, lambda it: max(0.0, 1.0 - it / actor_updates) if config.anneal_lr else 1.0)
        self.critic_scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.critic_optimizer, lambda it: max(0.0, 1.0 - it / config.iterations) if config.anneal_lr else 1.0)

        # Create logger (rank 0); restore state when resuming
        self.logger = RunLogger(self.run_dir) if self.is_main else None
        self.eval_seeds = held_out_seeds(config.eval_seed, config.eval_episodes, set())
        self.curve: list[dict] = []  # closed-loop success against frames
        self._stop_requested = False
        if resume:
            self._restore()
        else:
            save_config(self.run_dir / CONFIG_FILE, config)

    def _calibrate_batchnorm(self) -> None:
        # A network trained from scratch has no BatchNorm statistics yet: take them from random-action frames.
        env = make_env(num_envs=8, parallel=False, seed=self.config.seed + 10_007, **self.env_kwargs)
        frames = env.rollout(16, break_when_any_done=False).reshape(-1)
        inputs = (frames.get(keys.PIXELS), frames.get(keys.JOINT_STATE))
        calibrate_batchnorm(self.actor.module[0].module, *inputs)
        calibrate_batchnorm(self.critic.module, *inputs)

    # -- collection -------------------------------------------------------------------------------------------
    def _seed_iteration(self) -> None:
        # Fresh, reproducible boards each iteration: a resumed run collects what the uninterrupted one would.
        # (Direct backend only: process and Ray workers run ahead of the learner.)
        self.env.set_seed(self.seed * 1_000_003 + self.iteration * 7919)

    # -- checkpoints ------------------------------------------------------------------------------------------
    def _checkpoint(self) -> dict:
        return {
            "kind": "ppo", "config": asdict(self.config), "env": self.env_info,
            "policy_config": asdict(self.policy_config), "actor": self.actor.state_dict(),
            "critic": self.critic.state_dict(), "actor_optimizer": self.actor_optimizer.state_dict(),
            "critic_optimizer": self.critic_optimizer.state_dict(),
            "actor_scheduler": self.actor_scheduler.state_dict(),
            "critic_scheduler": self.critic_scheduler.state_dict(), "iteration": self.iteration,
            "frames": self.frames, "curve": self.curve, "rng": rng_state(),
        }

    def save(self) -> None:
        if self.is_main:
            save_checkpoint(self.run_dir / CHECKPOINT_DIR / "last.pt", self._checkpoint())

    def _restore(self) -> None:
        state = load_checkpoint(self.run_dir / CHECKPOINT_DIR / "last.pt", map_location=self.device)
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        self.actor_optimizer.load_state_dict(state["actor_optimizer"])
        self.critic_optimizer.load_state_dict(state["critic_optimizer"])
        self.actor_scheduler.load_state_dict(state["actor_scheduler"])
        self.critic_scheduler.load_state_dict(state["critic_scheduler"])
        self.iteration, self.frames, self.curve = state["iteration"], state["frames"], list(state["curve"])
        set_rng_state(state["rng"])
        if self.logger is not None:
            self.logger.truncate_after(self.frames)

    # -- one iteration ----------------------------------------------------------------------------------------
    def _autocast(self):
        return torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.device.type == "cuda")

    def anchor_weight(self) -> float:
        """The KL anchor's weight at this iteration (decays from the first actor update on)."""
        updates_done = max(0, self.iteration - self.config.critic_warmup)
        weight = self.config.anchor_weight * self.config.anchor_decay**updates_done
        return weight if self.pretrained is not None and weight >= ANCHOR_OFF_BELOW else 0.0

    def _all_finite(self, value: torch.Tensor) -> bool:
        # Every rank must take the same branch, or the ranks that call backward wait forever for the others.
        finite = torch.isfinite(value.detach()).all().float().reshape(1)
        if self.dist is not None:
            import torch.distributed as dist

            dist.all_reduce(finite, op=dist.ReduceOp.MIN)
        return bool(finite.item())

    def _step(self, optimizer, parameters, loss: torch.Tensor, what: str) -> float:
        if not self._all_finite(loss):
            raise TrainingDiverged(f"iteration {self.iteration + 1}: {what} loss is {loss.item()}; update skipped, "
                                   f"last checkpoint kept ({self.run_dir / CHECKPOINT_DIR / 'last.pt'})")
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(parameters, self.config.grad_clip)
        if not self._all_finite(norm):
            raise TrainingDiverged(f"iteration {self.iteration + 1}: {what} gradient norm is {norm.item()}; update "
                                   f"skipped, last checkpoint kept ({self.run_dir / CHECKPOINT_DIR / 'last.pt'})")
        optimizer.step()
        return float(norm)

    def update(self, batch: TensorDictBase) -> dict:
        """GAE, then ``ppo_epochs`` passes of minibatch updates; returns the mean of each logged quantity."""
        config = self.config
        warmup = self.iteration < config.critic_warmup
        with torch.no_grad(), self._autocast():
            self.advantage(batch)
        anchor = self.anchor_weight()
        self.loss.anchor_weight = anchor
        flat = batch.exclude((keys.NEXT, keys.PIXELS)).reshape(-1)
        if anchor and not warmup:
            flat.update(anchor_parameters(self.pretrained, flat))
        self.buffer.empty()
        self.buffer.extend(flat)
        sums: dict[str, float] = {}
        steps = config.ppo_epochs * (config.frames_per_batch // config.minibatch_size)
        for _ in range(steps):
            minibatch = self.buffer.sample()
            with self._autocast():
                if warmup:  # value-only update: the actor is neither run nor stepped
                    critic_loss, _, explained = self.loss.loss_critic(minibatch)
                    out = {"loss_critic": critic_loss.mean(), "explained_variance": explained}
                else:
                    out = dict(self.loss(minibatch).items())
            critic_total = out["loss_critic"]
            actor_total = sum(v for k, v in out.items() if k.startswith("loss_") and k != "loss_critic")
            if not warmup:
                out["grad_norm_actor"] = self._step(self.actor_optimizer, self.actor.parameters(), actor_total,
                                                    "actor")
            out["grad_norm_critic"] = self._step(self.critic_optimizer, self.critic.parameters(), critic_total,
                                                 "critic")
            for name, value in out.items():
                if value is not None and not isinstance(value, TensorDictBase):
                    sums[name] = sums.get(name, 0.0) + float(torch.as_tensor(value).detach())
        if not warmup:
            self.actor_scheduler.step()
        self.critic_scheduler.step()
        metrics = {f"train/{k}": v / steps for k, v in sums.items()}
        metrics.update({"train/anchor_weight": anchor if not warmup else 0.0, "train/critic_warmup": float(warmup),
                        "train/lr_actor": self.actor_scheduler.get_last_lr()[0]})
        return metrics

    def closed_loop(self) -> dict:
        metrics, _ = evaluate_policy(self.actor, self.eval_seeds, num_envs=min(8, len(self.eval_seeds)),
                                     device=self.device, **self.env_kwargs)
        self.curve.append({"frames": self.frames, "iteration": self.iteration, **{
            k: metrics[k] for k in ("success_rate", "verdict_accuracy", "collisions_per_episode", "episode_length")}})
        return metrics

    # -- loop -------------------------------------------------------------------------------------------------
    def _request_stop(self, signum, frame) -> None:
        if self._stop_requested:
            raise KeyboardInterrupt
        self._stop_requested = True
        tqdm.write("stopping after this iteration and saving a checkpoint (Ctrl-C again to abort)")

    def run(self, progress: bool = True, until_iteration: int | None = None) -> dict:
        """Runs until ``config.iterations`` (or ``until_iteration``); returns the summary (``summary.json``)."""
        config = self.config
        last = min(config.iterations, until_iteration or config.iterations)
        previous = signal.signal(signal.SIGINT, self._request_stop) if _main_thread() else None
        bar = tqdm(total=last, initial=self.iteration, desc="finetune", unit="it", disable=not progress)
        try:
            if self.iteration == 0 and not self.curve and self.is_main:
                self._log(self._eval_metrics())  # the starting point of the learning curve
            iterator = iter(self.collector)
            while self.iteration < last and not self._stop_requested:
                start = time.perf_counter()
                batch = self._collect(iterator)
                collect_seconds = time.perf_counter() - start
                metrics = self.update(batch)
                self.iteration += 1
                self.frames += batch.numel() * (self.dist.world_size if self.dist else 1)
                push_weights(self.collector, self.actor)
                episodes = episode_metrics(batch.reshape(-1, batch.shape[-1]))
                if episodes:
                    stats = aggregate(episodes)
                    metrics.update({"train/success_rate": stats["success_rate"],
                                    "train/collisions_per_episode": stats["collisions_per_episode"],
                                    "train/episode_length": stats["episode_length"],
                                    "train/episode_return": stats["return"], "train/episodes": len(episodes)})
                    metrics.update({f"reward/{k}": v for k, v in stats["reward_terms"].items()})
                metrics["train/frames_per_s"] = batch.numel() / collect_seconds
                metrics["train/iteration_seconds"] = time.perf_counter() - start
                due = (config.eval_every and self.iteration % config.eval_every == 0) or self.iteration == last
                if due and self.is_main:
                    metrics.update(self._eval_metrics())
                self._log(metrics)
                if self.iteration % config.checkpoint_every == 0 or self.iteration == last:
                    self.save()
                bar.update(1)
                bar.set_postfix(frames=self.frames, success=metrics.get("train/success_rate"))
            if self._stop_requested:
                self.save()
        finally:
            bar.close()
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
        summary = {"iterations": self.iteration, "frames": self.frames, "curve": self.curve,
                   "init": config.init or "scratch", "env": self.env_info}
        if self.is_main:
            write_json(self.run_dir / "summary.json", summary)
        return summary

    def _collect(self, iterator) -> TensorDictBase:
        try:
            return next(iterator)
        except Exception as err:  # noqa: BLE001 - a dying worker surfaces as many exception types
            if self.config.collector == "direct" and self.config.workers == 0:
                raise  # no workers: a genuine error of this process
            raise CollectionFailed(
                f"iteration {self.iteration + 1}: a {self.config.collector} collection worker failed "
                f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else 'no message'}); run stopped, "
                f"last checkpoint kept ({self.run_dir / CHECKPOINT_DIR / 'last.pt'})") from err

    def _eval_metrics(self) -> dict:
        stats = self.closed_loop()
        return {"eval/success_rate": stats["success_rate"], "eval/verdict_accuracy": stats["verdict_accuracy"],
                "eval/collisions_per_episode": stats["collisions_per_episode"],
                "eval/episode_length": stats["episode_length"]}

    def _log(self, metrics: dict) -> None:
        if self.logger is not None:
            self.logger.log(metrics, step=self.frames)

    def close(self) -> None:
        try:
            self.collector.shutdown(timeout=20)
        except TypeError:  # backends whose shutdown takes no timeout
            self.collector.shutdown()
        except Exception as err:  # noqa: BLE001 - a dead worker can make shutdown complain; the run is over
            tqdm.write(f"collector shutdown: {type(err).__name__}: {err}")


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread() and os.name == "posix"


def finetune(config: FinetuneConfig, progress: bool = True) -> dict:
    """Starts a new run in ``config.run_dir`` (which must not hold one) and trains it."""
    if (Path(config.run_dir) / CONFIG_FILE).exists():
        raise UsageError(f"{config.run_dir} already holds a run; use --resume {config.run_dir} or another --run-dir")
    run = PPORun(config)
    try:
        return run.run(progress)
    finally:
        run.close()


def resume(run_dir: str | Path, progress: bool = True) -> dict:
    """Continues the run in ``run_dir`` from its last checkpoint, with its stored config."""
    config = load_config(Path(run_dir) / CONFIG_FILE, FinetuneConfig)
    run = PPORun(config, resume=True)
    try:
        return run.run(progress)
    finally:
        run.close()
