"""The labelled views of an encoder pretraining run, cached on disk as uint8 / float32 memmaps.

::

    views/
      views.json           what is committed: views rendered, boards (chunks) used, seconds, the render options
      pixels.npy           uint8 [views, H, W, 3]
      segmentation.npy     uint8 [views, H, W]
      <target>.npy         one per perception target (robot_rl.envs.perception.PERCEPTION_TARGETS)

Files are created at full size (disk blocks allocated up front: a full disk stops the run before it writes), then
filled a few boards at a time; ``views.json`` is replaced atomically after each batch, so a killed render keeps
what it committed and the same command renders the rest. A board's views depend only on (seed, board index), so
the cache equals one rendered without interruption. Rendering runs here or in ``workers`` spawned processes (a
forked child of a process that rendered would hang, see ``robot_rl.envs.rendering``).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from robot_rl.envs.perception import PERCEPTION_TARGETS
from robot_rl.errors import NoSpaceLeft, UsageError
from robot_rl.io import check_space, write_json
from robot_rl.processes import workers_ignore_stop_signals

VIEWS_DIR, VIEWS_META = "views", "views.json"
CHUNKS_PER_COMMIT = 8

_RENDERERS: dict = {}  # per process: the ViewRenderer of each option set


def _render_chunk(job: tuple) -> dict[str, np.ndarray]:
    """Renders one board's views (in this process or a worker): ``job`` is (renderer options, seed, index)."""
    from robot_rl.envs.views import ViewRenderer

    options, seed, index = job
    key = tuple(sorted(options.items()))
    if key not in _RENDERERS:
        _RENDERERS[key] = ViewRenderer(**options)
    return _RENDERERS[key].chunk(seed, index)


def entry_layouts(image_size: int) -> dict[str, tuple[np.dtype, tuple[int, ...]]]:
    """Name -> (dtype, shape of one view) of every cached entry."""
    layouts = {"pixels": (np.dtype(np.uint8), (image_size, image_size, 3)),
               "segmentation": (np.dtype(np.uint8), (image_size, image_size))}
    layouts.update({name: (np.dtype(dtype), shape) for name, (dtype, shape, _) in PERCEPTION_TARGETS.items()})
    return layouts


class ViewCache:
    """The ``views/`` folder of a run: ``render`` fills it, ``arrays`` reads it (memory-mapped)."""

    def __init__(self, folder: str | Path, views: int, image_size: int, render_options: dict, seed: int):
        self.folder, self.views, self.image_size = Path(folder), views, image_size
        self.render_options, self.seed = dict(render_options), seed
        self.layouts = entry_layouts(image_size)
        meta_path = self.folder / VIEWS_META
        if meta_path.is_file():
            try:
                self.meta = json.loads(meta_path.read_text())
            except json.JSONDecodeError as err:
                raise UsageError(f"{meta_path}: corrupt JSON ({err})") from None
            recorded = {k: self.meta.get(k) for k in ("views", "image_size", "seed", "render")}
            wanted = {"views": views, "image_size": image_size, "seed": seed, "render": self.render_options}
            if recorded != wanted:
                raise UsageError(f"{meta_path}: a cache of other views ({recorded}, this run wants {wanted})")
        else:
            self.meta = {"views": views, "image_size": image_size, "seed": seed, "render": self.render_options,
                         "rendered": 0, "chunks": 0, "seconds": 0.0}

    @property
    def complete(self) -> bool:
        return self.meta["rendered"] >= self.views

    def allocate(self) -> None:
        """Creates the cache's files at full size (the ones missing); refuses views that cannot fit on the disk."""
        self.folder.mkdir(parents=True, exist_ok=True)
        sizes = {name: self.views * dtype.itemsize * int(np.prod(shape)) for name, (dtype, shape) in
                 self.layouts.items()}
        missing = {name: size for name, size in sizes.items() if not (self.folder / f"{name}.npy").is_file()}
        try:
            check_space(self.folder, sum(missing.values()))
        except NoSpaceLeft as err:  # before anything is written: the asked views cannot fit here at all
            raise UsageError(f"{self.folder}: {self.views:,} views need ~{err.needed / 1e9:,.1f} GB of disk, "
                             f"{shutil.disk_usage(self.folder).free / 1e9:,.1f} GB free there; use fewer --views "
                             "or free some space") from None
        for name in missing:
            dtype, shape = self.layouts[name]
            array = np.lib.format.open_memmap(self.folder / f"{name}.npy.tmp", mode="w+", dtype=dtype,
                                              shape=(self.views, *shape))
            del array
            path = self.folder / f"{name}.npy.tmp"
            with open(path, "r+b") as handle:  # allocate the blocks now (no SIGBUS on a full disk later)
                os.posix_fallocate(handle.fileno(), 0, path.stat().st_size)
            path.rename(self.folder / f"{name}.npy")

    def arrays(self, mode: str = "r") -> dict[str, np.memmap]:
        """Every entry as a memmap of shape [views, ...] (only ``meta['rendered']`` rows are filled)."""
        arrays = {}
        for name, (dtype, shape) in self.layouts.items():
            path = self.folder / f"{name}.npy"
            try:
                array = np.load(path, mmap_mode=mode, allow_pickle=False)
            except (OSError, ValueError) as err:
                raise UsageError(f"{path}: unreadable view cache ({type(err).__name__}: {err})") from None
            if array.dtype != dtype or array.shape != (self.views, *shape):
                raise UsageError(f"{path}: {array.dtype} {list(array.shape)}, expected {dtype} "
                                 f"{[self.views, *shape]}")
            arrays[name] = array
        return arrays

    def render(self, workers: int = 1, should_stop: Callable[[], bool] = lambda: False,
               on_views: Callable[[int], None] = lambda n: None, chunks_per_commit: int = CHUNKS_PER_COMMIT) -> bool:
        """Renders the views still missing, committing every ``chunks_per_commit`` boards; returns whether the
        cache is complete (False when ``should_stop`` asked to stop first). ``on_views(n)`` is told of every n
        views written."""
        if self.complete:
            return True
        self.allocate()
        arrays = self.arrays(mode="r+")
        pool = None
        if workers > 1:
            with workers_ignore_stop_signals():
                pool = multiprocessing.get_context("spawn").Pool(workers)
        try:
            while not self.complete and not should_stop():
                start = time.perf_counter()
                first = self.meta["chunks"]
                jobs = [(self.render_options, self.seed, i) for i in range(first, first + chunks_per_commit)]
                chunks = pool.imap(_render_chunk, jobs) if pool is not None else map(_render_chunk, jobs)
                written = 0
                for chunk in chunks:
                    row = self.meta["rendered"] + written
                    take = min(len(chunk["pixels"]), self.views - row)
                    for name, array in arrays.items():
                        array[row:row + take] = chunk[name][:take]
                    written += take
                    self.meta["chunks"] += 1
                    on_views(take)
                    if row + take >= self.views:
                        break
                for array in arrays.values():
                    array.flush()
                self.meta["rendered"] += written
                self.meta["seconds"] = round(self.meta["seconds"] + time.perf_counter() - start, 2)
                write_json(self.folder / VIEWS_META, self.meta)
        finally:
            if pool is not None:
                pool.terminate()
                pool.join()
        return self.complete
