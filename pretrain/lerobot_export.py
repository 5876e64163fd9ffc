"""``robot-rl export-dataset``: a robot_rl demo dataset as a LeRobot dataset (codebase v3.0).

Every frame entry becomes a feature (names in ``robot_rl.pretrain.lerobot_layout``); the wrist camera goes to
MP4 (H.264 by default, or LeRobot's own default AV1) or, with ``--video-codec none``, into the parquet files as
PNG images (pixels exact). The folder is built under a temporary name and renamed into place when whole.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import cv2
import numpy as np
import torch
from tensordict import TensorDictBase

from robot_rl import keys
from robot_rl.dataset import DemoDataset, remove_stale_build_dirs
from robot_rl.errors import UsageError
from robot_rl.io import write_json
from robot_rl.locks import exclusive
from robot_rl.pretrain import lerobot_layout as layout

EPISODES_PER_WRITE = 64  # episodes read from the memmaps and written together
STATS_IMAGE_FRAMES = 2000  # image statistics from at most this many frames, evenly spaced (as LeRobot samples)
QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)
CODEC_NAMES = {"h264": "h264", "libsvtav1": "av1"}  # the encoder -> the codec name info.json records


def export_dataset(data: str | Path, out: str | Path, video_codec: str = "h264", crf: int = 18,
                   progress: bool = True) -> dict:
    """Writes the demos in ``data`` as a LeRobot dataset at ``out`` (which must not exist or be empty); returns
    a summary (episodes, frames, files, bytes)."""
    pa = layout.require_pyarrow()
    dataset = DemoDataset.open(data)
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"{out}: already exists and is not empty; choose another --out")
    if video_codec != "none" and dataset.image_size % 2:
        raise UsageError(f"--video-codec {video_codec} needs an even image side, {data} has {dataset.image_size}; "
                         f"use --video-codec none (PNG frames)")
    out.parent.mkdir(parents=True, exist_ok=True)
    with exclusive(out, "LeRobot export"):  # one writer: the build folders beside ``out`` are its alone
        if out.exists() and any(out.iterdir()):  # another export finished while this one waited
            raise UsageError(f"{out}: already exists and is not empty; choose another --out")
        remove_stale_build_dirs(out)  # of exports killed before their rename
        build = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
        build.chmod(0o755)  # mkdtemp makes it private; the dataset is an ordinary folder
        try:
            summary = _Exporter(pa, dataset, build, video_codec, crf).run(progress)
            if out.exists():
                out.rmdir()
            build.rename(out)
        except BaseException:
            shutil.rmtree(build, ignore_errors=True)
            raise
    return {**summary, "out": str(out)}


def frame_columns(frames: TensorDictBase) -> dict[str, torch.Tensor]:
    """Feature name -> [N, D] (or [N, H, W, 3] for the image) tensor of a batch of frames."""
    columns = {layout.IMAGE: frames[keys.PIXELS], layout.STATE: frames[keys.JOINT_STATE]}
    for source, name in ((keys.ACTION, layout.ACTION), (keys.EXPERT, layout.EXPERT_ACTION)):
        columns[name] = torch.cat([frames[source, "pose"], frames[source, "verdict"].unsqueeze(-1).float()], -1)
    named = {layout.flat_key(key) for key in layout.NAMED_ENTRIES} | {(keys.ACTION,), (keys.EXPERT,)}
    for key, value in frames.items(include_nested=True, leaves_only=True):
        key = layout.flat_key(key)
        # Segmentation masks stay robot_rl's: LeRobot has no mask feature, and flattened they would dwarf the rest.
        if key[:1] not in named and key != (keys.SEGMENTATION,):
            columns[layout.feature_name(key)] = value.reshape(value.shape[0], -1)
    return columns


def _arrow_column(pa, values: np.ndarray):
    if values.shape[1] == 1:
        return pa.array(values[:, 0])
    return pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1)), values.shape[1])


def _png_column(pa, images: np.ndarray, first_index: int):
    encoded = []
    for offset, image in enumerate(images):
        ok, png = cv2.imencode(".png", cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
        if not ok:
            raise RuntimeError("PNG encoding failed")
        encoded.append({"bytes": png.tobytes(), "path": f"frame-{first_index + offset:06d}.png"})
    return pa.array(encoded, type=pa.struct([("bytes", pa.binary()), ("path", pa.string())]))


def _stats(values: np.ndarray) -> dict:
    """LeRobot's per-feature statistics of [N, D] values (bool min/max stay bools)."""
    numbers = values.astype(np.float64)
    stats = {"min": values.min(0).tolist(), "max": values.max(0).tolist(), "mean": numbers.mean(0).tolist(),
             "std": numbers.std(0).tolist(), "count": [len(values)]}
    for q in QUANTILES:
        stats[f"q{round(q * 100):02d}"] = np.quantile(numbers, q, axis=0).tolist()
    return stats


