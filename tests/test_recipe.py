"""The recipe runner the pipeline and the benchmarks share: a stage is skipped when its output is done, resumed
when a run of it was stopped, and its seconds are summed over the invocations that ran it; a stage finished
earlier keeps what it cost then. The runs here are stand-ins that write a run folder's marker files."""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from robot_rl import pipeline
from robot_rl.artefact_files import RECIPE_STAGES, RUN_CONFIG, RUN_SUMMARY
from robot_rl.errors import RunStopped
from robot_rl.recipe import Recipe
from robot_rl.run_folder import ensure_finished


class FakeRun:
    """A training run (``TrainingRun``'s commands) that stops after its first part (as Ctrl-C would) and finishes
    when resumed; or, ``stops=False``, finishes in one part."""

    command = "pretrain"

    def __init__(self, seconds: float = 0.05, stops: bool = True):
        self.seconds, self.stops, self.calls = seconds, stops, []

    def start(self, config, progress):
        self.calls.append("start")
        time.sleep(self.seconds)
        Path(config.run_dir).mkdir(parents=True)
        (Path(config.run_dir) / RUN_CONFIG).write_text("{}")
        return self.resume(Path(config.run_dir), progress) if not self.stops else {"finished": False}

    def resume(self, path, progress):
        self.calls.append("resume")
        time.sleep(self.seconds)
        (path / RUN_SUMMARY).write_text(json.dumps({"finished": True}))
        return {"finished": True}

    def ensure_trained(self, config, progress):
        return ensure_finished(config.run_dir, self.command, lambda: self.start(config, progress),
                               lambda path: self.resume(path, progress))


def test_a_stopped_run_is_resumed_and_costs_both_parts_and_a_finished_one_is_not_timed_again(tmp_path):
    run, run_dir, record = FakeRun(), tmp_path / "bc", tmp_path / RECIPE_STAGES

    def train(recipe):
        return recipe.train("pretrain", run, SimpleNamespace(run_dir=run_dir))

    with pytest.raises(RunStopped):
        train(Recipe(record, log=lambda line: None))
    assert train(Recipe(record, log=lambda line: None)) == {"finished": True}  # the next invocation resumes it
    recipe = Recipe(record, log=lambda line: None)
    assert run.calls == ["start", "resume"] and recipe.finished("pretrain")
    parts = recipe.stages["pretrain"]["parts"]
    assert [part["finished"] for part in parts] == [False, True]
    assert recipe.seconds("pretrain") == pytest.approx(sum(part["seconds"] for part in parts))
    assert recipe.seconds("pretrain") >= 0.1
    # A third invocation finds the folder finished: no run, no new part, the seconds measured then.
    train(recipe)
    assert run.calls == ["start", "resume"] and len(Recipe(record).stages["pretrain"]["parts"]) == 2


def test_an_evaluation_whose_report_exists_is_read_back_not_run(tmp_path):
    report, runs = tmp_path / "eval" / "report.json", []

    def evaluate():
        runs.append(1)
        report.parent.mkdir()
        report.write_text(json.dumps({"metrics": {"success_rate": 0.5}}))

    lines = []
    recipe = Recipe(tmp_path / RECIPE_STAGES, log=lines.append)
    assert recipe.evaluate("evaluate", report, evaluate)["metrics"] == {"success_rate": 0.5}
    assert recipe.evaluate("evaluate", report, evaluate)["metrics"] == {"success_rate": 0.5}
    assert runs == [1] and lines[-1].endswith("exists, skipped")


def test_an_output_reused_without_a_record_has_no_seconds_and_one_made_again_starts_a_new_record(tmp_path):
    record = tmp_path / RECIPE_STAGES
    recipe = Recipe(record, log=lambda line: None)
    recipe.collect("collect-demos", tmp_path / "demos", lambda: pytest.fail("collected again"), done=True)
    assert recipe.seconds("collect-demos") is None and not record.exists()  # reusing is not a measurement
    recipe.stage("evaluate", lambda: time.sleep(0.1))
    Recipe(record).stage("pretrain", lambda: None)  # another process recording into the same file meanwhile
    recipe.stage("evaluate", lambda: None)  # its report was removed and is made again
    stages = Recipe(record).stages
    assert len(stages["evaluate"]["parts"]) == 1 and stages["evaluate"]["seconds"] < 0.1
    assert stages["pretrain"]["finished"]


def test_the_pipeline_reports_each_stage_at_what_it_cost_over_its_invocations(tmp_path, monkeypatch):
    """A pipeline stopped during fine-tuning and run again: pipeline.json's seconds are the recipe's record
    (collection and BC as measured when they ran, fine-tuning's two parts summed), not the instant of a skip."""
    bc_run, ppo_run = FakeRun(stops=False), FakeRun()
    collected = []
    monkeypatch.setattr(pipeline, "collect_demos", lambda config, progress: collected.append(time.sleep(0.05)))
    monkeypatch.setattr(pipeline.DemoDataset, "open", lambda folder: type("Demos", (), {"episodes": range(10**6)}))
    monkeypatch.setattr(pipeline.bc, "BCRun", bc_run)
    monkeypatch.setattr(pipeline.trainer, "PPORun", ppo_run)
    monkeypatch.setattr(Recipe, "evaluate", lambda self, name, report, run, label=None: {"metrics": {}})
    preset = pipeline.PRESETS["quick"]
    with pytest.raises(RunStopped):
        pipeline.run_pipeline(preset, tmp_path, device="cpu", progress=False, log=lambda line: None)
    (tmp_path / "demos").mkdir()
    (tmp_path / "demos" / "meta.json").write_text("{}")  # the demos are done: the next invocation skips them
    result = pipeline.run_pipeline(preset, tmp_path, device="cpu", progress=False, log=lambda line: None)
    recipe = Recipe(tmp_path / RECIPE_STAGES)
    assert result["seconds"] == {name: recipe.seconds(name) for name in ("collect-demos", "pretrain", "finetune")}
    assert len(collected) == 1  # done demos are not collected again
    assert result["seconds"]["collect-demos"] >= 0.05 and len(recipe.stages["collect-demos"]["parts"]) == 1
    assert [part["finished"] for part in recipe.stages["finetune"]["parts"]] == [False, True]
    assert result["seconds"]["finetune"] >= 0.1
    assert json.loads((tmp_path / pipeline.RESULT_FILE).read_text())["seconds"] == result["seconds"]
