"""Camera-pose inverse kinematics on MuJoCo's Jacobians, with mink (differential IK as a small QP).

One control step asks for a small pose change (at most 3 cm and 0.15 rad), so one Gauss-Newton step from the
measured joint angles lands within about a millimetre, and the next step corrects what is left; mink's
configuration limit keeps the answer inside the joint ranges. About 130 us per step on one CPU core.
"""

from __future__ import annotations

import mink
import mujoco
import numpy as np


class CameraPoseIK:
    """Maps a target pose of a site (the wrist camera) to joint angles within the joint limits."""

    def __init__(self, model: mujoco.MjModel, site: str, iterations: int = 1, damping: float = 1e-4,
                 posture: np.ndarray | None = None, posture_cost: float = 0.0):
        """``posture`` (qpos) with ``posture_cost > 0`` adds a posture task: a redundant arm's null space drifts
        without one."""
        self.configuration = mink.Configuration(model)
        self.task = mink.FrameTask(site, "site", position_cost=1.0, orientation_cost=0.3)
        self.tasks = [self.task]
        if posture_cost > 0:
            posture_task = mink.PostureTask(model, cost=posture_cost)
            posture_task.set_target(np.asarray(posture, np.float64))
            self.tasks.append(posture_task)
        self.limits = [mink.ConfigurationLimit(model)]
        self.iterations, self.damping = iterations, damping
        self._lower, self._upper = model.jnt_range[:, 0].copy(), model.jnt_range[:, 1].copy()

    def solve(self, q: np.ndarray, target_pos: np.ndarray, target_quat: np.ndarray) -> np.ndarray:
        """Joint angles that put the site at ``target_pos`` (m) with orientation ``target_quat`` (wxyz), from ``q``.

        Starts from ``q`` clipped into the joint ranges (a collision can push a joint slightly past its limit,
        which would make the QP infeasible); returns that clipped ``q`` if the QP still has no solution.
        """
        q = np.clip(q, self._lower, self._upper)
        self.configuration.update(q)
        self.task.set_target(mink.SE3(wxyz_xyz=np.concatenate([target_quat, target_pos])))
        try:
            for _ in range(self.iterations):
                velocity = mink.solve_ik(self.configuration, self.tasks, 1.0, "daqp", damping=self.damping,
                                         limits=self.limits)
                self.configuration.integrate_inplace(velocity, 1.0)
        except mink.NoSolutionFound:
            return q
        return np.clip(self.configuration.q, self._lower, self._upper)
