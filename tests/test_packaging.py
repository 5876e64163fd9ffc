"""The package as a user installs it: a built wheel (not the editable checkout) imports under one name, carries its
MJCF and textures, and runs an env step."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = """
import sys
from pathlib import Path
import robot_rl, robot_rl.assets, robot_rl.envs, robot_rl.pretrain, robot_rl.finetune
site = Path(sys.argv[1]).resolve()
for module in (robot_rl, robot_rl.assets, robot_rl.envs, robot_rl.pretrain, robot_rl.finetune):
    assert site in Path(module.__file__).resolve().parents, (module.__name__, module.__file__)
assets = Path(robot_rl.assets.__file__).parent
assert (assets / "pcb_inspect.xml").is_file() and list((assets / "textures").glob("*.png"))
from robot_rl.envs import make_env
env = make_env(difficulty="easy", image_size=48)
rollout = env.rollout(3)  # random actions: a verdict may end the episode on any step
assert 1 <= rollout.shape[0] <= 3 and rollout.get(("next", "pixels")).shape[-3:] == (48, 48, 3)
print("ok")
"""


def test_a_built_wheel_imports_finds_its_assets_and_steps_an_env(tmp_path):
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--quiet", "-w", str(wheels), str(ROOT)],
                   check=True, timeout=300, cwd=tmp_path)
    (wheel,) = wheels.glob("robot_rl-*.whl")
    subprocess.run([*pip, "install", "--no-deps", "--quiet", "--target", str(site), str(wheel)], check=True,
                   timeout=300, cwd=tmp_path)
    assert {p.name for p in site.iterdir() if not p.name.endswith(".dist-info")} - {"bin"} == {"robot_rl"}
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(site)], capture_output=True, text=True, timeout=300,
                            cwd=tmp_path, env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "MUJOCO_GL": "egl"})
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-2000:]
