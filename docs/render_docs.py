"""Renders the docs pages and README tables that hold figures or come from code, so none can drift from its source.

From ``benchmarks/results/*.json``: the results pages (``docs/results/``), the history page and the README's
quick-start and results-at-a-glance tables (between ``<!-- generated: NAME -->`` and ``<!-- end generated -->``).
From the code: the CLI reference (the ``robot-rl`` parser, built from the option dataclasses in
``robot_rl/configs.py``) and the tasks reference (tasks, difficulty presets, randomization presets, perturbations).
Each figure printed names its file, with the machine, date and commit the file records.

In the hand-written pages (the guides, start and reference pages, the README), every default the prose states comes
from the code too: ``<!-- default: COMMAND --flag -->VALUE<!-- end -->`` is the value ``robot-rl COMMAND --help``
shows, ``<!-- preset: PRESET COMMAND --flag -->VALUE<!-- end -->`` that option in the pipeline preset's stage
(``robot_rl.pipeline.PRESETS``), and a ``<!-- generated: NAME -->`` block in a page under ``docs/`` is
``templates/pages/NAME.md`` (beside this file) rendered (with ``option_default``, ``preset_value`` and
``recipe_changes``).

    python docs/render_docs.py           # rewrite every generated page (make docs-render)
    python docs/render_docs.py --check   # exit 1 naming the pages that differ from what would be rendered
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import jinja2

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))  # the results' schema and the retired scripts are the benchmarks'
from harness import RETIRED, RETIRED_COMMANDS, recorded_command, runs_today  # noqa: E402
from results_file import read_results  # noqa: E402

RESULTS_DIR = ROOT / "benchmarks" / "results"
TEMPLATES = ROOT / "docs" / "templates"
README = ROOT / "README.md"
COMMAND = "make docs-render"  # or: python docs/render_docs.py
BLOCK = re.compile(r"(<!-- generated: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- end generated -->)", re.S)
# A value the prose states that the code defines (see the module docstring); the value is what gets rewritten.
VALUE = re.compile(r"(<!-- (?P<kind>default|preset): (?P<key>[^>]*?) -->)(?P<value>.*?)(<!-- end -->)")
# The counts the prose spells out.
NUMBER_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight"}
# The page templates, each rendered with the same helpers to the same path under docs/.
PAGES = (*(f"results/{name}.md" for name in ("index", "demo", "bc", "fine-tuning", "robustness", "throughput",
                                             "arms-tasks", "reliability")), "history.md")


# -- loading and provenance ------------------------------------------------------------------------------------
def load_results(folder: Path = RESULTS_DIR) -> dict[str, dict]:
    """Every results file by its stem, flattened (``results_file.flatten``: the templates read a file's
    measurements beside its provenance)."""
    return {path.stem: read_results(path) for path in sorted(folder.glob("*.json"))}


def machine_text(machine: dict | None) -> str:
    """The CPU (or GPU) as the file records it: 'AMD EPYC, 2 cores'."""
    if not machine:
        return "machine not recorded"
    cpu = re.sub(r"\((R|TM)\)", "", machine.get("cpu") or "unknown CPU").replace(" Processor", "").strip()
    text = f"{cpu}, {machine.get('logical_cpus', '?')} cores"
    return text + (f", {machine['gpu']}" if machine.get("gpu") else "")


def wall_text(data: dict) -> str:
    """The file's wall time (``wall_s``), or the sum of its arms' stages where the file has none."""
    value = data.get("wall_s")
    if isinstance(value, int | float):
        scope = " (its last invocation; runs in parts)" if data.get("wall_s_scope") == "this invocation" else ""
        return f"{value:,.0f} s{scope}"
    arms = [a["wall_s"] for a in data.get("arms", {}).values() if isinstance(a, dict) and "wall_s" in a]
    if arms and all(isinstance(a, dict) for a in arms):
        return f"{sum(sum(a.values()) for a in arms):,.0f} s (its arms' stages)"
    return "wall time not recorded"


def provenance_line(name: str, data: dict) -> str:
    """'`benchmarks/results/NAME.json`: AMD EPYC, 2 cores; 2026-12-02; commit bae2daf; 437 s' (and where the date
    and commit came from, when git history)."""
    date = (data.get("date") or "date not recorded")[:10]
    commit = (data.get("commit") or "commit not recorded")[:7]
    note = " (date and commit: the git commit that added the file)" if data.get("provenance_source") else ""
    retired = RETIRED.get(data.get("benchmark"))
    if retired is not None:
        note += f"; the script is retired, its last version in commit {retired.commit[:7]}"
    gone = RETIRED_COMMANDS.get(data.get("benchmark"))
    if gone is not None and not runs_today(data["benchmark"], recorded_command(data)):
        note += f"; its command is retired from the script, whose version at commit {gone.commit[:7]} runs it"
    return (f"`benchmarks/results/{name}.json`: {machine_text(data.get('machine'))}; {date}; commit {commit}; "
            f"{wall_text(data)}{note}")


def command_text(data: dict) -> str:
    argv = data.get("argv") or []
    if argv and argv[0].endswith(("python", "python3")) or (argv and "/python" in argv[0]):
        argv = argv[1:]
    if argv and argv[0].endswith(".py"):
        argv = ["python", "benchmarks/" + Path(argv[0]).name, *argv[1:]]
    return " ".join(argv)


# -- number formatting -----------------------------------------------------------------------------------------
def pct(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value * 100:.{digits}f}%"


def ci(pair, digits: int = 0) -> str:
    return f"{pct(pair[0], digits)}-{pct(pair[1], digits)}"


def rate_ci(metrics: dict, digits: int = 0) -> str:
    """'74% (60%-84%)' from a metrics dict (success_rate + success_ci95, or rate + ci95)."""
    rate = metrics.get("success_rate", metrics.get("rate"))
    pair = metrics.get("success_ci95", metrics.get("ci95"))
    return f"{pct(rate, digits)} ({ci(pair, digits)})"


def num(value, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def and_list(items) -> str:
    """'a', 'a and b', 'a, b and c'."""
    items = [str(item) for item in items]
    return " and ".join(items) if len(items) < 3 else ", ".join(items[:-1]) + " and " + items[-1]


def span(values, text=pct) -> str:
    """The range of ``values`` as 'low-high' (or the one value), each through ``text``."""
    low, high = text(min(values)), text(max(values))
    return low if low == high else f"{low[:-1] if low.endswith('%') else low}-{high}"


def cell(value) -> str:
    """A stored table cell as text: CIs as percentages, floats to 3 significant digits, bools as yes / no."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, float) and 0 <= v <= 1 for v in value):
        return ci(value)
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "-"
    return "-" if value is None or value == "" else str(value).replace("|", "\\|")


