"""Every ``robot-rl`` command line in the README and the docs parses with the real parser, and every ``--option``
the prose names is an option of a command it talks about: docs that name a command or option the CLI does not have
fail here, not in a reader's shell."""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import json
import re
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from robot_rl.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import harness  # noqa: E402  (benchmarks/ is not a package: its scripts import each other by name)

# The CLI reference is rendered from the parser itself; every other page is written (or templated) by hand.
GENERATED_FROM_PARSER = ROOT / "docs" / "reference" / "cli.md"
# Pages that record what changed, and so name options by their earlier, deprecated names on purpose.
HISTORY = (ROOT / "docs" / "changelog.md", ROOT / "docs" / "history.md")
FENCE = re.compile(r"^(```|~~~)[^\n]*\n(.*?)^\1[ \t]*$", re.S | re.M)
INLINE = re.compile(r"(?<!`)`([^`\n]+(?:\n[^`\n]+)*?)`(?!`)")  # inline code may wrap onto the next line
OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")
PLACEHOLDER = re.compile(r"[A-Z][A-Z0-9_]*")  # RUN_DIR, PATH, N: a value the reader fills in
SHELL_SEPARATORS = (";", "&&", "||")
ADD_ARGUMENT = re.compile(r"add_argument\(\s*\"(--[\w-]+)\"")


def doc_pages() -> list[Path]:
    """The README and every docs page but the parser's own reference (the templates render into the pages)."""
    templates = ROOT / "docs" / "templates"
    return [ROOT / "README.md", *(p for p in sorted((ROOT / "docs").rglob("*.md"))
                                  if p != GENERATED_FROM_PARSER and templates not in p.parents)]


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


PARSER = build_parser()
COMMANDS = subcommands(PARSER)
# Every option name of every command (deprecated names apart; ablation switches, out of --help, included), and the
# deprecated ones.
def _current(action: argparse.Action) -> bool:
    return action.help != argparse.SUPPRESS or hasattr(action, "ablation_help")


OPTIONS = {name: {s for a in command._actions if _current(a) for s in a.option_strings}
           for name, command in COMMANDS.items()}
DEPRECATED = {name: {s for a in command._actions if not _current(a) for s in a.option_strings}
              for name, command in COMMANDS.items()}
# The benchmark scripts' options, which the docs name beside `python benchmarks/NAME.py`: each script's own, and
# the harness's (its --list and --variant, and the shared options a script may take: harness.COMMON).
HARNESS_OPTIONS = {*ADD_ARGUMENT.findall((ROOT / "benchmarks" / "harness.py").read_text()),
                   *(f"--{name}" for name in harness.COMMON)}
BENCHMARK_OPTIONS = {path.stem: set(ADD_ARGUMENT.findall(path.read_text())) | HARNESS_OPTIONS
                     for path in (ROOT / "benchmarks").glob("*.py")}


@functools.cache
def benchmark_options(script: str) -> set[str]:
    """The options of benchmark ``script``; a retired script's (whose commands the pages of its results still
    show) from its last version in git, which a clone without that history cannot check (the error says so)."""
    if script in harness.RETIRED:
        return set(ADD_ARGUMENT.findall(harness.retired_source(script))) | HARNESS_OPTIONS
    return BENCHMARK_OPTIONS.get(script, set())


def _recorded_commands() -> set[str]:
    """The commands the results files record, as the rendered pages show them (a live script's retired command
    among them: the page says which commit runs it)."""
    commands = set()
    for path in (ROOT / "benchmarks" / "results").glob("*.json"):
        data = json.loads(path.read_text())
        commands.add(" ".join(["python", f"benchmarks/{data['benchmark']}.py", *harness.recorded_command(data)]))
    return commands


RECORDED_COMMANDS = _recorded_commands()


# -- finding the commands ---------------------------------------------------------------------------------------
def code_lines(text: str) -> Iterator[str]:
    """The lines of the page's fenced blocks, a line continued with a trailing backslash joined to the next."""
    for match in FENCE.finditer(text):
        yield from match.group(2).replace("\\\n", " ").splitlines()


def without_comment(line: str) -> str:
    """A shell line without its trailing ``# comment`` (prose about the command, not part of it)."""
    return re.split(r"(?:^|\s)#", line, maxsplit=1)[0]


def shell_commands(line: str) -> list[str]:
    """The commands of one code line: a prompt dropped, split at ``;``, ``&&`` and ``||``; a line that runs
    ``make`` is left out (its ``robot-rl`` is in the comment, not a command line)."""
    line = re.sub(r"^\s*(?:\$|>>>|\.\.\.)\s+", "", line)
    if line.lstrip().startswith("make "):
        return []
    return [part.strip() for part in re.split("|".join(map(re.escape, SHELL_SEPARATORS)), line)]


