"""LeRobot datasets (codebase v3.0) as training data: ``robot-rl pretrain --data`` on a LeRobot folder.

A LeRobot dataset is read once into a robot_rl demo dataset (memmapped uint8, what the training loop samples
from) inside the run folder; a resumed run reuses that copy. An export of robot_rl comes back exactly (its
``meta/robot_rl.json`` says the task, arm, difficulty and episode seeds); a dataset made elsewhere needs the
same features (``lerobot_layout.required_features()``) and names its task (a robot_rl task name) as its only
task string and its arm as ``robot_type``.
"""

from __future__ import annotations

import io
import json
import math
import shutil
from pathlib import Path

import numpy as np
import torch
from tensordict import TensorDict

from robot_rl import keys
from robot_rl.dataset import DatasetError, DemoDataset, EpisodeRecord
from robot_rl.dataset_checks import IMAGE_SIZES, MAX_FRAMES, is_count
from robot_rl.pretrain import lerobot_layout as layout

EPISODES_PER_WRITE = 64  # episodes decoded, then written to the memmaps together
MAX_FILE_INDEX = 10**6  # chunk and file numbers of any real dataset are far below
# The fields each path template of info.json may use (with example values: a template is checked up front).
# The families of LeRobot feature dtypes robot_rl reads ("float32", "int64", "bool", ...) and the Arrow cell types
# each admits; index columns that info.json does not declare are read as int64.
_ARROW_FAMILIES = {"float": lambda types, t: types.is_floating(t),
                   "int": lambda types, t: types.is_integer(t),
                   "bool": lambda types, t: types.is_boolean(t)}
_INDEX_DTYPE = "int64"
TEMPLATE_FIELDS = {"video_path": {"video_key": layout.IMAGE, "chunk_index": 0, "file_index": 0},
                   "data_path": {"chunk_index": 0, "file_index": 0}}


def is_lerobot_dataset(path: str | Path) -> bool:
    return (Path(path) / layout.INFO_PATH).is_file()


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as err:
        raise DatasetError(f"{path}: unreadable ({err})") from None


def _read_tables(pq, pa, root: Path, folder: Path, what: str):
    files = sorted(folder.glob("*/*.parquet"))
    if not files:
        raise DatasetError(f"{folder}: no {what} parquet files")
    files = [layout.inside_file(root, f, f"{f}") for f in files]
    try:
        return pa.concat_tables([pq.read_table(f) for f in files])
    except (OSError, pa.ArrowException) as err:
        raise DatasetError(f"{folder}: unreadable parquet ({err})") from None


def _expected_features(meta: dict) -> dict[str, tuple[torch.dtype, int]]:
    """Feature name -> (dtype, width) of every frame entry robot_rl knows, from the specs of the env the demos
    were recorded in (the joint state's width is its arm's)."""
    from robot_rl.envs.torchrl_env import proof_env

    env = proof_env(meta["difficulty"], meta["image_size"], meta["arm"], meta["env"])
    expected = {}
    per_step = {layout.flat_key(k)[0] for k in env.full_done_spec.keys(True, True)} | {keys.INFO, keys.REWARD_TERMS}
    leaves = [*env.observation_spec.items(True, True), *env.full_done_spec.items(True, True),
              *env.full_reward_spec.items(True, True)]
    for key, spec in leaves:
        key = layout.flat_key(key)
        if key == (keys.PIXELS,):
            continue
        dtype_and_width = (spec.dtype, max(1, spec.shape.numel()))
        if key[0] != keys.REWARD:
            expected[layout.feature_name(key)] = dtype_and_width
        if key[0] in per_step or key[0] == keys.REWARD:  # what a step returns is stored under next. as well
            expected[layout.feature_name((keys.NEXT, *key))] = dtype_and_width
    pose = env.full_action_spec[keys.POSE]
    for name in (layout.ACTION, layout.EXPERT_ACTION):
        expected[name] = (pose.dtype, pose.shape.numel() + 1)  # the pose, then the verdict
    env.close()
    return expected


