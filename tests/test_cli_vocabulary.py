"""One CLI vocabulary: the checkpoint rule in every command, option names old and new, --help, --version, info,
list, and defaults that are the measured recipes."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from robot_rl import configs
from robot_rl.cli import COMMANDS, build_parser, main
from robot_rl.options import flag_of

CONFIGS = {"demo": configs.DemoConfig, "collect-demos": configs.CollectConfig, "pretrain": configs.BCConfig,
           "dagger": configs.DAggerConfig, "finetune": configs.FinetuneConfig, "evaluate": configs.EvaluateConfig,
           "export": configs.ExportConfig, "export-dataset": configs.ExportDatasetConfig,
           "pipeline": configs.PipelineConfig, "pretrain-encoder": configs.EncoderPretrainConfig}


def _help(command: str, monkeypatch) -> str:
    monkeypatch.setenv("COLUMNS", "1000")  # one line per option: its default cannot wrap away
    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.choices and command in a.choices)
    return subparsers.choices[command].format_help()


def _option_entries(help_text: str) -> dict[str, str]:
    """--help's entries (an option and its help, on one line or two), keyed by their first option string."""
    entries: dict[str, str] = {}
    key = None
    for line in help_text.splitlines():
        match = re.match(r"^  (-[-\w]+)", line)
        if match:
            key = match.group(1)
            entries[key] = line
        elif key and line.startswith("    "):
            entries[key] += " " + line.strip()
        else:
            key = None
    return entries


# -- --help -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", list(CONFIGS))
def test_every_option_help_shows_its_default_once_and_lists_its_choices(command, monkeypatch):
    text = _help(command, monkeypatch)
    entries = _option_entries(text)
    assert set(CONFIGS) == set(COMMANDS)
    for field in dataclasses.fields(CONFIGS[command]):
        if field.metadata.get("ablation"):  # out of --help, named in its epilog (the CLI reference lists it)
            assert flag_of(field) not in entries and flag_of(field) in text.split("\nablation switches")[1]
            continue
        entry = entries[flag_of(field)]
        assert entry.count("(default: ") == 1, entry
        shown = "''" if field.default == "" else str(field.default)
        assert entry.endswith(f"(default: {shown})"), entry
        choices = field.metadata["choices"]
        if choices:
            assert "{" + ",".join(choices) + "}" in entry, entry
        for old in field.metadata["old_flags"]:  # old names are accepted, not advertised
            assert f"--{old} " not in text
    assert "example:\n  robot-rl " + command in text
    # A command given a run folder as --policy says which file of it it takes (and only such a command: the
    # pipeline's --checkpoint-kind speaks of its own runs).
    assert ("checkpoints/last.pt" in text) == (command in ("pretrain", "dagger", "finetune", "evaluate", "export"))


def test_help_groups_the_options_and_documents_a_task_of_ones_own(monkeypatch):
    text = _help("finetune", monkeypatch)
    for title in ("input and output:", "PPO options:", "task and environment:", "closed-loop checks (held-out "
                  "boards):", "compute:", "logs and checkpoints:"):
        assert f"\n{title}\n" in text
    assert text.index("input and output:") < text.index("PPO options:") < text.index("compute:")
    assert "module:Class" in _option_entries(_help("collect-demos", monkeypatch))["--task"]


def test_version_names_the_package():
    result = subprocess.run([sys.executable, "-m", "robot_rl.cli", "--version"], capture_output=True, text=True,
                            timeout=60)
    assert (result.returncode, result.stdout.strip()) == (0, "robot-rl 0.1.0")


