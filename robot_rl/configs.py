"""Every command's options, as typed dataclasses: one field = one ``--option`` with its help and its check.

Light to import (no torch, no MuJoCo): the CLI builds its help from these. ``robot_rl.options`` turns a dataclass
into an argparse parser; the pipeline's presets (``robot_rl.pipeline.PRESETS``) are instances of these classes.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from robot_rl.envs.defaults import CAMERA_EXPOSURES, DEFAULT_ARM, DEFAULT_TASK
from robot_rl.options import option, validate

# Kept in step with every task's difficulty presets (robot_rl.envs.difficulty.DIFFICULTY_NAMES) and
# robot_rl.envs.randomization.RANDOMIZATIONS (a test checks); importing the env package here would make
# `robot-rl --help` load MuJoCo.
DIFFICULTY_NAMES = ("easy", "default", "hard")
RANDOMIZATION_NAMES = ("none", "default", "wide", "surfaces", "strong", "mount", "calibrated", "lights",
                       "rectified", "metered", "highlights")
RANDOMIZATION_HELP = ("domain randomization of the camera view (lights, colours, camera mount, noise): none, "
                      "default, wide (default plus tables of any colour, four solder masks, marks, twice the camera "
                      "mount range), surfaces (wide with default's camera mount), strong, mount (surfaces with "
                      "the camera up to 12 mm and 6 deg off its mount), calibrated (mount in a cell that "
                      "measured its camera: the arm controls the camera where it sits, to within 2 mm and 1 deg), "
                      "lights (calibrated with light intensity x0.3-2.0), rectified (calibrated in a cell that "
                      "measured its lens too, to within 0.5 deg, and resamples every image to the nominal lens), "
                      "metered (rectified with a camera that sets its exposure from the centre of its image), or "
                      "highlights (metered, its camera metering the highlights in that centre)")
# Arms and tasks are checked where the env is built (an unknown name or a bad ArmSpec file exits 2 there): a user's
# arm is a JSON file and a user's task a Python class, which only the env package can read.
TASK_HELP = ("what the camera inspects: pcb-inspect (a board's components, from straight above), lead-inspect "
             "(a connector's pins, from its open side: the view must tilt), or your own task as module:Class (a "
             "Task subclass in an importable module, imported to run it: docs/guides/own-task.md); robot-rl list "
             "shows them")
ARM_HELP = "the arm carrying the camera: a registered name (ur5e_like, panda) or an ArmSpec .json file"
IMAGE_SIZES = (32, 224)  # smallest and largest wrist camera image side
MAX_HIDDEN, MAX_KEYPOINTS = 4096, 512  # architecture bounds, also where checkpoints and exports are read
COLLECTORS = ("direct", "process", "ray")
VIDEO_QUALITIES = ("pretty", "fast")
VIDEO_CODECS = ("h264", "libsvtav1", "none")  # export-dataset (none: PNG frames)
EXPORT_FORMATS = ("torchscript", "export", "onnx", "safetensors", "all")
PIPELINE_PRESETS = ("quick", "full")
PIPELINE_STAGE_SWITCHES = ("auto", "on", "off")  # pipeline --dagger / --encoder: robot_rl.pipeline.for_options
LOGGERS = ("csv", "tensorboard", "wandb", "mlflow")
JOINT_SCALINGS = ("bounds", "demos")  # pretrain --joint-scaling
PRECISIONS = ("auto", "fp32", "bf16")  # robot_rl.precision
PRECISION_HELP = ("compute precision of the image encoder: auto (bf16 where the CPU or GPU runs it natively, else "
                  "fp32), fp32 or bf16; weights, optimizer state, checkpoints and exports stay fp32")
TRUST_CODE_HELP = ("import the task module (module:Class) that a dataset, checkpoint or export names: importing runs "
                   "its code, so only for files you trust (--task module:Class also allows that one)")
CHECKPOINT_KINDS = ("last", "best")  # robot_rl.checkpoints.policy_checkpoint: which checkpoint a run folder means
CHECKPOINT_KIND_HELP = ("which checkpoint a run folder given as --policy means: last (checkpoints/last.pt, the policy "
                        "the run ended with, which the project reports) or best (best.pt, its best held-out check); "
                        "a .pt file means itself")
# pretrain --recolour: the segmentation classes (robot_rl.envs.perception.SEGMENTATION_CLASSES) a demo frame's
# colours may be redrawn for. The parts and the arm keep theirs: the verdict is read from the parts.
RECOLOUR_CLASSES = ("table", "board", "background")
# finetune --exploration (robot_rl.finetune.exploration resolves it): how widely PPO samples around its start.
# The verdict answers where the policy is sure (no continue floor), and a tenth of the pose scale BC learned is kept
# over a floor of 0.02 pre-tanh: where the sampled lead start succeeds as often as its deterministic policy.
LOW_NOISE = {"answer_temperature": 0.1, "continue_floor": 0.0, "pose_scale_factor": 0.1, "pose_min_scale": 0.02}
# With that noise the actor's learning rate is scaled by the same tenth (FinetuneConfig.lr's 3e-5 -> 3e-6): a tenth
# of the pose scale makes a step of one size ten times as far in the policy's own terms, and PPO's KL stop reads each
# minibatch before its step, the first at a KL of 0, so an iteration's first step is never checked.
LOW_NOISE_LR = 3e-6
# Waiting at the inspection view costs 0.05 a step: the runs that measured these settings did so with the cost, as a
# policy sampled this close to its start otherwise waits there where its start waited.
LOW_EXPLORATION = {**LOW_NOISE, "lr": LOW_NOISE_LR, "dwell_penalty": 0.05}
# A start "works" from this held-out check success: the level --dagger auto stops its rounds at.
WORKING_START = 0.8
EXPLORATIONS = ("default", "low", "auto")

LOGGER_HELP = ("where scalars go besides the run folder's CSV log (always written): csv (nothing more), tensorboard, "
               "wandb (offline, under the run folder) or mlflow (a file store under the run folder)")


def _one_of(names) -> str:
    return f"one of {', '.join(names)}"


# --help's argument groups: title -> field names (a command's other options come first, under its own title).
OPTION_GROUPS = {
    "input and output": ("data", "init", "checkpoint", "checkpoint_kind", "from_scratch", "run_dir", "out", "root",
                         "format", "video_codec", "crf"),
    "task and environment": ("task", "arm", "difficulty", "image_size", "randomization", "pose_noise",
                             "perturbations"),
    "policy architecture": ("hidden", "min_scale", "keypoints", "joint_velocities", "continue_head",
                            "encoder_weights", "critic_hidden"),
    "closed-loop checks (held-out boards)": ("eval_every", "eval_episodes", "eval_seed", "eval_envs"),
    "videos": ("videos", "failure_videos", "video_height", "video_quality", "video_slowdown"),
    "compute": ("device", "precision", "compile", "threads", "num_envs", "workers", "collector", "ray_address",
                "worker_device", "episodes_per_commit"),
    "logs and checkpoints": ("logger", "checkpoint_every"),
    "trust": ("trust_code",),
}
# The groups that are not part of a training recipe (what pretrain and finetune say they differ from).
NOT_RECIPE = ("input and output", "task and environment", "compute", "logs and checkpoints", "trust")


# -- the options several commands share, each declared once (a command's own wording goes in as an argument) ----
def device_option(part: str = "") -> Any:
    """``--device``: where the command (or its ``part``, e.g. the learner) computes."""
    return option("auto", f"{part} device: auto, cpu, cuda or cuda:N" if part else "auto, cpu, cuda or cuda:N")


def precision_option(more: str = "") -> Any:
    """``--precision`` (``robot_rl.precision``); ``more`` adds what it covers in this command."""
    return option("auto", PRECISION_HELP + more, choices=PRECISIONS)


def threads_option(help_text: str = "torch CPU threads (0 = torch's default)") -> Any:
    return option(0, help_text)


def logger_option() -> Any:
    return option("csv", LOGGER_HELP, choices=LOGGERS)


def trust_code_option(names_a_task: bool = True) -> Any:
    """``--trust-code``; a command without ``--task`` (``names_a_task`` False) leaves out what that option allows."""
    return option(False, TRUST_CODE_HELP if names_a_task
                  else TRUST_CODE_HELP.replace(" (--task module:Class also allows that one)", ""))


def task_option(more: str = "") -> Any:
    """``--task`` of a command that makes a new artefact (one that reads an artefact takes the artefact's task)."""
    return option(DEFAULT_TASK, TASK_HELP + more)


def arm_option() -> Any:
    """``--arm`` of a command that makes a new artefact."""
    return option(DEFAULT_ARM, ARM_HELP)


def difficulty_option(help_text: str = "task difficulty") -> Any:
    return option("default", help_text, choices=DIFFICULTY_NAMES)


def policy_option(default: str, help_text: str, old_flag: str) -> Any:
    """The field of the policy a command reads or starts from: ``--policy`` everywhere (formerly ``--old_flag``)."""
    return option(default, help_text, flag="policy", old_flags=(old_flag,))


def output_option(default: str, help_text: str, old_flag: str) -> Any:
    """The field of the folder a command writes: ``--out`` everywhere (formerly ``--old_flag``)."""
    return option(default, help_text, flag="out", old_flags=(old_flag,))


def checkpoint_kind_option() -> Any:
    return option("last", CHECKPOINT_KIND_HELP, choices=CHECKPOINT_KINDS)


def eval_board_seed_option(default: int) -> Any:
    """The first board seed of a training run's closed-loop checks: ``--eval-board-seed`` (formerly
    ``--eval-seed``)."""
    return option(default, "first board seed of the closed-loop checks (check k inspects boards seed ... seed + "
                  "episodes - 1)", flag="eval-board-seed", old_flags=("eval-seed",))


# -- the actor's architecture: its one home ---------------------------------------------------------------------
@dataclass(frozen=True)
class ActorArchitecture:
    """The actor's architecture options and their defaults, defined once: ``pretrain`` takes them as options
    (``BCConfig``), ``robot_rl.policy.PolicyConfig`` adds what fine-tuning sets at run time, and fine-tuning
    --from-scratch builds these defaults (a BC init keeps its checkpoint's architecture)."""

    hidden: int = option(256, "width of the actor's two-layer MLP heads")
    min_scale: float = option(0.3, "lower bound of the pose distribution's scale (pre-tanh)")
    keypoints: int = option(32, "spatial-softmax keypoints on ResNet18's layer2 beside the pooled image feature "
                            "(0 = none)")
    joint_velocities: bool = option(False, "the policy reads the joint velocities too, not only the angles")
    continue_head: bool = option(False, "when to answer from an MLP of its own (p(answer now) = its sigmoid); pass "
                                 "vs rework stay with the pose's MLP (off: one MLP writes all)")
    encoder_weights: str = option("", "local ResNet18 state dict to start from (e.g. ImageNet); '' = random")

    def architecture_checks(self) -> list[tuple[str, bool, str]]:
        return [("hidden", 1 <= self.hidden <= MAX_HIDDEN, f"in [1, {MAX_HIDDEN}]"),
                ("min_scale", self.min_scale > 0, "> 0"),
                ("keypoints", 0 <= self.keypoints <= MAX_KEYPOINTS, f"in [0, {MAX_KEYPOINTS}]")]

    def architecture(self) -> dict:
        """These options' values, by name."""
        return {f.name: getattr(self, f.name) for f in fields(ActorArchitecture)}


# -- the scripted expert and its demonstrations ------------------------------------------------------------------
@dataclass(frozen=True)
class DemoConfig:
    """Options of ``robot-rl demo``."""

    task: str = task_option()
    difficulty: str = difficulty_option()
    image_size: int = option(84, "wrist camera image side (pixels, 32-224)")
    arm: str = arm_option()
    seed: int = option(0, "first board seed: episode k inspects board seed + k", flag="board-seed",
                       old_flags=("seed",))
    episodes: int = option(3, "episodes to run")
    frames: int = option(4, "PNG frames written per episode")
    out: str = option("runs/demo", "output folder: frames/ and metrics.json (each episode's metrics)")

    def __post_init__(self) -> None:
        validate(self, [
            ("difficulty", self.difficulty in DIFFICULTY_NAMES, _one_of(DIFFICULTY_NAMES)),
            ("image_size", IMAGE_SIZES[0] <= self.image_size <= IMAGE_SIZES[1], "in [32, 224]"),
            ("episodes", self.episodes >= 1, ">= 1"), ("frames", self.frames >= 1, ">= 1"),
            ("seed", self.seed >= 0, ">= 0"),  # board seeds
        ])


@dataclass(frozen=True)
class CollectConfig:
    """Options of ``robot-rl collect-demos``."""

    out: str = option("data/demos", "dataset folder (created, or appended to)")
    episodes: int = option(200, "episodes this run adds")
    task: str = task_option("; a dataset holds one task")
    difficulty: str = difficulty_option()
    image_size: int = option(84, "wrist camera image side, pixels (32-224)")
    randomization: str = option("none", RANDOMIZATION_HELP, choices=RANDOMIZATION_NAMES)
    arm: str = arm_option()
    pose_noise: float = option(0.1, "std of Gaussian noise on the executed pose (the clean pose is the label)")
    seed: int = option(-1, "seed of this collection run (its boards and pose noise); -1 resumes an interrupted run "
                       "or takes the next unused seed")
    num_envs: int = option(0, "envs collecting in parallel (0 = one per CPU core)")
    episodes_per_commit: int = option(8, "whole episodes written and committed together")
    masks: bool = option(False, "also record each frame's segmentation mask (uint8, a class per pixel: background, "
                         "table, board, parts, arm), which pretrain --recolour reads; a dataset holds masks for all "
                         "its frames or for none")

    def __post_init__(self) -> None:
        validate(self, [
            ("episodes", self.episodes >= 1, ">= 1"), ("image_size", 32 <= self.image_size <= 224, "in [32, 224]"),
            ("pose_noise", self.pose_noise >= 0, ">= 0"), ("num_envs", self.num_envs >= 0, ">= 0"),
            ("episodes_per_commit", self.episodes_per_commit >= 1, ">= 1"), ("seed", self.seed >= -1, ">= -1"),
            ("difficulty", self.difficulty in DIFFICULTY_NAMES, f"one of {', '.join(DIFFICULTY_NAMES)}"),
            ("randomization", self.randomization in RANDOMIZATION_NAMES, f"one of {', '.join(RANDOMIZATION_NAMES)}"),
        ])


@dataclass(frozen=True)
class BCConfig(ActorArchitecture):
    """Options of ``robot-rl pretrain`` (the architecture options first, from ``ActorArchitecture``)."""

    data: str = option("data/demos", "demonstration dataset folder: from collect-demos, or a LeRobot v3.0 dataset "
                       "(read once into the run folder)")
    run_dir: str = output_option("runs/bc", "run folder to write: config, checkpoints, logs", "run-dir")
    init: str = policy_option("", "policy to start from: a BC run folder or checkpoint of the same architecture, "
                              "task, arm and image size ('' = fresh weights)", "init")
    checkpoint_kind: str = checkpoint_kind_option()
    # The defaults are the recipe the README measures (benchmarks/bc_quality.py: 1,200 demos, 6 epochs, batch 64,
    # a 100-board check every 2 epochs).
    epochs: int = option(6, "passes over the training frames")
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
    timing_weight: float = option(0.0, "weight of the balanced answer-now-or-wait loss on close views of the "
                                  "board (0 = off: when to answer is learned from the verdict loss alone)")
    eval_every: int = option(2, "closed-loop check every N epochs (0 = only at the end)")
    eval_episodes: int = option(100, "episodes per closed-loop check (held-out boards)")
    eval_seed: int = eval_board_seed_option(10_000_000)
    eval_envs: int = option(0, "envs stepped together in a check (0 = one per CPU core)", flag="num-envs",
                            old_flags=("eval-envs",))
    device: str = device_option()
    precision: str = precision_option()
    compile: bool = option(False, "torch.compile the actor's image encoder (the heads stay eager)")
    seed: int = option(0, "training seed: sampling, augmentation and initialization")
    image_size: int = option(0, "expected image side in pixels; 0 = the dataset's")
    randomization: str = option("", "expected domain randomization of the demos (and of the closed-loop checks); "
                                "'' = the dataset's", choices=RANDOMIZATION_NAMES)
    steps_per_epoch: int = option(0, "cap on gradient steps per epoch (0 = a full pass)")
    threads: int = threads_option()
    logger: str = logger_option()
    joint_scaling: str = option("bounds", "how the policy scales the joint state it reads: bounds (the env spec's) "
                                "or demos (the training frames' mean and std)", choices=JOINT_SCALINGS)
    trust_code: bool = trust_code_option(names_a_task=False)
    recolour: str = option("", "segmentation-aware colour augmentation: recolour these classes of a demo frame at "
                           "train time, comma-separated from " + ", ".join(RECOLOUR_CLASSES) + " ('' = off; needs "
                           "demos collected with --masks)")
    recolour_prob: float = option(0.8, "fraction of training frames --recolour recolours (each class of a frame "
                                  "independently)")
    exposure: float = option(0.0, "exposure augmentation: each training frame is scaled by a factor drawn "
                             "log-uniformly in [1/(1+E), 1+E] and clipped to 0-255, as a brighter or dimmer light "
                             "makes it (0 = off)")
    zoom: float = option(0.0, "zoom augmentation: each training frame is scaled about its centre by a factor drawn "
                         "log-uniformly in [1/(1+Z), 1+Z], as another field of view makes it (0 = off)")

    def recolour_classes(self) -> tuple[str, ...]:
        """The classes ``recolour`` names, in the order given."""
        return tuple(name.strip() for name in self.recolour.split(",") if name.strip())

    def __post_init__(self) -> None:
        validate(self, [
            ("checkpoint_kind", self.checkpoint_kind in CHECKPOINT_KINDS, _one_of(CHECKPOINT_KINDS)),
            ("recolour", set(self.recolour_classes()) <= set(RECOLOUR_CLASSES), f"'' or a comma-separated list "
             f"from {', '.join(RECOLOUR_CLASSES)}"),
            ("recolour_prob", 0 <= self.recolour_prob <= 1, "in [0, 1]"),
            ("exposure", 0 <= self.exposure <= 4, "in [0, 4]"),
            ("zoom", 0 <= self.zoom <= 1, "in [0, 1]"),
            ("logger", self.logger in LOGGERS, _one_of(LOGGERS)),
            ("precision", self.precision in PRECISIONS, _one_of(PRECISIONS)),
            ("joint_scaling", self.joint_scaling in JOINT_SCALINGS, _one_of(JOINT_SCALINGS)),
            ("epochs", self.epochs >= 1, ">= 1"), ("batch_size", self.batch_size >= 1, ">= 1"),
            ("lr", self.lr > 0, "> 0"), ("weight_decay", self.weight_decay >= 0, ">= 0"),
            ("eval_seed", self.eval_seed >= 0, ">= 0"),  # board seeds
            ("grad_clip", self.grad_clip > 0, "> 0"), ("val_fraction", 0 < self.val_fraction < 1, "in (0, 1)"),
            ("shift_pad", self.shift_pad >= 0, ">= 0"), ("decision_weight", self.decision_weight >= 0, ">= 0"),
            ("verdict_weight", self.verdict_weight > 0, "> 0"), ("locate_weight", self.locate_weight >= 0, ">= 0"),
            ("mode_weight", self.mode_weight >= 0, ">= 0"), ("timing_weight", self.timing_weight >= 0, ">= 0"),
            ("eval_every", self.eval_every >= 0, ">= 0"), ("eval_episodes", self.eval_episodes >= 1, ">= 1"),
            ("eval_envs", self.eval_envs >= 0, ">= 0"), ("image_size", self.image_size >= 0, ">= 0"),
            *self.architecture_checks(),
            ("randomization", self.randomization in ("", *RANDOMIZATION_NAMES),
             f"'' or {_one_of(RANDOMIZATION_NAMES)}"),
            ("steps_per_epoch", self.steps_per_epoch >= 0, ">= 0"), ("threads", self.threads >= 0, ">= 0"),
        ])


# -- DAgger ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DAggerConfig:
    """Options of ``robot-rl dagger``: rounds of rollouts of the current policy labelled by the task's expert,
    aggregated with the demos, each followed by BC continued on the aggregate (the init run's BC options)."""

    init: str = policy_option("runs/bc", "BC run folder to start from; its demos and BC options are reused", "init")
    checkpoint_kind: str = checkpoint_kind_option()
    run_dir: str = output_option("runs/dagger", "run folder to write: config, the aggregate dataset, one BC run per "
                                 "round", "run-dir")
    rounds: int = option(4, "DAgger rounds (rollouts, labels, BC on the aggregate, a check)")
    episodes_per_round: int = option(100, "rollout episodes per round, on fresh training boards")
    epochs_per_round: int = option(2, "BC epochs on the aggregate after each round's rollouts")
    beta: float = option(0.5, "probability that the expert's action is executed in round 1 instead of the policy's "
                         "(0 = plain DAgger: the policy acts, the expert only labels)")
    beta_decay: float = option(0.5, "beta of round k = beta x beta_decay^(k-1)")
    include_demos: bool = option(True, "the aggregate starts with the init run's demos (DAgger's D0)")
    num_envs: int = option(0, "envs rolling out together, each in its own process (0 = one per CPU core)")
    eval_episodes: int = option(50, "episodes of each round's closed-loop check (held-out boards)")
    eval_seed: int = eval_board_seed_option(10_000_000)
    until_success: float = option(0.0, "no more rounds once a check reaches this success rate, the init policy's "
                                  "included (it may then run none); 0 = every round")
    until_flat: bool = option(False, "no more rounds after one whose check does not beat every earlier check "
                              "(the init policy's included); the run then ends with the best-checked round's "
                              "policy")
    device: str = device_option()
    precision: str = precision_option()
    seed: int = option(0, "training seed: the rollout boards, the beta draws and each round's BC")
    trust_code: bool = trust_code_option()

    def __post_init__(self) -> None:
        validate(self, [
            ("checkpoint_kind", self.checkpoint_kind in CHECKPOINT_KINDS, _one_of(CHECKPOINT_KINDS)),
            ("init", bool(self.init), "a BC run folder"), ("rounds", self.rounds >= 1, ">= 1"),
            ("episodes_per_round", self.episodes_per_round >= 1, ">= 1"),
            ("epochs_per_round", self.epochs_per_round >= 1, ">= 1"),
            ("beta", 0 <= self.beta <= 1, "in [0, 1]"), ("beta_decay", 0 <= self.beta_decay <= 1, "in [0, 1]"),
            ("num_envs", self.num_envs >= 0, ">= 0"), ("eval_episodes", self.eval_episodes >= 1, ">= 1"),
            ("eval_seed", self.eval_seed >= 0, ">= 0"), ("seed", self.seed >= 0, ">= 0"),
            ("precision", self.precision in PRECISIONS, _one_of(PRECISIONS)),
            ("until_success", 0 <= self.until_success <= 1, "in [0, 1]"),
        ])

    def beta_of(self, round_index: int) -> float:
        """The expert's share of executed actions in round ``round_index`` (0-based)."""
        return self.beta * self.beta_decay**round_index

    def rounds_wanted(self, successes: list[float]) -> int:
        """The rounds the run is to have, given the checks so far (``successes[0]``: the init policy's): every
        round, unless a stop rule ends it at the rounds done (``len(successes) - 1``)."""
        done = len(successes) - 1
        reached = bool(successes) and 0 < self.until_success <= successes[-1]
        flat = self.until_flat and done >= 1 and not successes[-1] > max(successes[:-1])
        return done if reached or flat else self.rounds


# -- PPO fine-tuning ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FinetuneConfig:
    """PPO fine-tuning: every field is one ``--option``."""

    init: str = policy_option("", "BC run folder (or checkpoint) to start the actor from; '' with --from-scratch",
                              "init")
    checkpoint_kind: str = checkpoint_kind_option()
    from_scratch: bool = option(False, "start from random weights, same architecture")
    run_dir: str = output_option("runs/ppo", "run folder to write: config, checkpoints, logs", "run-dir")
    difficulty: str = option("", "task difficulty; '' = the BC run's (default for --from-scratch)",
                             choices=DIFFICULTY_NAMES)
    image_size: int = option(0, "image side in pixels; 0 = the BC run's (84 for --from-scratch)")
    randomization: str = option("", "domain randomization; '' = the BC run's (none for --from-scratch)",
                                choices=RANDOMIZATION_NAMES)
    arm: str = option("", f"{ARM_HELP}; '' = the BC run's ({DEFAULT_ARM} for --from-scratch); another arm than the "
                      "BC run's is refused")
    task: str = option("", f"{TASK_HELP}; '' = the BC run's ({DEFAULT_TASK} for --from-scratch); another task than "
                       "the BC run's is refused")
    # The defaults are the design the README measures (benchmarks/protocols.py's few preset, the pipeline's
    # quick preset): 64 iterations of 1,024 frames from 8 envs, 8 PPO epochs of 256-frame minibatches, 2 critic
    # warm-up iterations, shaping 1, a 50-board check every 4 iterations.
    total_frames: int = option(65_536, "environment frames to collect")
    frames_per_batch: int = option(1024, "frames collected per PPO iteration")
    num_envs: int = option(8, "envs collecting together (per learner rank)")
    collector: str = option("direct", "collection backend: direct (this process), process (worker processes, "
                            "MultiSyncCollector) or ray (Ray actors, local or on a cluster)", choices=COLLECTORS)
    workers: int = option(0, "direct: ParallelEnv processes stepping num_envs / workers envs each (0 = step "
                          "them here); process/ray: collector workers, each with its envs and a policy copy")
    ray_address: str = option("", "ray: cluster address ('' starts a local Ray instance)")
    worker_device: str = option("cpu", "process/ray: device of the workers' policy copies")
    ppo_epochs: int = option(8, "passes over each batch")
    minibatch_size: int = option(256, "frames per gradient step")
    lr: float = option(3e-5, "learning rate of the actor's heads (one Adam step at 1e-4 moved most of a batch's "
                       "actions outside PPO's clip range)")
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
    critic_warmup: int = option(2, "first iterations update only the critic (actor frozen)")
    anchor_weight: float = option(0.0, "weight of KL(pretrained || current) at the first actor update (0 = off: an "
                                  "anchor to an imperfect BC policy caps the lift, README 'Fine-tuning design')",
                                  ablation=True)
    anchor_decay: float = option(0.95, "per-iteration decay of the anchor weight (DAPG's 0.95^k)", ablation=True)
    anchor_floor: float = option(0.0, "the anchor weight never decays below this (0 = decays away; no anchor with "
                                 "--anchor-weight 0)", ablation=True)
    target_kl: float = option(0.02, "stop an iteration's PPO epochs at the first minibatch whose approximate KL to "
                              "the collecting policy exceeds 1.5 x this (0 = off)")
    answer_temperature: float = option(0.25, "temperature of the verdict's answer-now decision while fine-tuning "
                                       "(1 = BC's 3-way softmax; < 1 answers where the policy is sure)")
    continue_floor: float = option(0.05, "while fine-tuning, the verdict continues with at least this probability "
                                   "on every step, so an answer given too early is still questioned (0 = off)")
    exploration: str = option("default", "how widely PPO samples around the start policy: default (the noise "
                              "options' own values), low (a sharp verdict, a tenth of BC's pose scale over 0.02 and "
                              "a tenth of the actor's learning rate, waiting at the view costing 0.05: a start that "
                              "works stays working), auto (low when the start's own held-out check is at least "
                              "80%%, else default)")
    anchor_pose_only: bool = option(False, "anchor the pose head only, leaving the verdicts free", ablation=True)
    mask_verdict_pose: bool = option(True, "leave the pose's log-prob out of the ratio on steps that give a verdict",
                                     ablation=True)
    verdict_ce_weight: float = option(1.0, "weight of the verdict cross-entropy whose labels the verdict reward "
                                      "reveals (0 = off)", ablation=True)
    guess_ce_weight: float = option(0.0, "weight of a cross-entropy toward 'continue' on every guess (a verdict "
                                    "given with the board not localized, the env's flag); 0 = off", ablation=True)
    continue_prob: float = option(0.0, "--from-scratch: initial probability of 'continue' (verdict head bias), so "
                                  "early episodes last long enough to explore; 0 = leave the head as initialized")
    pose_min_scale: float = option(0.1, "lower bound of the pose TanhNormal's scale while fine-tuning (pre-tanh); "
                                   "0 = the policy's own (BC's 0.3 makes most sampled episodes fail)")
    pose_scale_factor: float = option(1.0, "while fine-tuning, the share of the start policy's learned pose scale "
                                      "(above --pose-min-scale) kept: BC's scale follows the demonstrations' "
                                      "spread, which can make sampled episodes fail where the policy succeeds "
                                      "(1 = all of it)")
    residual_scale: float = option(0.0, "train a residual on the frozen BC policy instead of its heads: a zero-"
                                   "initialized MLP adds at most this much to the pose's loc (pre-tanh); the "
                                   "verdict stays BC's (0 = off: PPO fine-tunes the heads)")
    shaping: float = option(1.0, "weight of the env's potential-based shaping term (0 = off)")
    guess_penalty: float = option(1.0, "subtracted from the reward of a verdict given while the board is not "
                                  "localized, so the reward agrees with success (0 = the env's reward: a lucky "
                                  "guess pays as much as an inspection)")
    dwell_penalty: float = option(0.0, "subtracted from the reward of every step that ends at the inspection view "
                                  "without a verdict, so waiting there costs (0 = off: only discounting does)")
    eval_every: int = option(4, "closed-loop check every N iterations (0 = only at the end)")
    eval_episodes: int = option(50, "episodes per closed-loop check (held-out boards)")
    eval_seed: int = eval_board_seed_option(20_000_000)
    checkpoint_every: int = option(4, "checkpoint every N iterations (and on Ctrl-C)")
    device: str = device_option("learner")
    precision: str = precision_option("; collection workers follow their own device")
    compile: bool = option(False, "torch.compile the actor's image encoder (the heads and critic stay eager)")
    seed: int = option(0, "training seed: collection, sampling and initialization")
    critic_hidden: int = option(256, "MLP width of the critic (the actor's architecture is the BC run's, or "
                                "ActorArchitecture's defaults with --from-scratch)")
    threads: int = threads_option("torch CPU threads of the learner (0 = torch's default); while local env "
                                             "workers run, these minus one per worker (at least one)")
    logger: str = logger_option()
    trust_code: bool = trust_code_option()

    def __post_init__(self) -> None:
        validate(self, [
            ("checkpoint_kind", self.checkpoint_kind in CHECKPOINT_KINDS, _one_of(CHECKPOINT_KINDS)),
            ("init", bool(self.init) != self.from_scratch, "a BC run folder, or '' with --from-scratch"),
            ("logger", self.logger in LOGGERS, _one_of(LOGGERS)),
            ("precision", self.precision in PRECISIONS, _one_of(PRECISIONS)),
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
            ("guess_ce_weight", self.guess_ce_weight >= 0, ">= 0"),
            ("continue_prob", 0 <= self.continue_prob < 1, "in [0, 1)"),
            ("pose_min_scale", self.pose_min_scale >= 0, ">= 0"),
            ("pose_scale_factor", 0 < self.pose_scale_factor <= 1, "in (0, 1]"),
            ("residual_scale", 0 <= self.residual_scale < 10, "in [0, 10)"),
            ("clip_epsilon", 0 < self.clip_epsilon < 1, "in (0, 1)"),
            ("entropy_coeff", self.entropy_coeff >= 0, ">= 0"),
            ("critic_coeff", self.critic_coeff > 0, "> 0"), ("clip_value", self.clip_value >= 0, ">= 0"),
            ("gamma", 0 < self.gamma <= 1, "in (0, 1]"), ("gae_lambda", 0 <= self.gae_lambda <= 1, "in [0, 1]"),
            ("grad_clip", self.grad_clip > 0, "> 0"), ("critic_warmup", self.critic_warmup >= 0, ">= 0"),
            ("anchor_weight", self.anchor_weight >= 0, ">= 0"),
            ("anchor_decay", 0 <= self.anchor_decay <= 1, "in [0, 1]"),
            ("anchor_floor", 0 <= self.anchor_floor <= (self.anchor_weight or self.anchor_floor),
             "in [0, --anchor-weight]"),
            ("target_kl", self.target_kl >= 0, ">= 0"),
            ("answer_temperature", self.answer_temperature > 0, "> 0"),
            ("continue_floor", 0 <= self.continue_floor < 0.5, "in [0, 0.5)"),
            ("shaping", self.shaping >= 0, ">= 0"), ("guess_penalty", self.guess_penalty >= 0, ">= 0"),
            ("dwell_penalty", self.dwell_penalty >= 0, ">= 0"),
            ("exploration", self.exploration in EXPLORATIONS, _one_of(EXPLORATIONS)),
            ("eval_every", self.eval_every >= 0, ">= 0"),
            ("eval_episodes", self.eval_episodes >= 1, ">= 1"),
            ("checkpoint_every", self.checkpoint_every >= 1, ">= 1"),
            ("critic_hidden", self.critic_hidden >= 1, ">= 1"), ("threads", self.threads >= 0, ">= 0"),
            ("seed", self.seed >= 0, ">= 0"), ("eval_seed", self.eval_seed >= 0, ">= 0"),  # board seeds
        ])
        if self.anchor_weight and self.from_scratch:
            raise ValueError("--anchor-weight needs a pretrained policy; use 0 with --from-scratch")
        if self.residual_scale and self.from_scratch:
            raise ValueError("--residual-scale corrects a pretrained policy; use 0 with --from-scratch")
        if self.residual_scale and self.encoder_lr:
            raise ValueError("--residual-scale keeps the pretrained policy, its encoder included, as it is; use "
                             "--encoder-lr 0")
        if self.continue_prob and not self.from_scratch:
            raise ValueError("--continue-prob sets up a fresh verdict head; use it with --from-scratch")
        if self.exploration != "default":
            defaults = {f.name: f.default for f in fields(self)}
            for name, value in LOW_EXPLORATION.items():
                if getattr(self, name) not in (defaults[name], value):
                    raise ValueError(f"--exploration {self.exploration} sets --{name.replace('_', '-')}; leave it "
                                     "out, or use --exploration default")

    @property
    def frozen_encoder(self) -> bool:
        return self.encoder_lr == 0

    @property
    def iterations(self) -> int:
        return self.total_frames // self.frames_per_batch


# -- evaluation, export, the whole pipeline --------------------------------------------------------------------
@dataclass(frozen=True)
class EvaluateConfig:
    """Options of ``robot-rl evaluate``."""

    checkpoint: str = policy_option("", "the policy: a run folder, a checkpoint .pt file or exported weights "
                                    "(model.safetensors or its folder)", "checkpoint")
    checkpoint_kind: str = checkpoint_kind_option()
    out: str = option("", "report folder; '' = <the policy's run folder>/eval")
    episodes: int = option(100, "episodes, one per board seed")
    seed: int = option(30_000_000, "first board seed: episode k inspects board seed + k", flag="board-seed",
                       old_flags=("seed",))
    difficulty: str = option("", "task difficulty; '' = the policy's", choices=DIFFICULTY_NAMES)
    randomization: str = option("", "domain randomization; '' = the policy's", choices=RANDOMIZATION_NAMES)
    arm: str = option("", "'' = the policy's arm; another arm is refused (a policy knows one arm's joints)")
    task: str = option("", "'' = the policy's task; another task is refused (a policy learned one task); naming "
                       "its module:Class allows importing it")
    camera_exposure: str = option("", "the deployed wrist camera's exposure, under every setting evaluated: auto "
                                  "(it sets its exposure from the centre of its image every frame), highlights "
                                  "(from the highlights in that centre, held just under clipping), fixed (a "
                                  "constant exposure: frames as bright as the scene is lit), '' = the policy's "
                                  "camera, or the one --randomization names", choices=tuple(CAMERA_EXPOSURES))
    perturbations: bool = option(False, "also run the same boards under each shift of the perturbation suite "
                                 "(success per shift next to nominal, one failure video each)")
    num_envs: int = option(8, "envs stepped together (in this process)")
    stochastic: bool = option(False, "sample actions instead of the deterministic mode")
    videos: int = option(4, "MP4s of the first N episodes (every failed episode gets one too)")
    failure_videos: int = option(50, "cap on the MP4s of failed episodes")
    video_height: int = option(240, "third-person camera height in video frames, pixels (width = 4/3 x)")
    video_quality: str = option("pretty", "pretty (shadows, ~60 ms a frame in software GL) or fast (no shadows)",
                                choices=VIDEO_QUALITIES)
    video_slowdown: float = option(2.0, "videos play this many times slower than real time (1 = real time)")
    device: str = device_option()
    precision: str = precision_option()
    trust_code: bool = trust_code_option()

    def __post_init__(self) -> None:
        validate(self, [
            ("checkpoint_kind", self.checkpoint_kind in CHECKPOINT_KINDS, _one_of(CHECKPOINT_KINDS)),
            ("checkpoint", bool(self.checkpoint), "a run folder or checkpoint file"),
            ("episodes", self.episodes >= 1, ">= 1"), ("seed", self.seed >= 0, ">= 0"),
            ("difficulty", self.difficulty in ("", *DIFFICULTY_NAMES), f"'' or one of {', '.join(DIFFICULTY_NAMES)}"),
            ("randomization", self.randomization in ("", *RANDOMIZATION_NAMES),
             f"'' or one of {', '.join(RANDOMIZATION_NAMES)}"),
            ("camera_exposure", self.camera_exposure in ("", *CAMERA_EXPOSURES),
             f"'' or one of {', '.join(CAMERA_EXPOSURES)}"),
            ("num_envs", self.num_envs >= 1, ">= 1"), ("videos", self.videos >= 0, ">= 0"),
            ("failure_videos", self.failure_videos >= 0, ">= 0"),
            ("video_height", 64 <= self.video_height <= 1080 and self.video_height % 2 == 0, "even, in [64, 1080]"),
            ("video_quality", self.video_quality in VIDEO_QUALITIES, f"one of {', '.join(VIDEO_QUALITIES)}"),
            ("video_slowdown", 1 <= self.video_slowdown <= 10, "in [1, 10]"),
            ("precision", self.precision in PRECISIONS, _one_of(PRECISIONS)),
        ])


@dataclass(frozen=True)
class ExportConfig:
    """Options of ``robot-rl export``."""

    checkpoint: str = policy_option("", "the policy: a run folder or a checkpoint .pt file", "checkpoint")
    checkpoint_kind: str = checkpoint_kind_option()
    out: str = option("", "output folder; '' = <the policy's run folder>/export")
    format: str = option("all", "torchscript, export (torch.export), onnx, safetensors (weights + config.json, for "
                         "load_actor), or all that are available", choices=EXPORT_FORMATS)
    trust_code: bool = trust_code_option(names_a_task=False)

    def __post_init__(self) -> None:
        validate(self, [
            ("checkpoint_kind", self.checkpoint_kind in CHECKPOINT_KINDS, _one_of(CHECKPOINT_KINDS)),
            ("checkpoint", bool(self.checkpoint), "a run folder or checkpoint file"),
            ("format", self.format in EXPORT_FORMATS, f"one of {', '.join(EXPORT_FORMATS)}"),
        ])


@dataclass(frozen=True)
class ExportDatasetConfig:
    """Options of ``robot-rl export-dataset``."""

    data: str = option("data/demos", "robot_rl demo dataset folder (from collect-demos)")
    out: str = option("", "LeRobot dataset folder to create; '' = DATA-lerobot")
    video_codec: str = option("h264", "wrist camera MP4 codec: h264 (plays in browsers), libsvtav1 (LeRobot's "
                              "default, smaller) or none (PNG frames in the parquet files: pixels exact, larger)",
                              choices=VIDEO_CODECS)
    crf: int = option(18, "video quality (constant rate factor: lower = closer to the stored pixels, larger files)")

    def __post_init__(self) -> None:
        validate(self, [
            ("data", bool(self.data), "a dataset folder"),
            ("video_codec", self.video_codec in VIDEO_CODECS, _one_of(VIDEO_CODECS)),
            ("crf", 0 <= self.crf <= 63, "in 0-63"),
        ])


@dataclass(frozen=True)
class PipelineConfig:
    """Options of ``robot-rl pipeline``."""

    preset: str = option("quick", "quick: minutes on 2 CPU cores; full: a budget meant for a GPU box (on a GPU, "
                         "either preset's envs step in workers on its cores)", choices=PIPELINE_PRESETS)
    root: str = output_option("", "folder of every stage's output ('' = runs/pipeline-PRESET, plus -TASK and -ARM "
                              "for another task than pcb-inspect or another arm than ur5e_like)", "root")
    checkpoint_kind: str = option("last", "which checkpoint of the BC and PPO runs the pipeline fine-tunes and "
                                  "evaluates: last (the policy each run ended with) or best (its best held-out "
                                  "check)", choices=CHECKPOINT_KINDS)
    task: str = task_option()
    arm: str = arm_option()
    dagger: str = option("auto", "a DAgger stage between pretrain and finetune (rollouts of the BC policy labelled "
                         "by the task's expert): on (the preset's rounds), off, or auto (up to 8 rounds, while the "
                         "policy's check is under 80%% and each round beats every earlier check: none when BC's "
                         "policy already checks at 80%%)", choices=PIPELINE_STAGE_SWITCHES)
    encoder: str = option("auto", "a pretrain-encoder stage before pretrain (the policy's ResNet18 trained on "
                          "labelled views of the demos' cell, loaded by BC): on, off, or auto (on: every task labels "
                          "its own views, and on every built-in task it was measured to pay)",
                          choices=PIPELINE_STAGE_SWITCHES)
    device: str = device_option()
    precision: str = precision_option(" (every stage)")

    def __post_init__(self) -> None:
        validate(self, [("preset", self.preset in PIPELINE_PRESETS, _one_of(PIPELINE_PRESETS)),
                        ("dagger", self.dagger in PIPELINE_STAGE_SWITCHES, _one_of(PIPELINE_STAGE_SWITCHES)),
                        ("encoder", self.encoder in PIPELINE_STAGE_SWITCHES, _one_of(PIPELINE_STAGE_SWITCHES)),
                        ("checkpoint_kind", self.checkpoint_kind in CHECKPOINT_KINDS, _one_of(CHECKPOINT_KINDS)),
                        ("precision", self.precision in PRECISIONS, _one_of(PRECISIONS))])


# -- encoder pretraining on labelled views -----------------------------------------------------------------------
@dataclass(frozen=True)
class EncoderPretrainConfig:
    """Options of ``robot-rl pretrain-encoder``: render labelled views under a randomization preset (cached in the
    run folder as uint8 memmaps), then train the policy's ResNet18 trunk and keypoints with small heads on them."""

    task: str = task_option()
    randomization: str = option("surfaces", RANDOMIZATION_HELP + "; drawn again for every view",
                                choices=RANDOMIZATION_NAMES)
    views: int = option(20_000, "labelled views to render (the last val_fraction of them validate)")
    run_dir: str = output_option("runs/encoder", "output folder: config, views/ (the cache), checkpoints, logs, "
                                 "encoder.pt", "run-dir")
    difficulty: str = difficulty_option("task difficulty (board placement, posts, lighting)")
    image_size: int = option(84, "wrist camera image side, pixels (32-224): the BC demos' size")
    arm: str = arm_option()
    keypoints: int = option(32, "spatial-softmax keypoints on layer2, trained with the trunk (BC's --keypoints "
                            "must match to load them)")
    pose_noise: float = option(0.3, "std of the noise on the expert's pose actions along its approaches")
    workspace_views: int = option(16, "views per board at camera poses drawn in the workspace (half near the "
                                  "inspection point), after the expert's approach")
    render_workers: int = option(1, "processes rendering the views (1 = this process)")
    epochs: int = option(8, "passes over the training views")
    batch_size: int = option(64, "views per gradient step")
    lr: float = option(1e-3, "AdamW peak learning rate (cosine decay to 0)")
    weight_decay: float = option(1e-4, "AdamW weight decay")
    grad_clip: float = option(10.0, "max gradient norm")
    shift_pad: int = option(4, "random-shift augmentation, pixels (0 = off); the pixel target moves with it")
    segmentation_weight: float = option(1.0, "weight of the per-pixel class loss (table, board, parts, ...)")
    val_fraction: float = option(0.05, "fraction of the views (the last ones: other boards) held out")
    device: str = device_option()
    precision: str = precision_option()
    seed: int = option(0, "seed of the views (boards, poses, appearances), initialization and sampling")
    threads: int = threads_option()

    def __post_init__(self) -> None:
        validate(self, [
            ("randomization", self.randomization in RANDOMIZATION_NAMES, _one_of(RANDOMIZATION_NAMES)),
            ("difficulty", self.difficulty in DIFFICULTY_NAMES, _one_of(DIFFICULTY_NAMES)),
            ("image_size", IMAGE_SIZES[0] <= self.image_size <= IMAGE_SIZES[1], "in [32, 224]"),
            ("views", self.views >= 2, ">= 2"), ("keypoints", 1 <= self.keypoints <= MAX_KEYPOINTS,
                                                 f"in [1, {MAX_KEYPOINTS}] (the dense head reads layer2)"),
            ("pose_noise", self.pose_noise >= 0, ">= 0"), ("workspace_views", self.workspace_views >= 0, ">= 0"),
            ("render_workers", self.render_workers >= 1, ">= 1"), ("epochs", self.epochs >= 1, ">= 1"),
            ("batch_size", self.batch_size >= 1, ">= 1"), ("lr", self.lr > 0, "> 0"),
            ("weight_decay", self.weight_decay >= 0, ">= 0"), ("grad_clip", self.grad_clip > 0, "> 0"),
            ("shift_pad", self.shift_pad >= 0, ">= 0"), ("segmentation_weight", self.segmentation_weight >= 0, ">= 0"),
            ("val_fraction", 0 < self.val_fraction < 1, "in (0, 1)"), ("seed", self.seed >= 0, ">= 0"),
            ("precision", self.precision in PRECISIONS, _one_of(PRECISIONS)), ("threads", self.threads >= 0, ">= 0"),
        ])