class LeRobotSource:
    """A LeRobot v3.0 dataset folder, checked: its features, episodes and (for an export of ours) robot_rl meta."""

    def __init__(self, root: str | Path, trust_code: bool = False):
        self.pa = layout.require_pyarrow()
        self.trust_code = trust_code  # import a module:Class task the dataset names
        import pyarrow.parquet as pq

        self.pq, self.root = pq, Path(root)
        info_path = self._file(layout.INFO_PATH)
        self.info = _read_json(info_path)
        if not isinstance(self.info, dict):
            raise DatasetError(f"{info_path}: not a JSON object")
        version = str(self.info.get("codebase_version", ""))
        if not version.startswith("v3."):
            raise DatasetError(f"{info_path}: codebase_version {version or 'missing'}, robot_rl reads LeRobot v3.x "
                               f"datasets")
        if self.info.get("fps") != layout.FPS:
            raise DatasetError(f"{info_path}: fps {self.info.get('fps')}, robot_rl's envs step at {layout.FPS} Hz")
        self.features = self.info.get("features") or {}
        if not isinstance(self.features, dict):
            raise DatasetError(f"{info_path}: features must be an object")
        for field in ("total_episodes", "total_frames"):
            if field in self.info and not is_count(self.info[field], 0, MAX_FRAMES):
                raise DatasetError(f"{info_path}: {field} must be an integer in [0, 2^40], got {self.info[field]!r}")
        for field, values in TEMPLATE_FIELDS.items():
            if self.info.get(field) is not None:
                relative = layout.expand_template(self.info[field], values, f"{info_path}: {field}")
                layout.inside(self.root, self.root / relative, f"{info_path}: {field}")
        for name in layout.required_features():
            if not isinstance(self.features.get(name), dict):
                raise DatasetError(f"{info_path}: no feature {name!r} (robot_rl trains on "
                                   f"{', '.join(layout.required_features())})")
        image = self.features[layout.IMAGE]
        shape = image.get("shape")
        square = isinstance(shape, list) and len(shape) == 3 and is_count(shape[0], *IMAGE_SIZES)
        if image.get("dtype") not in ("video", "image") or not square or shape[1:] != [shape[0], 3]:
            raise DatasetError(f"{info_path}: {layout.IMAGE} must be a square RGB image or video [S, S, 3] with S in "
                               f"{IMAGE_SIZES[0]}-{IMAGE_SIZES[1]}, got {image.get('dtype')} {shape}")
        self.image_size, self.video = shape[0], image["dtype"] == "video"
        if self.video and not self.info.get("video_path"):
            raise DatasetError(f"{info_path}: {layout.IMAGE} is a video but video_path is missing")
        self.episodes = self._read_episodes()
        own = self.root / layout.ROBOT_RL_PATH
        self.robot_rl = _read_json(self._file(layout.ROBOT_RL_PATH)) if own.is_file() or own.is_symlink() else None
        if self.robot_rl is not None and (not isinstance(self.robot_rl, dict)
                                          or self.robot_rl.get("format") != layout.ROBOT_RL_FORMAT
                                          or not isinstance(self.robot_rl.get("dataset", {}), dict)):
            raise DatasetError(f"{own}: not robot_rl's meta")
        self.meta = self._dataset_meta()
        self.expected = _expected_features(self.meta)
        for name in layout.required_features():
            if name == layout.IMAGE:
                continue
            dtype, width = self.expected[name]
            declared = self.features[name]
            if _dtype_family(declared.get("dtype")) is None:
                raise DatasetError(f"{info_path}: feature {name!r} has dtype {declared.get('dtype')!r}; robot_rl "
                                   f"reads {', '.join(_ARROW_FAMILIES)} features")
            if declared.get("shape") != [width]:
                raise DatasetError(f"{info_path}: feature {name!r} has shape {declared.get('shape')}, the "
                                   f"{self.meta['env']} env with arm {self.meta['arm']} has [{width}]")

    def _file(self, relative: str) -> Path:
        """A file of the dataset by its relative path, refused if it leads outside the dataset folder."""
        return layout.inside_file(self.root, self.root / relative, str(self.root / relative))

    def _read_episodes(self) -> list[dict]:
        folder = self.root / "meta/episodes"
        episodes = _read_tables(self.pq, self.pa, self.root, folder, "episodes")
        needed = ["episode_index", "length"]
        if self.video:
            needed += [f"videos/{layout.IMAGE}/{c}" for c in ("chunk_index", "file_index", "from_timestamp")]
        missing = [name for name in needed if name not in episodes.column_names]
        if missing:
            raise DatasetError(f"{folder}: no {missing[0]!r} column")
        rows = episodes.to_pylist()
        for row in rows:
            _check_episode_row(row, folder, self.video)
        rows.sort(key=lambda row: row["episode_index"])
        if len(rows) != self.info.get("total_episodes", len(rows)):
            raise DatasetError(f"{folder}: {len(rows)} episodes, {layout.INFO_PATH} says {self.info['total_episodes']}")
        return rows

    def _dataset_meta(self) -> dict:
        """What robot_rl's demo dataset records (task, arm, difficulty, ...), from our meta or the LeRobot one."""
        from robot_rl.envs.arms import DIGEST_KEY, check_arm, get_arm
        from robot_rl.envs.tasks import TaskError, get_task

        if self.robot_rl is not None:
            meta = dict(self.robot_rl.get("dataset", {}))
        else:
            path = self._file(layout.TASKS_PATH)
            try:
                tasks = self.pq.read_table(path).to_pylist()
            except (OSError, self.pa.ArrowException) as err:
                raise DatasetError(f"{path}: unreadable ({err})") from None
            names = [row.get("__index_level_0__", row.get("task")) for row in tasks]
            if len(names) != 1 or not isinstance(names[0], str):
                raise DatasetError(f"{path}: needs one task string (the robot_rl task), has {names}")
            if ":" in names[0]:
                get_task(names[0], trust_code=self.trust_code, source=str(path))
            try:
                task = get_task(names[0])
            except TaskError:
                raise DatasetError(f"{path}: task {names[0]!r} is not a robot_rl task (and {layout.ROBOT_RL_PATH} "
                                   f"is missing)") from None
            meta = {"env": names[0], "env_version": task.version, "difficulty": "default", "randomization": "none",
                    "arm": self.info.get("robot_type")}
        for field in ("env", "arm", "difficulty", "randomization"):
            if not isinstance(meta.get(field, ""), str):
                raise DatasetError(f"{self.root / layout.ROBOT_RL_PATH}: {field} must be a string, got {meta[field]!r}")
        get_task(meta.get("env") or "", trust_code=self.trust_code, source=str(self.root / layout.ROBOT_RL_PATH))
        try:
            get_arm(meta.get("arm") or "")
        except Exception:  # noqa: BLE001 - ArmError, or a missing file: the culprit is the dataset's robot_type
            raise DatasetError(f"{self.root / layout.INFO_PATH}: robot_type {meta.get('arm')!r} is not a robot_rl arm "
                               f"(a registered name or an ArmSpec .json file)") from None
        digest = check_arm(meta["arm"], meta.get(DIGEST_KEY), str(self.root / layout.ROBOT_RL_PATH))
        if digest is not None:
            meta[DIGEST_KEY] = digest
        return {**meta, "image_size": self.image_size}

    def fingerprint(self) -> dict:
        """What identifies this source (a changed dataset is imported again)."""
        return {"path": str(self.root.resolve()), "total_frames": self.info.get("total_frames"),
                "total_episodes": len(self.episodes),
                "info_mtime_ns": (self.root / layout.INFO_PATH).stat().st_mtime_ns}

    # -- frames -----------------------------------------------------------------------------------------------
    def _episode_frames(self, data: dict[str, np.ndarray], rows: np.ndarray, images: np.ndarray,
                        number: int) -> TensorDict:
        """One episode's frames as robot_rl stores them. Features robot_rl does not know are left out."""
        n, frames = len(rows), {}
        for name, values in data.items():
            if name not in self.expected:
                continue
            dtype, width = self.expected[name]
            tensor = torch.from_numpy(np.ascontiguousarray(values[rows])).reshape(n, -1)
            if tensor.shape[1] != width:
                raise DatasetError(f"{self.root / 'data'}: {name!r} has {tensor.shape[1]} values per frame, expected "
                                   f"{width}")
            if name in (layout.ACTION, layout.EXPERT_ACTION):
                group = keys.ACTION if name == layout.ACTION else keys.EXPERT
                verdict = tensor[:, -1].round().long()
                if not ((verdict >= 0) & (verdict <= 2)).all():
                    raise DatasetError(f"{self.root / 'data'}: {name!r} holds verdicts outside 0-2")
                frames[group, "pose"], frames[group, "verdict"] = tensor[:, :-1].to(dtype), verdict
            elif name == layout.STATE:
                frames[keys.JOINT_STATE] = tensor.to(dtype)
            else:
                frames[layout.entry_key(name)] = tensor.to(dtype)
        if keys.EXPERT_POSE not in frames:  # recorded elsewhere: the executed action is the label
            frames[keys.EXPERT_POSE], frames[keys.EXPERT_VERDICT] = frames[keys.POSE], frames[keys.VERDICT]
        frames[keys.PIXELS] = torch.from_numpy(images)
        frames[keys.EPISODE] = torch.full((n,), number, dtype=torch.int64)
        frames[keys.STEP] = torch.arange(n)
        return TensorDict(frames, batch_size=[n])

    def _images(self, reader: layout.VideoReader, row: dict, data: dict, rows: np.ndarray) -> np.ndarray:
        episode = row["episode_index"]
        if self.video:
            prefix = f"videos/{layout.IMAGE}"
            source = f"{self.root / layout.INFO_PATH}: video_path"
            relative = layout.expand_template(self.info["video_path"], {
                "video_key": layout.IMAGE, "chunk_index": row[f"{prefix}/chunk_index"],
                "file_index": row[f"{prefix}/file_index"]}, source)
            path = layout.inside_file(self.root, self.root / relative, source)
            images = reader.read(path, round(row[f"{prefix}/from_timestamp"] * layout.FPS), len(rows))
        else:
            import cv2

            images = []
            for cell in data[layout.IMAGE][rows]:
                encoded = (cell or {}).get("bytes") if isinstance(cell, dict) else None
                if encoded is not None and not isinstance(encoded, bytes):
                    encoded = None
                size = self._encoded_size(encoded) if encoded else None
                if encoded and size != (self.image_size, self.image_size):
                    raise DatasetError(f"{self.root / 'data'}: episode {episode}: an image of "
                                       f"{'x'.join(map(str, size)) if size else 'no known format'}, "
                                       f"{layout.INFO_PATH} says {self.image_size}x{self.image_size}")
                image = cv2.imdecode(np.frombuffer(encoded, np.uint8), cv2.IMREAD_COLOR) if encoded else None
                if image is None:
                    raise DatasetError(f"{self.root / 'data'}: episode {episode}: an image without decodable bytes")
                images.append(cv2.cvtColor(image, cv2.COLOR_BGR2RGB))
            images = np.stack(images)
        if images.shape[1:] != (self.image_size, self.image_size, 3):
            raise DatasetError(f"{self.root}: episode {episode}: images are {list(images.shape[1:])}, "
                               f"{layout.INFO_PATH} says {[self.image_size, self.image_size, 3]}")
        return images

    @staticmethod
    def _encoded_size(encoded: bytes) -> tuple[int, int] | None:
        """(width, height) from an encoded image's header, read before anything is decoded (a small file can
        claim a huge image); None when it is no image."""
        from PIL import Image, UnidentifiedImageError

        try:
            with Image.open(io.BytesIO(encoded)) as image:
                return image.size
        except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError):
            return None

    def write_demos(self, out: Path) -> DemoDataset:
        """Reads every episode into a new robot_rl demo dataset at ``out``, committed once: whole or absent."""
        data = self._read_data()
        order = np.argsort(data[layout.INDEX], kind="stable")
        episode_of_row = data[layout.EPISODE_INDEX][order]
        rows_of = {int(data[layout.EPISODE_INDEX][rows[0]]): rows  # each episode's rows, in frame order
                   for rows in np.split(order, np.flatnonzero(np.diff(episode_of_row)) + 1)}
        dataset = DemoDataset.open_for_append(out, {**self.meta, "source": self.fingerprint()})
        reader = layout.VideoReader(size=self.image_size)
        pending, records = [], []
        try:
            for number, row in enumerate(self.episodes):
                rows = rows_of.get(row["episode_index"])
                if rows is None or len(rows) != row["length"]:
                    raise DatasetError(f"{self.root / 'data'}: episode {row['episode_index']} has "
                                       f"{0 if rows is None else len(rows)} frames, the episodes table says "
                                       f"{row['length']}")
                frames = self._episode_frames(data, rows, self._images(reader, row, data, rows), number)
                # As collect-demos records them: the board's seed, and whether the last step succeeded.
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
        """The columns of the data files robot_rl uses: name -> [frames] or [frames, D] array (images: the parquet
        cells). Each is checked against its type declared in info.json first (a column of strings where numbers
        are declared is refused naming it, not fed to torch)."""
        folder = self.root / "data"
        table = _read_tables(self.pq, self.pa, self.root, folder, "data")
        needed = [layout.INDEX, layout.EPISODE_INDEX] + [n for n in layout.required_features()
                                                         if not (n == layout.IMAGE and self.video)]
        missing = [name for name in needed if name not in table.column_names]
        if missing:
            raise DatasetError(f"{folder}: no {missing[0]!r} column")
        data = {}
        for name in table.column_names:
            if name == layout.IMAGE and not self.video:
                data[name] = np.array(table.column(name).to_pylist(), dtype=object)
            elif name in self.expected or name in (layout.INDEX, layout.EPISODE_INDEX):
                data[name] = self._numbers(table.column(name), name, folder)
        return data

    def _numbers(self, column, name: str, folder: Path) -> np.ndarray:
        """A numeric or boolean column as a [frames] or [frames, D] array, refused (naming it) unless its cells
        are all there and of the family its feature declares (numbers of robot_rl's type for the index columns)."""
        types = self.pa.types
        declared = self.features.get(name)
        dtype = declared.get("dtype") if isinstance(declared, dict) else _INDEX_DTYPE
        listed = types.is_fixed_size_list(column.type) or types.is_list(column.type) or types.is_large_list(
            column.type)
        cells = column.type.value_type if listed else column.type
        family = _dtype_family(dtype)
        if family is None:
            raise DatasetError(f"{self.root / layout.INFO_PATH}: feature {name!r} has dtype {dtype!r}; robot_rl reads "
                               f"{', '.join(_ARROW_FAMILIES)} features")
        if not _ARROW_FAMILIES[family](types, cells):
            raise DatasetError(f"{folder}: column {name!r} holds {column.type}, {layout.INFO_PATH} declares {dtype!r}")
        try:
            if column.null_count or (listed and column.combine_chunks().flatten().null_count):
                raise ValueError("empty cells")
            if types.is_fixed_size_list(column.type):
                flat = column.combine_chunks().flatten().to_numpy(zero_copy_only=False)
                return flat.reshape(len(column), -1)
            if listed:
                values = np.array(column.to_pylist())
                if values.dtype == object:
                    raise ValueError("rows of different lengths")
                return values
            return column.to_numpy()
        except (self.pa.ArrowException, ValueError, TypeError) as err:
            raise DatasetError(f"{folder}: column {name!r} unreadable ({err})") from None


