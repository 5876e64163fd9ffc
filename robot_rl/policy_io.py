"""A policy on disk: the architecture a checkpoint records, exported weights (``model.safetensors`` +
``config.json``, no pickle), and ``load_actor``, which rebuilds the actor of either. The actor itself is
``robot_rl.policy``."""

from __future__ import annotations

import os
from dataclasses import asdict, fields
from pathlib import Path

import torch
from torchrl.modules import ProbabilisticActor

from robot_rl import compat
from robot_rl.artefact_files import EXPORT_CONFIG as WEIGHTS_CONFIG
from robot_rl.artefact_files import EXPORT_WEIGHTS as WEIGHTS_FILE
from robot_rl.artefact_schema import check_export_config, check_policy_config
from robot_rl.encoder import set_encoder_precision
from robot_rl.envs.errors import file_problem
from robot_rl.policy import PolicyConfig, make_actor
from robot_rl.precision import resolve_precision
from robot_rl.provenance import Provenance


def checkpoint_policy_config(state: dict, source: str | Path = "checkpoint") -> PolicyConfig:
    """The architecture stored in a checkpoint (its weights come from the checkpoint, not from encoder_weights;
    older checkpoints filled in by ``compat.policy_config``); a missing, unknown or out-of-range value is a
    UsageError naming ``source``."""
    known = {f.name for f in fields(PolicyConfig)} | set(compat.POLICY_CONFIG_DROPPED)
    check_policy_config(state.get("policy_config"), source, known)
    return PolicyConfig(**{**compat.policy_config(state["policy_config"]), "encoder_weights": ""})


def save_weights(actor: ProbabilisticActor, policy_config: PolicyConfig, provenance: Provenance,
                 folder: str | Path, source: str = "") -> Path:
    """Writes the actor's weights as ``model.safetensors`` and its architecture and env as ``config.json`` (no
    pickle: ``load_actor(folder)`` rebuilds the actor from them). Returns the weights' path."""
    from safetensors.torch import save_file

    from robot_rl.io import atomic_path, write_json

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().cpu().contiguous().clone() for k, v in actor.state_dict().items()}
    path = folder / WEIGHTS_FILE
    with atomic_path(path) as tmp:
        save_file(tensors, str(tmp), metadata={"format": "robot_rl-policy"})
    write_json(folder / WEIGHTS_CONFIG, {"format": "robot_rl-policy", "format_version": 1, "source": source,
                                         "policy_config": asdict(policy_config), "env": provenance.record()})
    return path


def _weights_of(source: Path) -> Path | None:
    """The safetensors file ``source`` stands for (the file, or a folder holding one), or None."""
    if source.suffix == ".safetensors":
        return source
    return source / WEIGHTS_FILE if os.path.lexists(source / WEIGHTS_FILE) else None


