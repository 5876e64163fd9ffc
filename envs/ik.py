"""Camera-pose inverse kinematics on MuJoCo's Jacobians: differential IK as a small QP, mink's formulation.

One control step asks for a small pose change (at most 3 cm and 0.15 rad), so one Gauss-Newton step from the
measured joint angles lands within about a millimetre, and the next step corrects what is left; mink's
configuration limit keeps the answer inside the joint ranges.

``MinkCameraPoseIK`` builds that QP with mink and solves it through qpsolvers (the reference, ~50 us a call on one
CPU core, mostly Python around a few-microsecond QP). ``CameraPoseIK`` builds the same QP with the same numerical
operations in the same order into preallocated arrays and calls the DAQP solver directly: its answers equal the
reference's bit for bit (``tests/envs/test_step_speedups.py`` compares them) in about a third of the time
(``benchmarks/env_step.py``). ``camera_ik`` builds either for a scene's arm, as the tasks set it up.
"""

from __future__ import annotations

from ctypes import c_int
from typing import TYPE_CHECKING

import daqp
import mink
import mink.configuration
import mink.tasks.frame_task
import mujoco
import numpy as np

from robot_rl.envs.arms import CAMERA_SITE

if TYPE_CHECKING:
    from robot_rl.envs.scene import ArmScene

try:  # the ufunc np.clip dispatches to, without its argument handling (a tenth of its time on small arrays)
    from numpy._core.umath import clip as _clip
except ImportError:
    _clip = np.clip

_DAQP_NO_LOWER_BOUND = -1e30  # what qpsolvers hands DAQP for one-sided inequalities


class MinkCameraPoseIK:
    """Maps a target pose of a site (the wrist camera) to joint angles within the joint limits, through mink."""

    def __init__(self, model: mujoco.MjModel, site: str, iterations: int = 1, damping: float = 1e-4,
                 posture: np.ndarray | None = None, posture_cost: float = 0.0):
        """``iterations`` Gauss-Newton steps of ``damping`` (Levenberg-Marquardt, on every joint); ``posture``
        (qpos) with ``posture_cost > 0`` adds a posture task: a redundant arm's null space drifts without one."""
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
        return self._solve_with_mink(np.clip(q, self._lower, self._upper), target_pos, target_quat)

    def _solve_with_mink(self, q: np.ndarray, target_pos: np.ndarray, target_quat: np.ndarray) -> np.ndarray:
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


def _lie_ops():
    """mink's compiled SE(3) operations when mink itself uses them (None where it runs its Python fallback)."""
    native = mink.tasks.frame_task._native
    return native if native is not None and mink.configuration._native is native else None


_LIE_OPS = _lie_ops()  # mink decides once, when it is imported


