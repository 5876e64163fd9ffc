"""Episode videos: the wrist camera beside the third-person camera, a caption per frame, H.264 MP4 via PyAV.

Also a PNG contact sheet (a grid of frames) for READMEs and reports, and ``VideoRecorder``, which films the
episodes ``robot-rl evaluate`` keeps while they run.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Sequence
from pathlib import Path

import av
import cv2
import numpy as np

from robot_rl import keys
from robot_rl.configs import EvaluateConfig
from robot_rl.envs.task import Verdict
from robot_rl.io import atomic_path

CAPTION_HEIGHT = 28
FPS = 25  # playback rate of evaluation videos


def side_by_side(wrist_hwc: np.ndarray, scene_hwc: np.ndarray) -> np.ndarray:
    """uint8 [H, H + W, 3]: the wrist image (nearest-neighbour upscaled to the scene's height, its pixels stay
    visible) left of the scene image."""
    height = scene_hwc.shape[0]
    wrist = cv2.resize(np.ascontiguousarray(wrist_hwc), (height, height), interpolation=cv2.INTER_NEAREST)
    return np.concatenate([wrist, scene_hwc], axis=1)


def write_png(path: str | Path, rgb: np.ndarray) -> None:
    """Writes an RGB image (uint8 [H, W, 3]) as a PNG, atomically."""
    ok, encoded = cv2.imencode(".png", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
    if not ok:
        raise RuntimeError(f"{path}: PNG encoding failed")
    with atomic_path(path) as tmp:
        tmp.write_bytes(encoded.tobytes())


def compose_frame(wrist_hwc: np.ndarray, scene_hwc: np.ndarray, caption: str) -> np.ndarray:
    """uint8 [H + caption, H + W, 3]: ``side_by_side`` with a caption bar below."""
    frame = side_by_side(wrist_hwc, scene_hwc)
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
    write_png(path, cv2.resize(grid, (width, int(grid.shape[0] * scale)), interpolation=cv2.INTER_AREA))


def caption(index: int, step) -> str:
    """The text under a video frame: step number, reward, verdict, collision, localized."""
    nxt = step.get(keys.NEXT)
    verdict = Verdict(int(step.get(keys.VERDICT))).name.lower()
    return (f"step {index} | reward {float(nxt.get(keys.REWARD)):+.2f} | verdict {verdict} | "
            f"collision {'YES' if bool(nxt.get(keys.COLLISION)) else 'no'} | "
            f"localized {'yes' if bool(nxt.get(keys.LOCALIZED)) else 'no'}")


class VideoRecorder:
    """Films the episodes worth keeping (the first ``videos`` and failed ones, up to ``failure_videos``).

    Every env slot samples its arm's physics state between control steps (an ``ArmScene.substep_observer``, one
    ``qpos`` copy every few 4 ms substeps: cheap). When an episode ends and is kept, its sampled states are
    rendered (set, forward, render the scene and wrist cameras) before the env resets, so a video shows exactly
    the episode that was counted, smoothly: ``FPS`` frames per second of playback, ``video_slowdown`` times
    slower than real time (said in the caption). Episodes that are not kept are never rendered.
    """

    def __init__(self, env, config: EvaluateConfig, out_dir: Path, slots: int):
        from robot_rl.envs.scene import PHYSICS_TIMESTEP

        self.env, self.config, self.out_dir, self.slots = env, config, out_dir, slots
        self.height = config.video_height
        self.width = self.height * 4 // 3
        self.stride = max(1, round(1 / (FPS * config.video_slowdown * PHYSICS_TIMESTEP)))  # substeps per frame
        self.slowdown = 1 / (FPS * self.stride * PHYSICS_TIMESTEP)
        self.states: list[list[np.ndarray]] = [[] for _ in range(slots)]
        self.steps: list[list[tuple[int, str]]] = [[] for _ in range(slots)]  # (states so far, caption) per step
        self.substeps = [0] * slots
        self.episode_counts = [0] * slots
        self.failures_saved = 0
        self.written: list[str] = []
        if config.videos or config.failure_videos:
            for slot in range(slots):
                scene = env.tasks[slot].scene
                scene.substep_observer = functools.partial(self._sample, slot, scene)

    def _sample(self, slot: int, scene) -> None:
        self.substeps[slot] += 1
        if self.substeps[slot] % self.stride == 0:
            self.states[slot].append(scene.data.qpos.copy())

    def on_step(self, slot: int, step) -> None:
        text = caption(len(self.steps[slot]) + 1, step)
        if round(self.slowdown, 2) != 1:
            text += f" | {self.slowdown:g}x slower"
        self.steps[slot].append((len(self.states[slot]), text))
        if bool(step.get((keys.NEXT, keys.DONE))):
            episode = slot + self.episode_counts[slot] * self.slots
            self.episode_counts[slot] += 1
            success = bool(step.get((keys.NEXT, keys.SUCCESS)))
            if self._keep(episode, success):
                self._write(episode, success, self._render(slot))
            self.states[slot], self.steps[slot], self.substeps[slot] = [], [], 0

    def _keep(self, episode: int, success: bool) -> bool:
        if episode >= self.config.episodes:
            return False  # an extra episode of a slot that already did its share
        if not success and self.failures_saved < self.config.failure_videos:
            self.failures_saved += 1
            return True
        return episode < self.config.videos

    def _render(self, slot: int) -> list[np.ndarray]:
        """The frames of the slot's finished episode; leaves the env's state as it found it."""
        import mujoco

        from robot_rl.envs.rendering import PLAIN, PRETTY, shared_renderer
        from robot_rl.envs.scene import SCENE_CAMERA

        task = self.env.tasks[slot]
        model, data = task.scene.model, task.scene.data
        quality = PRETTY if self.config.video_quality == "pretty" else PLAIN
        scene_camera = shared_renderer(SCENE_CAMERA, self.height, self.width, quality)
        saved = data.qpos.copy(), data.qvel.copy()
        frames: list[np.ndarray] = []
        start = 0
        try:
            with task.exposure_kept():  # a metered camera runs its exposure loop at the video's frame rate
                for end, text in self.steps[slot]:
                    # A verdict step does not move the arm: its outcome is held on screen for half a second.
                    states = (self.states[slot][start:end]
                              or [self.states[slot][end - 1] if end else saved[0]] * (FPS // 2))
                    for qpos in states:
                        data.qpos[:] = qpos
                        mujoco.mj_forward(model, data)
                        wrist = task.camera_image()
                        with task.lit_as_drawn():
                            frames.append(compose_frame(wrist, scene_camera.render(model, data), text))
                    start = end
        finally:
            data.qpos[:], data.qvel[:] = saved
            mujoco.mj_forward(model, data)
        return frames

    def _write(self, episode: int, success: bool, frames: list[np.ndarray]) -> None:
        path = self.out_dir / "videos" / f"episode{episode:03d}_{'success' if success else 'failure'}.mp4"
        try:
            write_mp4(path, frames, fps=FPS)
            if not self.written:
                contact_sheet(self.out_dir / "contact_sheet.png", frames)
            self.written.append(str(path.relative_to(self.out_dir)))
        except Exception as err:  # noqa: BLE001 - any codec failure: warn, keep the metrics
            warnings.warn(f"{path}: video not written ({type(err).__name__}: {err})", stacklevel=2)
