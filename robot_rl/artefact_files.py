"""The file names of every artefact robot_rl writes, spelled once: the stage that writes a file and every reader
(``robot-rl info``, the pipeline, the benchmarks) take the name from here.

Each kind of artefact is recognised by its marker file: a demo dataset by ``DATASET_META``, a run folder by
``RUN_CONFIG`` (its stage by the options it records), a pipeline root by ``PIPELINE_PRESET``, an evaluation by
``REPORT``, an exported policy by ``EXPORT_RECORD`` (or safetensors' ``EXPORT_WEIGHTS``), a LeRobot dataset by
``LEROBOT_INFO`` (``robot_rl.info.ARTEFACT_KINDS`` ties each marker to the description ``robot-rl info`` prints). A
DAgger run's rounds are laid out by ``dagger_round``, which the run, ``info`` and the checkpoint rule all read.
"""

from __future__ import annotations

from pathlib import Path

# A demo dataset (collect-demos, DAgger's aggregate, a LeRobot import): its record and marker.
DATASET_META = "meta.json"
LEROBOT_INFO = "meta/info.json"  # a LeRobot v3.0 dataset's

# A training run folder (pretrain, pretrain-encoder, dagger, finetune).
RUN_CONFIG = "config.json"  # the run's options, written when it starts
RUN_SUMMARY = "summary.json"  # written once the run has finished
CHECKPOINTS = "checkpoints"  # last.pt, best.pt
IMPORTED_DEMOS = "demos"  # a BC run's copy of LeRobot demos it was given
ENCODER_WEIGHTS = "encoder.pt"  # what pretrain-encoder leaves for pretrain --encoder-weights
DAGGER_AGGREGATE, DAGGER_ROUNDS = "aggregate", "rounds"  # a DAgger run's dataset and per-round folders and records


def dagger_round(run_dir: str | Path, round_index: int, record: bool = False) -> Path:
    """A DAgger run's round: its BC run folder ``rounds/round-KK``, or with ``record`` its check
    ``rounds/round-KK.json`` (round 0's record is the init policy's check; it has no folder)."""
    return Path(run_dir) / DAGGER_ROUNDS / f"round-{round_index:02d}{'.json' if record else ''}"


def _rounds(run_dir: str | Path, suffix: str) -> list[Path]:
    """``rounds/round-K<suffix>`` paths, in round order (by K's value: round-100 after round-99)."""
    numbered = [(path.name[len("round-"):len(path.name) - len(suffix)], path)
                for path in (Path(run_dir) / DAGGER_ROUNDS).glob(f"round-*{suffix}")]
    return [path for number, path in sorted((int(k), path) for k, path in numbered if k.isdigit())]


def dagger_round_records(run_dir: str | Path) -> list[Path]:
    """The round records a DAgger run has written, in round order (round 0 first)."""
    return _rounds(run_dir, ".json")


def dagger_round_folders(run_dir: str | Path) -> list[Path]:
    """The round folders a DAgger run has made, in round order (a folder may hold an unfinished BC run)."""
    return [path for path in _rounds(run_dir, "") if path.is_dir()]


# A pipeline root: the recipe it was started with, what it did (where, the table's metrics, seconds per stage), and
# each stage's seconds part by part (``robot_rl.recipe``; a benchmark's recipe keeps the same file).
PIPELINE_PRESET = "preset.json"
PIPELINE_RESULT = "pipeline.json"
RECIPE_STAGES = "stages.json"

# An evaluation folder.
REPORT = "report.json"

# An exported policy: the record every format writes beside the model (its marker); safetensors's weights and
# config under the Hugging Face names.
EXPORT_RECORD = "policy.json"
EXPORT_WEIGHTS, EXPORT_CONFIG = "model.safetensors", "config.json"