# -- names: one per concept, old ones still work ------------------------------------------------------------------
def test_one_name_per_concept_across_commands():
    flags = {command: {f.name: flag_of(f) for f in dataclasses.fields(cls)} for command, cls in CONFIGS.items()}
    for command in ("demo", "collect-demos", "pretrain", "dagger", "finetune", "evaluate", "export",
                    "export-dataset", "pipeline"):
        written = [f for f in ("out", "run_dir", "root") if f in flags[command]]
        assert [flags[command][f] for f in written] == ["--out"], command  # the folder a command writes
    for command in ("pretrain", "dagger", "finetune", "evaluate", "export"):
        read = flags[command].get("init") or flags[command].get("checkpoint")
        assert read == "--policy" and flags[command]["checkpoint_kind"] == "--checkpoint-kind", command
    assert flags["pretrain"]["data"] == flags["export-dataset"]["data"] == "--data"
    # --seed is a training seed; boards have their own seed
    assert flags["evaluate"]["seed"] == flags["demo"]["seed"] == "--board-seed"
    for command in ("pretrain", "dagger", "finetune"):
        assert flags[command]["seed"] == "--seed" and flags[command]["eval_seed"] == "--eval-board-seed"
    for command in ("collect-demos", "pretrain", "dagger", "finetune", "evaluate"):
        assert "--num-envs" in flags[command].values(), command


OLD_NAMES = [(command, field.name, old) for command, cls in CONFIGS.items() for field in dataclasses.fields(cls)
             for old in field.metadata["old_flags"]]


@pytest.mark.parametrize(("command", "field", "old"), OLD_NAMES)
def test_an_old_option_name_still_works_with_a_one_line_deprecation_note(command, field, old, capsys):
    default = getattr(CONFIGS[command], field)
    value = "7" if isinstance(default, int) else "some/folder"
    args = build_parser().parse_args([command, f"--{old}", value])
    new = flag_of(next(f for f in dataclasses.fields(CONFIGS[command]) if f.name == field))
    assert str(getattr(args, field)) == value and field in args.given_options
    assert capsys.readouterr().err.splitlines() == [
        f"robot-rl {command}: --{old} is deprecated, use {new} (the old name goes in a later release)"]
    assert getattr(build_parser().parse_args([command, new, value]), field) == getattr(args, field)
    assert capsys.readouterr().err == ""


