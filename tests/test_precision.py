"""Compute precision: auto follows the hardware, bf16 runs train with finite losses and write fp32 artefacts."""

from __future__ import annotations

import pytest
import torch

from robot_rl import precision
from robot_rl.checkpoints import load_checkpoint
from robot_rl.cli import main
from robot_rl.configs import BCConfig, EvaluateConfig, FinetuneConfig
from robot_rl.encoder import encoder_precision, set_encoder_precision
from robot_rl.envs.torchrl_env import InspectionEnv
from robot_rl.export import FILES, deploy, example_inputs
from robot_rl.finetune import trainer
from robot_rl.policy import PolicyConfig, actor_encoder, make_actor
from robot_rl.policy_io import load_actor
from robot_rl.pretrain import bc
from tests.finetune.test_trainer import tiny
from tests.pretrain.test_bc import small_config


@pytest.mark.parametrize("flags, expected", [
    ({"avx2", "avx512f"}, "fp32"),  # AVX-512 without its BF16 extension: bf16 would be emulated
    ({"avx2", "avx512f", "avx512_bf16"}, "bf16"),
    ({"amx_bf16", "amx_tile"}, "bf16"),
    ({"fp", "asimd", "bf16"}, "bf16"),  # an Arm core with BF16
    (set(), "fp32"),  # no /proc/cpuinfo (not Linux)
])
def test_auto_picks_bf16_only_where_the_cpu_runs_it_natively(monkeypatch, flags, expected):
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset(flags))
    assert precision.resolve_precision("auto", "cpu") == expected
    assert precision.resolve_precision("fp32", "cpu") == "fp32"
    assert precision.resolve_precision("bf16", "cpu") == "bf16"  # asked for explicitly: honoured
    assert precision.describe("auto", "cpu")["ran"] == expected


def test_the_cpu_flags_are_read_from_the_running_machine():
    flags = precision.cpu_flags()
    assert isinstance(flags, frozenset)
    try:
        text = open("/proc/cpuinfo").read()
    except OSError:
        assert flags == frozenset()
        return
    assert ("avx512_bf16" in flags) == (" avx512_bf16" in text)


@pytest.mark.parametrize("config_cls, extra", [(BCConfig, {}), (FinetuneConfig, {"from_scratch": True}),
                                               (EvaluateConfig, {"checkpoint": "x"})])
def test_the_precision_option_is_checked_and_defaults_to_auto(config_cls, extra):
    assert config_cls(**extra).precision == "auto"
    with pytest.raises(ValueError, match="--precision must be one of auto, fp32, bf16"):
        config_cls(precision="fp16", **extra)


def test_a_bad_precision_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["pretrain", "--data", str(tmp_path), "--out", str(tmp_path / "r"), "--precision", "fp8"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--precision" in err


def test_runs_stored_before_the_option_resume_in_fp32(tmp_path):
    from robot_rl.checkpoints import load_config

    (tmp_path / "config.json").write_text('{"run_dir": "x"}')
    assert load_config(tmp_path / "config.json", BCConfig).precision == "fp32"
    (tmp_path / "config.json").write_text('{"run_dir": "x", "from_scratch": true}')
    assert load_config(tmp_path / "config.json", FinetuneConfig).precision == "fp32"


@pytest.fixture(scope="module")
def env():
    return InspectionEnv(difficulty="easy", image_size=64, num_envs=2, seed=0)


def test_bf16_features_stay_fp32_and_close_to_fp32_ones(env):
    torch.manual_seed(0)
    actor = make_actor(env.observation_spec, env.full_action_spec, PolicyConfig(hidden=32)).eval()
    td = env.reset()
    encoder = actor_encoder(actor)
    with torch.no_grad():
        reference = encoder(td["pixels"], td["joint_state"])
        with encoder_precision(actor, "bf16"):
            assert encoder.image.precision == "bf16"
            reduced = encoder(td["pixels"], td["joint_state"])
    assert encoder.image.precision == "fp32"  # restored
    assert reduced.dtype == torch.float32
    assert torch.isfinite(reduced).all()
    # bf16 keeps 8 bits of mantissa: features agree to a few percent of their spread.
    assert (reduced - reference).abs().max() <= 0.05 * reference.abs().max()
    assert not torch.equal(reduced, reference)  # the bf16 path really ran


def test_a_bf16_bc_run_has_finite_losses_and_writes_an_fp32_checkpoint_and_export(demos_dir, tmp_path):
    summary = bc.pretrain(small_config(demos_dir, tmp_path / "run", epochs=1, precision="bf16"), progress=False)
    assert summary["precision"] == "bf16"
    assert summary["compute"]["precision"] == "bf16" and summary["compute"]["device"] == "cpu"  # the context ran
    losses = (tmp_path / "run" / "logs" / "scalars").glob("train/loss*.csv")
    values = [float(line.split(",")[1]) for path in losses for line in path.read_text().split()]
    assert values and all(torch.isfinite(torch.tensor(values)))
    state = load_checkpoint(tmp_path / "run" / "checkpoints" / "last.pt")
    floats = [t for t in state["actor"].values() if t.is_floating_point()]
    assert floats and all(t.dtype == torch.float32 for t in floats)
    assert state["config"]["precision"] == "bf16"

    # The export is the fp32 policy: it matches the loaded actor as an fp32 export of an fp32 run does.
    actor, env_info, _ = load_actor(tmp_path / "run")
    assert actor_encoder(actor).image.precision == "fp32"
    assert main(["export", "--policy", str(tmp_path / "run"), "--format", "torchscript",
                 "--out", str(tmp_path / "export")]) == 0
    program = torch.jit.load(str(tmp_path / "export" / FILES["torchscript"]))
    inputs = example_inputs(env_info.image_size, batch=3)
    with torch.no_grad():
        for exported, reference in zip(program(*inputs), deploy(actor)(*inputs)):
            torch.testing.assert_close(exported, reference)


def test_a_bf16_ppo_update_has_finite_losses_and_an_fp32_checkpoint(bc_run_dir, tmp_path):
    run_dir = tmp_path / "ppo"
    summary = trainer.finetune(tiny(run_dir, init=bc_run_dir, precision="bf16"), progress=False)
    assert summary["finished"] and summary["precision"] == summary["compute"]["precision"] == "bf16"
    scalars = run_dir / "logs" / "scalars" / "train"
    for name in ("loss_objective", "loss_critic"):
        values = [float(line.split(",")[1]) for line in (scalars / f"{name}.csv").read_text().split()]
        assert values and all(torch.isfinite(torch.tensor(values))), name
    state = load_checkpoint(run_dir / "checkpoints" / "last.pt")
    for part in ("actor", "critic"):
        assert all(t.dtype == torch.float32 for t in state[part].values() if t.is_floating_point()), part


def test_set_encoder_precision_refuses_an_unknown_precision(env):
    actor = make_actor(env.observation_spec, env.full_action_spec, PolicyConfig(hidden=16))
    with pytest.raises(ValueError, match="ImageEncoder: precision"):
        set_encoder_precision(actor, "auto")
