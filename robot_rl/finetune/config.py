"""Options of ``robot-rl finetune`` (a light module: the CLI builds its help from it)."""

from __future__ import annotations

from dataclasses import dataclass

from robot_rl.options import option, validate
from robot_rl.pretrain.configs import DIFFICULTY_NAMES, RANDOMIZATION_NAMES

COLLECTORS = ("direct", "process", "ray")


@dataclass(frozen=True)
class FinetuneConfig:
    """PPO fine-tuning: every field is one ``--option``."""

    init: str = option("", "BC run folder to start the actor from (its best.pt); '' with --from-scratch")
    from_scratch: bool = option(False, "start from random weights, same architecture")
    run_dir: str = option("runs/ppo", "output folder: config, checkpoints, logs")
    difficulty: str = option("", "task difficulty; '' = the BC run's (default for --from-scratch)")
    image_size: int = option(0, "image side in pixels; 0 = the BC run's (84 for --from-scratch)")
    randomization: str = option("", "domain randomization: none, default or strong; '' = the BC run's (none for "
                                "--from-scratch)")
    total_frames: int = option(200_000, "environment frames to collect")
    frames_per_batch: int = option(1024, "frames collected per PPO iteration")
    num_envs: int = option(4, "envs collecting together (per learner rank)")
    collector: str = option("direct", "collection backend: direct (this process), process (worker processes, "
                            "MultiSyncCollector) or ray (Ray actors, local or on a cluster)")
    workers: int = option(0, "direct: ParallelEnv processes stepping num_envs / workers envs each (0 = step "
                          "them here); process/ray: collector workers, each with its envs and a policy copy")
    ray_address: str = option("", "ray: cluster address ('' starts a local Ray instance)")
    worker_device: str = option("cpu", "process/ray: device of the workers' policy copies")
    ppo_epochs: int = option(4, "passes over each batch")
    minibatch_size: int = option(128, "frames per gradient step")
    lr: float = option(1e-4, "learning rate of the actor's heads")
    encoder_lr: float = option(0.0, "learning rate of the actor's image encoder; 0 = frozen: features computed once "
                               "per collected frame and reused by every PPO epoch")
    critic_lr: float = option(1e-3, "learning rate of the (privileged-state) critic")
    anneal_lr: bool = option(False, "anneal the learning rates linearly to 0 over the run")
    clip_epsilon: float = option(0.2, "PPO ratio clip")
    entropy_coeff: float = option(1e-3, "entropy bonus weight")
    critic_coeff: float = option(0.5, "value loss weight")
    clip_value: float = option(0.0, "value clipping range (0 = off)")
    gamma: float = option(0.99, "discount")
    gae_lambda: float = option(0.95, "GAE lambda")
    grad_clip: float = option(1.0, "max gradient norm (actor and critic separately)")
    critic_warmup: int = option(3, "first iterations update only the critic (actor frozen)")
    anchor_weight: float = option(1.0, "weight of KL(pretrained || current) at the first actor update (0 = off)")
    anchor_decay: float = option(0.95, "per-iteration decay of the anchor weight (DAPG's 0.95^k)")
    anchor_pose_only: bool = option(False, "anchor the pose head only, leaving the verdicts free")
    mask_verdict_pose: bool = option(True, "leave the pose's log-prob out of the ratio on steps that give a verdict")
    verdict_ce_weight: float = option(1.0, "weight of the verdict cross-entropy whose labels the verdict reward "
                                      "reveals (0 = off)")
    continue_prob: float = option(0.0, "--from-scratch: initial probability of 'continue' (verdict head bias), so "
                                  "early episodes last long enough to explore; 0 = leave the head as initialized")
    pose_min_scale: float = option(0.1, "lower bound of the pose TanhNormal's scale while fine-tuning (pre-tanh); "
                                   "0 = the policy's own (BC's 0.3 makes most sampled episodes fail)")
    shaping: float = option(0.0, "weight of the env's potential-based shaping term")
    eval_every: int = option(5, "closed-loop check every N iterations (0 = only at the end)")
    eval_episodes: int = option(50, "episodes per closed-loop check (held-out boards)")
    eval_seed: int = option(20_000_000, "first board seed of the closed-loop checks")
    checkpoint_every: int = option(5, "checkpoint every N iterations (and on Ctrl-C)")
    device: str = option("auto", "learner device: auto, cpu, cuda or cuda:N")
    compile: bool = option(False, "torch.compile the actor and critic networks")
    seed: int = option(0, "seed of collection, sampling and initialization")
    hidden: int = option(256, "MLP width of the critic, and of the actor with --from-scratch (a BC init keeps its own)")
    threads: int = option(0, "torch CPU threads (0 = torch's default)")

    def __post_init__(self) -> None:
        validate(self, [
            ("init", bool(self.init) != self.from_scratch, "a BC run folder, or '' with --from-scratch"),
            ("difficulty", self.difficulty in ("", *DIFFICULTY_NAMES), f"'' or one of {', '.join(DIFFICULTY_NAMES)}"),
            ("randomization", self.randomization in ("", *RANDOMIZATION_NAMES),
             f"'' or one of {', '.join(RANDOMIZATION_NAMES)}"),
            ("image_size", self.image_size == 0 or 32 <= self.image_size <= 224, "0 or in [32, 224]"),
            ("total_frames", self.total_frames >= self.frames_per_batch, ">= --frames-per-batch"),
            ("frames_per_batch", self.frames_per_batch >= 1, ">= 1"),
            ("num_envs", self.num_envs >= 1 and self.frames_per_batch % self.num_envs == 0,
             ">= 1 and divide --frames-per-batch"),
            ("collector", self.collector in COLLECTORS, f"one of {', '.join(COLLECTORS)}"),
            ("workers", self.workers >= 0 and (self.workers == 0 or self.num_envs % self.workers == 0),
             ">= 0 and divide --num-envs"),
            ("workers", self.collector == "direct" or self.workers >= 1, ">= 1 with --collector process or ray"),
            ("ppo_epochs", self.ppo_epochs >= 1, ">= 1"),
            ("minibatch_size", 1 <= self.minibatch_size <= self.frames_per_batch, "in [1, --frames-per-batch]"),
            ("lr", self.lr >= 0, ">= 0"), ("encoder_lr", self.encoder_lr >= 0, ">= 0"),
            ("critic_lr", self.critic_lr > 0, "> 0"),
            ("verdict_ce_weight", self.verdict_ce_weight >= 0, ">= 0"),
            ("continue_prob", 0 <= self.continue_prob < 1, "in [0, 1)"),
            ("pose_min_scale", self.pose_min_scale >= 0, ">= 0"),
            ("clip_epsilon", 0 < self.clip_epsilon < 1, "in (0, 1)"),
            ("entropy_coeff", self.entropy_coeff >= 0, ">= 0"),
            ("critic_coeff", self.critic_coeff > 0, "> 0"), ("clip_value", self.clip_value >= 0, ">= 0"),
            ("gamma", 0 < self.gamma <= 1, "in (0, 1]"), ("gae_lambda", 0 <= self.gae_lambda <= 1, "in [0, 1]"),
            ("grad_clip", self.grad_clip > 0, "> 0"), ("critic_warmup", self.critic_warmup >= 0, ">= 0"),
            ("anchor_weight", self.anchor_weight >= 0, ">= 0"),
            ("anchor_decay", 0 <= self.anchor_decay <= 1, "in [0, 1]"),
            ("shaping", self.shaping >= 0, ">= 0"), ("eval_every", self.eval_every >= 0, ">= 0"),
            ("eval_episodes", self.eval_episodes >= 1, ">= 1"),
            ("checkpoint_every", self.checkpoint_every >= 1, ">= 1"),
            ("hidden", self.hidden >= 1, ">= 1"), ("threads", self.threads >= 0, ">= 0"),
        ])
        if self.anchor_weight and self.from_scratch:
            raise ValueError("--anchor-weight needs a pretrained policy; use 0 with --from-scratch")
        if self.continue_prob and not self.from_scratch:
            raise ValueError("--continue-prob sets up a fresh verdict head; use it with --from-scratch")

    @property
    def frozen_encoder(self) -> bool:
        return self.encoder_lr == 0

    @property
    def iterations(self) -> int:
        return self.total_frames // self.frames_per_batch
