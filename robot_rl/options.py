"""Dataclass configs as command-line options: every field declared once, typed, with a one-line help.

Why not tyro (CleanRL's and nerfstudio's choice): our configs are flat dataclasses of scalars, which this
layer maps to argparse in ~40 lines, and two things here tyro does not do: invalid values end in one line naming
the option with exit code 2 (tyro prints a multi-line panel), and ``--resume`` refuses options that contradict
the stored run (``check_resume_options``), which needs to know which options were given on the command line.

A field's option is ``--field-name`` unless its ``flag`` says otherwise (the name stored in a run's config stays the
field's, so older runs keep loading); ``old_flags`` are earlier names, still accepted with a one-line deprecation
note on stderr. ``choices`` are listed in ``--help`` (checked by the config itself, which names the option).

Every config's ``validate`` applies ``generic_checks`` before its own: floats finite, integers within +-2^40, env
counts (``--num-envs``) within what this machine's CPUs can step. Continuing something stored (a ``--resume``d run,
an interrupted collection) follows one rule, ``conflicting_options``: an option not given takes the stored value,
one given with another value is refused.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
import textwrap
import typing
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from robot_rl.errors import UsageError


def option(default: Any, help: str, *, choices: tuple[str, ...] = (), flag: str = "",  # noqa: A002 - argparse's name
           old_flags: tuple[str, ...] = (), ablation: bool = False) -> Any:
    """A dataclass field with its command-line help; ``flag`` names its option (default: the field's name),
    ``old_flags`` its deprecated names, ``choices`` the values ``--help`` lists. An ``ablation`` switch turns a
    part of the design off (or back to a measured-worse setting) for the benchmark that measures it: accepted on the
    command line and stored like any option, but left out of ``--help`` (its epilog names it; the CLI reference
    lists it with its help)."""
    metadata = {"help": help, "choices": tuple(choices), "flag": flag, "old_flags": tuple(old_flags),
                "ablation": ablation}
    return dataclasses.field(default=default, metadata=metadata)


def flag_of(field: dataclasses.Field) -> str:
    """The option of a config field, e.g. ``--out`` for ``run_dir``."""
    return "--" + (field.metadata.get("flag") or field.name.replace("_", "-"))


def option_name(config: Any, name: str) -> str:
    """The option of field ``name`` of a config (class or instance)."""
    field = {f.name: f for f in dataclasses.fields(config)}.get(name)
    return flag_of(field) if field is not None else "--" + name.replace("_", "-")


# Every integer option lies within +-MAX_INT: far beyond any count, seed or size the commands use, small enough that
# the sums and products they compute (seed x 1_000_003 + episode, frames x bytes) stay inside a 64-bit integer.
MAX_INT_BITS = 40
MAX_INT = 2**MAX_INT_BITS
# Envs stepped together, at most ENVS_PER_CPU per CPU core (and never refused below MIN_ENV_CAP): past that a
# command spends minutes starting processes or stepping envs that the cores cannot run anyway.
ENVS_PER_CPU, MIN_ENV_CAP = 8, 16
ENV_COUNT_FLAG = "--num-envs"  # the option of an env count, in every command that has one
# Episode counts (--episodes, --eval-episodes, --episodes-per-round): each episode's record is kept in memory and
# a million boards take days on any machine here; a larger count is a typo, refused before it runs for hours.
MAX_EPISODES = 1_000_000
# Frame counts (--total-frames, --frames-per-batch): published image-based fine-tuning runs 1-24 million frames;
# a billion is weeks on any machine here, so a larger count is a typo.
MAX_FRAMES = 1_000_000_000


def max_envs() -> int:
    """The most envs a command steps together on this machine (``--num-envs``)."""
    return max(MIN_ENV_CAP, ENVS_PER_CPU * (os.cpu_count() or 1))


def generic_checks(config: Any) -> list[tuple[str, bool, str]]:
    """The checks every config gets, from its fields' values: a float is finite, an integer within +-MAX_INT, an
    episode count at most ``MAX_EPISODES``, a frame count at most ``MAX_FRAMES``, an env count (``--num-envs``) at
    most ``max_envs()``."""
    checks = []
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if isinstance(value, float):
            checks.append((field.name, math.isfinite(value), "a finite number"))
        elif isinstance(value, int) and not isinstance(value, bool):
            checks.append((field.name, -MAX_INT <= value <= MAX_INT, f"in [-2^{MAX_INT_BITS}, 2^{MAX_INT_BITS}]"))
            if field.name.endswith("episodes") or field.name.startswith("episodes_"):
                checks.append((field.name, value <= MAX_EPISODES, f"<= {MAX_EPISODES:,}"))
            if field.name.endswith("frames") or field.name.startswith("frames_"):
                checks.append((field.name, value <= MAX_FRAMES, f"<= {MAX_FRAMES:,}"))
            if flag_of(field) == ENV_COUNT_FLAG:
                checks.append((field.name, value <= max_envs(), f"<= {max_envs()} on this machine ({ENVS_PER_CPU} "
                               f"per CPU core x {os.cpu_count() or 1} cores, at least {MIN_ENV_CAP})"))
    return checks


def validate(config: Any, checks: list[tuple[str, bool, str]]) -> None:
    """Raises ValueError naming the first failing option: first ``generic_checks``, then ``checks``, the config's
    own (field name, passed, rule) triples."""
    for name, passed, rule in [*generic_checks(config), *checks]:
        if not passed:
            raise ValueError(f"{option_name(config, name)} must be {rule}, got {getattr(config, name)!r}")


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


class _Renamed(argparse.Action):
    """An option's earlier name: stores as the option does, with a one-line deprecation note on stderr."""

    def __init__(self, option_strings, dest, new_flag: str, **kwargs):
        super().__init__(option_strings, dest, **kwargs)
        self.new_flag = new_flag

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"{parser.prog}: {option_string} is deprecated, use {self.new_flag} (the old name goes in a later "
              f"release)", file=sys.stderr)
        setattr(namespace, self.dest, values)
        namespace.__dict__.setdefault(GIVEN, set()).add(self.dest)


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """``--help`` as written (descriptions and examples keep their lines), with each option's default once, at the
    end of its help ('' shown as '')."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = (action.help or "").replace(" (default: %(default)s)", "")  # BooleanOptionalAction adds its own
        if not action.option_strings or action.default in (None, argparse.SUPPRESS):
            return text
        shown = "''" if action.default == "" else "%(default)s"
        return f"{text} (default: {shown})"


def add_options(parser: argparse.ArgumentParser, config_cls: type, groups: dict[str, tuple[str, ...]] | None = None,
                main_group: str = "options", skip: tuple[str, ...] = ()) -> None:
    """Adds one option per field of ``config_cls`` (bools become ``--x/--no-x``), in argument groups: ``groups``
    maps a title to field names, listed in that order, with ``main_group`` (the fields no group names) second. The
    parsed namespace's ``given_options`` names the fields given on the command line, by any of their names."""
    hints = typing.get_type_hints(config_cls)
    fields = [f for f in dataclasses.fields(config_cls) if f.name not in skip]
    titles = {name: title for title, names in (groups or {}).items() for name in names}
    order = list(groups or {})
    order.insert(min(1, len(order)), main_group)
    sections = {title: parser.add_argument_group(title)
                for title in order if any(titles.get(f.name, main_group) == title for f in fields)}
    switches: list[str] = []
    for field in fields:
        section = sections[titles.get(field.name, main_group)]
        kind = hints[field.name]
        base = ([t for t in typing.get_args(kind) if t is not type(None)] or [kind])[0]
        help_text, flag = field.metadata.get("help", ""), flag_of(field)
        choices = field.metadata.get("choices", ())
        ablation = field.metadata.get("ablation", False)
        shown = argparse.SUPPRESS if ablation else help_text
        if base is bool:
            if field.metadata.get("old_flags"):
                raise TypeError(f"{config_cls.__name__}.{field.name}: a --x/--no-x option keeps its name")
            action = section.add_argument(flag, dest=field.name, action=_StoreBool, default=field.default, help=shown)
        else:
            metavar = "{" + ",".join(choices) + "}" if choices else flag[2:].replace("-", "_").upper()
            action = section.add_argument(flag, dest=field.name, action=_Store, type=base, default=field.default,
                                          help=shown, metavar=metavar)
        if ablation:
            action.ablation_help = help_text  # for the CLI reference, which lists what --help leaves out
            switches.append(flag)
        for old in field.metadata.get("old_flags", ()):
            parser.add_argument("--" + old, dest=field.name, action=_Renamed, new_flag=flag, type=base,
                                default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    if switches:
        named = textwrap.fill(f"ablation switches of the design, accepted but not listed above: "
                              f"{', '.join(switches)} (docs/reference/cli.md)", 100)
        parser.epilog = "\n\n".join(text for text in (parser.epilog, named) if text)


def config_from_args(config_cls: type, args: argparse.Namespace, **overrides) -> Any:
    """Builds ``config_cls`` from parsed options; invalid values raise UsageError naming the option."""
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(config_cls) if hasattr(args, f.name)}
    values.update(overrides)
    try:
        return config_cls(**values)
    except ValueError as err:
        raise UsageError(str(err)) from None


def given_options(args: argparse.Namespace) -> frozenset[str]:
    """The config fields given on the command line (by any of their names, at any value, a default included)."""
    return frozenset(getattr(args, GIVEN, ()))


def conflicting_options(config_cls: type, values: Mapping[str, Any], stored: Mapping[str, Any],
                        given: Collection[str]) -> list[str]:
    """The one rule for continuing something stored (a run, a collection): an option the user gave (``given``:
    field names) whose value (``values``) is not the stored one conflicts; an option not given takes the stored
    value. Returns ``--flag VALUE (run has STORED)`` for each conflict, in the config's field order."""
    conflicts = []
    for field in dataclasses.fields(config_cls):
        name = field.name
        if name in given and name in stored and values[name] != stored[name]:
            conflicts.append(f"{flag_of(field)} {values[name]} (run has {stored[name]})")
    return conflicts


def check_resume_options(config: Any, args: argparse.Namespace, run_dir: str | Path) -> None:
    """Refuses options given on the command line (at any value, a default included) that disagree with a stored
    run's config."""
    stored = {field.name: getattr(config, field.name) for field in dataclasses.fields(config)}
    conflicts = conflicting_options(type(config), vars(args), stored, given_options(args))
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
