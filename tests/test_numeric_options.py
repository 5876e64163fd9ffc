"""Every numeric option of every command is checked by one rule (``robot_rl.options.generic_checks``): floats
finite, integers within +-2^40, env counts within what the machine's CPUs can step."""

from __future__ import annotations

import dataclasses
import math

import pytest

from robot_rl import configs
from robot_rl.cli import main
from robot_rl.options import flag_of

# The fields a config cannot be built without (everything else has a valid default).
REQUIRED = {configs.EvaluateConfig: {"checkpoint": "runs/ppo"}, configs.ExportConfig: {"checkpoint": "runs/ppo"},
            configs.FinetuneConfig: {"init": "runs/bc"}}
COMMAND_CONFIGS = [cls for cls in vars(configs).values()
                   if dataclasses.is_dataclass(cls) and hasattr(cls, "__post_init__")]


def _fields(kind: type) -> list[tuple[type, dataclasses.Field]]:
    return [(cls, field) for cls in COMMAND_CONFIGS for field in dataclasses.fields(cls)
            if type(field.default) is kind]


def test_every_command_config_is_covered():
    assert {cls.__name__ for cls in COMMAND_CONFIGS} >= {
        "DemoConfig", "CollectConfig", "BCConfig", "DAggerConfig", "FinetuneConfig", "EvaluateConfig", "ExportConfig",
        "ExportDatasetConfig", "PipelineConfig", "EncoderPretrainConfig"}
    for cls in COMMAND_CONFIGS:
        cls(**REQUIRED.get(cls, {}))  # the defaults are valid


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
@pytest.mark.parametrize(("cls", "field"), _fields(float), ids=lambda x: getattr(x, "__name__", getattr(x, "name", "")))
def test_every_float_option_must_be_finite(cls, field, value):
    with pytest.raises(ValueError, match=f"^{flag_of(field)} must be a finite number, got {value}$"):
        cls(**{**REQUIRED.get(cls, {}), field.name: value})


@pytest.mark.parametrize(("cls", "field"), _fields(int), ids=lambda x: getattr(x, "__name__", getattr(x, "name", "")))
def test_every_int_option_is_bounded(cls, field):
    for value in (2**40 + 1, -(2**40) - 1):
        with pytest.raises(ValueError, match=rf"^{flag_of(field)} must be in \[-2\^40, 2\^40\], got {value}$"):
            cls(**{**REQUIRED.get(cls, {}), field.name: value})


def test_env_counts_are_bounded_by_the_cpu_count(monkeypatch):
    monkeypatch.setattr("robot_rl.options.os.cpu_count", lambda: 4)
    counted = [(cls, field) for cls, field in _fields(int) if flag_of(field) == "--num-envs"]
    assert {cls.__name__ for cls, _ in counted} == {"CollectConfig", "BCConfig", "DAggerConfig", "FinetuneConfig",
                                                    "EvaluateConfig"}
    for cls, field in counted:
        with pytest.raises(ValueError, match=r"^--num-envs must be <= 32 on this machine \(8 per CPU core x 4 "
                                             r"cores, at least 16\), got 33$"):
            cls(**{**REQUIRED.get(cls, {}), field.name: 33})
    configs.CollectConfig(num_envs=32)
    monkeypatch.setattr("robot_rl.options.os.cpu_count", lambda: 1)
    configs.CollectConfig(num_envs=16)  # never below 16


@pytest.mark.parametrize(("argv", "line"), [
    (["collect-demos", "--pose-noise", "inf"], "--pose-noise must be a finite number, got inf"),
    (["finetune", "--from-scratch", "--gamma", "nan"], "--gamma must be a finite number, got nan"),
    (["evaluate", "--policy", "runs/x", "--num-envs", "100000"], "--num-envs must be <= "),
    (["collect-demos", "--seed", "99999999999999"], "--seed must be in [-2^40, 2^40], got 99999999999999"),
])
def test_the_cli_refuses_them_in_one_line(argv, line, capsys):
    assert main(argv) == 2
    stderr = capsys.readouterr().err
    errors = [text for text in stderr.splitlines() if " error: " in text]
    assert "Traceback" not in stderr and len(errors) == 1 and line in errors[0], stderr
