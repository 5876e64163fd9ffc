"""The LeRobot dataset layout (codebase v3.0) as robot_rl writes and reads it: paths, feature names, video IO.

A LeRobot v3.0 dataset folder::

    meta/info.json                        codebase_version, fps, features (dtype, shape, names), totals, paths
    meta/stats.json                       per feature: min, max, mean, std, count, q01 q10 q50 q90 q99
    meta/tasks.parquet                    one row per task: task_index, the task string as the (pandas) index
    meta/episodes/chunk-000/file-000.parquet  one row per episode: length, frame range, video file and timestamps
    meta/robot_rl.json                    robot_rl's own: the demo dataset's meta (task, arm, difficulty, ...)
    data/chunk-CCC/file-FFF.parquet       one row per frame: every non-video feature
    videos/observation.images.wrist/chunk-CCC/file-FFF.mp4   the wrist camera, episodes one after another

The ``lerobot`` package does not install beside this project's torch, so the format is written and read here
with pyarrow and PyAV from its published description; LeRobot's own ``LeRobotDataset``, in a separate venv, loaded
its exports (``benchmarks/results/lerobot_validation.json``).

Feature names: the wrist image is ``observation.images.wrist``, the joint state ``observation.state``, the
executed action ``action`` (the 6 pose values, then the verdict 0 continue / 1 pass / 2 rework as a float) and the
expert's label ``expert.action`` (the same layout; it differs from ``action`` when demos were collected with pose
noise). Every other frame entry keeps its TensorDict key, joined with dots: ``next.reward``, ``next.done``,
``next.info.success``, ``task.board_pose`` (the privileged state), ...
"""

from __future__ import annotations

import os
import re
import string
from pathlib import Path

import av
import numpy as np

from robot_rl import keys
from robot_rl.envs.errors import file_problem
from robot_rl.envs.scene import CONTROL_PERIOD
from robot_rl.errors import UsageError

CODEBASE_VERSION = "v3.0"
FPS = round(1 / CONTROL_PERIOD)  # one frame per control step
CHUNKS_SIZE = 1000  # files per chunk folder
DATA_FILE_MB = 100  # a data (video) file is closed once past this size, between batches of episodes
VIDEO_FILE_MB = 200
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
EPISODES_PATH = "meta/episodes/chunk-000/file-000.parquet"
INFO_PATH, STATS_PATH, TASKS_PATH, ROBOT_RL_PATH = ("meta/info.json", "meta/stats.json", "meta/tasks.parquet",
                                                    "meta/robot_rl.json")
ROBOT_RL_FORMAT = "robot_rl-lerobot"

IMAGE = "observation.images.wrist"
STATE = "observation.state"
ACTION = "action"
EXPERT_ACTION = "expert.action"
# Indices every LeRobot dataset has (int64 unless said).
TIMESTAMP, FRAME_INDEX, EPISODE_INDEX, INDEX, TASK_INDEX = ("timestamp", "frame_index", "episode_index", "index",
                                                            "task_index")
INDEX_FEATURES = (TIMESTAMP, FRAME_INDEX, EPISODE_INDEX, INDEX, TASK_INDEX)
# Frame entries that have a LeRobot name of their own (the rest are named by their key).
NAMED_ENTRIES = {keys.PIXELS: IMAGE, keys.JOINT_STATE: STATE, keys.ACTION: ACTION, keys.EXPERT: EXPERT_ACTION,
                 keys.EPISODE: EPISODE_INDEX, keys.STEP: FRAME_INDEX}
ACTION_NAMES = ["dx", "dy", "dz", "droll", "dpitch", "dyaw", "verdict"]


def flat_key(key) -> tuple[str, ...]:
    """A TensorDict key as a flat tuple: ``("next", ("info", "success"))`` -> ``("next", "info", "success")``."""
    if isinstance(key, str):
        return (key,)
    return tuple(part for item in key for part in flat_key(item))


def feature_name(key) -> str:
    """The LeRobot feature that holds a frame entry (``keys.PIXELS`` -> ``observation.images.wrist``)."""
    key = flat_key(key)
    if key[:1] in ((keys.ACTION,), (keys.EXPERT,)):  # pose and verdict share one vector
        key = key[:1]
    return NAMED_ENTRIES.get(key[0] if len(key) == 1 else key, ".".join(key))


def entry_key(name: str) -> tuple[str, ...]:
    """The TensorDict key of a (non-named) LeRobot feature: ``next.info.success`` -> ``("next", "info", "success")``."""
    return tuple(name.split("."))


def required_features() -> list[str]:
    """The features a LeRobot dataset needs for ``pretrain`` (what a robot_rl dataset must hold, by name).
    ``expert.action`` may be missing: the executed ``action`` is the label then."""
    from robot_rl.dataset import REQUIRED_KEYS

    names = dict.fromkeys(feature_name(key) for key in (*REQUIRED_KEYS, keys.EPISODE_SEED))  # seeds: held-out boards
    names.pop(EXPERT_ACTION)
    return [ACTION] + [name for name in names if name not in INDEX_FEATURES]


def require_pyarrow():
    """pyarrow, or a one-line usage error with the install hint."""
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise UsageError("LeRobot datasets need pyarrow: pip install 'robot-rl[lerobot]'") from None
    return pyarrow