def table(rows, columns=None, headers=None) -> str:
    """A Markdown table of dict rows; ``columns`` picks keys, ``headers`` renames them."""
    rows = list(rows)
    columns = list(columns or (rows[0].keys() if rows else []))
    headers = list(headers or columns)
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join("---" for _ in headers) + " |"]
    lines += ["| " + " | ".join(cell(row.get(c)) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


# The BC arm's name in a bc_vs_scratch table (``bc_vs_scratch.ARM_LABELS``): files written before it named no recipe
# call it by the few-demo start's name, which other starts' rows must not show.
BC_ARM_LABEL, BC_ARM_OLD_LABEL = "PPO from the BC start", "PPO from few-demo BC"


def scratch_table(rows) -> str:
    """A bc_vs_scratch results table, its BC arm under ``BC_ARM_LABEL``."""
    return table({**row, "arm": BC_ARM_LABEL} if row.get("arm") == BC_ARM_OLD_LABEL else row for row in rows)


# -- tables used on several pages ------------------------------------------------------------------------------
def metrics_row(label: str, m: dict) -> dict:
    return {"what": label, "success (95% CI)": rate_ci(m),
            "boards": m.get("episodes", m.get("boards")), "guesses": m.get("guesses"),
            "collisions / episode": m.get("collisions_per_episode"), "episode length": m.get("episode_length")}


def bc_checks_table(data: dict) -> str:
    """A bc_quality file's checks, then its policies on fresh boards."""
    rows = [metrics_row(f"epoch {c['epoch']} (held-out boards)", c) for c in data["checks"]]
    for key in ("fresh_boards_last", "fresh_boards"):
        if key in data:
            m = data[key]
            rows.append(metrics_row(f"`{m.get('checkpoint', 'best.pt')}` on fresh boards", m))
    return table(rows)


def suite_table(files: dict[str, dict]) -> str:
    """Robustness suites side by side: one row per shift, one column per arm (label -> arm dict)."""
    shifts: list[str] = []
    for arm in files.values():
        shifts += [s["shift"] for s in arm["suite"] if s["shift"] not in shifts]
    rows = []
    for shift in shifts:
        row = {"shift": f"`{shift}`"}
        for label, arm in files.items():
            found = [s for s in arm["suite"] if s["shift"] == shift]
            row[label] = (f"{rate_ci(found[0])}, {found[0]['guesses']} guesses" if found else "not measured")
        rows.append(row)
    return table(rows)


def lead_inspect_rows(data: dict | None) -> list[dict]:
    """One row per finished arm of ``lead_inspect.json`` (an absent file or unfinished arms give none); an arm
    kept from an earlier part names the commit it was measured at."""
    commit = str((data or {}).get("commit", ""))
    return [{"arm": name, "last policy, fresh boards": rate_ci(final), "boards": final.get("episodes"),
             "collisions / episode": final.get("collisions_per_episode"), "guesses": final.get("guesses"),
             "wall time": f"{arm.get('wall_s', 0):,.0f} s", "target met": arm.get("targets", {}).get("met"),
             "measured at": f"`{str(arm.get('kept_from', {}).get('commit') or commit)[:7]}`"}
            for name, arm in (data or {}).get("arms", {}).items()
            if arm.get("status") == "done" and (final := arm.get("final")) is not None]


def perception_rows(data: dict) -> list[dict]:
    """One row per BC arm of ``perception.json``: its seconds per stage and its targets, met or missed (with the
    shifts it missed); the baseline is the row to beat."""
    targets, rows = data["targets"], []
    for name, arm in data["arms"].items():
        verdict = data["verdicts"].get(name)
        if verdict is None:
            target = "the row to beat"
        elif verdict["met"]:
            target = "met"
        else:
            target = "missed"
            if not verdict["nominal_met"]:
                target += f": nominal under {pct(targets['nominal_success'])}"
            if verdict["shifts_missed"]:
                target += (f" ({len(verdict['shifts_missed'])} of the shifts under {pct(targets['shift_success'])}: "
                           f"{', '.join(verdict['shifts_missed'])})")
        trained = arm.get("policies_from")  # another arm's policies: their training is in that arm's row
        rows.append({"arm": f"`{name}`",
                     "BC wall time": (f"`{trained}`'s" if trained else "not recorded" if arm["bc_wall_s"] is None
                                      else f"{num(arm['bc_wall_s'])} s"),
                     "encoder pretraining": f"{num(arm['extra_wall_s'])} s" if arm["extra_wall_s"] else "none",
                     "suite": f"{num(arm['evaluate_wall_s'])} s", "target": target,
                     "measured at": measured_commit(arm, data)})
    return rows


def measured_commit(record: dict, results: dict) -> str:
    """The commit a record was measured at (its own ``kept_from``, else its results file's), saying so when that
    run had uncommitted changes."""
    source = record.get("kept_from") or results
    changes = " with uncommitted changes" if source.get("uncommitted_changes") else ""
    return f"`{str(source.get('commit'))[:7]}`{changes}"


def arm_names(arms: dict, arm: str) -> list[str]:
    """The names of ``arm`` and its seeds (``ARM``, ``ARM-seed1``, ...) among ``arms``, in seed order."""
    found = {int(match[1] or 0): name for name in arms
             if (match := re.fullmatch(re.escape(arm) + r"(?:-seed(\d+))?", name))}
    return [found[seed] for seed in sorted(found)]


def seeds_of(arms: dict, arm: str) -> list[dict]:
    """The records of ``arm`` and its seeds among ``arms``, in seed order (``arm_names``)."""
    return [arms[name] for name in arm_names(arms, arm)]


def shift_of(arm: dict, shift: str) -> dict:
    """An arm's suite row under ``shift``."""
    return next(row for row in arm["suite"] if row["shift"] == shift)


def dagger_cap_checks(demo: dict) -> dict[str, bool]:
    """``--dagger auto``'s round-cap rule (``protocols.DAGGER_AUTO_CAP_RULE``) checked on a ``make demo`` record's
    last policy, by the same check as the budget presets' targets."""
    from protocols import DAGGER_AUTO_CAP_RULE, budget_targets

    last = demo["after_ppo"]
    final = {"0": {"rate": last["success_rate"], "guesses": last["guesses"], "boards": last["episodes"],
                   "failures": demo["failures"]["after_ppo"]}}
    return budget_targets(DAGGER_AUTO_CAP_RULE, {"rate": demo["after_bc"]["success_rate"]}, final)


# -- the code-generated reference pages ------------------------------------------------------------------------
def cli_reference() -> str:
    """Every command's options, from the ``robot-rl`` parser (which the option dataclasses build)."""
    from robot_rl.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    helps = {a.dest: a.help for a in sub._choices_actions}
    out = [_header("the `robot-rl` parser (`robot_rl/cli.py`), built from the option dataclasses in "
                   "`robot_rl/configs.py`"),
           "# CLI reference", "",
           "Every command of `robot-rl`, every option with its default, as `--help` prints them. Options are "
           "typed fields of dataclasses in `robot_rl/configs.py`; an invalid value ends in one line naming the "
           "option, exit code 2. See [run folders and checkpoints](../start/concepts.md) for what the folders "
           "hold.", ""]
    for name, command in sub.choices.items():
        out += [f"## `robot-rl {name}`", "", (helps.get(name) or command.description or "").rstrip(".") + ".", ""]
        ablations = []
        for group in command._action_groups:
            # Deprecated names are hidden from --help (argparse.SUPPRESS), and from here; ablation switches too,
            # listed after the groups.
            actions = [a for a in group._group_actions
                       if a.option_strings and a.dest != "help" and a.help != argparse.SUPPRESS]
            ablations += [a for a in group._group_actions if hasattr(a, "ablation_help")]
            if not actions:
                continue
            if group.title not in ("options", "optional arguments"):
                out += [f"**{group.title}**", ""]
            out += [table([_option_row(action, action.help) for action in actions]), ""]
        if ablations:
            out += ["**ablation switches** (accepted, not in `--help`: each turns a part of the design off, for "
                    "the benchmark that measures it)", "",
                    table([_option_row(action, action.ablation_help) for action in ablations]), ""]
    return "\n".join(out)


def _option_row(action: argparse.Action, help_text: str | None) -> dict:
    """An option as a CLI reference row: its flags, its default, its help (with its choices)."""
    choices = action.choices or (action.metavar[1:-1].split(",") if str(action.metavar).startswith("{") else None)
    # argparse's help strings escape a percent sign as %%; --help prints one.
    text = (help_text or "").replace("%%", "%") + (f" (choices: {', '.join(map(str, choices))})" if choices else "")
    return {"option": ", ".join(f"`{flag}`" for flag in action.option_strings),
            "default": _default_text(action.default), "meaning": text.replace("%(default)s", str(action.default))}


def _default_text(default) -> str:
    return "-" if default is None else "`''`" if default == "" else f"`{default}`"


def tasks_reference() -> str:
    """Tasks, their difficulty presets, the randomization presets and the perturbation suite, from the code."""
    import math
    from dataclasses import fields

    from robot_rl.envs import randomization as rnd
    from robot_rl.envs.tasks import TASKS

    out = [_header("the task registry (`robot_rl.envs.tasks.TASKS`), each task's difficulty presets and "
                   "`robot_rl.envs.randomization`"),
           "# Tasks, difficulty, randomization and perturbations", "",
           "What each built-in task is, and the ranges every episode draws from; the tables are generated "
           "from the code. How a task works and how to write your own: [your own task](../guides/own-task.md).",
           "", "## Tasks", ""]
    out += [table([{"task": f"`{name}`", "version": task.version, "class": f"`{task.__module__}.{task.__name__}`",
                    "defect types": ", ".join(task.defect_types) or "-", "difficulties": ", ".join(task.difficulties)}
                   for name, task in TASKS.items()]), ""]
    for name, task in TASKS.items():
        out += [f"## Difficulty presets of `{name}`", ""]
        rows = [{"level": level.name, "board x (m)": f"{level.board_x[0]:.2f}-{level.board_x[1]:.2f}",
                 "board y (m)": f"+-{level.board_y[1]:.2f}", "yaw": f"+-{math.degrees(level.board_max_yaw):.0f} deg",
                 "posts": level.num_posts, "post height (m)": f"{level.post_height:.2f}" if level.num_posts else "-",
                 "defect size": f"x{level.defect_scale:g}",
                 "lighting jitter": f"+-{level.light_variation:.0%}" if level.light_variation else "0",
                 "joint noise at reset (rad)": f"{level.init_joint_noise:g}"} for level in task.difficulties.values()]
        out += [table(rows), ""]
    presets = [r for r in rnd.RANDOMIZATIONS.values() if r.name != "none"]
    out += ["## Domain randomization presets", "",
            "`randomization=` on the envs and `--randomization` on the commands; each value is drawn uniformly from "
            "its range per episode (`none` draws nothing). Multipliers are `x`; a colour has one range per channel.",
            ""]
    rows = [{"quantity": f"`{f.name}`", "meaning": RANDOMIZATION_MEANING.get(f.name, ""),
             **{f"`{r.name}`": _field_text(f.name, getattr(r, f.name)) for r in presets}}
            for f in fields(rnd.Randomization) if f.name != "name"]
    out += [table(rows), "", "## Perturbation suite", "",
            "`evaluate --perturbations` runs the evaluation's boards nominally and under each fixed shift "
            "(`robot_rl.envs.randomization.PERTURBATIONS`), every one outside the `default` ranges:", ""]
    out += [table([{"shift": f"`{p.name}`", "change from the nominal cell": rnd.describe(p)}
                   for p in rnd.PERTURBATIONS.values()]), ""]
    return "\n".join(out)


# What each Randomization field varies (its unit), for the reference table.
RANDOMIZATION_MEANING = {
    "light_intensity": "light intensity, x nominal (diffuse and ambient)",
    "light_colour": "light colour, x each channel",
    "light_tilt": "horizontal offset of the light direction (z = -1), random heading",
    "board_colour": "board colour, x the texture, each channel",
    "board_gloss": "board finish, x specular and shininess",
    "board_masks": "board solder mask (texture)",
    "table_colour": "table colour (the wrist view's background), x each channel",
    "table_hsv": "table colour drawn in HSV instead (then x `table_colour`)",
    "table_marks": "distractor marks on the table, 55-180 mm from the board centre, 8-50 mm, any colour",
    "fixture_colour": "clamp posts and floor colour, x each channel",
    "camera_shift": "wrist camera offset from its mount (m), random direction",
    "camera_tilt": "wrist camera tilt (deg), random axis",
    "camera_fov": "wrist camera field of view change (deg; nominal 50)",
    "pixel_noise": "Gaussian pixel noise, std (0-255 scale), per episode",
    "calibrated": "the cell measured its camera: the arm (its localization test, the expert) controls the camera "
                  "where it sits, not the drawn mount",
    "calibration_shift": "a calibrated cell's error on the camera's position (m), random direction",
    "calibration_tilt": "a calibrated cell's error on the camera's orientation (deg), random axis",
    "rectified": "the cell measured its lens too: every wrist image is resampled to the nominal field of view",
    "calibration_fov": "a rectifying cell's error on the lens's field of view (deg), either sign",
    "auto_exposure": "the camera sets its exposure every frame from the centre of its image (all light scaled "
                     "towards its meter's target before the sensor clips)",
    "metering": "what that camera reads in the centre: its mean grey level (`centre`) or its highlights, held just "
                "under clipping (`highlights`)",
}


def _field_text(name: str, value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if name == "board_masks":
        return ", ".join(value)
    if name == "metering":
        return value
    if name == "table_hsv":
        return "nominal" if value is None else "HSV " + ", ".join(
            f"{c} {lo:g}-{hi:g}" for c, (lo, hi) in zip("hsv", value))
    if name == "table_marks":
        return "none" if value == (0, 0) else f"{value[0]}-{value[1]}"
    if isinstance(value[0], tuple):
        parts = {f"{lo:g}-{hi:g}" if lo != hi else f"{lo:g}" for lo, hi in value}
        return "x" + parts.pop() if len(parts) == 1 else "x(" + ", ".join(
            f"{lo:g}-{hi:g}" for lo, hi in value) + ")"
    low, high = value
    return f"{low:g}-{high:g}" if low != high else f"{low:g}"


# -- defaults the hand-written pages state ---------------------------------------------------------------------
# Each command's stage in a pipeline preset (robot_rl.pipeline.Preset's fields).
PRESET_STAGES = {"collect-demos": "collect", "pretrain-encoder": "encoder", "pretrain": "pretrain", "dagger": "dagger",
                 "finetune": "finetune", "evaluate": "evaluate"}


def _command_action(command: str, flag: str) -> argparse.Action:
    """The ``robot-rl`` parser's action for ``command``'s ``flag`` (what ``--help`` prints); a name the parser
    lacks is a ValueError naming it."""
    from robot_rl.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    parser = sub.choices.get(command)
    if parser is None:
        raise ValueError(f"no command robot-rl {command}")
    action = parser._option_string_actions.get(flag)
    if action is None or (action.help == argparse.SUPPRESS and not hasattr(action, "ablation_help")):
        raise ValueError(f"robot-rl {command} has no option {flag}")
    return action


def value_text(value) -> str:
    """An option's value as prose states it: 65,536; 0.1; 3e-5; 2 (a whole float); on / off; '' as none."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.0f}" if value.is_integer() else re.sub(r"e([+-])0*(\d)", r"e\g<1>\2", f"{value:g}")
    return "none" if value in ("", None) else str(value)


def option_default(command: str, flag: str) -> str:
    """The default of ``robot-rl COMMAND --flag``, as prose states it."""
    return value_text(_command_action(command, flag).default)


def _preset_stage(preset: str, command: str):
    """The config a pipeline preset runs ``command`` with (an optional stage as ``for_options`` adds it)."""
    from robot_rl import pipeline

    stage = PRESET_STAGES.get(command)
    if preset not in pipeline.PRESETS or stage is None:
        raise ValueError(f"no stage {command} in a pipeline preset {preset!r}")
    optional = {"encoder": pipeline.ENCODER_STAGES, "dagger": pipeline.DAGGER_STAGES}.get(stage, {})
    return getattr(pipeline.PRESETS[preset], stage) or optional[preset]


def preset_value(preset: str, command: str, flag: str) -> str:
    """``--flag`` of ``command`` in the pipeline preset ``preset``, as prose states it."""
    return value_text(getattr(_preset_stage(preset, command), _command_action(command, flag).dest))


def recipe_changes(preset: str, command: str) -> list[dict]:
    """The options (flag, the preset's value, the command's default) where a pipeline preset's stage differs from
    ``command``'s defaults; the fields that link stages (``robot_rl.pipeline.WIRING``) left out."""
    import dataclasses

    from robot_rl.options import flag_of
    from robot_rl.pipeline import WIRING

    config = _preset_stage(preset, command)
    stage = PRESET_STAGES[command]
    return [{"flag": flag_of(f), "value": value_text(getattr(config, f.name)), "default": value_text(f.default)}
            for f in dataclasses.fields(config)
            if f.name not in WIRING[stage] and getattr(config, f.name) != f.default]


def fill_values(text: str, source: str) -> str:
    """``text`` with each ``<!-- default: ... -->`` and ``<!-- preset: ... -->`` value rewritten from the code. A
    marker may not begin a line: Markdown takes a line that starts with a comment for an HTML block, which ends the
    paragraph there."""
    def fill(match: re.Match) -> str:
        if match.start() == 0 or text[match.start() - 1] == "\n":
            raise ValueError(f"{source}: {match.group(1)} begins a line; move a word before it")
        words = match["key"].split()
        try:
            if match["kind"] == "default" and len(words) == 2:
                value = option_default(*words)
            elif match["kind"] == "preset" and len(words) == 3:
                value = preset_value(*words)
            else:
                raise ValueError("expected `default: COMMAND --flag` or `preset: PRESET COMMAND --flag`")
        except ValueError as err:
            raise ValueError(f"{source}: {match.group(1)}: {err}") from None
        return match.group(1) + value + match.group(5)

    return VALUE.sub(fill, text)


def hand_written_pages() -> list[Path]:
    """The docs pages written by hand (every page under docs/ but the generated ones)."""
    generated = {ROOT / "docs" / page for page in PAGES} | {ROOT / "docs/reference/cli.md",
                                                             ROOT / "docs/reference/tasks.md"}
    return [page for page in sorted((ROOT / "docs").rglob("*.md")) if page not in generated]


def _header(source: str) -> str:
    return (f"<!-- Generated by docs/render_docs.py from {source}. Do not edit: change the source, then run "
            f"`{COMMAND}`. -->\n")


# -- rendering -------------------------------------------------------------------------------------------------
def environment(results: dict[str, dict]) -> jinja2.Environment:
    from perception import recipe_arm
    from protocols import DAGGER_AUTO_CAP_RULE

    full_cell = preset_value("full", "collect-demos", "--randomization")  # where `full` collects, and its arm
    from robot_rl.configs import PipelineConfig
    from robot_rl.pipeline import for_options

    quick_auto_dagger = for_options(PipelineConfig(preset="quick"))[0].dagger  # the stage `--dagger auto` runs
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True)
    env.globals.update(r=results, pct=pct, ci=ci, rate_ci=rate_ci, num=num, and_list=and_list, span=span,
                       words=NUMBER_WORDS, seeds_of=seeds_of, shift_of=shift_of,
                       arm_names=arm_names, measured_commit=measured_commit,
                       table=table, scratch_table=scratch_table,
                       metrics_row=metrics_row,
                       bc_checks_table=bc_checks_table, suite_table=suite_table, lead_inspect_rows=lead_inspect_rows,
                       perception_rows=perception_rows, option_default=option_default, preset_value=preset_value,
                       recipe_changes=recipe_changes, retired=RETIRED, full_cell=full_cell,
                       full_arm=recipe_arm(full_cell),
                       quick_dagger_rounds=quick_auto_dagger.rounds, dagger_cap_rule=DAGGER_AUTO_CAP_RULE,
                       dagger_cap_checks=dagger_cap_checks,
                       prov=lambda name: provenance_line(name, results[name]),
                       cmd=lambda name: command_text(results[name]), machine=machine_text)
    return env


def render_all(results: dict[str, dict] | None = None) -> dict[Path, str | bytes]:
    """Every generated file (docs pages, the README with its blocks filled, the images) by path, as it should
    read."""
    results = load_results() if results is None else results
    env = environment(results)
    pages = {}
    for template in PAGES:
        pages[ROOT / "docs" / template] = (_header(f"`benchmarks/results/*.json` through `docs/templates/"
                                                   f"{template}`") + env.get_template(template).render())
    pages[ROOT / "docs/reference/cli.md"] = cli_reference()
    pages[ROOT / "docs/reference/tasks.md"] = tasks_reference()
    pages[README] = fill_values(render_blocks(README.read_text(), env, "readme"), "README.md")
    for page in hand_written_pages():
        text = page.read_text()
        if VALUE.search(text) or BLOCK.search(text):
            pages[page] = fill_values(render_blocks(text, env, "pages"), str(page.relative_to(ROOT)))
    # The images the pages show, copied: MkDocs serves only what lies under docs/.
    for image in [*sorted(RESULTS_DIR.glob("*.png")), *sorted((ROOT / "assets" / "readme").glob("*.png"))]:
        pages[ROOT / "docs" / "assets" / image.name] = image.read_bytes()
    return pages


def render_blocks(text: str, env: jinja2.Environment, folder: str) -> str:
    """``text`` with each generated block replaced by the template ``FOLDER/NAME.md`` rendered."""
    def fill(match: re.Match) -> str:
        body = env.get_template(f"{folder}/{match['name']}.md").render()
        return match.group(1) + body.rstrip("\n") + "\n" + match.group(4)

    return BLOCK.sub(fill, text)


def stale(pages: dict[Path, str | bytes]) -> list[Path]:
    """The generated files whose committed content differs from ``pages``."""
    return [path for path, content in pages.items() if not path.is_file()
            or (path.read_bytes() if isinstance(content, bytes) else path.read_text()) != content]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report pages that differ; exit 1 if any")
    args = parser.parse_args(argv)
    try:
        pages = render_all()
    except ValueError as err:  # a page names an option or preset the code lacks: one line naming it
        print(f"render_docs: {err}", file=sys.stderr)
        return 2
    differ = stale(pages)
    if args.check:
        for path in differ:
            print(f"{path.relative_to(ROOT)} differs from its sources; run `{COMMAND}`", file=sys.stderr)
        return 1 if differ else 0
    for path in differ:
        path.parent.mkdir(parents=True, exist_ok=True)
        content = pages[path]
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
