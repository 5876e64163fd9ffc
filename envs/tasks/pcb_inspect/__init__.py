"""The PCB inspection task: its task, board (components and defects), difficulty presets and scripted expert."""

from robot_rl.envs.tasks.pcb_inspect.task import PcbInspectTask

__all__ = ["PcbInspectTask"]
