"""What a checkpoint's or export's recorded env and architecture may hold, checked before anything is built from them.

A checkpoint (``torch.save`` of a dict, read with ``weights_only=True``) and an export (``model.safetensors`` +
``config.json``) record the env the policy was trained in and its architecture. Both are files a user may be handed,
so every value is checked for its type and range before an env is built or a network allocated: an image side of
a million pixels or a 10^9-wide MLP is refused in one line naming the file and the field, not attempted.
"""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

from robot_rl.configs import DIFFICULTY_NAMES, IMAGE_SIZES, MAX_HIDDEN, MAX_KEYPOINTS, RANDOMIZATION_NAMES
from robot_rl.errors import UsageError

EXPORT_FORMAT, EXPORT_FORMAT_VERSION = "robot_rl-policy", 1
EXPORT_KEYS = {"format", "format_version", "source", "policy_config", "env"}
ENV_REQUIRED = {"env", "difficulty", "image_size", "arm"}
ENV_OPTIONAL = {"env_version", "randomization", "arm_sha256"}
_SHA256 = re.compile(r"[0-9a-f]{64}")


def _is_int(value, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_env_info(env: object, source: str | Path) -> None:
    """Refuses a recorded env that is not {env, difficulty, image_size, arm[, env_version, randomization,
    arm_sha256]} with values of the right type and range (UsageError naming ``source`` and the field)."""
    def refuse(field: str, rule: str, value) -> None:
        raise UsageError(f"{source}: env {field} must be {rule}, got {value!r}")

    if not isinstance(env, dict):
        raise UsageError(f"{source}: env must be an object, got {type(env).__name__}")
    missing, extra = sorted(ENV_REQUIRED - set(env)), sorted(set(env) - ENV_REQUIRED - ENV_OPTIONAL)
    if missing or extra:
        raise UsageError(f"{source}: env {'lacks ' + missing[0] if missing else 'has unknown key ' + repr(extra[0])}")
    for field in ("env", "arm"):
        if not isinstance(env[field], str) or not env[field]:
            refuse(field, "a name", env[field])
    if env["difficulty"] not in DIFFICULTY_NAMES:
        refuse("difficulty", f"one of {', '.join(DIFFICULTY_NAMES)}", env["difficulty"])
    if not _is_int(env["image_size"], *IMAGE_SIZES):
        refuse("image_size", f"an integer in [{IMAGE_SIZES[0]}, {IMAGE_SIZES[1]}]", env["image_size"])
    if "randomization" in env and env["randomization"] not in RANDOMIZATION_NAMES:
        refuse("randomization", f"one of {', '.join(RANDOMIZATION_NAMES)}", env["randomization"])
    if "env_version" in env and not _is_int(env["env_version"], 0, 2**31):
        refuse("env_version", "a non-negative integer", env["env_version"])
    if "arm_sha256" in env and not (isinstance(env["arm_sha256"], str) and _SHA256.fullmatch(env["arm_sha256"])):
        refuse("arm_sha256", "64 hex digits", env["arm_sha256"])


def check_policy_config(values: object, source: str | Path, known: set[str]) -> None:
    """Refuses a recorded architecture with a key outside ``known`` or a value of the wrong type or range (an MLP
    width above 4096, more than 512 keypoints)."""
    if not isinstance(values, dict):
        raise UsageError(f"{source}: policy_config must be an object, got {type(values).__name__}")
    extra = sorted(set(values) - known)
    if extra:
        raise UsageError(f"{source}: policy_config has unknown key {extra[0]!r}")
    rules = {"hidden": (lambda v: _is_int(v, 1, MAX_HIDDEN), f"an integer in [1, {MAX_HIDDEN}]"),
             "keypoints": (lambda v: _is_int(v, 0, MAX_KEYPOINTS), f"an integer in [0, {MAX_KEYPOINTS}]"),
             "min_scale": (lambda v: _is_number(v) and 0 < v < 1e3, "a number in (0, 1000)"),
             "answer_temperature": (lambda v: _is_number(v) and 0 < v < 1e3, "a number in (0, 1000)"),
             "continue_floor": (lambda v: _is_number(v) and 0 <= v < 1, "a number in [0, 1)"),
             "residual_scale": (lambda v: _is_number(v) and 0 <= v < 10, "a number in [0, 10)"),
             "pose_scale_factor": (lambda v: _is_number(v) and 0 < v <= 1, "a number in (0, 1]"),
             "joint_velocities": (lambda v: isinstance(v, bool), "true or false"),
             "continue_head": (lambda v: isinstance(v, bool), "true or false"),
             "share_encoder": (lambda v: isinstance(v, bool), "true or false"),
             "encoder_weights": (lambda v: isinstance(v, str), "a string")}
    for name, value in values.items():
        passes, rule = rules.get(name, (lambda v: True, ""))
        if not passes(value):
            raise UsageError(f"{source}: policy_config {name} must be {rule}, got {value!r}")


def check_export_config(config: object, source: str | Path, policy_fields: type) -> None:
    """Refuses an export's ``config.json`` that is not exactly {format, format_version, source, policy_config,
    env} with a valid env and architecture (``policy_fields``: the dataclass whose fields the architecture may
    name)."""
    if not isinstance(config, dict) or config.get("format") != EXPORT_FORMAT:
        raise UsageError(f"{source}: not a robot_rl policy config")
    missing, extra = sorted(EXPORT_KEYS - set(config)), sorted(set(config) - EXPORT_KEYS)
    if missing or extra:
        raise UsageError(f"{source}: {'lacks ' + repr(missing[0]) if missing else 'has unknown key ' + repr(extra[0])}")
    if config["format_version"] != EXPORT_FORMAT_VERSION:
        raise UsageError(f"{source}: format_version {config['format_version']!r}, this robot_rl reads "
                         f"{EXPORT_FORMAT_VERSION}")
    if not isinstance(config["source"], str):
        raise UsageError(f"{source}: source must be a string")
    check_policy_config(config["policy_config"], source, {f.name for f in fields(policy_fields)})
    check_env_info(config["env"], source)
