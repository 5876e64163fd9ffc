"""The one runner of ``benchmarks/``: each script declares a ``Benchmark`` (its named variants, its targets and
which shared options it takes) and a ``run(args) -> payload``; the harness parses the command line (the shared
options declared once here, the script's own added by its ``options(parser)``), times ``run`` and writes the
payload as the results file in the one schema (``results_file``).

    BENCHMARK = Benchmark("bc_quality", __doc__, variants=(...), common={"boards": 100, "out": None})
    ...
    if __name__ == "__main__":
        sys.exit(BENCHMARK.main(run, options))

A variant is a named command line of its script (``--variant NAME`` runs it; options given after it are added,
and a repeated option takes its last value); the Makefile's bench targets run variants by name, and ``--list``
prints them. ``python benchmarks/harness.py --list`` lists every script's variants (``make bench-list``).

    python benchmarks/bc_vs_scratch.py --list              # that script's variants
    python benchmarks/bc_vs_scratch.py --variant few-bc    # = --preset few --arms bc
    python benchmarks/harness.py --list                    # every script's variants
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).parent
# Modules of this folder that are no benchmark: the harness, the protocol definitions and the helpers.
LIBRARIES = ("harness", "protocols", "results_file", "timing")
REGISTRY: dict[str, Benchmark] = {}


@dataclass(frozen=True)
class Retired:
    """A benchmark whose question is answered: its results files stay, and the docs render from them as from any
    other; its script is in git at ``commit`` (a rerun starts from a checkout of that commit: the script imports
    the library and the helpers of its day). ``why`` says in one line what it answered."""

    commit: str
    why: str


def _retired(kind: str) -> dict[str, Retired]:
    """The register's ``kind`` ("scripts" or "commands"): name -> Retired."""
    register = json.loads((HERE / "retired.json").read_text())
    return {name: Retired(**entry) for name, entry in register[kind].items()}


# The register of answered questions is data (``retired.json``), kept out of the code like every other result.
# Scripts kept out of the working tree so that the lab holds what is still measured; listed by ``--list``.
RETIRED = _retired("scripts")
# Live scripts whose answered variants or options went: the commands their results files record no longer run on
# today's script (the docs say so); the script's version at ``commit`` ran them.
RETIRED_COMMANDS = _retired("commands")
RESULTS_DIR = HERE / "results"
# The options the scripts share, declared once: name -> (add_argument keywords, help). A script names the ones it
# takes in ``Benchmark.common`` with its default (or ``(default, help)``); ``out``'s None is results/NAME.json.
COMMON = {
    "device": ({}, "device: auto, cpu or cuda"),
    "precision": ({}, "the encoder's compute precision"),
    "out": ({"type": Path}, "JSON output"),
    "threads": ({"type": int}, "torch CPU threads"),
    "boards": ({"type": int}, "fresh boards per evaluation"),
    "seeds": ({"type": int, "nargs": "+"}, "seeds"),
}


@dataclass(frozen=True)
class Variant:
    """A named command line of a benchmark script: ``args`` after the script's name, ``about`` in one line."""

    name: str
    args: tuple[str, ...] = ()
    about: str = ""