def test_old_names_run_a_command_end_to_end(bc_run_dir, tmp_path, capsys):
    assert main(["export", "--checkpoint", str(bc_run_dir), "--format", "safetensors", "--out",
                 str(tmp_path / "export")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == ["robot-rl export: --checkpoint is deprecated, use --policy (the old name goes in a later release)"]
    assert (tmp_path / "export" / "model.safetensors").is_file()


# -- the checkpoint rule ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def two_checkpoints(bc_run_dir, tmp_path_factory):
    """A BC run folder whose last.pt and best.pt both exist (a copy of the session's BC run)."""
    folder = tmp_path_factory.mktemp("rule") / "bc"
    shutil.copytree(bc_run_dir, folder)
    assert (folder / "checkpoints" / "last.pt").is_file() and (folder / "checkpoints" / "best.pt").is_file()
    return folder


def _taken_by_evaluate(folder, kind, tmp_path):
    out = tmp_path / f"eval-{kind}"
    assert main(["evaluate", "--policy", str(folder), "--checkpoint-kind", kind, "--episodes", "1", "--videos", "0",
                 "--failure-videos", "0", "--num-envs", "1", "--out", str(out)]) == 0
    info = json.loads((out / "report.json").read_text())["info"]
    assert info["checkpoint_kind"] == kind
    return info["checkpoint"]


def _taken_by_export(folder, kind, tmp_path):
    out = tmp_path / f"export-{kind}"
    assert main(["export", "--policy", str(folder), "--checkpoint-kind", kind, "--format", "safetensors",
                 "--out", str(out)]) == 0
    return json.loads((out / "policy.json").read_text())["checkpoint"]


def _loaded_paths(monkeypatch, module) -> list[str]:
    """Records every checkpoint ``module`` loads through its ``load_checkpoint``."""
    loaded = []
    original = module.load_checkpoint

    def recording(path, *args, **kwargs):
        loaded.append(str(path))
        return original(path, *args, **kwargs)

    monkeypatch.setattr(module, "load_checkpoint", recording)
    return loaded


def _taken_by_finetune(folder, kind, tmp_path, monkeypatch):
    from robot_rl.finetune import models, trainer

    loaded = _loaded_paths(monkeypatch, models)
    # The run itself is the trainer's test; here only where it starts from: its starting point, resolved.
    monkeypatch.setattr(trainer, "finetune", lambda config: models.starting_point(config) and
                        {"finished": True, "curve": []})
    assert main(["finetune", "--policy", str(folder), "--checkpoint-kind", kind, "--out",
                 str(tmp_path / f"ppo-{kind}")]) == 0
    return loaded[-1]


def _taken_by_dagger(folder, kind, tmp_path, monkeypatch):
    from robot_rl.pretrain import dagger

    taken = []
    monkeypatch.setattr(dagger, "dagger", lambda config: taken.append(str(dagger._init_run(config)[1])) or
                        {"finished": True, "rounds": [], "policy": ""})
    assert main(["dagger", "--policy", str(folder), "--checkpoint-kind", kind, "--out",
                 str(tmp_path / f"dagger-{kind}")]) == 0
    return taken[-1]


def _taken_by_pretrain(folder, kind, tmp_path, monkeypatch):
    from robot_rl.policy_io import load_actor
    from robot_rl.pretrain import bc

    taken = []

    def recording_load_actor(*args, **kwargs):
        actor, env_info, path = load_actor(*args, **kwargs)
        taken.append(str(path))
        return actor, env_info, path

    def start_from_policy(config):
        # BCRun's own start from --policy, in a run whose actor and env are those of the policy itself.
        actor, provenance, _ = load_actor(config.init)
        bc.BCRun._start_from(SimpleNamespace(config=config, provenance=provenance, actor=actor), config.init)
        return {"finished": True, "best_success": 0.0, "final_eval": {}}

    monkeypatch.setattr(bc, "load_actor", recording_load_actor)
    monkeypatch.setattr(bc, "pretrain", start_from_policy)
    assert main(["pretrain", "--policy", str(folder), "--checkpoint-kind", kind, "--out",
                 str(tmp_path / f"bc-{kind}")]) == 0
    return taken[-1]


def _taken_by_pipeline(folder, kind, tmp_path, monkeypatch):
    from robot_rl import pipeline

    preset = pipeline.with_checkpoint_kind(pipeline.PRESETS["quick"], kind)
    assert preset.finetune.checkpoint_kind == kind  # the PPO stage starts from the BC run's checkpoint of that kind
    out = tmp_path / f"pipeline-{kind}"
    options = dataclasses.replace(preset.evaluate, episodes=1, num_envs=1, videos=0, failure_videos=0)
    pipeline._evaluate(options, folder, out, "cpu", "fp32", False, print, "evaluate")
    return json.loads((out / "report.json").read_text())["info"]["checkpoint"]


TAKERS = {"evaluate": _taken_by_evaluate, "export": _taken_by_export, "finetune --policy": _taken_by_finetune,
          "dagger --policy": _taken_by_dagger, "pretrain --policy": _taken_by_pretrain, "pipeline": _taken_by_pipeline}


@pytest.mark.parametrize("kind", ["last", "best"])
def test_every_command_takes_the_same_checkpoint_of_a_run_folder_and_says_which(kind, two_checkpoints, tmp_path,
                                                                                  monkeypatch, capsys):
    import inspect

    expected = str(two_checkpoints / "checkpoints" / f"{kind}.pt")
    for name, taker in TAKERS.items():
        extra = {"monkeypatch": monkeypatch} if "monkeypatch" in inspect.signature(taker).parameters else {}
        assert taker(two_checkpoints, kind, tmp_path, **extra) == expected, name
        out = capsys.readouterr().out
        assert f"policy: {expected}" in out or f": {expected} -> " in out, (name, out)
    assert main(["info", str(two_checkpoints)]) == 0  # info names what evaluate takes by default
    info = _info_lines(capsys.readouterr().out)
    assert info["evaluate takes"].startswith(str(two_checkpoints / "checkpoints" / "last.pt"))
    assert info["--checkpoint-kind best"].startswith(str(two_checkpoints / "checkpoints" / "best.pt"))


def test_the_default_is_the_last_policy_and_a_file_means_itself(two_checkpoints):
    from robot_rl.checkpoints import policy_checkpoint

    last = two_checkpoints / "checkpoints" / "last.pt"
    assert configs.EvaluateConfig(checkpoint="x").checkpoint_kind == "last"
    assert policy_checkpoint(two_checkpoints) == last
    assert policy_checkpoint(last, "best") == last


# -- defaults: the measured recipes; older runs keep theirs -------------------------------------------------------
def test_pretrain_and_finetune_defaults_are_the_measured_recipes():
    from robot_rl.pipeline import PRESETS, WIRING

    bc = configs.BCConfig()
    # README / benchmarks/bc_quality.py: 6 epochs, batch 64, a 100-board check every 2 epochs
    assert (bc.epochs, bc.batch_size, bc.eval_every, bc.eval_episodes) == (6, 64, 2, 100)
    quick = PRESETS["quick"].finetune  # the few preset's PPO, which the README measures
    default = configs.FinetuneConfig(init=quick.init)
    differing = {f.name for f in dataclasses.fields(quick)
                 if getattr(quick, f.name) != getattr(default, f.name) and f.name not in WIRING["finetune"]}
    # but how widely it samples: the recipe decides that from its start's check (--exploration auto), the command
    # keeps the noise every benchmark preset was measured with
    assert differing == {"exploration"}


def test_pretrain_and_finetune_say_which_recipe_they_run(two_checkpoints, tmp_path, monkeypatch, capsys):
    from robot_rl.finetune import trainer

    monkeypatch.setattr(trainer, "finetune", lambda config: {"finished": True, "curve": []})
    assert main(["finetune", "--policy", str(two_checkpoints), "--out", str(tmp_path / "a")]) == 0
    assert "robot-rl finetune: the README's measured fine-tuning design (the pipeline's quick preset)\n" in \
        capsys.readouterr().out
    assert main(["finetune", "--policy", str(two_checkpoints), "--out", str(tmp_path / "b"), "--ppo-epochs", "3",
                 "--seed", "4"]) == 0
    assert "the pipeline's quick preset), except --ppo-epochs 3\n" in capsys.readouterr().out


@pytest.mark.parametrize("config_cls", [configs.BCConfig, configs.FinetuneConfig, configs.DAggerConfig])
def test_a_config_stored_before_the_new_defaults_resumes_with_its_own_values(config_cls, tmp_path):
    from robot_rl.checkpoints import load_config
    from robot_rl.compat import RUN_CONFIG_DEFAULTS

    absent = RUN_CONFIG_DEFAULTS[config_cls.__name__]
    fields = {f.name for f in dataclasses.fields(config_cls)}
    stored = {k: v for k, v in dataclasses.asdict(config_cls(init="runs/bc")).items()
              if k not in absent}
    (tmp_path / "config.json").write_text(json.dumps(stored))
    older = load_config(tmp_path / "config.json", config_cls)
    assert older.checkpoint_kind == "best"  # what a run folder meant when it was started
    for name, value in absent.items():
        assert name in fields and getattr(older, name) == value
    explicit = {**stored, **{name: getattr(config_cls(init="x"), name) for name in absent}}
    (tmp_path / "config.json").write_text(json.dumps(explicit))
    assert load_config(tmp_path / "config.json", config_cls) == config_cls(**explicit)


# -- info and list ------------------------------------------------------------------------------------------------
def _info_lines(out: str) -> dict[str, str]:
    return {label: value.strip() for label, value in (line.split(": ", 1) for line in out.splitlines())}


def test_info_says_what_a_run_folder_and_a_dataset_hold(bc_run_dir, demos_dir, capsys):
    assert main(["info", str(bc_run_dir)]) == 0
    lines = _info_lines(capsys.readouterr().out)
    assert lines["stage"].startswith("pretrain") and lines["task"] == "pcb-inspect"
    assert lines["arm"] == "ur5e_like" and lines["randomization"] == "none"
    assert "epoch 1 of 1" in lines["progress"] and "finished" in lines["progress"]
    assert "success" in lines["last check"]
    assert lines["evaluate takes"].startswith(str(bc_run_dir / "checkpoints" / "last.pt"))
    assert main(["info", str(demos_dir)]) == 0
    lines = _info_lines(capsys.readouterr().out)
    assert lines["stage"] == "demo dataset (collect-demos)" and lines["difficulty"] == "easy"
    assert lines["progress"].startswith("12 episodes")
    assert re.fullmatch(r"\d+\.\d\d frames labelled continue per verdict frame \(median joint speed ([\d.]+|-) rad/s "
                        r"waiting, [\d.]+ at the verdict\)", lines["at the board"])


def test_info_on_a_pipeline_root_describes_each_stage_folder_as_info_would_alone(bc_run_dir, demos_dir, tmp_path,
                                                                                    capsys):
    root = tmp_path / "pipeline"
    root.mkdir()
    (root / "preset.json").write_text("{}")
    shutil.copytree(bc_run_dir, root / "bc")
    shutil.copytree(demos_dir, root / "demos")
    (root / "notes").mkdir()
    (root / "ppo").mkdir()
    (root / "ppo" / "config.json").write_text("[1, 2]")  # a stage folder its own reader refuses
    assert main(["info", str(root)]) == 0
    lines = _info_lines(capsys.readouterr().out)
    assert lines["stage"] == "pipeline root (robot-rl pipeline)"
    assert lines["bc"].startswith("pretrain (behaviour cloning); epoch 1 of 1") and "finished" in lines["bc"]
    assert lines["demos"].startswith("demo dataset (collect-demos); 12 episodes")
    assert lines["notes"] == "not an artefact of robot_rl" and lines["ppo"].startswith("refused: ")
    assert lines["progress"].startswith("unfinished")


def test_info_on_something_else_is_one_line_with_exit_2(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    for path in (tmp_path / "missing", tmp_path / "empty"):
        assert main(["info", str(path)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"robot-rl info: error: {path}")


def test_list_names_tasks_arms_difficulties_randomizations_and_perturbations(capsys):
    from robot_rl.envs.randomization import PERTURBATIONS, RANDOMIZATIONS

    assert main(["list"]) == 0
    out = capsys.readouterr().out
    names = {line.split()[0] for line in out.splitlines() if line.startswith("  ")}
    assert {"pcb-inspect", "lead-inspect", "ur5e_like", "panda", *RANDOMIZATIONS, *PERTURBATIONS} <= names
    assert "  pcb-inspect hard " in out and "tasks (--task; or module:Class for your own):" in out


def test_demo_writes_its_metrics_to_a_file(tmp_path, capsys):
    assert main(["demo", "--episodes", "1", "--frames", "1", "--difficulty", "easy", "--image-size", "48",
                 "--out", str(tmp_path)]) == 0
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert len(metrics["episodes"]) == 1 and metrics["episodes"][0]["episode"] == 0
    assert metrics["expert_success"] == metrics["episodes"][0]["success"]
    assert f"metrics in {Path(tmp_path) / 'metrics.json'}" in capsys.readouterr().out


@pytest.mark.parametrize(("name", "factory"), [
    ("device", configs.device_option), ("precision", configs.precision_option), ("logger", configs.logger_option),
    ("trust_code", configs.trust_code_option)])
def test_an_option_several_commands_share_is_declared_by_its_one_factory(name, factory):
    """Each command's field has the factory's default and choices, and its help starts or ends as the factory's
    (a command adds its own words): a copy declared by hand would drift from the others."""
    shared = factory()
    for command, config_cls in CONFIGS.items():
        field = next((f for f in dataclasses.fields(config_cls) if f.name == name), None)
        if field is None:
            continue
        assert field.default == shared.default, command
        assert field.metadata.get("choices", ()) == shared.metadata.get("choices", ()), command
        help_text, base = field.metadata["help"], shared.metadata["help"]
        common = base.split(" (--task")[0] if name == "trust_code" else base
        assert help_text.startswith(common) or help_text.endswith(common), (command, help_text)
