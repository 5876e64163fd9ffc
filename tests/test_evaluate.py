"""Evaluation reports and videos, policy export, and the one-command pipeline, on tiny budgets."""

from __future__ import annotations

import json

import onnxruntime
import pytest
import torch

from robot_rl.cli import main
from robot_rl.configs import EvaluateConfig, ExportConfig
from robot_rl.envs.scene import SUBSTEPS
from robot_rl.envs.torchrl_env import InspectionEnv
from robot_rl.errors import UsageError
from robot_rl.evaluate import evaluate
from robot_rl.export import FILES, deployed_policy, export
from robot_rl.video import FPS, read_mp4


def test_evaluate_writes_reports_and_playable_videos(bc_run_dir, tmp_path):
    out = tmp_path / "eval"
    result = evaluate(EvaluateConfig(checkpoint=str(bc_run_dir), out=str(out), episodes=3, num_envs=2, videos=1,
                                     failure_videos=3, video_height=120, video_quality="fast", video_slowdown=1),
                      progress=False)
    report = json.loads((out / "report.json").read_text())
    metrics = report["metrics"]
    assert metrics["episodes"] == 3 and len(report["episodes"]) == 3
    confusion = metrics["confusion"]
    assert sum(sum(row.values()) for row in confusion.values()) == 3
    assert sum(confusion["clean"].values()) == sum(e["defect"] == "none" for e in report["episodes"])
    assert 0.0 <= metrics["success_ci95"][0] <= metrics["success_rate"] <= metrics["success_ci95"][1] <= 1.0
    assert "| success rate" in (out / "report.md").read_text()
    assert metrics["guesses"] == sum(e["guess"] for e in report["episodes"])
    assert sum(metrics["failures"].values()) == sum(not e["success"] for e in report["episodes"])
    assert "## Why episodes failed" in (out / "report.md").read_text()
    assert not any(e["success"] and e["guess"] for e in report["episodes"])  # success needs the board localized
    failures = [e for e in report["episodes"] if not e["success"]]
    assert len(result["videos"]) == len({0} | {e["episode"] for e in failures})
    for relative in result["videos"]:
        episode = next(e for e in report["episodes"] if f"episode{e['episode']:03d}_" in relative)
        frames, height, width, codec, fps = read_mp4(out / relative)
        # 25 frames per second of simulated time (real time here): 2.5 per 0.1 s control step that moves the
        # arm, sampled between its physics substeps; a verdict step's outcome is held for half a second.
        moving = episode["steps"] - (episode["verdict"] != "none")
        assert codec == "h264" and fps == FPS == 25
        assert frames == moving * SUBSTEPS // 10 + (FPS // 2 if episode["verdict"] != "none" else 0)
        assert (height, width) == (120 + 28, 120 + 160)
    assert (out / "contact_sheet.png").stat().st_size > 1000


def test_a_verdict_without_looking_is_a_guess_and_never_a_success():
    from tensordict.nn import TensorDictModule

    from robot_rl import keys
    from robot_rl.closed_loop import evaluate_policy

    def answer_rework_at_once(joint_state):
        batch = joint_state.shape[:-1]
        return torch.zeros(*batch, 6), torch.full(batch, 2, dtype=torch.int64)

    policy = TensorDictModule(answer_rework_at_once, in_keys=[keys.JOINT_STATE], out_keys=[keys.POSE, keys.VERDICT])
    metrics, summaries = evaluate_policy(policy, seeds=list(range(8)), difficulty="easy", image_size=48, num_envs=4)
    assert metrics["guesses"] == 8 and metrics["guess_rate"] == 1.0 and metrics["success_rate"] == 0.0
    defective = sum(s["defect"] != "none" for s in summaries)
    assert sum(s["correct_verdict"] for s in summaries) == defective  # right by luck on the defective boards
    assert metrics["verdict_accuracy"] == defective / 8
    assert metrics["failures"] == {"unstable": 0, "guess": 8, "wrong_verdict": 0, "no_verdict_at_view": 0,
                                   "view_never_found": 0}
    assert sum(row["episodes"] for row in metrics["by_defect"].values()) == 8
    assert all(row["guesses"] == row["episodes"] and row["success_rate"] == 0.0
               for row in metrics["by_defect"].values())