def file_indices(file_number: int) -> dict[str, int]:
    """``chunk_index`` and ``file_index`` of the ``file_number``-th data or video file (chunks of CHUNKS_SIZE)."""
    return {"chunk_index": file_number // CHUNKS_SIZE, "file_index": file_number % CHUNKS_SIZE}


def file_path(template: str, file_number: int, **fields) -> str:
    """The relative path of the ``file_number``-th data or video file."""
    return template.format(**file_indices(file_number), **fields)


_FORMAT_SPEC = re.compile(r"0?[1-9]?d?")  # what LeRobot's templates use (``:03d``), at most 9 digits wide


def expand_template(template, fields: dict, source: str) -> str:
    """A path template of a dataset's ``info.json`` expanded with ``fields`` only: plain ``{name}`` or
    ``{name:03d}``, no attribute or index access (``{video_key.__class__}``), conversion or nested field, so a file
    cannot make Python format strings read anything but the values given. ``source`` names the culprit in the
    one-line UsageError."""
    if not isinstance(template, str):
        raise UsageError(f"{source}: not a path template: {template!r}")
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as err:
        raise UsageError(f"{source}: malformed path template {template!r} ({err})") from None
    for _, name, spec, conversion in parts:
        if name is None:
            continue
        if name not in fields or conversion or not _FORMAT_SPEC.fullmatch(spec or ""):
            field = name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "")
            raise UsageError(f"{source}: path template {template!r} has field {{{field}}}; allowed: "
                             f"{', '.join(sorted(fields))} (plain, or :0Nd)")
    try:
        return template.format(**fields)
    except (ValueError, TypeError) as err:
        raise UsageError(f"{source}: path template {template!r} does not fit its values ({err})") from None


def inside(root: Path, path: Path, source: str) -> Path:
    """``path`` with symlinks resolved, refused (one-line UsageError naming ``source``) unless it lies inside the
    dataset folder ``root``: a dataset's files are its own."""
    resolved = path.resolve()
    if not resolved.is_relative_to(root.resolve()):
        raise UsageError(f"{source}: {path} leads outside the dataset folder {root}")
    return resolved


def inside_file(root: Path, path: Path, source: str) -> Path:
    """``inside``, and refused unless it is a regular file where it exists (a FIFO or device would block or never
    end when read; a missing file is left to the reader's own message)."""
    resolved = inside(root, path, source)
    problem = file_problem(resolved)
    if problem and problem != "no such file":
        raise UsageError(f"{path}: {problem}" if source == str(path) else f"{source}: {path}: {problem}")
    return resolved


class VideoWriter:
    """One MP4 of the wrist camera: frames appended episode after episode, frame k shown at k / FPS seconds (the
    timestamps LeRobot's decoders look frames up by)."""

    def __init__(self, path: Path, size: int, codec: str, crf: int):
        path.parent.mkdir(parents=True, exist_ok=True)
        os.environ.setdefault("SVT_LOG", "2")  # SVT-AV1 prints its whole configuration otherwise
        self.path, self.frames = path, 0
        self.container = av.open(str(path), mode="w", format="mp4")
        encoder = "libx264" if codec == "h264" else codec
        self.stream = self.container.add_stream(encoder, rate=FPS)
        self.stream.width = self.stream.height = size
        self.stream.pix_fmt = "yuv420p"
        # A key frame every 2 frames, as LeRobot encodes: any frame decodes after at most one other.
        self.stream.options = {"crf": str(crf), "g": "2", **({"bf": "0"} if codec == "h264" else {"preset": "8"})}

    def write(self, frames: np.ndarray) -> None:
        """Appends uint8 [N, H, W, 3] RGB frames."""
        for image in frames:
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="rgb24")
            self.container.mux(self.stream.encode(frame))  # PyAV numbers the frames at ``rate``: k / FPS s
            self.frames += 1

    def close(self) -> None:
        self.container.mux(self.stream.encode())
        self.container.close()


class VideoReader:
    """Frames of the MP4s of one dataset, read in order: ``read(path, first, count)`` decodes forward from where
    the last read stopped (episodes are stored in order), reopening a file only to go back."""

    def __init__(self, size: int | None = None):
        self.path, self.container, self.frames, self.next_index = None, None, None, 0
        self.size = size  # the frame side every video must have (checked before anything is decoded)

    def _open(self, path: Path) -> None:
        self.close()
        try:
            self.container = av.open(str(path))
        except (OSError, av.error.FFmpegError) as err:
            raise UsageError(f"{path}: unreadable video ({err})") from None
        if not self.container.streams.video:
            raise UsageError(f"{path}: no video stream")
        stream = self.container.streams.video[0]
        if self.size is not None and (stream.codec_context.width, stream.codec_context.height) != (self.size,) * 2:
            raise UsageError(f"{path}: frames are {stream.codec_context.width}x{stream.codec_context.height}, the "
                             f"dataset says {self.size}x{self.size}")
        stream.thread_type = "AUTO"
        self.path, self.frames, self.next_index = path, self.container.decode(stream), 0

    def read(self, path: Path, first: int, count: int) -> np.ndarray:
        """uint8 [count, H, W, 3]: the frames shown at first / FPS ... (first + count - 1) / FPS seconds."""
        if path != self.path or first < self.next_index:
            self._open(path)
        out = []
        try:
            for frame in self.frames:
                index = round(frame.time * FPS)
                self.next_index = index + 1
                if index < first:
                    continue
                if index != first + len(out):
                    missing = (first + len(out)) / FPS
                    raise UsageError(f"{path}: no frame at {missing:.1f} s (frames are 1/{FPS} s apart)")
                out.append(frame.to_ndarray(format="rgb24"))
                if len(out) == count:
                    return np.stack(out)
        except av.error.FFmpegError as err:
            raise UsageError(f"{path}: undecodable video ({err})") from None
        raise UsageError(f"{path}: has {self.next_index} frames, the episodes table needs {first + count}")

    def close(self) -> None:
        if self.container is not None:
            self.container.close()
            self.path, self.container = None, None