def _image_stats(images: np.ndarray) -> dict:
    """Per-channel statistics of uint8 [N, H, W, 3] images scaled to [0, 1], shaped (3, 1, 1) as LeRobot's
    (from each channel's 256-bin histogram: exact, and no float copy of the images)."""
    per_channel = {name: [] for name in ("min", "max", "mean", "std", *(f"q{round(q * 100):02d}" for q in QUANTILES))}
    levels = np.arange(256) / 255.0
    for channel in range(3):
        counts = np.bincount(images[..., channel].reshape(-1), minlength=256)
        present = np.flatnonzero(counts)
        mean = float((counts * levels).sum() / counts.sum())
        cdf = np.cumsum(counts) / counts.sum()
        values = {"min": levels[present[0]], "max": levels[present[-1]], "mean": mean,
                  "std": float(np.sqrt((counts * (levels - mean) ** 2).sum() / counts.sum()))}
        values.update({f"q{round(q * 100):02d}": levels[np.searchsorted(cdf, q)] for q in QUANTILES})
        for name, value in values.items():
            per_channel[name].append([[float(value)]])
    return {**per_channel, "count": [len(images)]}


class _Exporter:
    def __init__(self, pa, dataset: DemoDataset, root: Path, video_codec: str, crf: int):
        import pyarrow.parquet as pq

        self.pa, self.pq, self.dataset, self.root = pa, pq, dataset, root
        self.video_codec, self.crf = video_codec, crf
        self.task_string = str(dataset.meta["env"])
        self.data_files, self.video_files = 0, 0
        self.data_writer, self.video_writer = None, None
        self.episode_rows: list[dict] = []
        self.stat_values: dict[str, list[np.ndarray]] = {}
        self.stat_images: list[np.ndarray] = []
        self.features: dict[str, dict] = {}

    # -- files ------------------------------------------------------------------------------------------------
    def _data_path(self) -> Path:
        return self.root / layout.file_path(layout.DATA_PATH, self.data_files)

    def _video_path(self) -> Path:
        return self.root / layout.file_path(layout.VIDEO_PATH, self.video_files, video_key=layout.IMAGE)

    def _write_table(self, table) -> None:
        if self.data_writer is None:
            self._data_path().parent.mkdir(parents=True, exist_ok=True)
            self.data_writer = self.pq.ParquetWriter(self._data_path(), table.schema)
        self.data_writer.write_table(table)

    def _roll_files(self) -> None:
        """Closes the data / video file once past its size (the next episode starts a new one)."""
        if self.data_writer is not None and self._data_path().stat().st_size > layout.DATA_FILE_MB * 2**20:
            self.data_writer.close()
            self.data_writer, self.data_files = None, self.data_files + 1
        if self.video_writer is not None and self._video_path().stat().st_size > layout.VIDEO_FILE_MB * 2**20:
            self.video_writer.close()
            self.video_writer, self.video_files = None, self.video_files + 1

    # -- frames -----------------------------------------------------------------------------------------------
    def _table(self, columns: dict[str, np.ndarray], episodes: np.ndarray, steps: np.ndarray, first_index: int):
        """One parquet table of a batch of whole episodes (``episodes``, ``steps``: each frame's episode and step)."""
        pa = self.pa
        arrays, names = [], []
        for name, values in columns.items():
            if name == layout.IMAGE:
                if self.video_codec != "none":
                    continue
                arrays.append(_png_column(pa, values, first_index))
            else:
                arrays.append(_arrow_column(pa, values))
            names.append(name)
        index_columns = {layout.TIMESTAMP: (steps / layout.FPS).astype(np.float32),
                         layout.FRAME_INDEX: steps.astype(np.int64), layout.EPISODE_INDEX: episodes.astype(np.int64),
                         layout.INDEX: np.arange(first_index, first_index + len(steps), dtype=np.int64),
                         layout.TASK_INDEX: np.zeros(len(steps), np.int64)}
        for name, values in index_columns.items():
            arrays.append(pa.array(values))
            names.append(name)
            self.stat_values.setdefault(name, []).append(values[:, None])
        table = pa.Table.from_arrays(arrays, names=names)
        return table.replace_schema_metadata({"huggingface": json.dumps({"info": {"features": self._hf_features(
            columns)}})})

    def _hf_features(self, columns: dict[str, np.ndarray]) -> dict:
        # The `datasets` feature types LeRobot's loader reads the parquet files with (schema metadata).
        features = {}
        for name, values in columns.items():
            if name == layout.IMAGE:
                if self.video_codec == "none":
                    features[name] = {"_type": "Image"}
                continue
            value = {"dtype": str(values.dtype), "_type": "Value"}
            features[name] = value if values.shape[1] == 1 else {"feature": value, "length": values.shape[1],
                                                                  "_type": "List"}
        for name in layout.INDEX_FEATURES:
            features[name] = {"dtype": "float32" if name == layout.TIMESTAMP else "int64", "_type": "Value"}
        return features

    def _describe(self, columns: dict[str, np.ndarray]) -> None:
        size = self.dataset.image_size
        image = {"dtype": "image", "shape": [size, size, 3], "names": ["height", "width", "channels"]}
        if self.video_codec != "none":
            image = {**image, "dtype": "video", "info": {
                "video.height": size, "video.width": size, "video.codec": CODEC_NAMES[self.video_codec],
                "video.pix_fmt": "yuv420p", "video.is_depth_map": False, "video.fps": layout.FPS,
                "video.channels": 3, "has_audio": False}}
        self.features[layout.IMAGE] = image
        for name, values in columns.items():
            if name == layout.IMAGE:
                continue
            feature_names = None
            if name in (layout.ACTION, layout.EXPERT_ACTION):
                feature_names = layout.ACTION_NAMES
            elif name == layout.STATE:
                feature_names = _joint_state_names(self.dataset.meta.get("arm"), values.shape[1])
            self.features[name] = {"dtype": str(values.dtype), "shape": [values.shape[1]], "names": feature_names}
        for name in layout.INDEX_FEATURES:
            self.features[name] = {"dtype": "float32" if name == layout.TIMESTAMP else "int64", "shape": [1],
                                   "names": None}

    def _add_episode(self, images: np.ndarray, episode: int, first_index: int, length: int) -> None:
        """The episode's row of the episodes table (and its frames appended to the current video file)."""
        row = {"episode_index": episode, "tasks": [self.task_string], "length": length,
               **{f"data/{name}": index for name, index in layout.file_indices(self.data_files).items()},
               "dataset_from_index": first_index, "dataset_to_index": first_index + length}
        if self.video_codec != "none":
            if self.video_writer is None:
                self.video_writer = layout.VideoWriter(self._video_path(), self.dataset.image_size,
                                                       self.video_codec, self.crf)
            start = self.video_writer.frames
            self.video_writer.write(images)
            prefix = f"videos/{layout.IMAGE}"
            row.update({**{f"{prefix}/{name}": index for name, index in layout.file_indices(self.video_files).items()},
                        f"{prefix}/from_timestamp": start / layout.FPS,
                        f"{prefix}/to_timestamp": (start + length) / layout.FPS})
        row.update({"meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0})
        self.episode_rows.append(row)

    def run(self, progress: bool) -> dict:
        from tqdm import tqdm

        episodes = self.dataset.episodes
        image_stride = max(1, self.dataset.frames // STATS_IMAGE_FRAMES)
        bar = tqdm(total=len(episodes), desc="export-dataset", unit="ep", disable=not progress)
        for batch_start in range(0, len(episodes), EPISODES_PER_WRITE):
            batch = episodes[batch_start : batch_start + EPISODES_PER_WRITE]
            first, last = batch[0].start, batch[-1].start + batch[-1].length
            columns = {name: value.numpy() for name, value in frame_columns(self.dataset.data[first:last]).items()}
            if not self.features:
                self._describe(columns)
            for name, values in columns.items():
                if name == layout.IMAGE:
                    self.stat_images.append(values[(-first) % image_stride :: image_stride])
                else:
                    self.stat_values.setdefault(name, []).append(values)
            for number, episode in enumerate(batch, start=batch_start):
                images = columns[layout.IMAGE][episode.start - first : episode.start - first + episode.length]
                self._add_episode(images, number, episode.start, episode.length)
            lengths = [e.length for e in batch]
            episode_of_frame = np.repeat(np.arange(batch_start, batch_start + len(batch)), lengths)
            steps = np.concatenate([np.arange(n) for n in lengths])
            self._write_table(self._table(columns, episode_of_frame, steps, first))
            self._roll_files()  # between batches: an episode stays in one data file
            bar.update(len(batch))
        bar.close()
        for writer in (self.data_writer, self.video_writer):
            if writer is not None:
                writer.close()
        self._write_meta()
        files = [p for p in self.root.rglob("*") if p.is_file()]
        return {"episodes": len(episodes), "frames": self.dataset.frames, "files": len(files),
                "bytes": sum(p.stat().st_size for p in files)}

    # -- metadata ---------------------------------------------------------------------------------------------
    def _write_meta(self) -> None:
        pa, meta = self.pa, self.dataset.meta
        (self.root / layout.EPISODES_PATH).parent.mkdir(parents=True, exist_ok=True)
        self.pq.write_table(pa.Table.from_pylist(self.episode_rows), self.root / layout.EPISODES_PATH)
        self.pq.write_table(_tasks_table(pa, [self.task_string]), self.root / layout.TASKS_PATH)
        stats = {name: _stats(np.concatenate(parts)) for name, parts in self.stat_values.items()}
        stats[layout.IMAGE] = _image_stats(np.concatenate(self.stat_images))
        write_json(self.root / layout.STATS_PATH, stats)
        episodes = len(self.episode_rows)
        write_json(self.root / layout.INFO_PATH, {
            "codebase_version": layout.CODEBASE_VERSION, "robot_type": meta.get("arm"),
            "total_episodes": episodes, "total_frames": self.dataset.frames, "total_tasks": 1,
            "chunks_size": layout.CHUNKS_SIZE, "data_files_size_in_mb": layout.DATA_FILE_MB,
            "video_files_size_in_mb": layout.VIDEO_FILE_MB, "fps": layout.FPS, "splits": {"train": f"0:{episodes}"},
            "data_path": layout.DATA_PATH, "video_path": layout.VIDEO_PATH if self.video_codec != "none" else None,
            "features": self.features})
        dataset_meta = {k: v for k, v in meta.items() if k not in ("frames", "capacity", "storage", "episodes")}
        write_json(self.root / layout.ROBOT_RL_PATH, {
            "format": layout.ROBOT_RL_FORMAT, "dataset": dataset_meta,
            "episodes": [[e.seed, e.success] for e in self.dataset.episodes]})


def _tasks_table(pa, tasks: list[str]):
    """``meta/tasks.parquet`` as pandas writes it (LeRobot reads it with pandas): the task strings are the index."""
    table = pa.table({"task_index": pa.array(range(len(tasks)), pa.int64()), "__index_level_0__": pa.array(tasks)})
    pandas_meta = {"index_columns": ["__index_level_0__"], "column_indexes": [
        {"name": None, "field_name": None, "pandas_type": "unicode", "numpy_type": "object",
         "metadata": {"encoding": "UTF-8"}}], "columns": [
        {"name": "task_index", "field_name": "task_index", "pandas_type": "int64", "numpy_type": "int64",
         "metadata": None},
        {"name": None, "field_name": "__index_level_0__", "pandas_type": "unicode", "numpy_type": "object",
         "metadata": None}], "attributes": {}, "creator": {"library": "pyarrow", "version": pa.__version__}}
    return table.replace_schema_metadata({"pandas": json.dumps(pandas_meta)})


def _joint_state_names(arm: str | None, width: int) -> list[str] | None:
    """``<joint>.pos`` then ``<joint>.vel`` for the arm's joints (None when the arm cannot be loaded here)."""
    try:
        from robot_rl.envs.arms import get_arm

        joints = get_arm(arm or "ur5e_like").joints
    except Exception:  # noqa: BLE001 - names are a courtesy; a user's arm file may live elsewhere
        return None
    names = [f"{j}.pos" for j in joints] + [f"{j}.vel" for j in joints]
    return names if len(names) == width else None
