"""LeRobot datasets (codebase v3.0) as training data: ``robot-rl pretrain --data`` on a LeRobot folder.

A LeRobot dataset is read once into a robot_rl demo dataset (memmapped uint8, what the training loop samples
from) inside the run folder; a resumed run reuses that copy. An export of robot_rl comes back exactly (its
``meta/robot_rl.json`` says the task, arm, difficulty and episode seeds); a dataset made elsewhere needs the
same features (``lerobot_layout.required_features()``) and names its task (a robot_rl task name) as its only
task string and its arm as ``robot_type``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import torch
from tensordict import TensorDict

from robot_rl import keys
from robot_rl.pretrain import lerobot_layout as layout
from robot_rl.pretrain.dataset import DatasetError, DemoDataset, EpisodeRecord

EPISODES_PER_WRITE = 64  # episodes decoded, then written to the memmaps together


def is_lerobot_dataset(path: str | Path) -> bool:
    return (Path(path) / layout.INFO_PATH).is_file()


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as err:
        raise DatasetError(f"{path}: unreadable ({err})") from None


def _read_tables(pq, pa, folder: Path, what: str):
    files = sorted(folder.glob("*/*.parquet"))
    if not files:
        raise DatasetError(f"{folder}: no {what} parquet files")
    try:
        return pa.concat_tables([pq.read_table(f) for f in files])
    except (OSError, pa.ArrowException) as err:
        raise DatasetError(f"{folder}: unreadable parquet ({err})") from None


class LeRobotSource:
    """A LeRobot v3.0 dataset folder, checked: its features, episodes and (for an export of ours) robot_rl meta."""

    def __init__(self, root: str | Path):
        self.pa = layout.require_pyarrow()
        import pyarrow.parquet as pq

        self.pq, self.root = pq, Path(root)
        self.info = _read_json(self.root / layout.INFO_PATH)
        version = str(self.info.get("codebase_version", ""))
        if not version.startswith("v3."):
            raise DatasetError(f"{self.root / layout.INFO_PATH}: codebase_version {version or 'missing'}, robot_rl "
                               f"reads LeRobot v3.x datasets")
        self.features = self.info.get("features") or {}
        for name in layout.required_features():
            if name not in self.features:
                raise DatasetError(f"{self.root / layout.INFO_PATH}: no feature {name!r} (robot_rl trains on "
                                   f"{', '.join(layout.required_features())})")
        image = self.features[layout.IMAGE]
        shape = list(image.get("shape", []))
        if image.get("dtype") not in ("video", "image") or len(shape) != 3 or shape[0] != shape[1] or shape[2] != 3:
            raise DatasetError(f"{self.root / layout.INFO_PATH}: {layout.IMAGE} must be a square RGB image or video "
                               f"[S, S, 3], got {image.get('dtype')} {shape}")
        self.image_size, self.video = shape[0], image["dtype"] == "video"
        if self.video and not self.info.get("video_path"):
            raise DatasetError(f"{self.root / layout.INFO_PATH}: {layout.IMAGE} is a video but video_path is missing")
        self.episodes = _read_tables(pq, self.pa, self.root / "meta/episodes", "episodes").to_pylist()
        self.episodes.sort(key=lambda row: row["episode_index"])
        if len(self.episodes) != self.info.get("total_episodes", len(self.episodes)):
            raise DatasetError(f"{self.root / 'meta/episodes'}: {len(self.episodes)} episodes, info.json says "
                               f"{self.info['total_episodes']}")
        own = self.root / layout.ROBOT_RL_PATH
        self.robot_rl = _read_json(own) if own.is_file() else None
        self.meta = self._dataset_meta()

    def _dataset_meta(self) -> dict:
        """What robot_rl's demo dataset records (task, arm, difficulty, ...), from our meta or the LeRobot one."""
        from robot_rl.envs.tasks import TaskError, get_task

        if self.robot_rl is not None:
            meta = dict(self.robot_rl.get("dataset", {}))
        else:
            tasks = self.pq.read_table(self.root / layout.TASKS_PATH).to_pylist()
            names = [row.get("__index_level_0__", row.get("task")) for row in tasks]
            if len(names) != 1:
                raise DatasetError(f"{self.root / layout.TASKS_PATH}: {len(names)} tasks; robot_rl trains on one")
            try:
                task = get_task(names[0])
            except TaskError:
                raise DatasetError(f"{self.root / layout.TASKS_PATH}: task {names[0]!r} is not a robot_rl task "
                                   f"(and {layout.ROBOT_RL_PATH} is missing)") from None
            meta = {"env": names[0], "env_version": task.version, "difficulty": "default", "randomization": "none",
                    "arm": self.info.get("robot_type") or "ur5e_like"}
        return {**meta, "image_size": self.image_size}

    def fingerprint(self) -> dict:
        """What identifies this source (a changed dataset is imported again)."""
        return {"path": str(self.root.resolve()), "total_frames": self.info.get("total_frames"),
                "total_episodes": len(self.episodes),
                "info_mtime_ns": (self.root / layout.INFO_PATH).stat().st_mtime_ns}

    # -- frames -----------------------------------------------------------------------------------------------
    def _episode_frames(self, data: dict[str, np.ndarray], row: dict, rows: np.ndarray, images: np.ndarray):
        columns = {name: values[rows] for name, values in data.items()}
        n = len(rows)
        frames = {}
        for name, values in columns.items():
            feature = self.features.get(name, {})
            if name in layout.INDEX_FEATURES or name == layout.IMAGE or feature.get("dtype") not in layout.DTYPES:
                continue
            tensor = torch.from_numpy(np.ascontiguousarray(values).astype(feature["dtype"]).reshape(n, -1))
            if name in (layout.ACTION, layout.EXPERT_ACTION):
                group = keys.ACTION if name == layout.ACTION else keys.EXPERT
                frames[group, "pose"], frames[group, "verdict"] = tensor[:, :6], tensor[:, 6].round().long()
            elif name == layout.STATE:
                frames[keys.JOINT_STATE] = tensor
            else:
                frames[layout.entry_key(name)] = tensor
        if layout.EXPERT_ACTION not in columns:  # recorded elsewhere: the executed action is the label
            frames[keys.EXPERT_POSE], frames[keys.EXPERT_VERDICT] = frames[keys.POSE], frames[keys.VERDICT]
        frames[keys.PIXELS] = torch.from_numpy(images)
        frames[keys.EPISODE] = torch.full((n,), row["episode_index"], dtype=torch.int64)
        frames[keys.STEP] = torch.arange(n)
        return TensorDict({key: value for key, value in frames.items()}, batch_size=[n])

    def _images(self, reader: layout.VideoReader, row: dict, data: dict, rows: np.ndarray) -> np.ndarray:
        if not self.video:
            import cv2

            images = [cv2.cvtColor(cv2.imdecode(np.frombuffer(cell["bytes"], np.uint8), cv2.IMREAD_COLOR),
                                   cv2.COLOR_BGR2RGB) for cell in data[layout.IMAGE][rows]]
            return np.stack(images)
        prefix = f"videos/{layout.IMAGE}"
        number = row[f"{prefix}/chunk_index"] * layout.CHUNKS_SIZE + row[f"{prefix}/file_index"]
        path = self.root / layout.file_path(self.info["video_path"], number, video_key=layout.IMAGE)
        first = round(row[f"{prefix}/from_timestamp"] * layout.FPS)
        return reader.read(path, first, len(rows))

    def write_demos(self, out: Path) -> DemoDataset:
        """Reads every episode into a new robot_rl demo dataset at ``out``, committed once: whole or absent."""
        data = self._read_data()
        rows_of = {}
        order = np.argsort(data[layout.INDEX], kind="stable")
        episode_of_row = data[layout.EPISODE_INDEX][order]
        bounds = np.flatnonzero(np.diff(episode_of_row)) + 1
        for rows in np.split(order, bounds):
            rows_of[int(data[layout.EPISODE_INDEX][rows[0]])] = rows
        seeds_and_success = (self.robot_rl or {}).get("episodes")
        dataset = DemoDataset.open_for_append(out, {**self.meta, "source": self.fingerprint()})
        reader = layout.VideoReader()
        pending, records = [], []
        try:
            for number, row in enumerate(self.episodes):
                rows = rows_of.get(row["episode_index"])
                if rows is None or len(rows) != row["length"]:
                    raise DatasetError(f"{self.root / 'data'}: episode {row['episode_index']} has "
                                       f"{0 if rows is None else len(rows)} frames, the episodes table says "
                                       f"{row['length']}")
                frames = self._episode_frames(data, row, rows, self._images(reader, row, data, rows))
                frames[keys.EPISODE] = torch.full_like(frames[keys.EPISODE], number)
                if seeds_and_success:
                    seed, success = seeds_and_success[number]
                else:
                    seed = int(frames[keys.EPISODE_SEED][0, 0])
                    success = bool(frames[(keys.NEXT, *keys.SUCCESS)][-1, 0])
                pending.append(frames)
                records.append(EpisodeRecord(0, len(rows), seed, success))
                if len(pending) == EPISODES_PER_WRITE or number == len(self.episodes) - 1:
                    dataset.add_episodes(torch.cat(pending), records)
                    pending, records = [], []
            dataset.commit()
        except BaseException:
            dataset.discard()
            raise
        finally:
            reader.close()
        return DemoDataset.open(out)

    def _read_data(self) -> dict[str, np.ndarray]:
        table = _read_tables(self.pq, self.pa, self.root / "data", "data")
        for name in (layout.INDEX, layout.EPISODE_INDEX):
            if name not in table.column_names:
                raise DatasetError(f"{self.root / 'data'}: no {name!r} column")
        missing = [n for n in layout.required_features() if n not in table.column_names and
                   not (n == layout.IMAGE and self.video)]
        if missing:
            raise DatasetError(f"{self.root / 'data'}: no {missing[0]!r} column")
        data = {}
        for name in table.column_names:
            column = table.column(name)
            if name == layout.IMAGE:
                data[name] = np.array(column.to_pylist(), dtype=object)
            elif self.pa.types.is_fixed_size_list(column.type):
                data[name] = column.combine_chunks().flatten().to_numpy().reshape(len(column), -1)
            elif self.pa.types.is_list(column.type):
                data[name] = np.array(column.to_pylist())
            else:
                data[name] = column.to_numpy()
        return data


def open_demos(data: str | Path, import_dir: str | Path) -> DemoDataset:
    """The demo dataset at ``data``: a robot_rl dataset as is, a LeRobot dataset read into ``import_dir`` (once:
    a copy of the same source is reused)."""
    if not is_lerobot_dataset(data):
        return DemoDataset.open(data)
    source = LeRobotSource(data)
    import_dir = Path(import_dir)
    try:
        existing = DemoDataset.open(import_dir)
        if existing.meta.get("source") == source.fingerprint():
            return existing
    except DatasetError:
        pass
    shutil.rmtree(import_dir, ignore_errors=True)
    return source.write_demos(import_dir)