@dataclass
class Benchmark:
    """A benchmark script's declaration: ``name`` (the script's module name, and its results file's default
    stem), ``doc`` (the script's docstring: its first line describes it), ``variants`` (the first is what the bare
    command runs), ``targets`` (what it must reach, fixed before any run; None where it has none) and ``common``:
    the shared options it takes (``COMMON``), each with its default or ``(default, help)``."""

    name: str
    doc: str
    variants: tuple[Variant, ...]
    targets: dict | None = None
    common: dict = field(default_factory=dict)
    # The results file of a script that writes its own, one per option value (bc_vs_scratch's per preset), from
    # the parsed options: the file whose lock a run holds. None: ``--out``, or results/<name>.json.
    results_path: Callable[[argparse.Namespace], Path] | None = None
    variant: str | None = field(default=None, init=False)  # the variant the parsed command line asked for

    def __post_init__(self):
        names = [v.name for v in self.variants]
        assert names and len(set(names)) == len(names), f"Benchmark {self.name}: variants need unique names"
        REGISTRY[self.name] = self

    @property
    def about(self) -> str:
        return self.doc.strip().splitlines()[0]

    def get(self, name: str) -> Variant:
        return next(v for v in self.variants if v.name == name)

    def command(self, variant: Variant) -> str:
        """The variant as a shell command from the repository root."""
        return " ".join(["python", f"benchmarks/{self.name}.py", *variant.args])

    def listing(self) -> str:
        """One line per variant: its name, its description, its command."""
        width = max(len(v.name) for v in self.variants)
        return "\n".join(f"  {v.name:<{width}}  {v.about}\n  {'':<{width}}  $ {self.command(v)}"
                         for v in self.variants)

    def parser(self, formatter_class=argparse.ArgumentDefaultsHelpFormatter) -> argparse.ArgumentParser:
        """The script's parser, with the harness's options (``--list``, ``--variant``); the script adds its own."""
        parser = argparse.ArgumentParser(description=self.about, formatter_class=formatter_class)
        group = parser.add_argument_group("harness")
        group.add_argument("--list", action="store_true", help="print this benchmark's variants and exit")
        group.add_argument("--variant", choices=[v.name for v in self.variants], default=None,
                           help="run a named variant (its options first, then the ones given here)")
        return parser

    def add_common(self, parser: argparse.ArgumentParser) -> None:
        """Adds the shared options the script takes, with its defaults (``common``)."""
        for name, value in self.common.items():
            default, help = value if isinstance(value, tuple) else (value, COMMON[name][1])
            options = dict(COMMON[name][0])
            if name == "precision":
                from robot_rl.configs import PRECISIONS

                options["choices"] = PRECISIONS
            if name == "out" and default is None:
                default = RESULTS_DIR / f"{self.name}.json"
            if name == "out" and default == "required":
                options["required"], default = True, None
            parser.add_argument(f"--{name}", default=default, help=help, **options)

    def main(self, run: Callable[[argparse.Namespace], dict | int | None],
             options: Callable[[argparse.ArgumentParser], None] | None = None, argv: list[str] | None = None) -> int:
        """The script's entry point: parses ``argv`` (the shared options, then the script's own), sets torch's
        threads where the script takes ``--threads``, and times ``run(args)``. A dict it returns is the payload,
        written (``write``) to ``--out`` (results/NAME.json by default) with those seconds as ``wall_s`` unless it has
        its own; an int is the exit status of a script that wrote its file itself. A run stopped by Ctrl-C or SIGTERM
        ends in one line, exit 128 + the signal, and writes nothing. The run holds the results file's lock from the
        start (it reads the file's earlier parts then): a second invocation writing it is refused in one line (exit
        2) rather than dropping the first one's parts."""
        parser = self.parser()
        self.add_common(parser)
        if options is not None:
            options(parser)
        args = self.parse(parser, argv)
        if "threads" in self.common:
            import torch

            torch.set_num_threads(args.threads)
        # The commit a results file names is the one its run starts from (``results_file.STARTED_FROM``, read on
        # import): imported now, before the run, not when its file is written.
        import results_file  # noqa: F401

        from robot_rl.errors import RunStopped, UsageError
        from robot_rl.locks import exclusive

        out = Path(getattr(args, "out", None) or (self.results_path(args) if self.results_path
                                                  else RESULTS_DIR / f"{self.name}.json"))
        start = time.perf_counter()
        with contextlib.ExitStack() as held:
            try:
                held.enter_context(exclusive(out, "results file", advice="wait for it to end"))
            except UsageError as refused:
                print(f"{self.name}: {refused}", file=sys.stderr)
                return 2
            try:
                payload = run(args)
            except RunStopped as stopped:  # Ctrl-C or SIGTERM: the stage under way checkpointed, its part recorded
                print(f"{self.name}: {stopped}; the same command continues it", file=sys.stderr)
                return 128 + stopped.signum
            if not isinstance(payload, dict):
                return payload or 0
            path = self.write(payload, out=out, wall_s=round(time.perf_counter() - start, 1))  # the file it locked
        print(f"wrote {path}")
        return 0

    def parse(self, parser: argparse.ArgumentParser, argv: list[str] | None = None) -> argparse.Namespace:
        """Parses ``argv`` (default: the command line) after the asked variant's options; ``--list`` prints the
        variants and exits 0 (before any required option is asked for)."""
        argv = sys.argv[1:] if argv is None else list(argv)
        # Only the harness's own two options, spelled in full (a script may have options that start alike).
        early = argparse.ArgumentParser(prog=parser.prog, add_help=False, allow_abbrev=False)
        early.add_argument("--list", action="store_true")
        early.add_argument("--variant", choices=[v.name for v in self.variants], default=None)
        asked, _ = early.parse_known_args(argv)
        if asked.list:
            print(f"{self.name}: {self.about}\n{self.listing()}")
            parser.exit(0)
        self.variant = asked.variant
        return parser.parse_args([*(self.get(asked.variant).args if asked.variant else ()), *argv])

    def write(self, payload: dict, out: str | os.PathLike | None = None, **kwargs) -> Path:
        """Writes the results file (``results_file.write_results``: ``out``, by default
        ``results/<name>.json``), with the declared targets where the payload has none and the variant that ran."""
        from results_file import write_results

        kwargs.setdefault("targets", self.targets)
        notes = {**kwargs.pop("notes", {}), **({"variant": self.variant} if self.variant else {})}
        return write_results(self.name, payload, out=out, notes=notes, **kwargs)


