"""The perception benchmark's timing protocol: an arm's seconds are summed over the invocations that ran it (a
stopped part, then the part that finished it), a finished stage is not timed again, and a folder finished before
stage records were kept keeps the seconds recorded with it, never the near-zero seconds of reusing it."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import perception  # noqa: E402  (benchmarks/ is not a package)

from robot_rl.errors import RunStopped  # noqa: E402
from robot_rl.recipe import Recipe  # noqa: E402


def _stopped():
    time.sleep(0.2)
    raise RunStopped("runs/bc", "bc")


def _finishes():
    time.sleep(0.1)
    return "trained"


def test_a_stage_split_across_invocations_counts_every_part(tmp_path):
    record = tmp_path / "stages.json"
    with pytest.raises(RunStopped):
        perception.timed(Recipe(record), "train:bc", _stopped, False, None)
    result, seconds = perception.timed(Recipe(record), "train:bc", _finishes, False, None)  # the next invocation
    assert result == "trained"
    stage = Recipe(record).stages["train:bc"]
    assert [part["finished"] for part in stage["parts"]] == [False, True]
    assert seconds == pytest.approx(0.3, abs=0.1) and seconds == stage["seconds"]
    # A third invocation reuses the finished folder: no new part, the same seconds.
    result, again = perception.timed(Recipe(record), "train:bc", lambda: "reused", True, None)
    assert result == "reused" and again == seconds and len(Recipe(record).stages["train:bc"]["parts"]) == 2


def test_a_folder_finished_before_stage_records_keeps_its_recorded_seconds(tmp_path):
    record = tmp_path / "stages.json"
    result, seconds = perception.timed(Recipe(record), "train:encoder", lambda: "reused", True, 822.0)
    assert result == "reused" and seconds == 822.0
    assert not record.exists()  # reusing it is not a measurement


def test_an_arm_keeps_the_date_commit_and_machine_it_was_measured_at():
    previous = {"date": "2026-12-03T16:40:00+00:00", "commit": "a" * 40, "machine": {"cpu": "AMD EPYC"},
                "metrics": {"arms": {"encoder": {"run_dir": "runs/bc-surfaces-encoder"},
                                     "recolour": {"run_dir": "runs/bc-surfaces-recolour",
                                                  "kept_from": {"date": "2026-12-02", "commit": "b" * 40}}}}}
    arms = perception.earlier_records(previous, previous["metrics"]["arms"])
    assert arms["encoder"]["kept_from"]["commit"] == "a" * 40  # measured by the invocation that wrote the file
    assert arms["recolour"]["kept_from"]["commit"] == "b" * 40  # kept by that rewrite from an earlier one
    # The machine: the file's, for a stamp written before machines were kept too (every rewrite ran there).
    assert arms["encoder"]["kept_from"]["machine"] == arms["recolour"]["kept_from"]["machine"] == {"cpu": "AMD EPYC"}
    kept = {"date": "2026-12-01", "commit": "c" * 40, "machine": {"cpu": "Intel Xeon"}}
    assert perception.earlier_records(previous, {"x": {"kept_from": kept}})["x"]["kept_from"] == kept
    # Run again: an arm whose suite finished before keeps its stamp; one evaluated now is the new file's.
    again = {"run_dir": "runs/bc-surfaces-encoder", "suite": []}
    assert perception.measured_then(again, arms["encoder"], {"evaluate:bc-surfaces-encoder"})["kept_from"] == \
        arms["encoder"]["kept_from"]
    assert "kept_from" not in perception.measured_then(again, arms["encoder"], set())
    assert "kept_from" not in perception.measured_then(again, None, {"evaluate:bc-surfaces-encoder"})


def _arm(nominal: float, shifts: list[float]) -> dict:
    return {"suite": [{"shift": "none", "success_rate": nominal, "episodes": 100},
                      *({"shift": f"s{i}", "success_rate": rate, "episodes": 100} for i, rate in enumerate(shifts))]}


def test_the_winner_has_the_most_shifts_at_target_and_full_adopts_it_only_over_three_seeds_without_nominal_cost():
    arms = {"baseline": _arm(1.0, [1.0, 1.0]), "encoder": _arm(1.0, [0.95, 0.5]),
            "encoder+recolour": _arm(0.98, [0.95, 0.91]), "encoder+recolour-seed1": _arm(0.96, [0.1, 0.1])}
    assert perception.best_arm(arms) == "encoder+recolour"  # a baseline or another seed is never the winner
    one_seed = perception.adoption("encoder+recolour", arms)
    assert one_seed["seeds"] == 2 and not one_seed["adopt"]  # fewer than three seeds decide nothing
    arms["encoder+recolour-seed2"] = _arm(0.99, [])
    three = perception.adoption("encoder+recolour", arms)  # 293 of 300: significantly under the preset's 99%
    assert three["boards"] == 300 and three["pooled_nominal"] == pytest.approx(0.9767, abs=1e-3)
    assert three["pooled_ci95"][1] < perception.FULL_PRESET_NOMINAL and not three["adopt"]
    arms["encoder+recolour-seed1"] = _arm(0.99, [])  # 296 of 300: no significant cost
    assert perception.adoption("encoder+recolour", arms)["adopt"]
    arms["encoder+recolour-seed2"] = _arm(0.90, [])  # pooled 94.7%: under the nominal target
    assert not perception.adoption("encoder+recolour", arms)["adopt"]


def _camera_arm(nominal: float, camera: float, guesses: int) -> dict:
    return {"suite": [{"shift": "none", "success_rate": nominal, "episodes": 100, "guesses": 0},
                      {"shift": "shifted_camera", "success_rate": camera, "episodes": 100, "guesses": guesses},
                      {"shift": "bright_light", "success_rate": 0.95, "episodes": 100, "guesses": 1}]}


def test_each_camera_arm_is_judged_on_its_own_against_the_mount_targets():
    arms = {"encoder+recolour": _arm(0.99, [0.95, 0.91]),
            perception.MOUNT_ARM: _camera_arm(0.99, 0.99, 0),  # best on every shift, yet not a surfaces lever
            perception.CALIBRATED_ARM: _camera_arm(0.97, 0.93, 4),
            f"{perception.CALIBRATED_ARM}-seed1": _camera_arm(0.96, 0.91, 6)}
    assert perception.best_arm(arms) == "encoder+recolour"
    verdicts = perception.judge({"arms": arms})
    mount, calibrated = verdicts["camera_mount"], verdicts["camera_calibrated"]
    assert mount["arm"] == perception.MOUNT_ARM and list(mount["seeds"]) == [perception.MOUNT_ARM]
    assert mount["seeds"][perception.MOUNT_ARM]["met"] and not mount["met"]  # one seed of three
    rows = calibrated["seeds"]
    assert rows[perception.CALIBRATED_ARM]["met"] and rows[perception.CALIBRATED_ARM]["shifted_camera"] == 0.93
    assert not rows[f"{perception.CALIBRATED_ARM}-seed1"]["met"]  # 6 guesses per 100 boards: over the target's 5
    assert calibrated["adoption"]["seeds"] == 2 and not calibrated["met"]


def _row(shift, success, guesses, **more):
    return {"shift": shift, "success_rate": success, "guesses": guesses, "episodes": 100, **more}


def test_a_deployed_arm_evaluates_the_policies_of_the_arm_that_trained_them_on_its_own_camera(tmp_path, monkeypatch):
    import json
    from types import SimpleNamespace

    deployed, trained = perception.DEPLOYED_EXPOSURE_ARM, perception.RECTIFIED_ARM
    where = perception.paths(tmp_path)
    assert perception.arm_run_dir(where, deployed, 2) == perception.arm_run_dir(where, trained, 2)
    assert perception.deployed_exposure(deployed) == "auto" and perception.deployed_exposure(trained) == ""

    calls = []

    def suite(checkpoint, boards, out, device, shifts=None, camera_exposure=""):
        calls.append((Path(out).name, camera_exposure))
        Path(out).mkdir(parents=True)
        rows = [_row("none", 0.97, 0), _row("dim_light", 0.96, 0)]
        (Path(out) / "report.json").write_text(json.dumps({"perturbations": rows}))
        return rows

    monkeypatch.setattr(perception, "perturbation_suite", suite)
    monkeypatch.setattr(perception, "ensure_trained", lambda config: {"best_success": 0.99})
    args = SimpleNamespace(boards=100, device="cpu")
    stages = perception.Stages(tmp_path / "stages.json", progress=False)
    run_dir = perception.arm_run_dir(where, deployed, 0)
    config = perception.bc_config(tmp_path / "demos", run_dir, 12, SimpleNamespace(boards=100, device="cpu"))
    as_trained = perception.train_and_evaluate(config, args, stages, None)
    on_its_camera = perception.train_and_evaluate(config, args, stages, None, camera_exposure="auto")
    assert calls == [("eval-perturbations-last", ""), ("eval-perturbations-last-exposure-auto", "auto")]
    assert on_its_camera["camera_exposure"] == "auto" and "camera_exposure" not in as_trained
    assert stages.finished(perception.evaluation_stage(run_dir, "auto"))

    # the arms part: the deployed arm's record says whose policies it evaluated and claims none of their training
    monkeypatch.setattr(perception, "ensure_demos", lambda *a, **k: 0.0)
    monkeypatch.setattr(perception, "encoder_record", lambda *a, **k: {"wall_s": 700.0})
    args = SimpleNamespace(boards=100, device="cpu", arms=[deployed], seeds=[0], epochs=12)
    record = perception.run_arms(args, where, {}, stages)[deployed]
    assert record["policies_from"] == trained and record["bc_wall_s"] is None and record["extra_wall_s"] == 0
    assert record["camera_exposure"] == "auto" and len(calls) == 2  # its evaluation was reused, not run again
    # an arm evaluated before keeps the provenance of the file that first recorded it
    earlier = {"kept_from": {"commit": "abc", "uncommitted_changes": True}}
    assert perception.measured_then(record, earlier, set(stages.stages))["kept_from"] == earlier["kept_from"]
