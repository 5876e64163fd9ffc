"""Options of the pretraining commands, as typed dataclasses (light to import: the CLI builds its help from them)."""

from __future__ import annotations

from dataclasses import dataclass

from robot_rl.options import option, validate

# Kept in step with robot_rl.envs.difficulty.DIFFICULTIES (a test checks); importing the env package here would
# make `robot-rl --help` load MuJoCo.
DIFFICULTY_NAMES = ("easy", "default", "hard")
# Kept in step with robot_rl.envs.randomization.RANDOMIZATIONS (the same test checks).
RANDOMIZATION_NAMES = ("none", "default", "strong")
RANDOMIZATION_HELP = ("domain randomization of the camera view (lights, colours, camera mount, noise): none, "
                      "default or strong")


@dataclass(frozen=True)
class CollectConfig:
    """Options of ``robot-rl collect-demos``."""

    out: str = option("data/demos", "dataset folder (created, or appended to)")
    episodes: int = option(200, "episodes this run adds")
    difficulty: str = option("default", "task difficulty: easy, default or hard")
    image_size: int = option(84, "wrist camera image side, pixels (32-224)")
    randomization: str = option("none", RANDOMIZATION_HELP)
    pose_noise: float = option(0.1, "std of Gaussian noise on the executed pose (the clean pose is the label)")
    seed: int = option(-1, "run seed; -1 resumes an interrupted run or takes the next unused seed")
    num_envs: int = option(0, "envs collecting in parallel (0 = one per CPU core)")
    episodes_per_commit: int = option(8, "whole episodes written and committed together")

    def __post_init__(self) -> None:
        validate(self, [
            ("episodes", self.episodes >= 1, ">= 1"), ("image_size", 32 <= self.image_size <= 224, "in [32, 224]"),
            ("pose_noise", self.pose_noise >= 0, ">= 0"), ("num_envs", self.num_envs >= 0, ">= 0"),
            ("episodes_per_commit", self.episodes_per_commit >= 1, ">= 1"), ("seed", self.seed >= -1, ">= -1"),
            ("difficulty", self.difficulty in DIFFICULTY_NAMES, f"one of {', '.join(DIFFICULTY_NAMES)}"),
            ("randomization", self.randomization in RANDOMIZATION_NAMES, f"one of {', '.join(RANDOMIZATION_NAMES)}"),
        ])


@dataclass(frozen=True)
class BCConfig:
    """Options of ``robot-rl pretrain``."""

    data: str = option("data/demos", "demonstration dataset folder (from collect-demos)")
    run_dir: str = option("runs/bc", "output folder: config, checkpoints, logs")
    epochs: int = option(20, "passes over the training frames")
    batch_size: int = option(64, "frames per gradient step")
    lr: float = option(3e-4, "AdamW peak learning rate (cosine decay to 0)")
    weight_decay: float = option(1e-4, "AdamW weight decay")
    grad_clip: float = option(10.0, "max gradient norm")
    val_fraction: float = option(0.1, "fraction of episodes held out for the validation loss")
    shift_pad: int = option(4, "random-shift augmentation, pixels (0 = off)")
    decision_weight: float = option(100.0, "weight of the pass-vs-rework loss on close views of the board")
    verdict_weight: float = option(5.0, "weight of a verdict frame against a 'continue' frame in the verdict loss")
    locate_weight: float = option(1.0, "weight of the auxiliary where-is-the-board loss (0 = off)")
    mode_weight: float = option(10.0, "weight of the squared error of the deterministic pose (0 = likelihood only)")
    eval_every: int = option(5, "closed-loop check every N epochs (0 = only at the end)")
    eval_episodes: int = option(50, "episodes per closed-loop check (held-out boards)")
    eval_seed: int = option(10_000_000, "first board seed of the closed-loop checks")
    eval_envs: int = option(0, "envs stepped together in a check (0 = one per CPU core)")
    device: str = option("auto", "auto, cpu, cuda or cuda:N")
    compile: bool = option(False, "torch.compile the actor network")
    seed: int = option(0, "seed of sampling, augmentation and initialization")
    image_size: int = option(0, "expected image side in pixels; 0 = the dataset's")
    hidden: int = option(256, "width of the MLP heads")
    min_scale: float = option(0.3, "lower bound of the pose distribution's scale (pre-tanh)")
    keypoints: int = option(32, "spatial-softmax keypoints beside the pooled image feature (0 = none)")
    joint_velocities: bool = option(False, "the policy reads the joint velocities too (default: angles only)")
    encoder_weights: str = option("", "local ResNet18 state dict to start from (e.g. ImageNet); '' = random")
    steps_per_epoch: int = option(0, "cap on gradient steps per epoch (0 = a full pass)")
    threads: int = option(0, "torch CPU threads (0 = torch's default)")

    def __post_init__(self) -> None:
        validate(self, [
            ("epochs", self.epochs >= 1, ">= 1"), ("batch_size", self.batch_size >= 1, ">= 1"),
            ("lr", self.lr > 0, "> 0"), ("weight_decay", self.weight_decay >= 0, ">= 0"),
            ("grad_clip", self.grad_clip > 0, "> 0"), ("val_fraction", 0 < self.val_fraction < 1, "in (0, 1)"),
            ("shift_pad", self.shift_pad >= 0, ">= 0"), ("decision_weight", self.decision_weight >= 0, ">= 0"),
            ("verdict_weight", self.verdict_weight > 0, "> 0"), ("locate_weight", self.locate_weight >= 0, ">= 0"),
            ("mode_weight", self.mode_weight >= 0, ">= 0"),
            ("eval_every", self.eval_every >= 0, ">= 0"), ("eval_episodes", self.eval_episodes >= 1, ">= 1"),
            ("eval_envs", self.eval_envs >= 0, ">= 0"), ("image_size", self.image_size >= 0, ">= 0"),
            ("hidden", self.hidden >= 1, ">= 1"), ("min_scale", self.min_scale > 0, "> 0"),
            ("keypoints", self.keypoints >= 0, ">= 0"),
            ("steps_per_epoch", self.steps_per_epoch >= 0, ">= 0"), ("threads", self.threads >= 0, ">= 0"),
        ])

    def policy_config(self):
        """The architecture options as a ``robot_rl.policy.PolicyConfig``."""
        from robot_rl.policy import PolicyConfig

        return PolicyConfig(hidden=self.hidden, min_scale=self.min_scale, keypoints=self.keypoints,
                            joint_velocities=self.joint_velocities,
                            encoder_weights=self.encoder_weights or None)
