"""``robot-rl pipeline``: collect-demos -> pretrain -> finetune -> evaluate, each stage feeding the next.

A stage whose output is complete is skipped; one that was interrupted is resumed. So running the same command
again after a crash picks up where it stopped. Presets: ``quick`` (the README's first command: a few minutes on
two CPU cores, easy boards and 48x48 images, ends with a report and videos even though the policy is still weak)
and ``full`` (default difficulty at 84x84, sized for a GPU).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from robot_rl.configs import EvaluateConfig
from robot_rl.finetune import trainer
from robot_rl.finetune.config import FinetuneConfig
from robot_rl.options import RUN_CONFIG_FILE
from robot_rl.pretrain import bc
from robot_rl.pretrain.collect import collect_demos
from robot_rl.pretrain.configs import BCConfig, CollectConfig
from robot_rl.pretrain.dataset import DemoDataset


@dataclass(frozen=True)
class Preset:
    """Option values of the four stages (paths and links between stages are filled in by the pipeline)."""

    collect: dict = field(default_factory=dict)  # CollectConfig fields
    pretrain: dict = field(default_factory=dict)  # BCConfig fields
    finetune: dict = field(default_factory=dict)  # FinetuneConfig fields
    evaluate: dict = field(default_factory=dict)  # EvaluateConfig fields

    def updated(self, **stages: dict) -> Preset:
        """A copy with some stages' options updated, e.g. ``updated(pretrain={"epochs": 1})``."""
        return replace(self, **{name: {**getattr(self, name), **values} for name, values in stages.items()})


PRESETS = {
    "quick": Preset(
        collect=dict(episodes=300, difficulty="easy", image_size=48),
        pretrain=dict(epochs=10, batch_size=64, eval_every=0, eval_episodes=20),
        finetune=dict(total_frames=1024, frames_per_batch=256, num_envs=4, ppo_epochs=2, minibatch_size=64,
                      eval_every=2, eval_episodes=20, critic_warmup=1, checkpoint_every=1),
        evaluate=dict(episodes=20, num_envs=4, videos=2, failure_videos=4),
    ),
    "full": Preset(
        collect=dict(episodes=1200, difficulty="default", image_size=84),
        pretrain=dict(epochs=12, batch_size=64, eval_every=3, eval_episodes=100),
        finetune=dict(total_frames=500_000, frames_per_batch=4096, num_envs=16, workers=16, ppo_epochs=4,
                      minibatch_size=256, eval_every=5, eval_episodes=100),
        evaluate=dict(episodes=200, num_envs=8, videos=8),
    ),
}


def _summary(run_dir: Path) -> dict | None:
    path = run_dir / "summary.json"
    return json.loads(path.read_text()) if path.is_file() else None


def _train_stage(label: str, run_dir: Path, start, resume, make_config, progress: bool, log) -> None:
    """A training stage: skipped when its run folder is finished, resumed when interrupted, started otherwise."""
    if _summary(run_dir) is not None:
        log(f"{label}: {run_dir} is finished, skipped")
    elif (run_dir / RUN_CONFIG_FILE).is_file():
        log(f"{label}: resuming {run_dir}")
        resume(run_dir, progress=progress)
    else:
        log(f"{label} -> {run_dir}")
        start(make_config(), progress=progress)


def run_pipeline(preset: Preset, root: str | Path, device: str = "auto", progress: bool = True,
                 log=print) -> dict:
    """Runs (or resumes) every stage under ``root``; returns where each stage wrote and the final metrics."""
    from robot_rl.evaluate import evaluate

    root = Path(root)
    data, bc_dir, ppo_dir, eval_dir = root / "demos", root / "bc", root / "ppo", root / "eval"
    timings: dict[str, float] = {}

    start = time.perf_counter()
    collect = CollectConfig(**{**preset.collect, "out": str(data)})
    meta = data / "meta.json"
    done = meta.is_file() and len(DemoDataset.open(data).episodes) >= collect.episodes
    if done:
        log(f"[1/4] collect-demos: {data} already holds the demos, skipped")
    else:
        log(f"[1/4] collect-demos -> {data}")
        collect_demos(collect, progress=progress)
    timings["collect-demos"] = time.perf_counter() - start

    start = time.perf_counter()
    _train_stage("[2/4] pretrain", bc_dir, bc.pretrain, bc.resume, lambda: BCConfig(
        **{**preset.pretrain, "data": str(data), "run_dir": str(bc_dir), "device": device}), progress, log)
    timings["pretrain"] = time.perf_counter() - start

    start = time.perf_counter()
    _train_stage("[3/4] finetune", ppo_dir, trainer.finetune, trainer.resume, lambda: FinetuneConfig(
        **{**preset.finetune, "init": str(bc_dir), "run_dir": str(ppo_dir), "device": device}), progress, log)
    timings["finetune"] = time.perf_counter() - start

    start = time.perf_counter()
    report = eval_dir / "report.json"
    if report.is_file():
        log(f"[4/4] evaluate: {report} exists, skipped")
        metrics = json.loads(report.read_text())["metrics"]
    else:
        log(f"[4/4] evaluate -> {eval_dir}")
        metrics = evaluate(EvaluateConfig(**{**preset.evaluate, "checkpoint": str(ppo_dir), "out": str(eval_dir),
                                             "device": device}), progress=progress)["metrics"]
    timings["evaluate"] = time.perf_counter() - start
    return {"demos": str(data), "pretrain": str(bc_dir), "finetune": str(ppo_dir), "report": str(eval_dir),
            "metrics": metrics, "seconds": {k: round(v, 1) for k, v in timings.items()}}