def _dtype_family(dtype) -> str | None:
    """The family ("float", "int", "bool") of a LeRobot feature dtype ("float32", "uint8", ...), or None."""
    if not isinstance(dtype, str):
        return None
    family = "int" if dtype.startswith("uint") else dtype.rstrip("0123456789")
    return family if family in _ARROW_FAMILIES else None


def _check_episode_row(row: dict, folder: Path, video: bool) -> None:
    """Refuses an episodes-table row whose counts are not bounded integers (or a timestamp not a finite time)."""
    checks = [("episode_index", 0, MAX_FRAMES), ("length", 1, MAX_FRAMES)]
    if video:
        checks += [(f"videos/{layout.IMAGE}/{name}", 0, MAX_FILE_INDEX) for name in ("chunk_index", "file_index")]
    for name, low, high in checks:
        if not is_count(row.get(name), low, high):
            raise DatasetError(f"{folder}: {name} {row.get(name)!r} must be an integer in [{low}, {high}]")
    if video:
        timestamp = row.get(f"videos/{layout.IMAGE}/from_timestamp")
        if not (isinstance(timestamp, (int, float)) and math.isfinite(timestamp) and 0 <= timestamp < MAX_FRAMES):
            raise DatasetError(f"{folder}: from_timestamp {timestamp!r} is not a time in seconds")


def open_demos(data: str | Path, import_dir: str | Path, resuming: bool = False,
               trust_code: bool = False) -> DemoDataset:
    """The demo dataset at ``data``: a robot_rl dataset as is, a LeRobot dataset read into ``import_dir`` (once:
    the copy of the same source is reused; ``resuming`` a run whose source changed is refused). ``trust_code``:
    import a ``module:Class`` task the dataset names (else refused)."""
    if not is_lerobot_dataset(data):
        return DemoDataset.open(data)
    source = LeRobotSource(data, trust_code=trust_code)
    import_dir = Path(import_dir)
    try:
        existing = DemoDataset.open(import_dir)
    except DatasetError:
        existing = None
    if existing is not None and existing.meta.get("source") == source.fingerprint():
        return existing
    if existing is not None and resuming:
        raise DatasetError(f"{data}: changed since the run started (its copy in {import_dir} is of another version); "
                           f"start a new run")
    shutil.rmtree(import_dir, ignore_errors=True)
    return source.write_demos(import_dir)
