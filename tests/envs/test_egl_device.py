"""The GPU an EGL renderer runs on follows the run's CUDA device (``robot_rl.envs.gl_backend``); no GPU needed."""

from __future__ import annotations

import os

import pytest

from robot_rl.envs import gl_backend
from robot_rl.envs.gl_backend import EGL_DEVICE_VARIABLE, DeviceError, egl_device_id, render_on_device
from robot_rl.errors import UsageError


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


UUID = "GPU-8d5c2a4e-1f3b-4c6d-9e0f-123456789abc"
MIG = "MIG-4a1e0b2c-3d4e-5f60-7182-93a4b5c6d7e8"


@pytest.mark.parametrize("orders_by_cuda", [False, True])
@pytest.mark.parametrize("visible", [UUID, MIG, f"{UUID},{MIG}", f"{MIG},{UUID}"])
def test_a_list_of_uuids_or_mig_instances_gives_no_id_in_either_order(visible, orders_by_cuda):
    assert egl_device_id(0, visible, egl_orders_by_cuda=orders_by_cuda) is None


def test_in_cuda_order_one_uuid_or_mig_entry_leaves_the_whole_list_unmappable():
    # MuJoCo orders its EGL devices by the list only when every entry is a number; otherwise it would read the id
    # as a driver's CUDA id, so cuda:0 under "1,GPU-..." could render on another GPU than the run's.
    for visible in (f"1,{UUID}", f"{MIG},0", f"0, {MIG} ,2"):
        assert egl_device_id(0, visible, egl_orders_by_cuda=True) is None
    assert egl_device_id(1, "3, 7", egl_orders_by_cuda=True) == 1  # numbers only: the index itself


def test_in_the_drivers_order_only_the_devices_own_entry_matters():
    assert egl_device_id(0, f"2,{MIG}", egl_orders_by_cuda=False) == 2  # its physical id is known
    assert egl_device_id(1, f"2,{MIG}", egl_orders_by_cuda=False) is None
    assert egl_device_id(0, f"{UUID},2", egl_orders_by_cuda=False) is None


@pytest.mark.parametrize("orders_by_cuda", [False, True])
def test_a_cuda_index_outside_the_visible_devices_is_refused_in_one_line_naming_both(orders_by_cuda):
    for visible in ("4,5", f"{UUID},{MIG}"):
        with pytest.raises(DeviceError) as refused:
            egl_device_id(2, visible, egl_orders_by_cuda=orders_by_cuda)
        assert str(refused.value) == f"cuda:2 is not among the 2 devices of CUDA_VISIBLE_DEVICES={visible!r}"
    with pytest.raises(DeviceError, match=r"^cuda:-1 is not a CUDA device \(the index must be >= 0\)$"):
        egl_device_id(-1, None, egl_orders_by_cuda=orders_by_cuda)


def test_a_device_error_is_bad_input_the_cli_reports_in_one_line():
    # UsageError: the CLI prints its message and exits 2; ValueError: what callers caught before.
    assert issubclass(DeviceError, UsageError) and issubclass(DeviceError, ValueError)


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


@pytest.mark.parametrize("orders_by_cuda", [False, True])
@pytest.mark.parametrize("visible", [UUID, MIG])
def test_a_list_of_uuids_or_mig_instances_leaves_the_variable_unset(egl_env, orders_by_cuda, visible):
    egl_env.setattr(gl_backend, "mujoco_orders_egl_by_cuda", lambda: orders_by_cuda)
    egl_env.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert render_on_device("cuda:0") is None
    assert EGL_DEVICE_VARIABLE not in os.environ


def test_a_uuid_list_removes_the_value_this_module_set_for_an_earlier_run(egl_env):
    egl_env.setattr(gl_backend, "mujoco_orders_egl_by_cuda", lambda: True)
    egl_env.setenv("CUDA_VISIBLE_DEVICES", "4,6")
    assert render_on_device("cuda:1") == "1"
    egl_env.setenv("CUDA_VISIBLE_DEVICES", f"{UUID},{MIG}")
    assert render_on_device("cuda:1") is None  # MuJoCo's default rather than a guess
    assert EGL_DEVICE_VARIABLE not in os.environ


@pytest.mark.parametrize("visible", [UUID, "4,6"])
def test_a_value_the_user_set_is_kept_under_cuda_order_too(egl_env, visible):
    egl_env.setattr(gl_backend, "mujoco_orders_egl_by_cuda", lambda: True)
    egl_env.setenv("CUDA_VISIBLE_DEVICES", visible)
    egl_env.setenv(EGL_DEVICE_VARIABLE, "3")
    assert render_on_device("cuda:1") == "3"
    assert os.environ[EGL_DEVICE_VARIABLE] == "3"


def test_in_cuda_order_a_cuda_run_sets_the_cuda_index(egl_env):
    egl_env.setattr(gl_backend, "mujoco_orders_egl_by_cuda", lambda: True)
    egl_env.setenv("CUDA_VISIBLE_DEVICES", "4,6")
    assert render_on_device("cuda:1") == "1"
    assert os.environ[EGL_DEVICE_VARIABLE] == "1"


@pytest.mark.parametrize("orders_by_cuda", [False, True])
@pytest.mark.parametrize(("device", "visible", "message"), [
    ("cuda:2", "4,6", "cuda:2 is not among the 2 devices of CUDA_VISIBLE_DEVICES='4,6'"),
    ("cuda:x", None, "device 'cuda:x': 'x' is not a CUDA device index"),
    ("cuda:-1", None, "device 'cuda:-1': '-1' is not a CUDA device index"),
])
def test_a_device_this_process_cannot_have_is_one_line_of_usage_error(egl_env, orders_by_cuda, device, visible,
                                                                       message):
    egl_env.setattr(gl_backend, "mujoco_orders_egl_by_cuda", lambda: orders_by_cuda)
    if visible is not None:
        egl_env.setenv("CUDA_VISIBLE_DEVICES", visible)
    with pytest.raises(UsageError) as refused:
        render_on_device(device)
    assert str(refused.value) == message
    assert EGL_DEVICE_VARIABLE not in os.environ
