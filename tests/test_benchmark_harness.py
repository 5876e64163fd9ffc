"""Every benchmark script runs through the one harness, every Makefile bench line names a declared variant, and
every results file is in the one schema."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import harness  # noqa: E402  (benchmarks/ is not a package: its scripts import each other by name)
from results_file import SCHEMA_KEYS, flatten, write_results  # noqa: E402

MAKE_LINE = re.compile(r"benchmarks/(\w+)\.py --variant ([\w-]+)")


@pytest.fixture(scope="module")
def declared() -> dict[str, harness.Benchmark]:
    return harness.load_all()


def test_every_script_is_the_harness_a_helper_or_declares_its_variants(declared):
    scripts = {p.stem for p in BENCHMARKS.glob("*.py")}
    assert set(declared) == scripts - set(harness.LIBRARIES)
    for name, benchmark in declared.items():
        assert isinstance(benchmark, harness.Benchmark) and benchmark.name == name
        assert benchmark.variants and all(v.about for v in benchmark.variants), f"{name}: a variant without a line"


def test_every_makefile_bench_line_names_a_declared_variant_and_reaches_every_script(declared):
    makefile = (ROOT / "Makefile").read_text()
    lines = MAKE_LINE.findall(makefile)
    for script, variant in lines:
        assert variant in [v.name for v in declared[script].variants], f"Makefile: {script} has no {variant}"
    assert {script for script, _ in lines} == set(declared), "a benchmark script no Makefile target runs"
    for script, rest in re.findall(r"benchmarks/(\w+)\.py([^\n]*)", makefile):
        assert script not in declared or rest.startswith(" --variant"), f"Makefile runs {script}{rest}: name a variant"


def test_list_prints_the_variants_and_their_commands():
    done = subprocess.run([sys.executable, "benchmarks/bc_quality.py", "--list"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "recipe" in done.stdout
    assert "$ python benchmarks/bc_quality.py --arm panda --data data/demos-panda" in done.stdout


def test_a_variant_is_its_options_then_the_ones_given(monkeypatch):
    monkeypatch.setattr(harness, "REGISTRY", {})
    bench = harness.Benchmark("toy", "A toy.\n", (harness.Variant("a", ("--n", "1", "--tag", "x"), "one"),))
    parser = bench.parser()
    parser.add_argument("--n", type=int, default=0)
    parser.add_argument("--tag", default="")
    parser.add_argument("--variants", nargs="+", default=[])  # starts like --variant: not taken for it
    args = bench.parse(parser, ["--variant", "a", "--n", "2", "--variants", "v"])
    assert (args.n, args.tag, args.variants, bench.variant) == (2, "x", ["v"], "a")
    assert bench.parse(parser, []).n == 0 and bench.variant is None


def test_main_takes_the_declared_common_options_runs_and_writes_the_payload(tmp_path, monkeypatch):
    monkeypatch.setattr(harness, "REGISTRY", {})
    monkeypatch.setattr(harness, "RESULTS_DIR", tmp_path)  # the default file's lock lands beside it
    bench = harness.Benchmark("toy", "A toy.\n", (harness.Variant("a", ("--n", "3"), "three"),),
                              common={"boards": 7, "out": None})

    def options(parser):
        parser.add_argument("--n", type=int, default=0)

    out = tmp_path / "toy.json"
    def run(args):
        return {"n": args.n, "boards": args.boards}

    assert bench.main(run, options, ["--variant", "a", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["metrics"] == {"n": 3, "boards": 7} and data["variant"] == "a" and data["wall_s"] >= 0
    assert bench.main(lambda args: 2, options, []) == 2  # a script that wrote its own file: its exit status
    with pytest.raises(SystemExit):
        bench.main(lambda args: 0, options, ["--device", "cpu"])  # not declared: not taken


def test_a_stopped_run_ends_in_one_line_and_writes_nothing(tmp_path, monkeypatch, capsys):
    import signal

    from robot_rl.errors import RunStopped

    monkeypatch.setattr(harness, "REGISTRY", {})
    bench = harness.Benchmark("toy", "A toy.\n", (harness.Variant("a", (), "as is"),), common={"out": None})
    out = tmp_path / "toy.json"

    def stopped(args):
        raise RunStopped("runs/toy", "pretrain", signal.SIGTERM)

    assert bench.main(stopped, None, ["--out", str(out)]) == 128 + signal.SIGTERM
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == ["toy: runs/toy: stopped, checkpoint saved; the same command continues it"]
    assert not out.exists()


def test_write_results_puts_the_payload_in_the_schema(tmp_path):
    path = write_results("toy", {"rows": [1], "targets": {"met": True}, "wall_s": {"a": 1.0, "b": 2.5}},
                         out=tmp_path / "toy.json")
    data = json.loads(path.read_text())
    assert list(data)[:len(SCHEMA_KEYS)] == list(SCHEMA_KEYS)
    assert (data["wall_s"], data["parts"], data["targets"], data["metrics"]) == (3.5, {"a": 1.0, "b": 2.5},
                                                                                 {"met": True}, {"rows": [1]})
    assert flatten(data)["rows"] == [1]


def test_a_results_file_names_the_commit_its_run_started_from(tmp_path, monkeypatch):
    import results_file
    import timing

    started_from = results_file.STARTED_FROM["commit"]
    monkeypatch.setattr(timing, "provenance", lambda: {"date": "2026-12-03T18:00:00+00:00", "commit": "f" * 40,
                                                       "uncommitted_changes": True, "argv": ["toy"]})
    monkeypatch.setattr(results_file, "provenance", timing.provenance)  # a commit made while the run ran
    data = json.loads(write_results("toy", {"rows": []}, out=tmp_path / "toy.json").read_text())
    assert data["commit"] == started_from != "f" * 40 and data["date"].startswith("2026-12-03T18")


def test_the_harness_reads_the_commit_before_the_run_starts(tmp_path):
    # A script that imports nothing of results_file itself: the commit is still read before its run.
    probe = ("import sys; sys.path.insert(0, 'benchmarks'); import harness; "
             "b = harness.Benchmark('toy', 'A toy.\\n', (harness.Variant('a'),), common={'out': None}); "
             "sys.exit(b.main(lambda args: 3 if 'results_file' in sys.modules else 4, None, "
             f"['--out', {str(tmp_path / 'toy.json')!r}]))")
    assert subprocess.run([sys.executable, "-c", probe], cwd=ROOT).returncode == 3


def test_every_results_file_is_in_the_schema():
    for path in sorted((BENCHMARKS / "results").glob("*.json")):
        data = json.loads(path.read_text())
        missing = [key for key in SCHEMA_KEYS if key not in data]
        assert not missing, f"{path.name} has no {missing}"
        assert isinstance(data["metrics"], dict) and data["metrics"]
        assert data["wall_s"] is None or isinstance(data["wall_s"], int | float)


def test_the_few_preset_is_the_quick_pipeline_recipe():
    from protocols import PRESETS

    from robot_rl.pipeline import PRESETS as PIPELINE

    few, quick = PRESETS["few"], PIPELINE["quick"]
    assert (few["demos"].episodes, few["demos"].difficulty, few["demos"].image_size) == (
        quick.collect.episodes, quick.collect.difficulty, quick.collect.image_size)
    assert (few["bc"].epochs, few["bc"].batch_size) == (quick.pretrain.epochs, quick.pretrain.batch_size)
    assert few["bc_frames"] == quick.finetune.total_frames
    assert all(getattr(quick.finetune, name) == value for name, value in few["ppo"].items())


def test_every_preset_builds_both_arms_configs_and_scratch_never_anchors():
    from protocols import PRESETS, ppo_config

    for name, preset in PRESETS.items():
        bc = ppo_config(preset, "bc", 0, Path("runs/x"), Path("runs/bc"), "cpu")
        scratch = ppo_config(preset, "scratch", 0, Path("runs/x"), Path("runs/bc"), "cpu")
        assert bc.init == "runs/bc" and scratch.from_scratch and scratch.anchor_weight == 0, name


def test_what_ppo_trained_on_is_read_from_the_run_logs_as_means_over_iterations(tmp_path):
    from protocols import what_ppo_trained_on

    from robot_rl.run_logs import RunLogger

    logger = RunLogger(tmp_path)
    for frames, (success, guesses, fraction) in enumerate([(0.2, 0.5, 0.25), (0.4, 0.3, 0.75)], start=1):
        logger.log({"train/success_rate": success, "train/guess_rate": guesses,
                            "train/actor_update_fraction": fraction}, 1024 * frames)
    logger.close()
    assert what_ppo_trained_on(tmp_path) == {"sampled_success": 0.3, "sampled_guess_rate": 0.4,
                                             "actor_update_fraction": 0.5}
    assert what_ppo_trained_on(tmp_path / "none") == dict.fromkeys(("sampled_success", "sampled_guess_rate",
                                                                    "actor_update_fraction"))


def test_the_lead_encoder_preset_is_the_quick_lead_pipeline():
    from protocols import PRESETS

    from robot_rl.configs import PipelineConfig
    from robot_rl.pipeline import DAGGER_STAGES, for_options

    lead, _ = for_options(PipelineConfig(preset="quick", task="lead-inspect"))
    bench = PRESETS["lead-encoder"]
    same = ("task", "arm", "difficulty", "image_size", "randomization", "views", "epochs")
    assert {k: getattr(bench["encoder"], k) for k in same} == {k: getattr(lead.encoder, k) for k in same}
    assert (bench["demos"].task, bench["demos"].episodes) == (lead.collect.task, lead.collect.episodes)
    # Its DAgger stage is the quick preset's (--dagger on), the 2 rounds --dagger auto stopped at when it ran.
    assert (bench["dagger"].rounds, bench["dagger"].episodes_per_round) == (DAGGER_STAGES["quick"].rounds,
                                                                             lead.dagger.episodes_per_round)


def test_the_lead_quick_preset_starts_ppo_from_the_quick_stages_round_of_the_longer_dagger_stage(monkeypatch):
    import protocols
    from protocols import PRESETS, prepare_bc

    from robot_rl.artefact_files import dagger_round
    from robot_rl.configs import PipelineConfig
    from robot_rl.pipeline import DAGGER_STAGES, for_options

    quick_lead, _ = for_options(PipelineConfig(preset="quick", task="lead-inspect"))
    preset = PRESETS["lead-quick-low-noise"]
    # Rounds are seeded by their index: the longer stage's first rounds are the quick stage's.
    assert preset["dagger_round"] == DAGGER_STAGES["quick"].rounds
    assert PRESETS["lead-flat"]["dagger"] == quick_lead.dagger  # the stage the pipeline's --dagger auto runs
    assert preset["dagger"].until_success == quick_lead.dagger.until_success
    assert preset["dagger"].episodes_per_round == quick_lead.dagger.episodes_per_round

    class FinishedStages:  # every stage done: DAgger ran 4 rounds
        def __init__(self, *args, **kwargs):
            pass

        def collect(self, *args, **kwargs):
            pass

        def train(self, name, run, config):
            final = dagger_round(config.run_dir, 4) if name == "dagger" else Path(config.run_dir)
            return {"final_round": 4, "policy": str(final / "checkpoints" / "last.pt")}

    monkeypatch.setattr(protocols, "Recipe", FinishedStages)
    start, _ = prepare_bc(preset, "cpu")
    assert start == dagger_round("runs/bench-lead-flat/dagger", 2)
    assert prepare_bc(PRESETS["lead-flat-low-noise"], "cpu")[0] == dagger_round("runs/bench-lead-flat/dagger", 4)
    with pytest.raises(ValueError, match="dagger_round 5"):
        prepare_bc({**preset, "dagger_round": 5}, "cpu")


def test_the_demo_benchmark_names_its_files_and_runs_the_own_task_guides_module():
    import argparse

    import quick_demo

    def name(**options):
        args = argparse.Namespace(**{"out": None, "task": quick_demo.DEFAULT_TASK, **options})
        return quick_demo.results_path(args, "quick_demo").name

    assert name() == "quick_demo.json" and name(task="lead-inspect") == "quick_demo_lead-inspect.json"
    assert name(task=quick_demo.OWN_TASK) == "quick_demo_my_tasks-JitteryLightBoards.json"  # no ':' in a file name
    module, task_class = quick_demo.OWN_TASK.split(":")
    namespace: dict = {}
    exec(compile(quick_demo.own_task_module(), f"{module}.py", "exec"), namespace)  # the guide's own example
    assert namespace[task_class].name == "jittery-light-boards"


def test_a_second_writer_of_one_results_file_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    from robot_rl.locks import exclusive

    monkeypatch.setattr(harness, "REGISTRY", {})
    bench = harness.Benchmark("toy", "A toy.\n", (harness.Variant("a", (), "as is"),), common={"out": None})
    out = tmp_path / "toy.json"
    out.write_text("{}")  # the first writer's file, as it was when the second started
    ran = []
    with exclusive(out, "results file"):  # the first invocation, still running
        assert bench.main(lambda args: ran.append(1) or {"n": 1}, None, ["--out", str(out)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"toy: {out}: results file in use") and "pid" in lines[0]
    assert not ran and out.read_text() == "{}"
    assert bench.main(lambda args: {"n": 1}, None, ["--out", str(out)]) == 0  # once the first has ended


def test_a_script_with_a_results_file_per_preset_is_refused_only_beside_the_same_preset(tmp_path, monkeypatch):
    import bc_vs_scratch

    from robot_rl.locks import exclusive

    monkeypatch.setattr(harness, "REGISTRY", {})
    monkeypatch.setattr(harness, "RESULTS_DIR", tmp_path)
    bench = harness.Benchmark("toy", "A toy.\n", (harness.Variant("a", (), "as is"),),
                              results_path=lambda args: tmp_path / f"toy_{args.preset}.json")

    def options(parser):
        parser.add_argument("--preset", default="x")

    with exclusive(tmp_path / "toy_x.json", "results file"):  # preset x running
        assert bench.main(lambda args: 0, options, ["--preset", "y"]) == 0
        assert bench.main(lambda args: 0, options, ["--preset", "x"]) == 2
    parser = bc_vs_scratch.BENCHMARK.parser()
    bc_vs_scratch.options(parser)
    args = parser.parse_args(["--preset", "lead-flat"])
    assert bc_vs_scratch.BENCHMARK.results_path(args).name == "bc_vs_scratch_lead-flat.json"


def test_every_results_file_was_written_by_a_live_script_or_a_retired_one_whose_last_version_git_holds(declared):
    writers = {json.loads(path.read_text())["benchmark"] for path in (BENCHMARKS / "results").glob("*.json")}
    assert writers <= set(declared) | set(harness.RETIRED), "a results file no script (live or retired) wrote"
    for name, retired in harness.RETIRED.items():
        assert not (BENCHMARKS / f"{name}.py").exists(), f"{name} is retired but still in benchmarks/"
        assert f'Benchmark("{name}"' in harness.retired_source(name), f"{name} at {retired.commit}"
        assert retired.why and name not in declared and len(retired.commit) == 40


def test_every_results_files_command_runs_on_its_live_script_or_is_named_retired_with_the_commit_that_ran_it(
        declared):
    for path in sorted((BENCHMARKS / "results").glob("*.json")):
        data = json.loads(path.read_text())
        name = data["benchmark"]
        if name in declared and not harness.runs_today(name, harness.recorded_command(data)):
            assert name in harness.RETIRED_COMMANDS, f"{path.name}: its command no longer runs on {name}.py"
    for name, retired in harness.RETIRED_COMMANDS.items():
        assert name in declared and retired.why and len(retired.commit) == 40
        assert f'Benchmark("{name}"' in harness.retired_source(name, retired.commit)
    assert harness.runs_today("bc_vs_scratch", ["--variant", "few-bc"])
    assert not harness.runs_today("bc_vs_scratch", ["--preset", "lead-residual"])


def test_harness_list_names_the_retired_scripts_with_their_commit(capsys):
    harness.main(["--list"])
    printed = capsys.readouterr().out
    for name, retired in harness.RETIRED.items():
        assert f"{name} (retired; its script is in commit {retired.commit[:7]})" in printed


def test_the_exposure_loop_reads_the_view_with_the_camera_fixed_and_setting_its_own(tmp_path):
    out = tmp_path / "exposure.json"
    done = subprocess.run([sys.executable, "benchmarks/exposure_loop.py", "--boards", "1", "--image-size", "32",
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")})
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(out.read_text())["metrics"]["rows"]
    assert [row["shift"] for row in rows][:3] == ["nominal", "dim_light", "bright_light"]
    for row in rows:
        assert 0 < row["fixed_level"] <= 255 and 0 <= row["auto_clipped_share"] <= 1
        assert 0.25 <= row["auto_lowest_gain_on_the_way"] <= row["auto_gain"] <= 4.0  # within the camera's reach
    dim, bright = rows[1], rows[2]
    assert dim["auto_gain"] > 1 > bright["auto_gain"]  # the loop opens up in dim light and stops down in bright
