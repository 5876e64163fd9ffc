"""The robot-rl command line, run through its real entry point with tiny budgets."""

from __future__ import annotations

import subprocess
import sys

import cv2
import pytest

from robot_rl.cli import main


def test_demo_writes_frames_and_prints_metrics(tmp_path, capsys):
    assert main(["demo", "--episodes", "2", "--frames", "2", "--difficulty", "easy", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| episode" in out and "expert success 2/2" in out
    frames = sorted((tmp_path / "frames").glob("*.png"))
    assert len(frames) == 4
    image = cv2.imread(str(frames[0]))
    assert image is not None and image.shape == (240, 240 + 320, 3)


def test_bad_option_exits_2_with_a_one_line_error():
    result = subprocess.run([sys.executable, "-m", "robot_rl.cli", "demo", "--image-size", "500"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == ["robot-rl demo: error: --image-size must be in [32, 224], got 500"]


def test_help_lists_defaults():
    result = subprocess.run([sys.executable, "-m", "robot_rl.cli", "demo", "--help"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0 and "(default: 3)" in result.stdout


def test_an_unknown_randomization_exits_2_naming_the_option():
    result = subprocess.run([sys.executable, "-m", "robot_rl.cli", "collect-demos", "--randomization", "foggy"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "robot-rl collect-demos: error: --randomization must be one of none, default, wide, surfaces, strong, mount, "
        "calibrated, lights, rectified, metered, highlights, got 'foggy'"]


def test_pipeline_arm_goes_to_the_demos_and_names_the_default_root(monkeypatch):
    from robot_rl import pipeline

    calls = []
    monkeypatch.setattr(pipeline, "run_pipeline", lambda preset, root, **options: calls.append((preset, root)) or {})
    monkeypatch.setattr(pipeline, "result_table", lambda result: "")
    assert main(["pipeline", "--arm", "panda"]) == 0
    assert main(["pipeline", "--preset", "full"]) == 0
    (panda, panda_root), (full, full_root) = calls
    assert (panda.collect.arm, panda_root) == ("panda", "runs/pipeline-quick-panda")
    assert (full.collect.arm, full_root) == ("ur5e_like", "runs/pipeline-full")
    assert panda.options()["collect"]["arm"] == "panda"  # in preset.json: a root of another arm is refused
    # The Panda's BC reads joint velocities and learns when to answer; the default arm keeps the recipe.
    assert {k: getattr(panda.pretrain, k) for k in pipeline.ARM_BC_OPTIONS["panda"]} == pipeline.ARM_BC_OPTIONS["panda"]
    assert (full.pretrain.joint_velocities, full.pretrain.timing_weight) == (False, 0.0)
    # full: tables of any colour in a calibrated cell metering the parts' highlights, masks kept for the
    # recolouring, BC from the encoder pretrained on that cell.
    assert (full.collect.randomization, full.collect.masks, full.pretrain.recolour) == (
        "highlights", True, "table,board,background")
    assert full.encoder is not None and full.encoder.randomization == "highlights"


def test_pipeline_dagger_auto_decides_from_its_checks_on_every_task_unless_told(monkeypatch):
    from dataclasses import fields, replace

    from robot_rl import pipeline
    from robot_rl.configs import PipelineConfig

    calls = []
    monkeypatch.setattr(pipeline, "run_pipeline", lambda preset, root, **options: calls.append((preset, root)) or {})
    monkeypatch.setattr(pipeline, "result_table", lambda result: "")
    for argv in (["--task", "lead-inspect"], ["--task", "lead-inspect", "--dagger", "off"], [],
                 ["--dagger", "on", "--preset", "full", "--checkpoint-kind", "best"]):
        assert main(["pipeline", *argv]) == 0, argv
    (lead, lead_root), (lead_off, _), (pcb, _), (pcb_on, _) = calls
    assert lead_root == "runs/pipeline-quick-lead-inspect"
    # auto: the preset's stage with the stop rules ending it, up to the full stage's rounds, on the lead task and the
    # PCB task alike (no task named)
    auto = replace(pipeline.DAGGER_STAGES["quick"], rounds=pipeline.DAGGER_AUTO_MAX_ROUNDS,
                   until_success=pipeline.DAGGER_AUTO_UNTIL_SUCCESS, until_flat=True)
    assert lead.dagger == auto == pcb.dagger and "dagger" in lead.options()  # recorded in preset.json
    dagger_help = next(f for f in fields(PipelineConfig) if f.name == "dagger").metadata["help"]
    assert f"up to {pipeline.DAGGER_AUTO_MAX_ROUNDS} rounds" in dagger_help  # the help states the cap the code runs
    assert lead_off.dagger is None and "dagger" not in lead_off.options()
    # on: the preset's rounds, every one
    assert pcb_on.dagger.rounds == pipeline.DAGGER_STAGES["full"].rounds and pcb_on.dagger.checkpoint_kind == "best"
    assert (pcb_on.dagger.until_success, pcb_on.dagger.until_flat) == (0.0, False)


def test_pipeline_pretrains_the_encoder_for_every_task_on_the_demos_cell_unless_told(monkeypatch):
    from robot_rl import pipeline

    calls = []
    monkeypatch.setattr(pipeline, "run_pipeline", lambda preset, root, **options: calls.append(preset) or {})
    monkeypatch.setattr(pipeline, "result_table", lambda result: "")
    for argv in (["--task", "lead-inspect"], ["--task", "lead-inspect", "--encoder", "off"], [],
                 ["--encoder", "on", "--preset", "full", "--arm", "panda"], ["--task", "my_tasks:MyTask"]):
        assert main(["pipeline", *argv]) == 0, argv
    lead, lead_off, pcb, pcb_on, own = calls
    assert lead_off.encoder is None and "encoder" not in lead_off.options()
    # auto: every task, a task of one's own included (no list of task names decides it)
    for preset, size in ((lead, "quick"), (pcb, "quick"), (pcb_on, "full"), (own, "quick")):
        cell = preset.collect
        assert (preset.encoder.views, preset.encoder.epochs) == (pipeline.ENCODER_STAGES[size].views,
                                                                 pipeline.ENCODER_STAGES[size].epochs)
        assert (preset.encoder.task, preset.encoder.arm, preset.encoder.difficulty, preset.encoder.image_size,
                preset.encoder.randomization) == (cell.task, cell.arm, cell.difficulty, cell.image_size,
                                                  cell.randomization)
        assert preset.encoder.keypoints == preset.pretrain.keypoints  # BC can load what the stage trains
        assert "encoder" in preset.options()  # recorded in preset.json


def _unwritable(tmp_path):
    """A folder this process cannot create files in (root ignores permissions: /sys refuses it too)."""
    import os
    from pathlib import Path

    if os.geteuid() != 0:
        folder = tmp_path / "read-only"
        folder.mkdir()
        folder.chmod(0o555)
        return folder
    try:
        os.close(os.open("/sys/.robot-rl-probe", os.O_RDWR | os.O_CREAT))
    except PermissionError:
        return Path("/sys")
    os.unlink("/sys/.robot-rl-probe")
    pytest.skip("no folder here refuses writes to root")


def _bad_inputs(tmp_path, demos_dir, bc_run_dir):
    """(robot-rl arguments, what the one line must name) of each bad input."""
    regular, long = tmp_path / "a-file", "x" * 300
    regular.write_text("not a folder\n")
    unwritable = _unwritable(tmp_path)
    collect = ["--episodes", "2", "--difficulty", "easy", "--image-size", "48", "--num-envs", "1"]
    return [
        (["finetune", "--seed", "-5", "--from-scratch", "--out", str(tmp_path / "neg")], "--seed"),
        (["pretrain", "--data", str(demos_dir), "--out", str(regular)], str(regular)),
        (["pretrain", "--data", str(demos_dir), "--out", str(regular / "run")], str(regular)),
        (["pretrain", "--resume", str(regular)], str(regular)),
        (["collect-demos", "--out", str(tmp_path / long / "demos"), *collect], long),
        (["collect-demos", "--out", str(regular), *collect], str(regular)),
        (["collect-demos", "--out", str(tmp_path / "armless"), "--arm", "no-such-arm", *collect], "no-such-arm"),
        (["collect-demos", "--out", str(unwritable / "demos"), *collect], str(unwritable)),
        (["pretrain", "--data", str(tmp_path / long), "--out", str(tmp_path / "bc")], long),
        (["finetune", "--policy", str(bc_run_dir), "--out", str(tmp_path / long / "ppo")], long),
        (["export", "--policy", str(bc_run_dir), "--out", str(regular)], str(regular)),
    ]


def test_bad_paths_and_values_end_in_one_line_naming_the_culprit_with_exit_2(tmp_path, demos_dir, bc_run_dir,
                                                                              capsys):
    for argv, culprit in _bad_inputs(tmp_path, demos_dir, bc_run_dir):
        code = main(argv)
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and culprit in err[0] and err[0].startswith(f"robot-rl {argv[0]}: "), (
            argv, code, err)
    assert not list(tmp_path.rglob(".*.tmp"))  # failed collects leave no temporary folder
    assert not (tmp_path / "armless").exists()