def inline_spans(text: str) -> Iterator[str]:
    """The page's inline code outside fenced blocks, a span that wraps joined with a space and a table's escaped
    pipe unescaped."""
    for match in INLINE.finditer(FENCE.sub("", text)):
        yield match.group(1).replace("\n", " ").replace("\\|", "|")


def commands_in(text: str) -> Iterator[str]:
    """Every command line a page shows: code lines and inline code that start with ``robot-rl``, and inline code
    that starts with a command's name and an option (``evaluate --perturbations``)."""
    for line in code_lines(text):
        yield from (c for c in shell_commands(without_comment(line)) if c.split()[:1] == ["robot-rl"])
    for span in inline_spans(text):
        words = span.split()
        if words[:1] == ["robot-rl"] or (words[:1] and words[0] in COMMANDS and words[1:2]
                                        and words[1].startswith("--")):
            yield span if words[0] == "robot-rl" else f"robot-rl {span}"


def argv_of(command: str) -> list[str]:
    """The argv a reader would type: the ``robot-rl`` dropped, ``[optional]`` brackets and ``...`` dropped, the
    first of ``a|b`` alternatives taken, and a placeholder value (``--resume RUN_DIR``, ``--workers N``) replaced
    by the option's default, which its type accepts."""
    words = [w.strip("[]") for w in shlex.split(command)[1:] if w not in ("...", "[", "]")]
    words = [w.split("|")[0] if "|" in w and not w.startswith("|") else w for w in words]
    parser = COMMANDS.get(words[0]) if words else None
    argv: list[str] = []
    for word in [*words, ""]:
        action = parser._option_string_actions.get(argv[-1]) if parser and argv else None
        if action is not None and action.nargs != 0 and (PLACEHOLDER.fullmatch(word) or word[:2] in ("--", "")):
            # A placeholder, or an option named without its value (`finetune --task`): the default stands in.
            argv.append(str(action.default) if action.default not in (None, "") else "x")
            if PLACEHOLDER.fullmatch(word):
                continue
        if word:
            argv.append(word)
    return argv


def parse_error(argv: list[str]) -> str:
    """What the real parser says about ``argv`` (empty when it parses)."""
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            PARSER.parse_args(argv)
    except SystemExit as stop:
        return "" if stop.code == 0 else stderr.getvalue().strip().splitlines()[-1]
    return ""


def all_commands() -> list[tuple[str, str]]:
    return [(str(page.relative_to(ROOT)), command) for page in doc_pages() for command in commands_in(page.read_text())]


# -- the tests --------------------------------------------------------------------------------------------------
def test_the_docs_show_commands_of_every_kind():
    found = all_commands()
    assert len(found) >= 60  # the guides alone show about as many
    assert {argv_of(c)[0] for _, c in found if len(argv_of(c)) > 1} >= {"demo", "collect-demos", "pretrain",
                                                                         "finetune", "evaluate", "export", "pipeline"}