def test_each_failed_episode_has_one_kind_in_the_order_the_kinds_are_tested():
    from robot_rl.episodes import FAILURE_KINDS, failure_counts, failure_kind

    def episode(success=False, unstable=False, guess=False, verdict="none", localized_at=None):
        return {"success": success, "unstable": unstable, "guess": guess, "verdict": verdict,
                "steps_to_localize": localized_at}

    episodes = [episode(success=True, verdict="pass", localized_at=3),
                episode(unstable=True, guess=True, verdict="pass"),  # unstable physics first: nothing else counts
                episode(guess=True, verdict="rework"),
                episode(verdict="pass", localized_at=4),  # answered at the view, wrongly
                episode(localized_at=5),  # found the view, never answered there
                episode()]  # never found it
    assert [failure_kind(e) for e in episodes] == [None, *FAILURE_KINDS]
    assert failure_counts(episodes) == dict.fromkeys(FAILURE_KINDS, 1)


def test_a_video_that_cannot_be_encoded_warns_and_keeps_the_metrics(bc_run_dir, tmp_path, monkeypatch):
    import robot_rl.video as module

    def broken(*args, **kwargs):
        raise RuntimeError("no encoder")

    monkeypatch.setattr(module, "write_mp4", broken)
    with pytest.warns(UserWarning, match="video not written"):
        result = evaluate(EvaluateConfig(checkpoint=str(bc_run_dir), out=str(tmp_path / "eval"), episodes=1,
                                         num_envs=1, videos=1, video_height=64, video_quality="fast"),
                          progress=False)
    assert result["videos"] == [] and (tmp_path / "eval" / "report.json").is_file()


def test_exported_safetensors_rebuild_the_actor_without_pickle(bc_run_dir, tmp_path, monkeypatch):
    from tensordict.nn import InteractionType, set_interaction_type

    from robot_rl.policy_io import load_actor

    folder = tmp_path / "weights"
    written = export(ExportConfig(checkpoint=str(bc_run_dir), out=str(folder), format="safetensors"))
    assert written == {"safetensors": str(folder / "model.safetensors")}
    reference, reference_info, _ = load_actor(bc_run_dir)

    def no_pickle(*args, **kwargs):
        raise AssertionError("torch.load (pickle) called")

    monkeypatch.setattr(torch, "load", no_pickle)
    for source in (folder, folder / "model.safetensors"):
        actor, env_info, path = load_actor(source)
        assert env_info == reference_info and path == folder / "model.safetensors"
        for name, value in reference.state_dict().items():
            assert torch.equal(actor.state_dict()[name], value), name
    td = InspectionEnv(difficulty=env_info.difficulty, image_size=env_info.image_size, num_envs=2,
                       seed=3).reset()
    with torch.no_grad(), set_interaction_type(InteractionType.DETERMINISTIC):
        assert torch.equal(actor(td.clone())["action", "pose"], reference(td.clone())["action", "pose"])
    config = json.loads((folder / "config.json").read_text())
    assert config["env"]["arm"] == "ur5e_like" and config["source"].startswith(str(bc_run_dir))
    assert set(config["policy_config"]) >= {"hidden", "min_scale", "keypoints"}
    (folder / "config.json").unlink()
    with pytest.raises(UsageError, match="config.json: missing"):
        load_actor(folder)


def test_export_round_trip_matches_the_actor_on_real_observations(bc_run_dir, tmp_path):
    written = export(ExportConfig(checkpoint=str(bc_run_dir), out=str(tmp_path / "export"), format="all"))
    assert set(written) == {"torchscript", "export", "onnx", "safetensors"}  # the test extra installs onnx
    policy, env_info, _ = deployed_policy(bc_run_dir)
    from robot_rl.envs.torchrl_env import InspectionEnv

    env = InspectionEnv(difficulty=env_info.difficulty, image_size=env_info.image_size, num_envs=3, seed=4)
    td = env.rollout(4, break_when_any_done=False).reshape(-1)
    pixels, joints = td["pixels"], td["joint_state"]
    with torch.no_grad():
        reference_pose, reference_verdict = policy(pixels, joints)
        programs = [torch.jit.load(written["torchscript"]), torch.export.load(written["export"]).module()]
        for program in programs:
            pose, verdict = program(pixels, joints)
            assert (pose - reference_pose).abs().max().item() < 1e-5
            assert torch.equal(verdict, reference_verdict)
    session = onnxruntime.InferenceSession(written["onnx"])
    pose, verdict = session.run(None, {"pixels": pixels.numpy(), "joint_state": joints.numpy()})
    assert abs(pose - reference_pose.numpy()).max() < 1e-5
    assert (verdict == reference_verdict.numpy()).all()
    # The plain program's action is the TorchRL actor's deterministic action.
    from tensordict.nn import InteractionType, set_interaction_type

    from robot_rl.policy_io import load_actor

    actor, _, _ = load_actor(bc_run_dir)
    with torch.no_grad(), set_interaction_type(InteractionType.DETERMINISTIC):
        acted = actor(td.select("pixels", "joint_state").clone())
    assert (acted["action", "pose"] - reference_pose).abs().max().item() < 1e-5
    assert torch.equal(acted["action", "verdict"], reference_verdict)
    meta = json.loads((tmp_path / "export" / "policy.json").read_text())
    assert meta["files"]["torchscript"] == FILES["torchscript"]


