"""How artefacts written by older robot_rl versions are read: the one place that fills in what they lack and
renames what has moved.

Every table holds what the code of that time did where the artefact is silent, so an old dataset, checkpoint, export
or run folder keeps meaning what it meant: a checkpoint from before domain randomization was trained without it, a
run config from before ``--precision`` ran fp32. A new field gets its entry here when it lands; a value is never
changed afterwards (tests load fixtures of each older format).
"""

from __future__ import annotations

from robot_rl.envs.defaults import DEFAULT_ARM

# -- the env an artefact was made in (robot_rl.provenance) -----------------------------------------------------
# Checkpoints and exports from before these options existed; a dataset's meta.json likewise (difficulty: datasets
# from before it was recorded were collected at the default one).
ENV_RECORD_DEFAULTS = {"randomization": "none", "arm": DEFAULT_ARM}
DATASET_META_DEFAULTS = {**ENV_RECORD_DEFAULTS, "difficulty": "default", "segmentation": False}

# -- a policy's architecture (robot_rl.policy_io) ------------------------------------------------------------------
# Checkpoints from before keypoints and the velocity switch: pooled feature only, joint velocities read.
POLICY_CONFIG_DEFAULTS = {"keypoints": 0, "joint_velocities": True}
# Recorded by older versions, ignored now: the image critic's share_encoder (PPO's critic reads the privileged state).
POLICY_CONFIG_DROPPED = ("share_encoder",)

# -- a run folder's config.json (robot_rl.checkpoints.load_config) ---------------------------------------------------
# Per command config class: an option the stored config predates takes the behaviour of that time.
RUN_CONFIG_DEFAULTS = {
    "BCConfig": {"precision": "fp32", "init": "", "checkpoint_kind": "best", "epochs": 20, "eval_every": 5,
                 "eval_episodes": 50},
    "DAggerConfig": {"checkpoint_kind": "best"},
    "FinetuneConfig": {"target_kl": 0.0, "answer_temperature": 1.0, "continue_floor": 0.0, "anchor_floor": 0.0,
                       "guess_penalty": 0.0, "dwell_penalty": 0.0, "guess_ce_weight": 0.0, "exploration": "default",
                       "precision": "fp32",
                       "checkpoint_kind": "best",
                       "total_frames": 200_000, "num_envs": 4, "ppo_epochs": 4, "minibatch_size": 128,
                       "critic_warmup": 3, "shaping": 0.0, "eval_every": 5, "checkpoint_every": 5},
}
# Options renamed since: a stored config's old name -> the new one. FinetuneConfig's hidden also set
# --from-scratch's actor width then.
RUN_CONFIG_RENAMED = {"FinetuneConfig": {"hidden": "critic_hidden"}}


def env_record(record: object) -> object:
    """A checkpoint's or export's recorded env with what older ones lack filled in (anything but a dict is
    returned as it is, for the schema check to refuse)."""
    return {**ENV_RECORD_DEFAULTS, **record} if isinstance(record, dict) else record


def dataset_meta(meta: dict) -> dict:
    """A dataset's meta.json with what older ones lack filled in."""
    return {**DATASET_META_DEFAULTS, **meta}


def policy_config(values: object) -> object:
    """A recorded architecture with what older checkpoints lack filled in and dropped options removed (anything
    but a dict is returned as it is)."""
    if not isinstance(values, dict):
        return values
    return {**POLICY_CONFIG_DEFAULTS, **{k: v for k, v in values.items() if k not in POLICY_CONFIG_DROPPED}}


def run_config(config_cls: type, stored: dict) -> dict:
    """A run folder's stored options for ``config_cls``, renamed options read under their new names and options
    it predates set to the behaviour of that time (the class's defaults fill the rest)."""
    renamed = RUN_CONFIG_RENAMED.get(config_cls.__name__, {})
    return {**RUN_CONFIG_DEFAULTS.get(config_cls.__name__, {}),
            **{renamed.get(name, name): value for name, value in stored.items()}}


def preset_options(stored: dict, defaults: dict[str, dict]) -> dict[str, dict]:
    """A pipeline root's recorded options per stage; roots from before the presets were typed recorded only the
    options that differed from the defaults (``defaults``: each stage's config defaults)."""
    return {stage: {**defaults.get(stage, {}), **options} for stage, options in stored.items()}