@pytest.mark.parametrize("page", doc_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_line_parses_with_the_real_parser(page):
    wrong = []
    for command in commands_in(page.read_text()):
        argv = argv_of(command)
        if not argv or (len(argv) == 1 and argv[0] in COMMANDS):
            continue  # a command named, not a command line (`robot-rl info` needs its PATH)
        error = parse_error(argv)
        if error:
            wrong.append(f"`{command}`: {error}")
        elif page not in HISTORY:
            wrong += [f"`{command}`: {word} is a deprecated name" for word in argv if word in DEPRECATED[argv[0]]]
    assert not wrong, f"{page.relative_to(ROOT)}:\n" + "\n".join(wrong)


def commands_named(text: str) -> set[str]:
    """The commands a page's code blocks run, and those its prose names (``robot-rl NAME``, `` `NAME` ``,
    `` `NAME --option` ``); none where its code blocks run no ``robot-rl`` command (a design or results page
    that mentions options in passing)."""
    run = {c.split()[1] for line in code_lines(text) for c in shell_commands(without_comment(line))
           if c.split()[:1] == ["robot-rl"] and len(c.split()) > 1} & set(COMMANDS)
    if not run:
        return set()
    named = {m for m in re.findall(r"robot-rl ([a-z-]+)", text) if m in COMMANDS}
    spans = {span.split()[0] for span in inline_spans(text) if span.split()}
    return run | named | (spans & set(COMMANDS))


# "`--x ...` of `cmd`" (also on, in, for) and "`cmd`'s `--x`": the prose says whose option it is.
OPTION_OF = re.compile(r"`(--[a-z][a-z0-9-]*)[^`]*`,? (?:of|on|in|for) `([a-z-]+)`")
COMMANDS_OPTION = re.compile(r"`([a-z-]+)`'s `(--[a-z][a-z0-9-]*)")


def other_programs_options(text: str) -> set[str]:
    """Options of other programs, named in inline code or code lines that run them (``pip install --no-deps``,
    ``tensorboard --logdir``); a benchmark script's options are checked against the script itself."""
    spans = [*inline_spans(text), *(without_comment(line) for line in code_lines(text))]
    options: set[str] = set()
    for span in spans:
        words = span.split()
        if not words or words[0] == "robot-rl" or words[0] in COMMANDS or words[0].startswith("--"):
            continue
        script = next((Path(w).stem for w in words if w.startswith("benchmarks/") and w.endswith(".py")), None)
        found = set(OPTION.findall(span))
        if script is not None and span.strip() not in RECORDED_COMMANDS:
            unknown = found - benchmark_options(script)
            assert not unknown, f"`{span}`: benchmarks/{script}.py has no option {', '.join(sorted(unknown))}"
        options |= found
    return options


def excerpt(text: str, at: int) -> str:
    return " ".join(text[max(0, at - 70):at + 50].split())


def prose_option_errors(text: str) -> list[str]:
    """On a page that runs commands, an option the prose names is an option of one of them or of a command the
    prose names (on other pages, of any command), or of a benchmark script the page names; and an option the prose
    gives as a command's (`` `--x` of `cmd` ``, `` `cmd`'s `--x` ``) is that command's. What breaks that."""
    named = commands_named(text) or set(COMMANDS)
    allowed = set().union(*(OPTIONS[name] for name in named)) | other_programs_options(text)
    if "benchmarks/" in text:
        allowed |= set().union(*BENCHMARK_OPTIONS.values())
    prose = re.sub(r"<!--.*?-->", "", FENCE.sub("", text))  # a stated default's marker: the renderer checks it
    wrong = [f"{m[1]} is not an option of {', '.join(sorted(named))}: ...{excerpt(prose, m.start())}..."
             for m in OPTION.finditer(prose) if m[1] not in allowed]
    for option, command, at in [*((m[1], m[2], m.start()) for m in OPTION_OF.finditer(prose)),
                                *((m[2], m[1], m.start()) for m in COMMANDS_OPTION.finditer(prose))]:
        if command in COMMANDS and option not in OPTIONS[command]:
            wrong.append(f"{option} is not an option of {command}: ...{excerpt(prose, at)}...")
    return wrong


@pytest.mark.parametrize("page", [p for p in doc_pages() if p not in HISTORY], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_option_the_prose_names_belongs_to_a_command_it_talks_about(page):
    wrong = prose_option_errors(page.read_text())
    assert not wrong, f"{page.relative_to(ROOT)}:\n" + "\n".join(wrong)


# -- the checker itself -----------------------------------------------------------------------------------------
def test_the_checker_reads_continuations_prompts_placeholders_and_alternatives():
    text = ("```bash\n$ robot-rl finetune --policy runs/bc \\\n    --workers N   # comment: robot-rl nonsense\n"
            "make demo   # robot-rl pipeline --preset quick (collect -> pretrain)\n```\n"
            "Run `robot-rl pipeline --preset quick\\|full [--task T]` or `evaluate --board-seed 7`.\n")
    found = list(commands_in(text))
    assert found == ["robot-rl finetune --policy runs/bc      --workers N",
                     "robot-rl pipeline --preset quick|full [--task T]", "robot-rl evaluate --board-seed 7"]
    assert [parse_error(argv_of(c)) for c in found] == ["", "", ""]
    assert argv_of(found[0])[-1] == "0"  # N: --workers' default
    assert argv_of(found[1]) == ["pipeline", "--preset", "quick", "--task", "pcb-inspect"]
    assert argv_of("robot-rl finetune --task") == ["finetune", "--task", "x"]  # an option named, without a value


def test_the_checker_catches_a_wrong_option_and_a_wrong_command():
    assert "unrecognized arguments: --sed" in parse_error(argv_of("robot-rl evaluate --policy runs/ppo --sed 3"))
    assert "invalid choice" in parse_error(argv_of("robot-rl evalute --policy runs/ppo"))
    # evaluate's --seed is a deprecated name of --board-seed: it parses, and the docs may not use it.
    assert "--seed" in DEPRECATED["evaluate"] and "--seed" not in OPTIONS["evaluate"]
    assert "--seed" in OPTIONS["pretrain"]


def test_the_checker_catches_an_option_of_another_command_in_the_prose():
    page = "```bash\nrobot-rl evaluate --policy runs/ppo\n```\n\n`evaluate` runs `--episodes` boards from `--{}`.\n"
    assert prose_option_errors(page.format("board-seed")) == []
    assert prose_option_errors(page.format("seed"))[0].startswith("--seed is not an option of evaluate")
    assert prose_option_errors("Boards from the default `--seed` of `evaluate`.")[0].startswith(
        "--seed is not an option of evaluate")
    assert prose_option_errors("Run `tensorboard --logdir runs/bc`.") == []  # another program's option
    with pytest.raises(AssertionError, match="bc_quality.py has no option --nope"):
        other_programs_options("`python benchmarks/bc_quality.py --nope 1`")
