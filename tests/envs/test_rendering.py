"""Headless rendering in the orders and processes users will really use (each case in a fresh interpreter)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest


def run_python(code: str, **env) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "MUJOCO_GL"}
    environ.update(env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=environ, timeout=120)


def test_renders_when_mujoco_was_imported_first_without_a_backend():
    result = run_python("""
        import mujoco
        from robot_rl.envs.tasks.pcb_inspect import PcbInspectTask
        obs = PcbInspectTask("easy").reset(0)
        assert obs["pixels"].std() > 0
        print("ok")
    """)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr[-2000:]


def test_importing_torchrl_after_rendering_does_not_crash():
    # Mesa's and Triton's LLVMs clash when triton loads after a GL context exists; robot_rl preloads triton.
    result = run_python("""
        from robot_rl.envs.tasks.pcb_inspect import PcbInspectTask
        PcbInspectTask("easy").reset(0)
        import torchrl, triton
        print("ok")
    """)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr[-2000:]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_child_forked_after_rendering_fails_loudly_instead_of_hanging():
    result = run_python("""
        import os
        from robot_rl.envs.tasks.pcb_inspect import PcbInspectTask
        PcbInspectTask("easy").reset(0)
        pid = os.fork()
        if pid == 0:
            try:
                PcbInspectTask("easy").reset(1)
            except RuntimeError as err:
                os._exit(7 if "forked" in str(err) else 1)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status))
    """)
    assert "child 7" in result.stdout, result.stdout + result.stderr[-2000:]


def test_missing_gl_backend_gives_an_install_hint():
    result = run_python("""
        import ctypes.util
        ctypes.util.find_library = lambda name: None  # pretend neither EGL nor OSMesa is installed
        from robot_rl.envs.tasks.pcb_inspect import PcbInspectTask
        try:
            PcbInspectTask("easy").reset(0)
        except RuntimeError as err:
            print("error:", err)
    """)
    assert "no headless OpenGL found" in result.stdout and "apt install" in result.stdout, result.stderr[-2000:]


def test_a_stuck_render_ends_the_process_with_a_clear_message():
    result = run_python("""
        import time, mujoco
        from robot_rl.envs.tasks.pcb_inspect import PcbInspectTask
        task = PcbInspectTask("easy")
        task.reset(0)
        mujoco.mjr_render = lambda *args: time.sleep(30)  # a GL driver that never returns
        task.step([0, 0, 0, 0, 0, 0], 0)
        print("not reached")
    """, ROBOT_RL_RENDER_TIMEOUT="2")
    from robot_rl.envs.rendering import RENDER_HUNG_EXIT_CODE

    assert result.returncode == RENDER_HUNG_EXIT_CODE, (result.returncode, result.stderr[-2000:])
    assert "has not returned after 2 s" in result.stderr and "not reached" not in result.stdout