def test_pipeline_runs_end_to_end_and_skips_finished_stages(tmp_path, capsys):
    from robot_rl.errors import UsageError
    from robot_rl.pipeline import PRESETS, result_table, run_pipeline

    tiny = PRESETS["quick"].updated(
        collect={"episodes": 4, "num_envs": 1},
        pretrain={"epochs": 1, "batch_size": 8, "steps_per_epoch": 2, "eval_episodes": 1, "eval_envs": 1,
                  "hidden": 16, "threads": 2},
        finetune={"total_frames": 32, "frames_per_batch": 32, "num_envs": 2, "minibatch_size": 16, "ppo_epochs": 1,
                  "eval_every": 0, "eval_episodes": 1, "threads": 2},
        evaluate={"episodes": 2, "num_envs": 2, "videos": 1, "failure_videos": 1, "video_height": 64,
                  "video_quality": "fast"},
    )
    result = run_pipeline(tiny, tmp_path / "pipe", progress=False)
    assert (tmp_path / "pipe" / "eval" / "report.md").is_file()
    assert list((tmp_path / "pipe" / "eval" / "videos").glob("*.mp4"))
    assert not list((tmp_path / "pipe" / "eval-bc").glob("videos/*.mp4"))
    assert result["metrics"]["episodes"] == result["after_bc"]["episodes"] == 2
    bc_report = json.loads((tmp_path / "pipe" / "eval-bc" / "report.json").read_text())
    ppo_report = json.loads((tmp_path / "pipe" / "eval" / "report.json").read_text())
    assert [e["episode_seed"] for e in bc_report["episodes"]] == [e["episode_seed"] for e in ppo_report["episodes"]]
    assert json.loads((tmp_path / "pipe" / "pipeline.json").read_text())["after_bc"] == result["after_bc"]
    # --exploration auto's choice is recorded as the run resolved it (the tiny BC start checks under 80%).
    assert result["exploration"] == json.loads((tmp_path / "pipe" / "ppo" / "config.json").read_text())[
        "exploration"] == "default"
    # The one checkpoint rule: each run folder's last.pt, recorded in pipeline.json and in each report.
    assert result["checkpoint_kind"] == "last"
    assert result["policies"] == {"bc": str(tmp_path / "pipe" / "bc" / "checkpoints" / "last.pt"),
                                  "ppo": str(tmp_path / "pipe" / "ppo" / "checkpoints" / "last.pt")}
    assert [bc_report["info"]["checkpoint"], ppo_report["info"]["checkpoint"]] == list(result["policies"].values())
    table = result_table(result).splitlines()
    bc_row, ppo_row = table[2], table[3]
    assert bc_row.startswith("| after BC") and ppo_row.startswith("| after PPO")
    assert f"{result['after_bc']['success_rate']:.0%} (" in bc_row and "2 boards" in ppo_row
    assert any(line.startswith("videos:") and "pipe/eval/videos" in line for line in table)
    lines = []
    run_pipeline(tiny, tmp_path / "pipe", progress=False, log=lines.append)
    assert len(lines) == 5 and all("skipped" in line for line in lines), lines
    # A changed preset is refused, naming what changed, instead of mixing with the finished stages.
    changed = tiny.updated(pretrain={"epochs": 2})
    with pytest.raises(UsageError, match=r"pretrain\.epochs: 1 -> 2"):
        run_pipeline(changed, tmp_path / "pipe", progress=False)
    with_dagger = tiny.updated(dagger={"rounds": 1})  # a stage added is a change too
    with pytest.raises(UsageError, match=r"dagger\.rounds: None -> 1"):
        run_pipeline(with_dagger, tmp_path / "pipe", progress=False)