def load_actor(source: str | Path, device: str | torch.device = "cpu", trust_code: bool = False,
               task: str = "", precision: str = "fp32",
               checkpoint_kind: str = "last") -> tuple[ProbabilisticActor, Provenance, Path]:
    """The actor of a BC or PPO checkpoint, or of exported weights: ``source`` is a run folder (its ``last.pt``, or
    ``best.pt`` with ``checkpoint_kind`` "best": ``checkpoints.policy_checkpoint``), a .pt file, or
    ``model.safetensors`` (or its folder) with ``config.json`` beside it, read without pickle. A ``module:Class``
    task it names is imported only with ``trust_code`` or when ``task`` (the user's --task) names it too; another
    ``task`` than the recorded one is refused. Its encoder runs in ``precision`` (``auto``, ``fp32`` or ``bf16``,
    resolved for ``device``: ``robot_rl.precision``); the weights stay fp32.

    Returns (actor in eval mode, the env it was trained in, its path).
    """
    from robot_rl.checkpoints import load_checkpoint, policy_checkpoint
    from robot_rl.errors import UsageError

    weights = _weights_of(Path(source))
    if weights is not None:
        path, state = weights, read_weights(weights)
        recorded_in = weights.parent / WEIGHTS_CONFIG  # where the env is written: the culprit of a bad one
    else:
        path = policy_checkpoint(source, checkpoint_kind)
        state = load_checkpoint(path)
        if state.get("kind") not in ("bc", "ppo") or not {"actor", "env", "policy_config"} <= set(state):
            raise UsageError(f"{path}: not a robot_rl policy checkpoint")
        recorded_in = path
    provenance = Provenance.of_checkpoint(state, recorded_in).inherit(str(path), task=task)
    provenance = provenance.verified(recorded_in, trust_code=trust_code or task == provenance.task)
    policy_config = checkpoint_policy_config(state, recorded_in)
    proof = provenance.proof_env()
    actor = make_actor(proof.observation_spec, proof.full_action_spec, policy_config)
    _check_weights(actor.state_dict(), state["actor"], path)
    try:
        actor.load_state_dict(state["actor"])
    except RuntimeError as err:  # right names and shapes, but tensors that do not copy (another layout or dtype)
        raise UsageError(f"{path}: weights do not load ({_first_line(err)})") from None
    set_encoder_precision(actor, resolve_precision(precision, torch.device(device)))
    return actor.to(device).eval(), provenance, path


def _check_weights(expected: dict, given: object, path: Path) -> None:
    """Refuses weights that are not exactly the actor's tensors (names and shapes), naming the first culprit."""
    from robot_rl.errors import UsageError

    culprit = "fit this robot_rl's policy (written by another version?)"
    if not isinstance(given, dict):
        raise UsageError(f"{path}: weights do not {culprit}: not a dict of tensors")
    for name, value in given.items():
        if name not in expected:
            raise UsageError(f"{path}: weights do not {culprit}: unexpected tensor {name!r}")
        if not isinstance(value, torch.Tensor) or value.shape != expected[name].shape:
            shape = list(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
            raise UsageError(f"{path}: weights do not {culprit}: {name!r} is {shape}, the policy has "
                             f"{list(expected[name].shape)}")
    missing = [name for name in expected if name not in given]
    if missing:
        raise UsageError(f"{path}: weights do not {culprit}: {len(missing)} missing, e.g. {missing[0]!r}")


def read_weights(path: Path) -> dict:
    """A checkpoint-like dict (actor, policy_config, env) from ``model.safetensors`` and its ``config.json``.
    Whatever goes wrong while reading either file is a one-line UsageError naming it."""
    import json

    from safetensors.torch import load_file

    from robot_rl.errors import UsageError

    config_path = path.parent / WEIGHTS_CONFIG
    for file in (config_path, path):
        problem = file_problem(file, follow_symlinks=True)
        if problem == "no such file":
            raise UsageError(f"{file}: missing (exported weights need {WEIGHTS_FILE} and {WEIGHTS_CONFIG})")
        if problem:
            raise UsageError(f"{file}: not readable exported weights: {problem}")
    try:
        config = json.loads(config_path.read_text())
    except Exception as err:  # noqa: BLE001 - any failure to read the file is the file's
        raise UsageError(f"{config_path}: unreadable ({_first_line(err)})") from None
    check_export_config(config, config_path, PolicyConfig)  # before the weights: nothing read past a bad config
    try:
        actor = load_file(str(path))
    except Exception as err:  # noqa: BLE001 - safetensors raises its own errors, and OSError, on a corrupt file
        raise UsageError(f"{path}: unreadable exported weights ({_first_line(err)})") from None
    return {"actor": actor, "policy_config": config["policy_config"], "env": config["env"]}


def _first_line(err: Exception) -> str:
    """An exception as ``Type: first line of its message`` (at most 200 characters), for one-line refusals."""
    return f"{type(err).__name__}: {(str(err).strip().splitlines() or [''])[0][:200]}"