class CameraPoseIK(MinkCameraPoseIK):
    """``MinkCameraPoseIK``'s answers, bit for bit, without mink's per-call Python.

    Each array below is what mink computes at the same place (``mink.solve_ik`` with a ``FrameTask``, an
    optional ``PostureTask`` and a ``ConfigurationLimit``), by the same NumPy/BLAS call on arrays of the same shape
    and layout; only the allocation and dispatch around them is gone. Models this mirror does not cover (joints
    other than hinges and slides, equality constraints, mink without its compiled SE(3) operations) and unusual
    inputs (targets that are not float64 [7] once joined) go to mink unchanged.
    """

    def __init__(self, model: mujoco.MjModel, site: str, iterations: int = 1, damping: float = 1e-4,
                 posture: np.ndarray | None = None, posture_cost: float = 0.0):
        super().__init__(model, site, iterations, damping, posture, posture_cost)
        self.model = model
        self.data = self.configuration.data  # mink's scratch data: every solve starts by setting its qpos
        self.site_id = model.site(site).id
        one_dof_joints = np.isin(model.jnt_type, (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE)).all()
        self._mirrored = _LIE_OPS is not None and bool(one_dof_joints) and model.neq == 0 and model.nq == model.nv
        nv = model.nv
        self._posture = self.tasks[1] if len(self.tasks) > 1 else None
        # The stacked weighted Jacobian W of mink's objective (H = W^T W): the frame task's rows change every
        # call, the posture task's rows (its cost times the identity) never do.
        rows = 6 + (nv if self._posture is not None else 0)
        self._weighted_jacobian = np.empty((rows, nv))
        self._weighted_error = np.empty(rows)
        self._jacobian = np.empty((6, nv))
        if self._posture is not None:
            self._weighted_jacobian[6:] = self._posture.cost[:, None] * np.eye(nv)
        self._diagonal = slice(None, None, nv + 1)
        limit = self.limits[0]
        if limit.projection_matrix is None or len(limit._ball_qposadr):
            self._mirrored = False
        else:
            self._limited, self._limit_gain = limit.indices, limit.gain
            self._limit_lower, self._limit_upper = limit.lower, limit.upper
            self._limit_rows = np.vstack([limit.projection_matrix, -limit.projection_matrix])
            self._no_lower_bound = np.full(len(self._limit_rows), _DAQP_NO_LOWER_BOUND)
            self._sense = np.zeros(len(self._limit_rows), dtype=c_int)
            self._bounds = np.empty(len(self._limit_rows))

    def solve(self, q: np.ndarray, target_pos: np.ndarray, target_quat: np.ndarray) -> np.ndarray:
        """Joint angles that put the site at ``target_pos`` (m) with orientation ``target_quat`` (wxyz), from ``q``.

        Starts from ``q`` clipped into the joint ranges (a collision can push a joint slightly past its limit,
        which would make the QP infeasible); returns that clipped ``q`` if the QP still has no solution.
        """
        q = _clip(q, self._lower, self._upper)
        target = np.concatenate((target_quat, target_pos))
        if not self._mirrored or target.dtype != np.float64 or target.shape != (7,):
            return self._solve_with_mink(q, target_pos, target_quat)
        m, d = self.model, self.data
        d.qpos = q
        for _ in range(self.iterations):
            mujoco.mj_kinematics(m, d)
            mujoco.mj_comPos(m, d)
            step = self._newton_step(target)
            if step is None:
                return q
            mujoco.mj_integratePos(m, d.qpos, step, 1.0)
        return _clip(d.qpos, self._lower, self._upper)

    def _newton_step(self, target: np.ndarray) -> np.ndarray | None:
        """One QP step from the current ``data``, as ``mink.solve_ik(..., dt=1.0)`` computes it; None where the
        QP has no solution."""
        ops, m, d, site = _LIE_OPS, self.model, self.data, self.site_id
        # FrameTask._error_and_jacobian
        xmat = d.site_xmat[site]
        frame = ops.xmat_xpos_to_wxyz_xyz(xmat, d.site_xpos[site])
        jac = self._jacobian
        mujoco.mj_jacSite(m, d, jac[:3], jac[3:], site)
        jac = ops.se3_rotation_adjoint_from_xmat(xmat) @ jac
        error = ops.se3_rminus(target, frame)
        jacobian = -ops.se3_jlog(ops.se3_inverse_multiply(target, frame)) @ jac
        # Task._weighted_residual of each task, stacked as _compute_qp_objective stacks them
        task, weighted, errors = self.task, self._weighted_jacobian, self._weighted_error
        np.multiply(task.cost[:, None], jacobian, out=weighted[:6])
        frame_error = np.multiply(task.cost, -task.gain * error, out=errors[:6])
        mu_total = 0.0
        mu_total += task.lm_damping * float(frame_error @ frame_error)
        q = d.qpos.copy()
        posture = self._posture
        if posture is not None:
            posture_error = np.multiply(posture.cost, -posture.gain * np.subtract(q, posture.target_q),
                                        out=errors[6:])  # q - target is mj_differentiatePos for hinges and slides
            mu_total += posture.lm_damping * float(posture_error @ posture_error)
        hessian = weighted.T @ weighted
        linear = -(errors @ weighted)
        hessian.flat[self._diagonal] += self.damping + mu_total
        # ConfigurationLimit.compute_qp_inequalities: G = [P; -P], h = gain * [upper - q; q - lower] on limited dofs
        bounds, limited, k = self._bounds, self._limited, len(self._limited)
        np.multiply(self._limit_gain, np.subtract(self._limit_upper, q)[limited], out=bounds[:k])
        np.multiply(self._limit_gain, np.subtract(q, self._limit_lower)[limited], out=bounds[k:])
        # qpsolvers' daqp_solve_problem with inequalities only
        x, _, exitflag, _ = daqp.solve(hessian, linear, self._limit_rows, bounds, self._no_lower_bound, self._sense,
                                       primal_start=None)
        return x if exitflag > 0 else None  # x is mink's velocity times dt = 1


def camera_ik(scene: ArmScene, iterations: int = 1, model: mujoco.MjModel | None = None,
              reference: bool = False) -> CameraPoseIK | MinkCameraPoseIK:
    """The wrist camera's IK for ``scene``'s arm, with its posture task towards the arm's home (the arm's
    ``posture_cost``): ``CameraPoseIK``, or mink's ``MinkCameraPoseIK`` with ``reference``. ``model`` (default:
    the scene's) is a variant of the scene's model with the same joints, for tests that change its limits."""
    model = model or scene.model
    posture = np.zeros(model.nq)  # the arm's joints are the model's only joints
    posture[scene.joint_qpos_ids] = scene.home
    kind = MinkCameraPoseIK if reference else CameraPoseIK
    return kind(model, CAMERA_SITE, iterations=iterations, posture=posture, posture_cost=scene.arm.posture_cost)
