"""Where a dataset or a policy comes from: the env it was made in, as one record.

``Provenance`` is the task (and the task version it was recorded with), the arm (and its content digest), the
difficulty, the image size and the domain randomization. Every artefact records it in one shape (``record()``): a
dataset's meta.json (a LeRobot folder's robot_rl.json holds the same fields), a checkpoint's ``env``, an export's
config.json ``env``. One constructor reads each, older artefacts through ``robot_rl.compat``; ``inherit`` is the
one rule for an option given beside an upstream artefact (empty: take it from upstream; another value: refused in
one line naming both); ``verified`` checks the task and the arm against this code; ``make_env`` builds the env
the record describes. The default task and arm are ``robot_rl.envs.defaults``'.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path

from robot_rl import compat
from robot_rl.artefact_schema import check_env_info
from robot_rl.envs.defaults import DEFAULT_ARM, DEFAULT_TASK
from robot_rl.errors import UsageError

# The field names artefacts use on disk, where they differ from the record's (a task was an "env" then).
_ON_DISK = {"task": "env", "task_version": "env_version"}


@dataclass(frozen=True)
class Provenance:
    """The env an artefact was made in. ``task`` is a registered name or a user's ``module:Class``; ``arm`` a
    registered name or an ArmSpec .json file; ``task_version`` and ``arm_sha256`` are None where the artefact
    predates them."""

    task: str = DEFAULT_TASK
    difficulty: str = "default"
    image_size: int = 84
    randomization: str = "none"
    arm: str = DEFAULT_ARM
    task_version: int | None = None
    arm_sha256: str | None = None

    # -- constructors ---------------------------------------------------------------------------------------------
    @classmethod
    def new(cls, task: str = "", difficulty: str = "", image_size: int = 0, randomization: str = "",
            arm: str = "", trust_code: bool = True) -> Provenance:
        """A new artefact's record (collected demos, PPO from scratch): an empty option takes the default; the
        task version and the arm digest are this code's."""
        from robot_rl.envs.arms import arm_digest
        from robot_rl.envs.tasks import get_task

        given = {"task": task, "difficulty": difficulty, "image_size": image_size, "randomization": randomization,
                 "arm": arm}
        record = cls(**{name: value for name, value in given.items() if value})
        return replace(record, task_version=get_task(record.task, trust_code=trust_code).version,
                       arm_sha256=arm_digest(record.arm))

    @classmethod
    def from_record(cls, record: object, source: str | Path) -> Provenance:
        """A checkpoint's or export's recorded env (older ones filled in by ``compat.env_record``), each value
        checked for type and range first (UsageError naming ``source`` and the field)."""
        record = compat.env_record(record)
        check_env_info(record, source)
        on_disk = {field: _ON_DISK.get(field, field) for field in _FIELDS}
        return cls(**{field: record[name] for field, name in on_disk.items() if name in record})

    @classmethod
    def of_checkpoint(cls, state: dict, source: str | Path) -> Provenance:
        """A BC or PPO checkpoint's record."""
        return cls.from_record(state.get("env"), source)

    @classmethod
    def of_dataset(cls, meta: dict, source: str | Path) -> Provenance:
        """A demo dataset's record, from its meta.json (older datasets filled in by ``compat.dataset_meta``)."""
        meta = compat.dataset_meta(meta)
        return cls.from_record({name: meta[name] for name in _ON_DISK_NAMES if name in meta}, source)

    @classmethod
    def of_options(cls, options: dict) -> Provenance:
        """The env a run's own options name (a pretrain-encoder run records its cell only as options)."""
        return cls(**{name: options[name] for name in ("task", "difficulty", "image_size", "randomization", "arm")})

    # -- the rules ------------------------------------------------------------------------------------------------
    def same_cell(self, other: Provenance) -> bool:
        """The same task with the same arm: the same arm name, or arm files of the same content now (a file
        that no longer reads: the same file name)."""
        from robot_rl.envs.arms import ArmError, arm_digest

        if self.task != other.task:
            return False
        if self.arm == other.arm:
            return True
        try:
            return arm_digest(self.arm) == arm_digest(other.arm)
        except ArmError:
            return Path(self.arm).name == Path(other.arm).name

    def inherit(self, upstream: str, may_change: tuple[str, ...] = (), **options) -> Provenance:
        """This record under the options a command was given beside its upstream artefact (``upstream`` names it
        for errors, e.g. "the BC run runs/bc"): an empty option ('' or 0) takes the upstream value; another value
        is a UsageError naming both, except for the fields in ``may_change``, which take it (evaluate runs a
        policy on other boards and randomizations than it was trained on)."""
        changed = {}
        for name, given in options.items():
            if not given or given == getattr(self, name):
                continue
            if name not in may_change:
                raise UsageError(f"--{name.replace('_', '-')} {given} does not match {upstream} "
                                 f"({name.replace('_', ' ')} {getattr(self, name)!r})")
            changed[name] = given
        return replace(self, **changed)

    def verified(self, source: str | Path, trust_code: bool = False) -> Provenance:
        """Checks the record against this code: the task is known (a ``module:Class`` one is imported only with
        ``trust_code``), its version is this code's, the arm's digest is the recorded one (``robot_rl.envs``
        raises a UsageError naming ``source`` otherwise). Returns it with the arm's current digest."""
        from robot_rl.envs.arms import check_arm
        from robot_rl.envs.tasks import check_task_version, get_task

        task = get_task(self.task, trust_code=trust_code, source=str(source))
        check_task_version(task, self.task_version, str(source))
        digest = check_arm(self.arm, self.arm_sha256, str(source))
        return replace(self, arm_sha256=digest)

    # -- uses -----------------------------------------------------------------------------------------------------
    def record(self) -> dict:
        """The record as artefacts store it (fields that are None left out)."""
        values = {_ON_DISK.get(field, field): getattr(self, field) for field in _RECORD_ORDER}
        return {name: value for name, value in values.items() if value is not None}

    def env_kwargs(self, **changes) -> dict:
        """The ``make_env`` arguments of this record (``changes`` replace some, e.g. ``randomization="none"``)."""
        return {"difficulty": self.difficulty, "image_size": self.image_size, "randomization": self.randomization,
                "arm": self.arm, "task": self.task, **changes}

    def make_env(self, **kwargs):
        """The TorchRL env this record describes (``kwargs`` go to ``robot_rl.envs.make_env``: num_envs,
        episode_seeds, device, ... and any of the record's fields to change)."""
        from robot_rl.envs import make_env

        return make_env(**self.env_kwargs(**kwargs))

    def proof_env(self):
        """A one-env instance for specs (shapes and bounds), never stepped."""
        from robot_rl.envs.torchrl_env import proof_env

        return proof_env(self.difficulty, self.image_size, self.arm, self.task)


_FIELDS = tuple(f.name for f in fields(Provenance))
# The order artefacts have always written: env, env_version, difficulty, image_size, randomization, arm, digest.
_RECORD_ORDER = ("task", "task_version", "difficulty", "image_size", "randomization", "arm", "arm_sha256")
_ON_DISK_NAMES = tuple(_ON_DISK.get(field, field) for field in _FIELDS)
