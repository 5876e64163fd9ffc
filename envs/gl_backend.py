"""The headless GL backend MuJoCo renders with: EGL when libEGL loads, else OSMesa, else none (rendering then fails
with a clear message). MuJoCo reads ``MUJOCO_GL`` once, when ``mujoco`` is first imported, so ``robot_rl.envs``
imports this module (standard library and ``robot_rl.envs.errors`` only) before any of its modules imports mujoco,
or mink, which imports it.

Under EGL, the GPU a process renders on is ``MUJOCO_EGL_DEVICE_ID``, read when the process makes its first GL
context: ``render_on_device`` points it at a run's CUDA device before env workers start (they inherit it).
A CUDA device that is not among ``CUDA_VISIBLE_DEVICES`` is bad input: ``DeviceError``, a ``UsageError`` (one line,
exit 2 from the CLI).
"""

from __future__ import annotations

import ctypes.util
import importlib
import importlib.metadata
import os
import sys

from robot_rl.envs.errors import UsageError

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


EGL_DEVICE_VARIABLE = "MUJOCO_EGL_DEVICE_ID"
_egl_device_set_here: str | None = None  # the value render_on_device wrote (any other value is the user's)


class DeviceError(UsageError, ValueError):
    """A CUDA device this process cannot have: a negative or unreadable index, or one past the devices that
    ``CUDA_VISIBLE_DEVICES`` lists. The message names the device (and the list)."""


def egl_device_id(cuda_index: int, cuda_visible_devices: str | None, egl_orders_by_cuda: bool) -> int | None:
    """The ``MUJOCO_EGL_DEVICE_ID`` that renders on CUDA device ``cuda_index`` of this process (``cuda:K``).

    ``egl_orders_by_cuda``: MuJoCo's EGL module lists the EGL devices in this process's CUDA order (MuJoCo >= 4.0,
    where the driver says which CUDA device backs each EGL device), so the id is ``cuda_index`` itself. Otherwise
    the EGL devices come in the driver's order, which ignores ``CUDA_VISIBLE_DEVICES``: the id is the physical id
    of ``cuda_index``, ``cuda_visible_devices.split(',')[cuda_index]`` (robosuite's convention), or
    ``cuda_index`` when the variable is unset or empty.

    None where no id can be derived, so that the caller keeps MuJoCo's default device: in CUDA order, when any
    entry is not a device number (a UUID ``GPU-...``, a MIG instance ``MIG-...``): MuJoCo then cannot order its
    EGL devices by the list and would read the id as a driver's CUDA id, not this process's index; in the
    driver's order, when the entry of ``cuda_index`` is not a number. Raises ``DeviceError`` for a negative
    ``cuda_index`` or one past the listed devices."""
    if cuda_index < 0:
        raise DeviceError(f"cuda:{cuda_index} is not a CUDA device (the index must be >= 0)")
    entries = [entry.strip() for entry in (cuda_visible_devices or "").split(",") if entry.strip()]
    if entries and cuda_index >= len(entries):
        raise DeviceError(f"cuda:{cuda_index} is not among the {len(entries)} devices of "
                          f"CUDA_VISIBLE_DEVICES={cuda_visible_devices!r}")
    if not entries:
        return cuda_index
    if egl_orders_by_cuda:  # MuJoCo orders by the list only when every entry is a number (mujoco.egl)
        return cuda_index if all(entry.isdigit() for entry in entries) else None
    physical = entries[cuda_index]
    return int(physical) if physical.isdigit() else None


def mujoco_orders_egl_by_cuda() -> bool:
    """Whether the installed MuJoCo lists EGL devices in CUDA order (4.0 and later), read from its version without
    importing it (this module runs before mujoco is imported)."""
    try:
        major = importlib.metadata.version("mujoco").split(".")[0]
    except importlib.metadata.PackageNotFoundError:
        return True
    return not major.isdigit() or int(major) >= 4


def render_on_device(device) -> str | None:
    """Makes the processes started from now on (env workers) and this one, if it has not rendered yet, render on
    the GPU of torch device ``device`` (a ``torch.device`` or its string: ``cuda``, ``cuda:1``) under EGL, by
    setting ``MUJOCO_EGL_DEVICE_ID`` (``egl_device_id``). A value the user set is kept; a CPU device, another GL
    backend or a ``CUDA_VISIBLE_DEVICES`` of UUIDs or MIG instances change nothing. Returns the variable's value in
    force (None: unset). Raises ``DeviceError`` for a CUDA device this process cannot have (``egl_device_id``)."""
    global _egl_device_set_here
    current = os.environ.get(EGL_DEVICE_VARIABLE)
    kind, _, index = str(device).partition(":")
    if kind != "cuda" or os.environ.get("MUJOCO_GL") != "egl" or current not in (None, _egl_device_set_here):
        return current
    if not index:  # plain "cuda" is torch's current device; torch is loaded wherever a CUDA device is named
        import torch

        index = str(torch.cuda.current_device())
    if not index.isdigit():
        raise DeviceError(f"device {str(device)!r}: {index!r} is not a CUDA device index")
    egl = egl_device_id(int(index), os.environ.get("CUDA_VISIBLE_DEVICES"), mujoco_orders_egl_by_cuda())
    if egl is None:
        os.environ.pop(EGL_DEVICE_VARIABLE, None)  # (only ever ours here: the user's returned above)
        _egl_device_set_here = None
        return None
    os.environ[EGL_DEVICE_VARIABLE] = _egl_device_set_here = str(egl)
    return _egl_device_set_here


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
