"""Episode videos: the wrist camera beside the third-person camera, a caption per frame, H.264 MP4 via PyAV.

Also a PNG contact sheet (a grid of frames) for READMEs and reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import av
import cv2
import numpy as np

from robot_rl.io import atomic_path

CAPTION_HEIGHT = 28
FPS = 25  # playback rate of evaluation videos


def compose_frame(wrist_hwc: np.ndarray, scene_hwc: np.ndarray, caption: str) -> np.ndarray:
    """uint8 [H + caption, H + W, 3]: the wrist image (nearest-neighbour upscaled, its pixels stay visible) left
    of the scene image, a caption bar below."""
    height = scene_hwc.shape[0]
    wrist = cv2.resize(np.ascontiguousarray(wrist_hwc), (height, height), interpolation=cv2.INTER_NEAREST)
    frame = np.concatenate([wrist, scene_hwc], axis=1)
    bar = np.full((CAPTION_HEIGHT, frame.shape[1], 3), 24, np.uint8)
    cv2.putText(bar, caption, (8, CAPTION_HEIGHT - 9), cv2.FONT_HERSHEY_SIMPLEX, 0.5, (235, 235, 235), 1,
                cv2.LINE_AA)
    frame = np.concatenate([frame, bar], axis=0)
    # H.264 with 4:2:0 chroma needs even sides.
    return frame[: frame.shape[0] // 2 * 2, : frame.shape[1] // 2 * 2]


def write_mp4(path: str | Path, frames: Sequence[np.ndarray], fps: int = FPS) -> None:
    """Encodes RGB frames (uint8 [H, W, 3], all the same size) as an H.264 MP4, written atomically."""
    if not frames:
        raise ValueError(f"{path}: no frames to encode")
    height, width = frames[0].shape[:2]
    with atomic_path(path) as tmp:
        with av.open(str(tmp), mode="w", format="mp4") as container:
            stream = container.add_stream("libx264", rate=fps)
            stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
            stream.options = {"crf": "23", "preset": "veryfast", "movflags": "+faststart"}
            for frame in frames:
                for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                    container.mux(packet)
            for packet in stream.encode():
                container.mux(packet)


def read_mp4(path: str | Path) -> tuple[int, int, int, str, float]:
    """Decodes an MP4 and returns (frames, height, width, codec name, frames per second)."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        count = sum(1 for _ in container.decode(stream))
        return count, stream.height, stream.width, stream.codec_context.name, float(stream.average_rate)


def contact_sheet(path: str | Path, frames: Sequence[np.ndarray], columns: int = 4, count: int = 8,
                  width: int = 1200) -> None:
    """A PNG grid of ``count`` frames spread over the episode, ``width`` pixels wide."""
    picks = [frames[i] for i in np.linspace(0, len(frames) - 1, min(count, len(frames))).round().astype(int)]
    rows = [picks[i : i + columns] for i in range(0, len(picks), columns)]
    blank = np.zeros_like(picks[0])
    grid = np.concatenate([np.concatenate(row + [blank] * (columns - len(row)), axis=1) for row in rows], axis=0)
    scale = width / grid.shape[1]
    grid = cv2.resize(grid, (width, int(grid.shape[0] * scale)), interpolation=cv2.INTER_AREA)
    ok, encoded = cv2.imencode(".png", cv2.cvtColor(grid, cv2.COLOR_RGB2BGR))
    if not ok:
        raise RuntimeError(f"{path}: PNG encoding failed")
    with atomic_path(path) as tmp:
        tmp.write_bytes(encoded.tobytes())
