"""Options of ``robot-rl evaluate``, ``export`` and ``pipeline`` (light: the CLI builds its help from them)."""

from __future__ import annotations

from dataclasses import dataclass

from robot_rl.options import option, validate
from robot_rl.pretrain.configs import DIFFICULTY_NAMES, RANDOMIZATION_NAMES

VIDEO_QUALITIES = ("pretty", "fast")
EXPORT_FORMATS = ("torchscript", "export", "onnx", "all")


@dataclass(frozen=True)
class EvaluateConfig:
    """Options of ``robot-rl evaluate``."""

    checkpoint: str = option("", "run folder (its best.pt, else last.pt) or a checkpoint .pt file")
    out: str = option("", "report folder; '' = <checkpoint's run folder>/eval")
    episodes: int = option(100, "episodes, one per board seed")
    seed: int = option(30_000_000, "first board seed; episode k inspects board seed + k")
    difficulty: str = option("", "task difficulty; '' = the checkpoint's")
    randomization: str = option("", "domain randomization: none, default or strong; '' = the checkpoint's")
    perturbations: bool = option(False, "also run the same boards under each shift of the perturbation suite "
                                 "(success per shift next to nominal, one failure video each)")
    num_envs: int = option(8, "envs stepped together (in this process)")
    stochastic: bool = option(False, "sample actions instead of the deterministic mode")
    videos: int = option(4, "MP4s of the first N episodes (every failed episode gets one too)")
    failure_videos: int = option(50, "cap on the MP4s of failed episodes")
    video_height: int = option(240, "third-person camera height in video frames, pixels (width = 4/3 x)")
    video_quality: str = option("pretty", "pretty (shadows, ~60 ms a frame in software GL) or fast (no shadows)")
    video_slowdown: float = option(2.0, "videos play this many times slower than real time (1 = real time)")
    device: str = option("auto", "auto, cpu, cuda or cuda:N")

    def __post_init__(self) -> None:
        validate(self, [
            ("checkpoint", bool(self.checkpoint), "a run folder or checkpoint file"),
            ("episodes", self.episodes >= 1, ">= 1"), ("seed", self.seed >= 0, ">= 0"),
            ("difficulty", self.difficulty in ("", *DIFFICULTY_NAMES), f"'' or one of {', '.join(DIFFICULTY_NAMES)}"),
            ("randomization", self.randomization in ("", *RANDOMIZATION_NAMES),
             f"'' or one of {', '.join(RANDOMIZATION_NAMES)}"),
            ("num_envs", self.num_envs >= 1, ">= 1"), ("videos", self.videos >= 0, ">= 0"),
            ("failure_videos", self.failure_videos >= 0, ">= 0"),
            ("video_height", 64 <= self.video_height <= 1080 and self.video_height % 2 == 0, "even, in [64, 1080]"),
            ("video_quality", self.video_quality in VIDEO_QUALITIES, f"one of {', '.join(VIDEO_QUALITIES)}"),
            ("video_slowdown", 1 <= self.video_slowdown <= 10, "in [1, 10]"),
        ])


@dataclass(frozen=True)
class ExportConfig:
    """Options of ``robot-rl export``."""

    checkpoint: str = option("", "run folder (its best.pt, else last.pt) or a checkpoint .pt file")
    out: str = option("", "output folder; '' = <checkpoint's run folder>/export")
    format: str = option("all", "torchscript, export (torch.export), onnx, or all that are available")

    def __post_init__(self) -> None:
        validate(self, [
            ("checkpoint", bool(self.checkpoint), "a run folder or checkpoint file"),
            ("format", self.format in EXPORT_FORMATS, f"one of {', '.join(EXPORT_FORMATS)}"),
        ])
