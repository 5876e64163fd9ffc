"""Dataclass configs as command-line options: every field declared once, typed, with a one-line help.

Why not tyro (CleanRL's and nerfstudio's choice): our configs are flat dataclasses of scalars, which this
layer maps to argparse in ~40 lines, and two things here tyro does not do: invalid values end in one line naming
the option with exit code 2 (tyro prints a multi-line panel), and ``--resume`` refuses options that contradict
the stored run (``check_resume_options``), which needs to know which options were given on the command line.
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from pathlib import Path
from typing import Any

from robot_rl.errors import UsageError


def option(default: Any, help: str) -> Any:  # noqa: A002 - mirrors argparse's name
    """A dataclass field with its command-line help."""
    return dataclasses.field(default=default, metadata={"help": help})


def validate(config: Any, checks: list[tuple[str, bool, str]]) -> None:
    """Raises ValueError naming the first failing option; ``checks`` are (field name, passed, rule) triples."""
    for name, passed, rule in checks:
        if not passed:
            raise ValueError(f"{_flag(name)} must be {rule}, got {getattr(config, name)!r}")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


GIVEN = "given_options"  # attribute of the parsed namespace: the fields given on the command line


class _Store(argparse.Action):
    """argparse's plain store, which also records that the option was given (at any value, a default included)."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        namespace.__dict__.setdefault(GIVEN, set()).add(self.dest)


class _StoreBool(argparse.BooleanOptionalAction):
    """``--x/--no-x`` that also records that it was given."""

    def __call__(self, parser, namespace, values, option_string=None):
        super().__call__(parser, namespace, values, option_string)
        namespace.__dict__.setdefault(GIVEN, set()).add(self.dest)


def add_options(parser: argparse.ArgumentParser, config_cls: type, skip: tuple[str, ...] = ()) -> None:
    """Adds one ``--option`` per field of ``config_cls`` (bools become ``--x/--no-x``); the parsed namespace's
    ``given_options`` names the ones given on the command line."""
    hints = typing.get_type_hints(config_cls)
    for field in dataclasses.fields(config_cls):
        if field.name in skip:
            continue
        kind = hints[field.name]
        base = [t for t in typing.get_args(kind) if t is not type(None)] or [kind]
        help_text = field.metadata.get("help", "")
        if base[0] is bool:
            parser.add_argument(_flag(field.name), action=_StoreBool, default=field.default, help=help_text)
        else:
            parser.add_argument(_flag(field.name), action=_Store, type=base[0], default=field.default,
                                help=help_text, metavar=field.name.upper())


def config_from_args(config_cls: type, args: argparse.Namespace, **overrides) -> Any:
    """Builds ``config_cls`` from parsed options; invalid values raise UsageError naming the option."""
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(config_cls) if hasattr(args, f.name)}
    values.update(overrides)
    try:
        return config_cls(**values)
    except ValueError as err:
        raise UsageError(str(err)) from None


def check_resume_options(config: Any, args: argparse.Namespace, run_dir: str | Path) -> None:
    """Refuses options given on the command line (at any value, a default included) that disagree with a stored
    run's config."""
    conflicts = []
    for field in dataclasses.fields(config):
        if field.name not in getattr(args, GIVEN, set()):
            continue
        given, stored = getattr(args, field.name), getattr(config, field.name)
        if given != stored:
            conflicts.append(f"{_flag(field.name)} {given} (run has {stored})")
    if conflicts:
        raise UsageError(f"{run_dir}: --resume continues the stored config; conflicting options: "
                         + ", ".join(conflicts))


def resolve_device(name: str):
    """``auto`` -> CUDA when available, else CPU; otherwise the named device (a torch.device), which must exist."""
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise UsageError(f"--device: unknown device {name!r} (use auto, cpu, cuda or cuda:N)") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"--device {name}: CUDA is not available on this machine")
    if device.type not in ("cpu", "cuda"):
        raise UsageError(f"--device: unsupported device type {device.type!r} (use auto, cpu, cuda or cuda:N)")
    return device
