"""Validates ``robot-rl export-dataset`` against LeRobot's own loader (not part of CI: it installs packages).

``lerobot`` does not install beside this project's torch (0.4.4 asks for torch < 2.11, 0.5+ for Python >= 3.12),
so robot_rl writes the format itself. This script installs ``lerobot==0.4.4 --no-deps`` with the packages its
dataset loader imports into a separate venv, exports a fresh demo dataset with each video codec (and with PNG
frames), loads every export there with ``LeRobotDataset(repo_id, root=...)`` offline, and compares every frame,
the episode boundaries and the episode count with the robot_rl dataset it came from: every feature it wrote, the
image within the codec's error, every other one exactly.

Video decoding: LeRobot 0.4.4 decodes through torchcodec (its pyav path needs ``torchvision.io.VideoReader``,
gone from torchvision 0.29), and torchcodec loads FFmpeg's shared libraries: the script points it at the copy
bundled in the venv's PyAV wheel, as a machine without a system FFmpeg needs.

    python benchmarks/lerobot_validation.py                 # a temporary venv (a few minutes to install)
    python benchmarks/lerobot_validation.py --venv /tmp/lerobot_venv   # reuse (or create) that venv
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from harness import Benchmark, Variant

from robot_rl import keys
from robot_rl.configs import CollectConfig
from robot_rl.dataset import DemoDataset
from robot_rl.pretrain import lerobot_layout as layout
from robot_rl.pretrain.collect import collect_demos
from robot_rl.pretrain.lerobot_export import export_dataset, frame_columns
from robot_rl.tables import markdown_table

LEROBOT = "lerobot==0.4.4"
# What lerobot.datasets.lerobot_dataset imports (its other dependencies are for robots and policies).
LOADER_PACKAGES = ["datasets>=4.0.0,<5.0.0", "huggingface-hub>=0.34.2,<0.36.0", "av>=15.0.0,<16.0.0",
                   "accelerate>=1.10.0,<2.0.0", "packaging>=24.2,<26.0", "pandas", "pillow"]
TORCH = ["torch==2.14.1", "torchvision==0.29.1"]
CODECS = ("h264", "libsvtav1", "none")

# Runs inside the LeRobot venv: loads a dataset, writes every frame and the episode table to an .npz.
CHILD = r"""
import json, sys, numpy as np
from lerobot.datasets.lerobot_dataset import LeRobotDataset
root, out = sys.argv[1], sys.argv[2]
ds = LeRobotDataset("robot_rl/demos", root=root)
items = [ds[i] for i in range(len(ds))]
image = np.stack([(it["observation.images.wrist"].numpy() * 255).round().astype(np.uint8) for it in items])
arrays = {"observation.images.wrist": image.transpose(0, 2, 3, 1)}
for name, value in items[0].items():  # every other feature the loader returns, as it returns it
    if name != "observation.images.wrist" and hasattr(value, "numpy"):
        arrays[name] = np.stack([it[name].numpy() for it in items]).reshape(len(items), -1)
episodes = ds.meta.episodes
arrays["meta/from_index"] = np.array(episodes["dataset_from_index"])
arrays["meta/to_index"] = np.array(episodes["dataset_to_index"])
np.savez(out, **arrays)
import lerobot, datasets
print(json.dumps({"len": len(ds), "num_episodes": ds.num_episodes, "fps": ds.fps, "video_backend": ds.video_backend,
                  "task": items[0]["task"], "lerobot": lerobot.__version__ if hasattr(lerobot, "__version__")
                  else "0.4.4", "datasets": datasets.__version__}))
"""

BENCHMARK = Benchmark("lerobot_validation", __doc__, variants=(
    Variant("all", (), "export-dataset with each codec, loaded by LeRobot 0.4.4 in a venv of its own"),
), common={"out": None})


def _pip(venv: Path, *args: str) -> None:
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", *args], check=True)


def prepare_venv(venv: Path) -> float:
    """Creates the LeRobot venv unless it already imports the loader; returns the seconds it took."""
    start = time.perf_counter()
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import lerobot.datasets.lerobot_dataset, torchcodec"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return 0.0
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    _pip(venv, *TORCH)
    _pip(venv, LEROBOT, "--no-deps")
    _pip(venv, *LOADER_PACKAGES)
    _pip(venv, "torchcodec==0.17.0", "--no-deps")
    return time.perf_counter() - start


def ffmpeg_library_dir(venv: Path, into: Path) -> Path:
    """Links PyAV's bundled FFmpeg libraries (``libavcodec-<hash>.so.61...``) under the names torchcodec loads."""
    into.mkdir(parents=True, exist_ok=True)
    for library in venv.glob("lib/python*/site-packages/av.libs/lib*.so*"):
        match = re.match(r"(lib(?:av|sw)\w+)-[0-9a-f]+\.so\.(\d+)", library.name)
        if match:
            link = into / f"{match[1]}.so.{match[2]}"
            if not link.exists():
                link.symlink_to(library)
    return into


