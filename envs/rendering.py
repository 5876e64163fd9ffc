"""Headless MuJoCo rendering: lazily created per-camera renderers with fast defaults, on the GL backend that
``robot_rl.envs.gl_backend`` chose before mujoco was imported.

Speed: Mesa's software renderer spends ~50 ms a frame on shadows and reflections, and its cost grows with the
offscreen buffer, MSAA samples and triangle count. Policy cameras use ``FAST`` settings (about 1,500 frames/s at
84x84 on two CPU cores, against 18 frames/s with MuJoCo's defaults); video cameras opt into ``PRETTY``.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass

import mujoco
import numpy as np

from robot_rl.envs.gl_backend import NO_BACKEND_HINT as _NO_BACKEND_HINT
from robot_rl.envs.gl_backend import SELECTED_BACKEND as _SELECTED_BACKEND

_context_owner_pid: int | None = None  # the process that created this process's first GL context
_FORKED_HINT = (
    "this process was forked after its parent rendered with MuJoCo; Mesa's GL hangs in such children. "
    "Start env workers with the 'spawn' or 'forkserver' start method (robot_rl's make_env does)."
)


def _preload_llvm_users() -> None:
    # Mesa's software rasterizer and Triton each bring an LLVM; importing triton after a Mesa context exists
    # segfaults the process. torchrl and tensordict import triton, so users hit this by importing in an
    # unlucky order. Loading triton first, when it is installed, makes every later order safe.
    try:
        import triton  # noqa: F401
    except Exception:  # noqa: BLE001 - absent or broken triton: nothing to protect against
        pass


def _check_process() -> None:
    # A process forked after its parent created a Mesa EGL context hangs at its first render. Fail loudly instead.
    global _context_owner_pid
    pid = os.getpid()
    if _context_owner_pid is None:
        _context_owner_pid = pid
    elif _context_owner_pid != pid:
        raise RuntimeError(_FORKED_HINT)


class _RenderWatchdog:
    """Ends the process with a clear message when one render call hangs (it cannot be interrupted from Python).

    EGL on NVIDIA with several renderers per process or several processes has been reported to hang on H200s
    with driver 580 (MuJoCo issue 3444). One daemon thread per process checks, once a second, how long the
    current render has been running; a render costs the hot path two attribute writes.
    """

    def __init__(self, timeout: float):
        self.timeout, self.started, self.what = timeout, None, ""
        self._thread = None

    def __enter__(self):
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._watch, name="robot_rl-render-watchdog", daemon=True)
            self._thread.start()
        self.started = time.monotonic()
        return self

    def __exit__(self, *exc):
        self.started = None

    def _watch(self) -> None:
        while True:
            time.sleep(min(1.0, self.timeout / 4))
            started = self.started
            if started is not None and time.monotonic() - started > self.timeout:
                sys.stderr.write(
                    f"robot_rl: a MuJoCo render ({self.what}) has not returned after {self.timeout:.0f} s; the GL "
                    f"driver ({os.environ.get('MUJOCO_GL')}) is stuck (EGL with several renderers can hang on "
                    "NVIDIA driver 580, MuJoCo issue 3444). Try MUJOCO_GL=osmesa, fewer env workers per GPU, "
                    "or another driver. Exiting.\n")
                sys.stderr.flush()
                os._exit(RENDER_HUNG_EXIT_CODE)


RENDER_HUNG_EXIT_CODE = 75
# Seconds a single render may take before the process is ended (ROBOT_RL_RENDER_TIMEOUT overrides).
_watchdog = _RenderWatchdog(float(os.environ.get("ROBOT_RL_RENDER_TIMEOUT", "120")))


ARM_GROUP = 1  # the moving arm: behind the wrist camera's image plane, skipped by fast renderers
ROOM_GROUP = 2  # the floor and table legs: never seen by the wrist camera, skipped by fast renderers


@dataclass(frozen=True)
class RenderQuality:
    """Settings fixed when a GL context is made (MSAA samples, primitive tessellation) and scene flags."""

    offsamples: int
    numslices: int
    numstacks: int
    shadows: bool
    reflections: bool
    hidden_groups: tuple[int, ...]  # geom groups not drawn


# Policy cameras, each setting measured on Mesa's software EGL at 84x84 on two cores: MSAA off 350 -> 725
# frames/s, coarser primitives -> 1,030, room geoms skipped -> 1,500, 8-sided primitives -> 2,000, arm skipped
# -> 2,600 (with LP_NUM_THREADS=0, below). Each geom is a few draw calls, and draw calls dominate at this size.
# Shadows alone would cost ~50 ms a frame.
FAST = RenderQuality(offsamples=0, numslices=8, numstacks=4, shadows=False, reflections=False,
                     hidden_groups=(ARM_GROUP, ROOM_GROUP))
PRETTY = RenderQuality(offsamples=4, numslices=28, numstacks=16, shadows=True, reflections=True, hidden_groups=())
# Videos without the ~50 ms of software shadows: everything drawn, nothing fancy.
PLAIN = RenderQuality(offsamples=4, numslices=16, numstacks=8, shadows=False, reflections=False, hidden_groups=())


class CameraRenderer:
    """One GL context that renders one camera at one size and quality, for any model compiled from the cell's MJCF.

    A context holds only what the model's assets give (textures, primitive meshes), which every task of the cell
    shares, so the tasks of a process share one renderer per (camera, size, quality) through
    ``shared_renderer``: fewer GL contexts and warmer caches. Built on MuJoCo's C rendering API because
    ``mujoco.Renderer`` binds a single model.
    """

    def __init__(self, camera: str, height: int, width: int, quality: RenderQuality = FAST):
        self.camera, self.height, self.width, self.quality = camera, height, width, quality
        self._gl = self._context = self._scene = None
        self._option = mujoco.MjvOption()  # draws geom groups 0-2; group 3 holds hidden board pool geoms
        for group in quality.hidden_groups:
            self._option.geomgroup[group] = 0
        self._view = mujoco.MjvCamera()
        self._view.type = mujoco.mjtCamera.mjCAMERA_FIXED
        self._rect = mujoco.MjrRect(0, 0, width, height)
        self._pixels = np.empty((height, width, 3), np.uint8)

    def _create(self, model: mujoco.MjModel) -> None:
        if _SELECTED_BACKEND is None and not os.environ.get("MUJOCO_GL"):
            raise RuntimeError(_NO_BACKEND_HINT)
        if "triton" not in sys.modules:
            _preload_llvm_users()
        _check_process()
        from mujoco.rendering.classic import gl_context

        # Buffer size, MSAA and tessellation are read from the model when the context is made: set this
        # renderer's, then put the model's values back.
        vis, q = model.vis, self.quality
        saved = (vis.global_.offwidth, vis.global_.offheight, vis.quality.offsamples, vis.quality.numslices,
                 vis.quality.numstacks)
        vis.global_.offwidth, vis.global_.offheight = self.width, self.height
        vis.quality.offsamples, vis.quality.numslices, vis.quality.numstacks = q.offsamples, q.numslices, q.numstacks
        _watchdog.what = f"creating the GL context for camera {self.camera!r}"
        try:
            with _watchdog:
                self._gl = gl_context.GLContext(self.width, self.height)
                self._gl.make_current()
                self._context = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_150)
                mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, self._context)
        except Exception as err:  # noqa: BLE001 - GL failures surface as many exception types
            raise RuntimeError(f"MuJoCo could not create a {os.environ.get('MUJOCO_GL')} GL context ({err}); "
                               f"{_NO_BACKEND_HINT}") from err
        finally:
            (vis.global_.offwidth, vis.global_.offheight, vis.quality.offsamples, vis.quality.numslices,
             vis.quality.numstacks) = saved
        self._scene = mujoco.MjvScene(model, maxgeom=1000)
        self._scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = q.shadows
        self._scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = q.reflections
        self._scene.flags[mujoco.mjtRndFlag.mjRND_SKYBOX] = False

    def render(self, model: mujoco.MjModel, data: mujoco.MjData) -> np.ndarray:
        """Returns the camera image of ``data`` (simulated with ``model``) as a new uint8 [H, W, 3] array."""
        if self._context is None:
            self._create(model)
        elif _context_owner_pid != os.getpid():
            raise RuntimeError(_FORKED_HINT)
        self._view.fixedcamid = model.camera(self.camera).id
        _watchdog.what = f"camera {self.camera!r}, {self.width}x{self.height}"
        with _watchdog:
            self._gl.make_current()
            mujoco.mjv_updateScene(model, data, self._option, None, self._view, mujoco.mjtCatBit.mjCAT_ALL,
                                   self._scene)
            mujoco.mjr_render(self._rect, self._scene, self._context)
            mujoco.mjr_readPixels(self._pixels, None, self._rect, self._context)
        return np.flipud(self._pixels).copy()  # OpenGL's rows run bottom-up

    def render_geom_ids(self, model: mujoco.MjModel, data: mujoco.MjData) -> np.ndarray:
        """The model geom drawn at each pixel of the camera image of ``data``: int32 [H, W], -1 where none is.

        MuJoCo's segmentation rendering: every drawn geom gets a flat colour encoding its index in the scene (no
        lighting, no texture), read back and mapped to geom ids. The same hidden groups as ``render``, so the ids
        label exactly the pixels of that image. Needs a renderer without MSAA (``FAST``): blended edges would
        mix ids.
        """
        if self.quality.offsamples:
            raise ValueError(f"CameraRenderer: segmentation needs a renderer without MSAA, this one has "
                             f"{self.quality.offsamples} samples")
        if self._context is None:
            self._create(model)
        elif _context_owner_pid != os.getpid():
            raise RuntimeError(_FORKED_HINT)
        self._view.fixedcamid = model.camera(self.camera).id
        _watchdog.what = f"segmentation of camera {self.camera!r}, {self.width}x{self.height}"
        flags = self._scene.flags
        with _watchdog:
            self._gl.make_current()
            mujoco.mjv_updateScene(model, data, self._option, None, self._view, mujoco.mjtCatBit.mjCAT_ALL,
                                   self._scene)
            flags[mujoco.mjtRndFlag.mjRND_SEGMENT] = flags[mujoco.mjtRndFlag.mjRND_IDCOLOR] = True
            try:
                mujoco.mjr_render(self._rect, self._scene, self._context)
                mujoco.mjr_readPixels(self._pixels, None, self._rect, self._context)
            finally:
                flags[mujoco.mjtRndFlag.mjRND_SEGMENT] = flags[mujoco.mjtRndFlag.mjRND_IDCOLOR] = False
        scene = self._scene
        # Colour c encodes the scene geom with segid c - 1; 0 is the background.
        segid_to_geom = np.full(scene.ngeom + 1, -1, np.int32)
        for index in range(scene.ngeom):
            geom = scene.geoms[index]
            if geom.segid >= 0 and geom.objtype == mujoco.mjtObj.mjOBJ_GEOM:
                segid_to_geom[geom.segid + 1] = geom.objid
        code = self._pixels.astype(np.int32)
        code = code[..., 0] + (code[..., 1] << 8) + (code[..., 2] << 16)
        np.clip(code, 0, scene.ngeom, out=code)
        return np.flipud(segid_to_geom[code]).copy()

    def close(self) -> None:
        if self._context is not None:
            with self._gl.as_current():
                self._context.free()
            self._gl.free()
        self._gl = self._context = self._scene = None


_SHARED: dict[tuple, CameraRenderer] = {}


def shared_renderer(camera: str, height: int, width: int, quality: RenderQuality = FAST) -> CameraRenderer:
    """This process's renderer for (camera, size, quality); created on first use, shared by every task here."""
    key = (camera, height, width, quality)
    if key not in _SHARED:
        _SHARED[key] = CameraRenderer(camera, height, width, quality)
    return _SHARED[key]


def close_shared_renderers() -> None:
    """Frees every shared renderer of this process (they are recreated on next use)."""
    for renderer in _SHARED.values():
        renderer.close()
    _SHARED.clear()