def test_every_command_documents_its_defaults():
    import subprocess
    import sys

    for command in ("collect-demos", "pretrain", "finetune", "evaluate", "export", "pipeline"):
        out = subprocess.run([sys.executable, "-m", "robot_rl.cli", command, "--help"], capture_output=True,
                             text=True, timeout=60).stdout
        assert "(default:" in out, command


def test_evaluate_rejects_a_missing_checkpoint(tmp_path, capsys):
    assert main(["evaluate", "--policy", str(tmp_path / "nothing")]) == 2
    assert "no such checkpoint" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.slow  # 13 shifts end to end; the suite rows are checked by benchmarks/perception.py
def test_perturbation_suite_runs_the_same_boards_under_every_shift(bc_run_dir, tmp_path):
    from robot_rl.envs.randomization import PERTURBATIONS

    out = tmp_path / "eval"
    result = evaluate(EvaluateConfig(checkpoint=str(bc_run_dir), out=str(out), episodes=1, num_envs=1, videos=0,
                                     failure_videos=1, video_height=64, video_quality="fast", perturbations=True),
                      progress=False)
    rows = json.loads((out / "report.json").read_text())["perturbations"]
    assert [r["shift"] for r in rows] == ["none", *PERTURBATIONS] == [r["shift"] for r in result["perturbations"]]
    assert rows[0]["success_rate"] == result["metrics"]["success_rate"]  # nominal = the main evaluation
    for row in rows:
        assert row["episodes"] == 1 and row["success_ci95"][0] <= row["success_rate"] <= row["success_ci95"][1]
        if row["success_rate"] < 1:  # one failure video per shift that failed somewhere
            assert (out / row["video"]).stat().st_size > 0
    assert "## Perturbations (the same boards under every shift: 1)" in (out / "report.md").read_text()


def test_the_suite_takes_other_shifts_by_value(bc_run_dir, tmp_path):
    from robot_rl.envs.randomization import PERTURBATIONS, Randomization

    shifts = {"offset_10mm_tilt_5deg": Randomization("offset_10mm_tilt_5deg", camera_shift=(0.01, 0.01),
                                                     camera_tilt=(5.0, 5.0))}
    suite = evaluate(EvaluateConfig(checkpoint=str(bc_run_dir), out=str(tmp_path / "eval"), episodes=2, num_envs=1,
                                    videos=0, failure_videos=0, perturbations=True), progress=False,
                     shifts={**shifts, "shifted_camera": PERTURBATIONS["shifted_camera"]})["perturbations"]
    assert [row["shift"] for row in suite] == ["none", "offset_10mm_tilt_5deg", "shifted_camera"]
    assert suite[1]["change"] == "camera_shift 0.01 m; camera_tilt 5 deg"
    # the same ranges by value and by name: the same draws on the same boards
    assert {k: v for k, v in suite[1].items() if k != "shift"} == {k: v for k, v in suite[2].items() if k != "shift"}
    for row in suite:  # every failed episode of a shift is counted under one kind, overall and per defect
        failed = round(row["episodes"] * (1 - row["success_rate"]))
        assert sum(row["failures"].values()) == failed
        assert sum(sum(d["failures"].values()) for d in row["by_defect"].values()) == failed


