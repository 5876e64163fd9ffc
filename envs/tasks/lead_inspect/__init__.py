"""The lead-inspection task: its task, connector (pins, roof, defects), view, difficulty presets and expert."""

from robot_rl.envs.tasks.lead_inspect.task import LeadInspectTask

__all__ = ["LeadInspectTask"]