def retired_source(name: str, commit: str | None = None) -> str:
    """Script ``name`` at ``commit`` (by default a retired script's last version, its commit in ``RETIRED``), from
    git."""
    path, commit = f"benchmarks/{name}.py", commit or RETIRED[name].commit
    shown = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=HERE.parent, capture_output=True, text=True)
    if shown.returncode != 0:
        raise FileNotFoundError(f"{path} at commit {commit}: {shown.stderr.strip()}")
    return shown.stdout


def recorded_command(data: dict) -> list[str]:
    """The options a results file's script ran with (its ``argv`` after the script's path)."""
    argv = list(data.get("argv") or [])
    scripts = [i for i, word in enumerate(argv) if word.endswith(".py")]
    return argv[scripts[0] + 1:] if scripts else argv


def runs_today(name: str, argv: list[str]) -> bool:
    """Whether live benchmark ``name`` still parses ``argv`` (the options after its script's path)."""
    benchmark = load_all()[name]
    parser = benchmark.parser()
    benchmark.add_common(parser)
    options = getattr(sys.modules[name], "options", None)
    if options is not None:
        options(parser)
    asked = benchmark.variant
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            benchmark.parse(parser, argv)
        return True
    except SystemExit:
        return False
    finally:
        benchmark.variant = asked


def script_names() -> list[str]:
    """Every benchmark script of this folder, by module name."""
    return sorted(p.stem for p in HERE.glob("*.py") if p.stem not in LIBRARIES)


def load_all() -> dict[str, Benchmark]:
    """Imports every benchmark script (none runs) and returns script name -> its Benchmark."""
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    return {stem: importlib.import_module(stem).BENCHMARK for stem in script_names()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print every script's variants")
    args = parser.parse_args(argv)
    if not args.list:
        parser.print_help()
        return 0
    for benchmark in load_all().values():
        print(f"{benchmark.name}: {benchmark.about}\n{benchmark.listing()}\n")
    for name, retired in RETIRED.items():
        print(f"{name} (retired; its script is in commit {retired.commit[:7]}): {retired.why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
