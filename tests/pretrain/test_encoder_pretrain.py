"""Encoder pretraining: the view cache resumes exactly, a killed run continues, its weights load into BC."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
import torch

from robot_rl.checkpoints import load_checkpoint
from robot_rl.cli import main
from robot_rl.configs import BCConfig, EncoderPretrainConfig
from robot_rl.encoder import WeightsError, encoder_weights_file, load_resnet_weights, read_encoder_weights
from robot_rl.errors import UsageError
from robot_rl.pretrain.encoder_pretrain import check_encoder_cell
from robot_rl.pretrain.view_cache import ViewCache
from robot_rl.provenance import Provenance

SIZE = 32
RENDER = {"task": "pcb-inspect", "difficulty": "easy", "image_size": SIZE, "randomization": "surfaces",
          "arm": "ur5e_like", "pose_noise": 0.3, "workspace_views": 4}


def tiny_args(run_dir, views: int = 40, epochs: int = 2) -> list[str]:
    return ["pretrain-encoder", "--out", str(run_dir), "--views", str(views), "--epochs", str(epochs),
            "--image-size", str(SIZE), "--difficulty", "easy", "--batch-size", "8", "--workspace-views", "4",
            "--keypoints", "8", "--threads", "2"]


def test_a_cache_rendered_in_pieces_equals_one_rendered_at_once(tmp_path):
    whole = ViewCache(tmp_path / "whole", 50, SIZE, RENDER, seed=3)
    assert whole.render(chunks_per_commit=1)
    pieces = ViewCache(tmp_path / "pieces", 50, SIZE, RENDER, seed=3)
    calls = []
    assert not pieces.render(should_stop=lambda: calls.append(1) or len(calls) > 1, chunks_per_commit=1)
    assert 0 < pieces.meta["rendered"] < 50
    again = ViewCache(tmp_path / "pieces", 50, SIZE, RENDER, seed=3)  # a new process, as after a kill
    assert again.meta["rendered"] == pieces.meta["rendered"] and again.render(chunks_per_commit=1)
    for name, array in whole.arrays().items():
        assert np.array_equal(array, again.arrays()[name]), name
    arrays = whole.arrays()
    assert arrays["point_in_view"].any() and arrays["localized"].any() and not arrays["localized"].all()
    assert len({tuple(p.reshape(-1, 3).mean(0).round()) for p in arrays["pixels"]}) > 40  # fresh looks
    with pytest.raises(Exception, match="a cache of other views"):
        ViewCache(tmp_path / "whole", 50, SIZE, {**RENDER, "randomization": "none"}, seed=3)


def test_a_killed_pretrain_encoder_continues_with_the_same_command_and_its_weights_load_into_bc(
        tmp_path, demos_dir, capsys):
    run_dir = tmp_path / "encoder"
    command = [sys.executable, "-m", "robot_rl.cli", *tiny_args(run_dir, epochs=4)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env={**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")})
    log = run_dir / "logs" / "scalars" / "train" / "epoch.csv"
    deadline = time.monotonic() + 600
    while not log.is_file() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)  # until the first epoch is logged (its checkpoint is written right after)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL, "the run ended before it was killed"
    assert not (run_dir / "summary.json").exists()
    assert main(tiny_args(run_dir, epochs=4)) == 0  # the same command: continues the run and its cache
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["epochs"] == 4 and summary["views"] == 40
    steps = [int(line.split(",")[0]) for line in log.read_text().split()]
    assert steps == sorted(set(steps)) and len(steps) == 4  # one row per epoch, none repeated
    assert summary["final_val"]["val/segmentation_accuracy"] > 0.5
    capsys.readouterr()
    assert main(["info", str(run_dir)]) == 0
    assert "epoch 4 of 4, 40 views; finished" in capsys.readouterr().out

    # The weights: into BC through --encoder-weights (the run folder), then exported.
    from robot_rl.configs import ExportConfig
    from robot_rl.envs.torchrl_env import proof_env
    from robot_rl.export import export
    from robot_rl.policy import PolicyConfig, actor_encoder, make_actor
    from robot_rl.policy_io import load_actor

    weights, cell = read_encoder_weights(run_dir)
    assert (cell.task, cell.arm, cell.difficulty, cell.image_size) == ("pcb-inspect", "ur5e_like", "easy", SIZE)
    assert cell.task_version is not None and cell.arm_sha256 is not None  # the record every artefact carries
    capsys.readouterr()
    assert main(["info", str(run_dir / "encoder.pt")]) == 0
    assert "encoder weights (pretrain-encoder)" in capsys.readouterr().out
    env = proof_env("easy", 64)
    actor = make_actor(env.observation_spec, env.full_action_spec,
                       PolicyConfig(encoder_weights=str(run_dir), keypoints=8))
    image = actor_encoder(actor).image
    torch.testing.assert_close(image.trunk.state_dict()["layer3.0.conv1.weight"], weights["layer3.0.conv1.weight"])
    torch.testing.assert_close(image.keypoints.project.weight, weights["keypoints.project.weight"])
    with pytest.raises(WeightsError, match="8-keypoint layer, this policy has 32"):
        make_actor(env.observation_spec, env.full_action_spec, PolicyConfig(encoder_weights=str(run_dir)))
    bc_dir = tmp_path / "bc"
    assert main(["pretrain", "--data", str(demos_dir), "--out", str(bc_dir), "--encoder-weights", str(run_dir),
                 "--keypoints", "8", "--epochs", "1", "--batch-size", "8", "--steps-per-epoch", "1",
                 "--eval-episodes", "1", "--num-envs", "1", "--hidden", "32", "--threads", "2"]) == 0
    files = export(ExportConfig(checkpoint=str(bc_dir), format="safetensors"))
    loaded, _, _ = load_actor(Path(files["safetensors"]).parent)
    assert actor_encoder(loaded).image.keypoints is not None


def test_a_folder_without_encoder_weights_is_refused_in_one_line(tmp_path):
    import torchvision

    with pytest.raises(WeightsError, match="no encoder.pt"):
        load_resnet_weights(torchvision.models.resnet18(weights=None), tmp_path)


def test_bad_options_fail_in_one_line(tmp_path, capsys):
    assert main(tiny_args(tmp_path / "run") + ["--randomization", "plaid"]) == 2
    assert "--randomization must be one of" in capsys.readouterr().err
    assert main(tiny_args(tmp_path / "run") + ["--keypoints", "0"]) == 2
    assert EncoderPretrainConfig().keypoints == BCConfig().keypoints  # the defaults fit each other


def test_the_pipeline_pretrains_the_encoder_before_bc_and_bc_starts_from_it(tmp_path):
    from robot_rl.pipeline import PRESETS, run_pipeline

    tiny = PRESETS["quick"].updated(
        collect={"episodes": 3, "num_envs": 1},
        encoder={"views": 24, "epochs": 1, "batch_size": 8, "workspace_views": 4, "keypoints": 8, "threads": 2,
                 "difficulty": "easy", "image_size": 64, "randomization": "none"},
        pretrain={"epochs": 1, "batch_size": 8, "steps_per_epoch": 2, "eval_episodes": 1, "eval_envs": 1,
                  "hidden": 16, "keypoints": 8, "threads": 2},
        finetune={"total_frames": 32, "frames_per_batch": 32, "num_envs": 2, "minibatch_size": 16, "ppo_epochs": 1,
                  "eval_every": 0, "eval_episodes": 1, "threads": 2},
        evaluate={"episodes": 1, "num_envs": 1, "videos": 0, "failure_videos": 0})
    lines = []
    result = run_pipeline(tiny, tmp_path / "pipe", progress=False, log=lines.append)
    assert [line.split(" ")[0] for line in lines][:3] == ["[1/5]", "[2a/5]", "[2/5]"]
    encoder_dir = tmp_path / "pipe" / "encoder"
    assert result["encoder"] == str(encoder_dir) and "pretrain-encoder" in result["seconds"]
    assert load_checkpoint(tmp_path / "pipe" / "bc" / "checkpoints" / "last.pt")["config"]["encoder_weights"] == str(
        encoder_dir)
    assert json.loads((tmp_path / "pipe" / "preset.json").read_text())["encoder"]["views"] == 24
    lines.clear()  # the same command again: every stage is finished, nothing runs twice
    run_pipeline(tiny, tmp_path / "pipe", progress=False, log=lines.append)
    assert any(line.startswith("[2a/5] pretrain-encoder") and line.endswith("is finished, skipped") for line in lines)


def encoder_run_folder(path: Path, task: str, arm: str = "ur5e_like") -> Path:
    """A finished pretrain-encoder run folder as BC reads it: its config and its encoder.pt."""
    path.mkdir()
    (path / "config.json").write_text(json.dumps({**asdict(EncoderPretrainConfig(task=task, arm=arm)),
                                                  "run_dir": str(path)}))
    torch.save({}, path / "encoder.pt")
    return path


def test_an_encoder_pretrained_on_another_task_or_arm_is_refused_before_bc_builds(tmp_path):
    lead = encoder_run_folder(tmp_path / "lead", "lead-inspect")
    demos = Provenance(task="pcb-inspect", arm="ur5e_like")
    for weights in (lead, lead / "encoder.pt"):  # the run folder, or its weights file
        with pytest.raises(UsageError, match=r"pretrained on views of lead-inspect .* the demos are pcb-inspect"):
            check_encoder_cell(str(weights), demos)
    panda = encoder_run_folder(tmp_path / "panda", "pcb-inspect", arm="panda")
    with pytest.raises(UsageError, match="with the panda arm, the demos are pcb-inspect with ur5e_like"):
        check_encoder_cell(str(panda), demos)
    check_encoder_cell(str(lead), Provenance(task="lead-inspect"))  # the same cell loads
    torch.save({}, tmp_path / "resnet18.pth")
    check_encoder_cell(str(tmp_path / "resnet18.pth"), demos)  # weights that record no cell load as they are


def test_encoder_weights_carry_their_cell_wherever_they_are_copied(tmp_path, capsys):
    import torchvision

    from robot_rl.encoder import SpatialSoftmax, encoder_state_dict

    class Trunk(torch.nn.Module):  # encoder_state_dict's view of an ImageEncoder: a trunk and keypoints
        def __init__(self):
            super().__init__()
            self.trunk, self.keypoints = torchvision.models.resnet18(weights=None), SpatialSoftmax(128, 4)

    lead = Provenance.new(task="lead-inspect", arm="ur5e_like")
    copied = tmp_path / "somewhere" / "weights.pt"  # no run folder, no config.json beside it
    copied.parent.mkdir()
    torch.save(encoder_weights_file(encoder_state_dict(Trunk()), lead), copied)
    weights, cell = read_encoder_weights(copied)
    assert cell == lead and "layer1.0.conv1.weight" in weights and "keypoints.project.weight" in weights
    with pytest.raises(UsageError, match=r"pretrained on views of lead-inspect .* the demos are pcb-inspect"):
        check_encoder_cell(str(copied), Provenance(task="pcb-inspect"))
    check_encoder_cell(str(copied), Provenance(task="lead-inspect"))
    load_resnet_weights(torchvision.models.resnet18(weights=None), copied, SpatialSoftmax(128, 4))  # loads
    assert main(["info", str(copied)]) == 0
    out = capsys.readouterr().out
    assert "task:" in out and "lead-inspect" in out and "keypoints:" in out and " 4" in out

    # A record that does not read is one line naming the file, never a silent load.
    broken = tmp_path / "broken.pt"
    torch.save({**encoder_weights_file({}, lead), "env": {"env": 3}}, broken)
    with pytest.raises(UsageError, match=str(broken)):
        read_encoder_weights(broken)
    assert main(["info", str(broken)]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
