"""The GPU an EGL renderer runs on follows the run's CUDA device (``robot_rl.envs.gl_backend``); no GPU needed."""

from __future__ import annotations

import os

import pytest

from robot_rl.envs import gl_backend
from robot_rl.envs.gl_backend import EGL_DEVICE_VARIABLE, egl_device_id, render_on_device


@pytest.mark.parametrize(("index", "visible", "expected"), [
    (0, None, 0), (1, None, 1), (0, "", 0),  # nothing hidden: the CUDA index is the physical id
    (0, "2,3", 2), (1, "2,3", 3), (1, " 5 , 7 ", 7),  # robosuite's convention: the k-th listed physical id
    (0, "1,0", 1),  # a reordered list
])
def test_in_the_drivers_order_the_id_is_the_physical_id_of_the_cuda_device(index, visible, expected):
    assert egl_device_id(index, visible, egl_orders_by_cuda=False) == expected


@pytest.mark.parametrize(("index", "visible"), [(0, None), (1, "2,3"), (0, "1,2"), (1, "1,0")])
def test_when_mujoco_orders_egl_devices_by_cuda_the_id_is_the_cuda_index(index, visible):
    # MuJoCo >= 4.0 reads an id below the number of visible devices as a visible-device index: the physical id
    # would pick cuda:1 for cuda:0 under CUDA_VISIBLE_DEVICES=1,2.
    assert egl_device_id(index, visible, egl_orders_by_cuda=True) == index


def test_a_list_of_uuids_or_mig_instances_gives_no_id():
    assert egl_device_id(0, "GPU-8d5c2a4e-1f3b", egl_orders_by_cuda=False) is None
    assert egl_device_id(1, "0,MIG-4a1e", egl_orders_by_cuda=False) is None


def test_a_cuda_index_outside_the_visible_devices_is_refused_in_one_line_naming_both():
    with pytest.raises(ValueError, match=r"cuda:2 is not among the 2 devices of CUDA_VISIBLE_DEVICES='4,5'"):
        egl_device_id(2, "4,5", egl_orders_by_cuda=False)
    with pytest.raises(ValueError, match="cuda_index must be >= 0"):
        egl_device_id(-1, None, egl_orders_by_cuda=True)


def test_the_installed_mujoco_orders_egl_devices_by_cuda():
    assert gl_backend.mujoco_orders_egl_by_cuda()  # the pinned mujoco 4.0.0


@pytest.fixture
def egl_env(monkeypatch):
    """MUJOCO_GL=egl, no EGL device chosen yet, nothing set by an earlier call."""
    monkeypatch.setenv("MUJOCO_GL", "egl")
    for name in (EGL_DEVICE_VARIABLE, "CUDA_VISIBLE_DEVICES"):
        monkeypatch.setenv(name, "")  # recorded first, so what the tests set is undone
        monkeypatch.delenv(name)
    monkeypatch.setattr(gl_backend, "_egl_device_set_here", None)
    monkeypatch.setattr(gl_backend, "mujoco_orders_egl_by_cuda", lambda: False)
    return monkeypatch


def test_a_cuda_run_sets_the_variable_for_the_processes_it_starts(egl_env):
    egl_env.setenv("CUDA_VISIBLE_DEVICES", "4,6")
    assert render_on_device("cuda:1") == "6"
    assert os.environ[EGL_DEVICE_VARIABLE] == "6"
    assert render_on_device("cuda:0") == "4"  # a later run replaces the value this module set


def test_a_value_the_user_set_is_kept(egl_env):
    egl_env.setenv(EGL_DEVICE_VARIABLE, "3")
    assert render_on_device("cuda:1") == "3"
    assert os.environ[EGL_DEVICE_VARIABLE] == "3"


@pytest.mark.parametrize(("device", "gl"), [("cpu", "egl"), ("cuda:1", "osmesa")])
def test_a_cpu_run_or_another_gl_backend_changes_nothing(egl_env, device, gl):
    egl_env.setenv("MUJOCO_GL", gl)
    assert render_on_device(device) is None
    assert EGL_DEVICE_VARIABLE not in os.environ


def test_a_list_of_uuids_leaves_the_variable_unset(egl_env):
    egl_env.setenv("CUDA_VISIBLE_DEVICES", "GPU-8d5c2a4e")
    assert render_on_device("cuda:0") is None
    assert EGL_DEVICE_VARIABLE not in os.environ