def test_a_deployed_camera_sets_its_own_exposure_under_every_setting(bc_run_dir, tmp_path):
    from robot_rl.envs.randomization import PERTURBATIONS

    shifts = {"dim_light": PERTURBATIONS["dim_light"]}
    reports = {}
    for exposure in ("auto", "fixed", "highlights"):
        out = tmp_path / exposure
        evaluate(EvaluateConfig(checkpoint=str(bc_run_dir), out=str(out), episodes=1, num_envs=1, videos=0,
                                failure_videos=0, perturbations=True, camera_exposure=exposure),
                 progress=False, shifts=shifts)
        reports[exposure] = json.loads((out / "report.json").read_text())
    auto, fixed = reports["auto"], reports["fixed"]
    assert auto["info"]["auto_exposure"] and not fixed["info"]["auto_exposure"]  # the policy's camera had none
    assert auto["info"]["camera_exposure"] == "auto" and "(its camera setting its own exposure)" in (
        tmp_path / "auto" / "report.md").read_text()
    assert [row["change"] for row in auto["perturbations"]] == ["auto exposure", "light_intensity x0.35; auto exposure"]
    assert [row["change"] for row in fixed["perturbations"]] == ["nominal", "light_intensity x0.35"]
    assert reports["highlights"]["info"]["metering"] == "highlights" and auto["info"]["metering"] == "centre"
    assert "metering" not in fixed["info"]  # a fixed camera meters nothing
    assert [row["change"] for row in reports["highlights"]["perturbations"]] == [
        "auto exposure; metering highlights", "light_intensity x0.35; auto exposure; metering highlights"]
    header = (tmp_path / "highlights" / "report.md").read_text()
    assert "(its camera setting its own exposure from its highlights)" in header


def _suites_in_cells(bc_run_dir, out, shift: str, cells: dict) -> list[list[dict]]:
    """The BC run's policy on one board, nominally and under ``shift``, in each of ``cells`` (name -> cell): each
    cell's suite rows, in order."""
    from robot_rl.envs.randomization import PERTURBATIONS
    from robot_rl.evaluate import perturbation_suite
    from robot_rl.policy_io import load_actor

    actor, trained_in, _ = load_actor(str(bc_run_dir))
    config = EvaluateConfig(checkpoint=str(bc_run_dir), episodes=1, num_envs=1, videos=0, failure_videos=0)
    return [perturbation_suite(actor, trained_in, config, out / name, "cpu", progress=False,
                               shifts={shift: PERTURBATIONS[shift]}, cell=cell) for name, cell in cells.items()]


def test_a_fixed_exposure_takes_the_exposure_loop_from_a_metered_policys_camera(bc_run_dir, tmp_path):
    from robot_rl.envs.randomization import METERED, with_exposure

    metered, fixed, highlights = _suites_in_cells(bc_run_dir, tmp_path, "dim_light", {
        "metered": METERED, "fixed": with_exposure(METERED, "fixed"),
        "highlights": with_exposure(METERED, "highlights")})
    assert all("auto exposure" in row["change"] and "metering" not in row["change"] for row in metered)
    assert not any("auto exposure" in row["change"] for row in fixed)
    assert "rectified" in fixed[1]["change"]  # the rest of the cell stays the policy's
    assert all(row["change"].endswith("auto exposure; metering highlights") for row in highlights)


def test_a_calibrated_cell_stays_calibrated_under_every_shift_of_the_suite(bc_run_dir, tmp_path):
    from robot_rl.envs.randomization import CALIBRATED, NONE

    calibrated, plain = _suites_in_cells(bc_run_dir, tmp_path, "shifted_camera",
                                         {"calibrated": CALIBRATED, "plain": NONE})
    assert [row["change"] for row in plain] == ["nominal", "camera_shift 0.01 m; camera_tilt 5 deg"]
    assert calibrated[0]["change"] == "nominal"  # the nominal cell has nothing to calibrate
    assert calibrated[1]["change"] == ("camera_shift 0.01 m; camera_tilt 5 deg; calibrated; "
                                       "calibration_shift 0 to 0.002 m; calibration_tilt 0 to 1 deg")


def test_finished_episodes_summarizes_every_episode_that_ended_in_a_batch():
    from robot_rl import keys
    from robot_rl.envs import make_env
    from robot_rl.episodes import finished_episodes, summarize_episode

    env = make_env(num_envs=2, difficulty="easy", image_size=32, parallel=False, seed=0)
    batch = env.rollout(12, break_when_any_done=False)  # [2, 12]: random verdicts end most episodes early
    env.close()
    done = batch.get((keys.NEXT, keys.DONE)).squeeze(-1)
    summaries = finished_episodes(batch)
    assert len(summaries) == int(done.sum()) > 0
    first_end = int(done[0].nonzero()[0])
    assert summaries[0] == summarize_episode(batch[0, : first_end + 1])
    assert sum(s["steps"] for s in summaries) == sum(int(d.nonzero()[-1]) + 1 for d in done if d.any())
