"""The one runner of ``benchmarks/``: each script declares a ``Benchmark`` (its named variants and its targets);
the harness gives it the shared command line and writes its results file in the one schema (``results_file``).

A variant is a named command line of its script (``--variant NAME`` runs it; options given after it are added,
and a repeated option takes its last value); the Makefile's bench targets run variants by name, and ``--list``
prints them. ``python benchmarks/harness.py --list`` lists every script's variants (``make bench-list``).

    python benchmarks/bc_vs_scratch.py --list              # that script's variants
    python benchmarks/bc_vs_scratch.py --variant few-bc    # = --preset few --arms bc
    python benchmarks/harness.py --list                    # every script's variants
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).parent
# Modules of this folder that are no benchmark: the harness, the protocol definitions and the helpers.
LIBRARIES = ("harness", "protocols", "results_file", "timing")
# Scripts that maintain the results and docs rather than measure (each has its own command line).
TOOLS = ("convert_results", "render_docs")
REGISTRY: dict[str, Benchmark] = {}


@dataclass(frozen=True)
class Variant:
    """A named command line of a benchmark script: ``args`` after the script's name, ``about`` in one line."""

    name: str
    args: tuple[str, ...] = ()
    about: str = ""


@dataclass
class Benchmark:
    """A benchmark script's declaration: ``name`` (the script's module name, and its results file's default
    stem), ``doc`` (the script's
    docstring: its first line describes it), ``variants`` (the first is what the bare command runs) and
    ``targets`` (what it must reach, fixed before any run; None where it has none)."""

    name: str
    doc: str
    variants: tuple[Variant, ...]
    targets: dict | None = None
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


def add_device(parser: argparse.ArgumentParser, default: str = "auto", precision: bool = False,
               help: str = "device: auto, cpu or cuda") -> None:
    """The shared ``--device`` (and ``--precision``: the encoder's compute precision) options."""
    parser.add_argument("--device", default=default, help=help)
    if precision:
        from robot_rl.configs import PRECISIONS

        parser.add_argument("--precision", choices=PRECISIONS, default="auto",
                            help="the encoder's compute precision")


def script_names() -> list[str]:
    """Every benchmark script of this folder, by module name."""
    return sorted(p.stem for p in HERE.glob("*.py") if p.stem not in LIBRARIES + TOOLS)


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
    return 0


if __name__ == "__main__":
    sys.exit(main())
