"""The headless GL backend MuJoCo renders with: EGL when libEGL loads, else OSMesa, else none (rendering then fails
with a clear message). MuJoCo reads ``MUJOCO_GL`` once, when ``mujoco`` is first imported, so ``robot_rl.envs``
imports this module (standard library only) before any of its modules imports mujoco, or mink, which imports it."""

from __future__ import annotations

import ctypes.util
import importlib
import os
import sys

_BACKEND_LIBRARIES = {"egl": ("EGL",), "osmesa": ("OSMesa",)}
NO_BACKEND_HINT = (
    "no headless OpenGL found for MuJoCo rendering: install Mesa's EGL (Debian: apt install libegl1 libegl-mesa0) "
    "or OSMesa (apt install libosmesa6), or set MUJOCO_GL to a backend that works here"
)


def select_gl_backend() -> str | None:
    """Sets ``MUJOCO_GL`` to a headless backend that exists here (unless the user set it) and returns it."""
    # Mesa's software rasterizer hands each frame to worker threads; for small frames the hand-off costs more than
    # it saves (84x84: 470 -> 330 us a frame, 224x224: 700 -> 590 us, rasterizing in the calling thread), and
    # env worker processes already use every core. Ignored by hardware GL drivers.
    os.environ.setdefault("LP_NUM_THREADS", "0")
    if os.environ.get("MUJOCO_GL"):
        return os.environ["MUJOCO_GL"]
    for backend, libraries in _BACKEND_LIBRARIES.items():
        if all(ctypes.util.find_library(lib) for lib in libraries):
            os.environ["MUJOCO_GL"] = backend
            if backend == "osmesa":
                os.environ.setdefault("PYOPENGL_PLATFORM", "osmesa")
            return backend
    return None


def _adopt_backend_late(backend: str) -> None:
    # mujoco was imported before robot_rl with MUJOCO_GL unset, so it bound GLFW, which needs a display. Its
    # Renderer looks the context class up on this module at construction, so pointing it at the headless
    # backend's class is enough.
    from mujoco.rendering.classic import gl_context

    gl_context.GLContext = importlib.import_module(f"mujoco.{backend}").GLContext


_MUJOCO_IMPORTED_WITHOUT_BACKEND = "mujoco" in sys.modules and not os.environ.get("MUJOCO_GL")
SELECTED_BACKEND = select_gl_backend()
if _MUJOCO_IMPORTED_WITHOUT_BACKEND and SELECTED_BACKEND:
    _adopt_backend_late(SELECTED_BACKEND)
