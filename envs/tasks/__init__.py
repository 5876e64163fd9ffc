"""The inspection tasks, one package each (task, props, expert, difficulty presets), and the registry that names
them. The TorchRL and Gymnasium front-ends know no task by name: they build ``get_task(name)``.

A task of your own: subclass ``robot_rl.envs.task.InspectionTask`` and ``register_task`` it (as ManiSkill's
``@register_env``) to build it by name in your process; from the CLI, ``--task my_package.my_module:MyTask`` imports
it (datasets and checkpoints then record that import path). Importing runs code, so a ``module:Class`` that a file
names (a dataset's, checkpoint's or export's) is imported only when the user says so: ``get_task(name,
trust_code=True)``, which the CLI does for ``--task`` and ``--trust-code``; the env front-ends never import one.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from robot_rl.envs.arms import ArmSpec
from robot_rl.envs.defaults import DEFAULT_ARM
from robot_rl.envs.difficulty import Difficulty
from robot_rl.envs.errors import UsageError
from robot_rl.envs.randomization import Randomization
from robot_rl.envs.task import InspectionTask, RewardWeights, TaskConfig
from robot_rl.envs.tasks.lead_inspect import LeadInspectTask
from robot_rl.envs.tasks.pcb_inspect import PcbInspectTask

TASKS: dict[str, type[InspectionTask]] = {task.name: task for task in (PcbInspectTask, LeadInspectTask)}


class TaskError(UsageError, ValueError):
    """An unknown task name or a task class that cannot be registered; the CLI exits 2."""


def register_task(task: type[InspectionTask]) -> type[InspectionTask]:
    """Makes ``task`` known by its ``name`` in this process (a decorator; a name taken by another class is
    refused)."""
    if not (isinstance(task, type) and issubclass(task, InspectionTask)):
        raise TaskError(f"register_task: {task!r} is not an InspectionTask subclass")
    for attribute in ("name", "version", "difficulties", "defect_types", "expert_class"):
        if not hasattr(task, attribute):
            raise TaskError(f"task class {task.__name__} has no {attribute!r}")
    if TASKS.get(task.name, task) is not task:
        raise TaskError(f"task {task.name!r} is registered already, by {TASKS[task.name].__name__}")
    TASKS[task.name] = task
    return task


def get_task(task: str | type[InspectionTask], trust_code: bool = False, source: str = "") -> type[InspectionTask]:
    """A registered task class by name (a ``module:Class`` imported before counts), a task class as given, or a
    ``"module:Class"`` imported and registered, only with ``trust_code`` (the user's own choice, never a file's).
    ``source`` names where the name was read, for the one-line error."""
    if isinstance(task, type) and issubclass(task, InspectionTask):
        return task
    if not isinstance(task, str):
        raise TaskError(f"{source or 'task'}: a task is a name or an InspectionTask class, got {task!r}")
    if ":" in task and task not in TASKS:
        if not trust_code:
            raise TaskError(f"{source or 'task'}: task {task!r} is code to import, and robot_rl imports no code a file "
                            f"names unless told to: --task {task} or --trust-code (in Python: trust_code=True or the "
                            "class itself)")
        found = _import_task(task)
        register_task(found)
        TASKS[task] = found  # the import path names it too, as datasets and checkpoints record it
        return found
    if task not in TASKS:
        raise TaskError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")
    return TASKS[task]


def _import_task(task: str) -> type[InspectionTask]:
    """The class a ``"module:Class"`` names, imported as ``python -m`` would: the current folder first on the import
    path. The console script alone has no current folder there, so the guide's ``my_tasks.py`` beside the user
    would not be found. The folder stays on the path (not removed after this import): the task module's own later
    imports and the collectors' spawned workers (multiprocessing hands them the parent's ``sys.path``) must find the
    same module again. Only the user's own choice (``--task`` or ``--trust-code``) gets here."""
    module, _, attribute = task.partition(":")
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)
    try:
        found = getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as err:
        raise TaskError(f"--task {task}: cannot import it ({err})") from None
    if not (isinstance(found, type) and issubclass(found, InspectionTask)):
        raise TaskError(f"--task {task}: {found!r} is not an InspectionTask subclass")
    return found


def check_task_version(task: type[InspectionTask], recorded, source: str) -> None:
    """Refuses an artefact recorded with another version of ``task`` than this code's (None: recorded before
    versions were, accepted)."""
    if recorded is not None and recorded != task.version:
        raise TaskError(f"{source}: recorded with task {task.name} v{recorded}, this code runs v{task.version}")


def build_task(task: str | type[InspectionTask], difficulty: str | Difficulty, image_size: int,
               reward_weights: RewardWeights | Mapping | None, task_overrides: Mapping[str, Any],
               randomization: str | Randomization = "none", arm: str | ArmSpec = DEFAULT_ARM) -> InspectionTask:
    """The task behind both front-ends, from constructor arguments (``reward_weights`` may be a partial dict)."""
    if isinstance(reward_weights, Mapping):
        reward_weights = replace(RewardWeights(), **reward_weights)
    config = TaskConfig(image_size=image_size, reward_weights=reward_weights or RewardWeights(), **task_overrides)
    return get_task(task)(difficulty, config, randomization, arm)