def compare(demos: DemoDataset, loaded: dict) -> dict:
    """What the LeRobot loader returned against the robot_rl dataset the export came from: every feature the
    export wrote (the image within the codec's error, the rest exactly) and the episode boundaries."""
    expected = {name: value.numpy().reshape(demos.frames, -1) for name, value in frame_columns(demos.data).items()
                if name != layout.IMAGE}
    steps = demos.data[keys.STEP].numpy()
    expected.update({layout.FRAME_INDEX: steps[:, None], layout.INDEX: np.arange(demos.frames)[:, None],
                     layout.EPISODE_INDEX: demos.data[keys.EPISODE].numpy()[:, None],
                     layout.TIMESTAMP: (steps / layout.FPS).astype(np.float32)[:, None],
                     layout.TASK_INDEX: np.zeros((demos.frames, 1), np.int64)})
    mismatched = sorted(name for name, value in expected.items()
                        if name not in loaded or not np.array_equal(loaded[name], value.astype(loaded[name].dtype)))
    error = np.abs(loaded[layout.IMAGE].astype(np.int16) - demos.data[keys.PIXELS].numpy().astype(np.int16))
    return {
        "pixel_error_mean": round(float(error.mean()), 3), "pixel_error_max": int(error.max()),
        "features_compared": len(expected), "features_exact": len(expected) - len(mismatched),
        "features_not_exact": mismatched,
        "episode_boundaries_exact": bool(np.array_equal(loaded["meta/from_index"], [e.start for e in demos.episodes])
                                         and np.array_equal(loaded["meta/to_index"],
                                                            [e.start + e.length for e in demos.episodes])),
    }


def options(parser) -> None:
    parser.add_argument("--venv", type=Path, default=None, help="LeRobot venv to reuse or create (default: temporary)")
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--image-size", type=int, default=84)


def run(args) -> int:
    with tempfile.TemporaryDirectory(prefix="lerobot-validation-") as scratch:
        scratch = Path(scratch)
        venv = args.venv or scratch / "venv"
        install_s = prepare_venv(venv)
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(scratch / "hf"),
               "LD_LIBRARY_PATH": str(ffmpeg_library_dir(venv, scratch / "ffmpeg"))}
        collect_demos(CollectConfig(out=str(scratch / "demos"), episodes=args.episodes, difficulty="easy",
                                    image_size=args.image_size, num_envs=1), progress=False)
        demos = DemoDataset.open(scratch / "demos")
        rows = []
        for codec in CODECS:
            root = scratch / f"lerobot-{codec}"
            export_dataset(scratch / "demos", root, video_codec=codec, progress=False)
            child = subprocess.run([str(venv / "bin" / "python"), "-c", CHILD, str(root), str(scratch / "out.npz")],
                                   capture_output=True, text=True, env=env)
            if child.returncode != 0:
                rows.append({"codec": codec, "loaded": False, "error": child.stderr.strip().splitlines()[-1]})
                continue
            report = json.loads(child.stdout.strip().splitlines()[-1])
            with np.load(scratch / "out.npz") as loaded:
                checks = compare(demos, {name: loaded[name] for name in loaded.files})
            rows.append({"codec": codec, "loaded": True, "frames": report["len"], "episodes": report["num_episodes"],
                         "frames_match": report["len"] == demos.frames,
                         "episodes_match": report["num_episodes"] == len(demos.episodes),
                         "task": report["task"], "video_backend": report["video_backend"], **checks,
                         "lerobot": report["lerobot"], "datasets": report["datasets"]})
    print(markdown_table(rows, ["codec", "loaded", "frames", "episodes", "pixel_error_mean", "pixel_error_max",
                                "features_compared", "features_exact", "episode_boundaries_exact"]))
    all_ok = all(r.get("loaded") and r["frames_match"] and r["episodes_match"] and not r["features_not_exact"]
                 and r["episode_boundaries_exact"] for r in rows)
    BENCHMARK.write({"lerobot": LEROBOT, "episodes": args.episodes, "image_size": args.image_size,
                     "source_frames": demos.frames, "rows": rows, "all_checks_pass": all_ok,
                     "install_seconds": round(install_s, 1)}, out=args.out)
    print(f"\nall checks pass: {all_ok}; {args.out}")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(BENCHMARK.main(run, options))
