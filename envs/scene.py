"""The MuJoCo side of the inspection cell: model loading and named physical quantities (dm_control's Physics role).

Everything here is addressed by MJCF names; indices are looked up once at construction.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources

import cv2
import mujoco
import numpy as np

from robot_rl.envs.arms import ARM_PREFIX, CAMERA_SITE, WRIST_CAMERA, ArmSpec, get_arm
from robot_rl.envs.arms.home import home_qpos
from robot_rl.envs.arms.spec import attach_arm
from robot_rl.envs.defaults import DEFAULT_ARM
from robot_rl.envs.randomization import MAX_MARKS, SOLDER_MASKS, Appearance

ASSET_PACKAGE = "robot_rl.assets"
SCENE_FILE = "pcb_inspect.xml"
SCENE_CAMERA = "scene_cam"
BOARD_HALF_SIZE = (0.04, 0.03)  # m, must match the board_plank geom of the MJCF
BOARD_TOP = 0.0016  # m above the table
HIDDEN_GROUP = 3  # geom group the renderers do not draw (a task's props out of use this episode)
MAX_POSTS = 4
FIXTURE_MATERIALS = ("steel", "clamp_orange", "floor")  # coloured by Randomization.fixture_colour
CONTROL_PERIOD = 0.1  # s (10 Hz control)
PHYSICS_TIMESTEP = 0.004  # s; implicitfast keeps the stiff joint servos stable at this step
SUBSTEPS = round(CONTROL_PERIOD / PHYSICS_TIMESTEP)
_BADQACC, _BADQPOS, _BADQVEL = _INSTABILITY_WARNINGS = (int(mujoco.mjtWarning.mjWARN_BADQACC),
                                                         int(mujoco.mjtWarning.mjWARN_BADQPOS),
                                                         int(mujoco.mjtWarning.mjWARN_BADQVEL))
# What a control period starts from, enough to run it again bit for bit (warm start and controls included).
_REPLAY_STATE = mujoco.mjtState.mjSTATE_INTEGRATION


def scene_xml_path() -> str:
    """Path of the cell's MJCF inside the installed package data."""
    return str(resources.files(ASSET_PACKAGE).joinpath(SCENE_FILE))


# The board texture's solder mask and traces (RGB, exact: the texture is drawn without anti-aliasing).
_TEXTURE_MASK, _TEXTURE_TRACE = (35, 110, 40), (70, 150, 60)
# Distractor marks out of sight: inside the table box (top at z = 0). Their compiled orientation is not the world
# frame's on purpose: MuJoCo skips the geom-to-body transform of a geom compiled in its body's frame, and the
# marks are moved by rewriting geom_pos / geom_quat.
_MARK_HIDDEN_POS, _MARK_HALF_HEIGHT = (0.35, 0.0, -0.02), 0.0002
_MARK_COMPILED_QUAT = (np.cos(0.05), 0.0, 0.0, np.sin(0.05))


def mask_texture_name(mask: str) -> str:
    return "pcb_texture" if mask == "green" else f"pcb_texture_{mask}"


@functools.cache
def _board_texture() -> np.ndarray:
    texture = cv2.cvtColor(cv2.imread(str(resources.files(ASSET_PACKAGE).joinpath("textures/pcb.png"))),
                           cv2.COLOR_BGR2RGB)
    texture.setflags(write=False)
    return texture


def recoloured_board_texture(mask_rgb: tuple[int, int, int]) -> np.ndarray:
    """The board texture (uint8 [H, W, 3], RGB) with its solder mask in ``mask_rgb``, traces a lighter shade."""
    texture = _board_texture()
    mask = np.array(mask_rgb, np.float64)
    trace = np.clip(mask * 1.3 + 25, 0, 255)  # copper under the mask reads lighter, as on the green board
    recoloured = texture.copy()
    recoloured[(texture == _TEXTURE_MASK).all(-1)] = mask.round().astype(np.uint8)
    recoloured[(texture == _TEXTURE_TRACE).all(-1)] = trace.round().astype(np.uint8)
    return recoloured


@functools.cache
def _mask_texture_data(mask: str) -> list[int]:
    """The texels MjSpec wants (a flat list); once per process, as every model load (every task) adds them."""
    return recoloured_board_texture(SOLDER_MASKS[mask]).ravel().tolist()


def _add_surfaces(spec: mujoco.MjSpec) -> None:
    """The solder-mask textures and the distractor-mark geoms that domain randomization swaps in and moves."""
    height, width = _board_texture().shape[:2]
    for mask in SOLDER_MASKS:
        if mask == "green":
            continue
        spec.add_texture(name=mask_texture_name(mask), type=mujoco.mjtTexture.mjTEXTURE_2D, width=width,
                         height=height, nchannel=3, data=_mask_texture_data(mask))
    for i in range(MAX_MARKS):
        spec.worldbody.add_geom(name=f"table_mark_{i}", type=mujoco.mjtGeom.mjGEOM_BOX, contype=0, conaffinity=0,
                                size=[0.004, 0.004, _MARK_HALF_HEIGHT], pos=_MARK_HIDDEN_POS,
                                quat=_MARK_COMPILED_QUAT, rgba=[0.5, 0.5, 0.5, 1])


def load_model(num_posts: int, arm: str | ArmSpec = DEFAULT_ARM,
               add_props: Callable[[mujoco.MjSpec], None] | None = None) -> mujoco.MjModel:
    """Compiles the cell with ``arm``, a task's props (``add_props`` edits the spec), ``num_posts`` clamp posts
    and the randomized surfaces."""
    spec = mujoco.MjSpec.from_file(scene_xml_path())
    attach_arm(spec, get_arm(arm))
    if add_props is not None:
        add_props(spec)
    _add_surfaces(spec)
    for i in range(num_posts, MAX_POSTS):
        spec.delete(spec.body(f"post_{i}"))
    spec.option.timestep = PHYSICS_TIMESTEP
    return spec.compile()


@dataclass
class StepOutcome:
    """What happened during one control step of physics."""

    collision: bool  # some arm geom touched the table, board or a post during the step
    unstable: bool  # MuJoCo reported a bad state or produced a non-finite acceleration


class ArmScene:
    """The arm, board, posts and a task's props: physics state and named accessors."""

    def __init__(self, num_posts: int, arm: str | ArmSpec = DEFAULT_ARM,
                 add_props: Callable[[mujoco.MjSpec], None] | None = None):
        self.arm = get_arm(arm)
        self.model = load_model(num_posts, self.arm, add_props)
        self.data = mujoco.MjData(self.model)
        self.num_posts = num_posts
        m = self.model
        joint_ids = [m.joint(ARM_PREFIX + n).id for n in self.arm.joints]
        self.joint_qpos_ids = m.jnt_qposadr[joint_ids].copy()
        self.joint_dof_ids = m.jnt_dofadr[joint_ids].copy()
        # The servo of each joint, found by what it drives (a user's file names its actuators as it likes).
        servo_of = {int(m.actuator_trnid[a, 0]): a for a in range(m.nu)
                    if m.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT}
        self.actuator_ids = np.array([servo_of[j] for j in joint_ids])
        self.joint_limits = m.jnt_range[joint_ids].copy()
        self.home = home_qpos(self.arm)
        self.camera_site_id = m.site(CAMERA_SITE).id
        self._nominal_site = (m.site_pos[self.camera_site_id].copy(), m.site_quat[self.camera_site_id].copy())
        self.board_mocap_id = m.body("board").mocapid[0]
        self.post_mocap_ids = [m.body(f"post_{i}").mocapid[0] for i in range(num_posts)]
        self.key_light_id, self.fill_light_id = m.light("key_light").id, m.light("fill_light").id
        self._nominal_lights = (m.light_diffuse.copy(), m.light_dir.copy(), m.vis.headlight.ambient.copy())
        # What an exposure scales besides (set_exposure): the parts of the light no randomization draws.
        self._undrawn_light = (m.light_specular.copy(), m.light_ambient.copy(), m.vis.headlight.diffuse.copy(),
                               m.vis.headlight.specular.copy())
        self._drawn_light = (m.light_diffuse.copy(), m.vis.headlight.ambient.copy())
        self.board_material_id, self.table_material_id = m.material("pcb").id, m.material("table").id
        self.mask_texture_ids = {mask: m.texture(mask_texture_name(mask)).id for mask in SOLDER_MASKS}
        self.mark_geom_ids = np.array([m.geom(f"table_mark_{i}").id for i in range(MAX_MARKS)])
        self._nominal_marks = (m.geom_pos[self.mark_geom_ids].copy(), m.geom_quat[self.mark_geom_ids].copy(),
                               m.geom_size[self.mark_geom_ids].copy(), m.geom_rgba[self.mark_geom_ids].copy())
        self.fixture_material_ids = [m.material(n).id for n in FIXTURE_MATERIALS]
        self.wrist_camera_id = m.camera(WRIST_CAMERA).id
        self._nominal_materials = (m.mat_rgba.copy(), m.mat_specular.copy(), m.mat_shininess.copy())
        self._nominal_camera = (m.cam_pos[self.wrist_camera_id].copy(), m.cam_quat[self.wrist_camera_id].copy(),
                                float(m.cam_fovy[self.wrist_camera_id]))
        self.nominal_fovy = self._nominal_camera[2]  # the drawn lens's vertical field of view (degrees)
        # Called after every physics substep when set (evaluation videos record intermediate states with it;
        # training and collection never set it).
        self.substep_observer: Callable[[], None] | None = None
        self._period_start = np.empty(mujoco.mj_stateSize(m, _REPLAY_STATE))
        self.substeps = SUBSTEPS

    def set_physics_timestep(self, timestep: float) -> None:
        """Runs physics at ``timestep`` (s) from now on, the control period unchanged: what another env version's
        timestep would change is measured with it (``benchmarks/env_step.py``); the env never calls it."""
        substeps = round(CONTROL_PERIOD / timestep) if timestep > 0 else 0
        if substeps < 1 or abs(substeps * timestep - CONTROL_PERIOD) > 1e-9:
            raise ValueError(f"timestep {timestep} s does not divide the {CONTROL_PERIOD} s control period")
        self.model.opt.timestep, self.substeps = timestep, substeps

    # -- state ------------------------------------------------------------------------------------------------
    def reset(self, qpos: np.ndarray) -> None:
        """Clears the simulation (board and posts included) and puts the arm at rest at ``qpos``, servos holding.

        Call ``forward`` once the board and posts are placed.
        """
        mujoco.mj_resetData(self.model, self.data)
        self.data.qpos[self.joint_qpos_ids] = qpos
        self.data.ctrl[self.actuator_ids] = qpos

    @property
    def qpos(self) -> np.ndarray:
        return self.data.qpos[self.joint_qpos_ids]

    @property
    def qvel(self) -> np.ndarray:
        return self.data.qvel[self.joint_dof_ids]

    def joint_state(self) -> np.ndarray:
        """float32 [2 x joints]: joint angles (rad) then joint velocities (rad/s, clipped to the arm's
        ``max_joint_speed``)."""
        speed = self.arm.max_joint_speed
        return np.concatenate([self.qpos, np.clip(self.qvel, -speed, speed)]).astype(np.float32)

    def joint_state_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper bounds of ``joint_state`` (float32 [2 x joints] each): joint ranges, then the speed
        range."""
        speed = np.full(len(self.arm.joints), self.arm.max_joint_speed)
        low = np.concatenate([self.joint_limits[:, 0], -speed]).astype(np.float32)
        high = np.concatenate([self.joint_limits[:, 1], speed]).astype(np.float32)
        return low, high

    def camera_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """Wrist camera position (m) and rotation matrix [3, 3]; the camera looks along its -z column."""
        return self.data.site_xpos[self.camera_site_id].copy(), self.data.site_xmat[self.camera_site_id].reshape(3, 3)

    def camera_quat(self) -> np.ndarray:
        """Wrist camera orientation as a unit quaternion (wxyz)."""
        return self.data.site_xquat[self.camera_site_id].copy()

    # -- episode set-up ---------------------------------------------------------------------------------------
    def place_board(self, x: float, y: float, yaw: float) -> None:
        self.data.mocap_pos[self.board_mocap_id] = (x, y, 0.0)
        self.data.mocap_quat[self.board_mocap_id] = _yaw_quat(yaw)

    def place_posts(self, board_x: float, board_y: float, board_yaw: float, gap: float, height: float,
                    rng: np.random.Generator) -> None:
        """Puts the clamp posts beside the board edges, clamps pointing at the board, rods ``height`` tall."""
        half_x, half_y = BOARD_HALF_SIZE
        # Long edges first: posts 0 and 1 clamp the long sides, 2 and 3 the short ones.
        sides = [(0.0, half_y + gap, -np.pi / 2), (0.0, -half_y - gap, np.pi / 2),
                 (half_x + gap, 0.0, np.pi), (-half_x - gap, 0.0, 0.0)]
        c, s = np.cos(board_yaw), np.sin(board_yaw)
        for mocap_id, (px, py, facing) in zip(self.post_mocap_ids, sides):
            along = rng.uniform(-0.4, 0.4) * (half_x if px == 0.0 else half_y)
            bx, by = (px, py + along) if px != 0.0 else (px + along, py)
            self.data.mocap_pos[mocap_id] = (board_x + c * bx - s * by, board_y + s * bx + c * by, 0.0)
            self.data.mocap_quat[mocap_id] = _yaw_quat(board_yaw + facing)
        self._set_post_height(height)

    def _set_post_height(self, height: float) -> None:
        m = self.model
        for i in range(self.num_posts):
            rod, clamp = m.geom(f"post_{i}_rod").id, m.geom(f"post_{i}_clamp").id
            m.geom_size[rod][1] = height / 2
            m.geom_pos[rod][2] = height / 2
            m.geom_rbound[rod] = float(np.hypot(m.geom_size[rod][0], height / 2))
            m.geom_pos[clamp][2] = height + m.geom_size[clamp][2]

    def set_lighting(self, rng: np.random.Generator, variation: float) -> None:
        """Scales light intensities and tilts their directions by up to ``variation`` (relative)."""
        diffuse, direction, ambient = self._nominal_lights
        m = self.model
        m.light_diffuse[:] = diffuse * rng.uniform(1 - variation, 1 + variation, size=(len(diffuse), 1))
        m.light_dir[:] = direction + rng.uniform(-variation, variation, size=direction.shape)
        m.vis.headlight.ambient[:] = ambient * rng.uniform(1 - variation, 1 + variation)
        self._keep_drawn_light()
        self.set_exposure(1.0)  # an earlier episode's exposure does not carry over

    def _keep_drawn_light(self) -> None:
        m = self.model
        self._drawn_light = (m.light_diffuse.copy(), m.vis.headlight.ambient.copy())

    def set_exposure(self, gain: float) -> None:
        """The wrist camera's exposure (``robot_rl.envs.exposure``): every light scaled by ``gain`` from the
        episode's drawn lights (1 = as drawn). An exposure scales all the light a sensor gathers before it clips,
        which in this renderer is the lights' every term."""
        m = self.model
        diffuse, ambient = self._drawn_light
        specular, light_ambient, head_diffuse, head_specular = self._undrawn_light
        m.light_diffuse[:], m.vis.headlight.ambient[:] = diffuse * gain, ambient * gain
        m.light_specular[:], m.light_ambient[:] = specular * gain, light_ambient * gain
        m.vis.headlight.diffuse[:], m.vis.headlight.specular[:] = head_diffuse * gain, head_specular * gain

    def set_appearance(self, appearance: Appearance) -> None:
        """Writes one episode's domain randomization into the model (after ``set_lighting``, which it scales).

        Materials and the wrist camera start from their nominal values, so appearances never accumulate. The
        camera offset moves the rendered camera only, not ``CAMERA_SITE`` (the pose the arm controls), unless the
        cell is calibrated: then the site goes where the calibration measured the camera.
        """
        m, a = self.model, appearance
        if a.light_tilt.shape[0] != m.nlight:
            raise ValueError(f"Appearance tilts {a.light_tilt.shape[0]} lights, the model has {m.nlight}")
        rgba, specular, shininess = self._nominal_materials
        m.mat_rgba[:], m.mat_specular[:], m.mat_shininess[:] = rgba, specular, shininess
        m.light_diffuse[:] *= a.light_intensity * a.light_colour
        m.vis.headlight.ambient[:] *= a.light_intensity * a.light_colour
        m.light_dir[:, :2] += a.light_tilt * np.abs(m.light_dir[:, 2:])
        self._keep_drawn_light()
        board = self.board_material_id
        m.mat_rgba[board, :3] *= a.board_colour
        m.mat_specular[board] = min(1.0, specular[board] * a.board_gloss)
        m.mat_shininess[board] = min(1.0, shininess[board] * a.board_gloss)
        m.mat_texid[board, mujoco.mjtTextureRole.mjTEXROLE_RGB] = self.mask_texture_ids[a.board_mask]
        if a.table_rgb is not None:
            m.mat_rgba[self.table_material_id, :3] = a.table_rgb
        m.mat_rgba[self.table_material_id, :3] *= a.table_colour
        m.mat_rgba[self.fixture_material_ids, :3] *= a.fixture_colour
        self._place_marks(a.marks)
        pos, quat, fovy = self._nominal_camera
        cam = self.wrist_camera_id
        m.cam_pos[cam] = pos + a.camera_offset
        tilted = np.empty(4)
        mujoco.mju_mulQuat(tilted, quat, quat_from_rotvec(a.camera_rotation))
        m.cam_quat[cam] = tilted
        m.cam_fovy[cam] = fovy + a.camera_fov
        self._place_camera_site(a)

    def _place_camera_site(self, a: Appearance) -> None:
        """The pose the arm controls: the drawn mount's, or a calibrated cell's measurement of the camera (the
        rendered camera's pose composed with the measurement's error)."""
        m, site = self.model, self.camera_site_id
        if a.calibration_offset is None:
            m.site_pos[site], m.site_quat[site] = self._nominal_site
            return
        cam = self.wrist_camera_id
        rotation = np.empty(9)
        mujoco.mju_quat2Mat(rotation, m.cam_quat[cam])
        m.site_pos[site] = m.cam_pos[cam] + rotation.reshape(3, 3) @ a.calibration_offset
        measured = np.empty(4)
        mujoco.mju_mulQuat(measured, m.cam_quat[cam], quat_from_rotvec(a.calibration_rotation))
        m.site_quat[site] = measured

    def _place_marks(self, marks: np.ndarray) -> None:
        """Lays ``marks`` (rows as ``randomization.MARK_FIELDS``) flat on the table around the board; the rest of
        the mark geoms go back out of sight."""
        m, ids = self.model, self.mark_geom_ids
        m.geom_pos[ids], m.geom_quat[ids], m.geom_size[ids], m.geom_rgba[ids] = self._nominal_marks
        board_x, board_y = self.data.mocap_pos[self.board_mocap_id][:2]
        for geom, (dx, dy, yaw, half_x, half_y, r, g, b) in zip(ids, marks):
            m.geom_pos[geom] = (board_x + dx, board_y + dy, _MARK_HALF_HEIGHT)
            m.geom_quat[geom] = _yaw_quat(yaw)
            m.geom_size[geom] = (half_x, half_y, _MARK_HALF_HEIGHT)
            m.geom_rgba[geom] = (r, g, b, 1.0)

    def forward(self) -> None:
        mujoco.mj_forward(self.model, self.data)

    # -- stepping ---------------------------------------------------------------------------------------------
    def step(self, joint_targets: np.ndarray) -> StepOutcome:
        """Runs one control period with the joint servos tracking ``joint_targets`` (rad).

        The substeps run in one MuJoCo call, and a collision is read from MuJoCo's high-water mark of contacts
        (``maxuse_con``, raised at every substep's constraint build; collision filtering in the MJCF leaves only
        arm-vs-fixture contacts, so any contact in any substep is a collision). An instability makes MuJoCo reset
        its data mid-period, which clears that mark, so such a period runs again from its start one substep at a
        time (``step_substeps``). The outcome and the state reached are those of ``step_substeps`` either way.
        """
        if self.substep_observer is not None:
            return self.step_substeps(joint_targets)
        m, d = self.model, self.data
        if instability_warnings(d):
            return self.step_substeps(joint_targets)  # counts from before this period decide ``unstable`` there
        d.ctrl[self.actuator_ids] = joint_targets
        mujoco.mj_getState(m, d, self._period_start, _REPLAY_STATE)
        contacts_before = d.maxuse_con
        d.maxuse_con = 0
        mujoco.mj_step(m, d, self.substeps)
        collision = d.maxuse_con > 0
        if instability_warnings(d):
            if not m.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_AUTORESET:
                # The reset also cleared every other diagnostic, so the replay ends with the same ones.
                for w in _INSTABILITY_WARNINGS:
                    d.warning[w].number = 0
                mujoco.mj_setState(m, d, self._period_start, _REPLAY_STATE)
                d.maxuse_con = contacts_before
                return self.step_substeps(joint_targets)
            d.maxuse_con = max(contacts_before, d.maxuse_con)
            return StepOutcome(collision=collision, unstable=True)
        d.maxuse_con = max(contacts_before, d.maxuse_con)
        unstable = not (np.isfinite(d.qacc).all() and np.isfinite(d.qpos).all() and np.isfinite(d.qvel).all())
        return StepOutcome(collision=collision, unstable=unstable)

    def step_substeps(self, joint_targets: np.ndarray) -> StepOutcome:
        """``step`` one substep at a time, calling ``substep_observer`` (when set) after each."""
        d = self.data
        d.ctrl[self.actuator_ids] = joint_targets
        warnings_before = instability_warnings(d)
        collision = False
        for _ in range(self.substeps):
            mujoco.mj_step(self.model, d)
            # Collision filtering in the MJCF leaves only arm-vs-fixture contacts, so any contact is a collision.
            collision = collision or d.ncon > 0
            if self.substep_observer is not None:
                self.substep_observer()
        unstable = instability_warnings(d) > warnings_before or not (
            np.isfinite(d.qacc).all() and np.isfinite(d.qpos).all() and np.isfinite(d.qvel).all()
        )
        return StepOutcome(collision=collision, unstable=unstable)


def instability_warnings(data: mujoco.MjData) -> int:
    """How many instability warnings MuJoCo counted since its data was last reset."""
    numbers = data.warning.number
    return int(numbers[_BADQACC]) + int(numbers[_BADQPOS]) + int(numbers[_BADQVEL])


def quat_from_rotvec(rotvec: np.ndarray) -> np.ndarray:
    """The unit quaternion (wxyz) of a rotation vector (axis x angle, rad); identity for a zero vector."""
    angle = float(np.linalg.norm(rotvec))
    quat = np.array([1.0, 0.0, 0.0, 0.0])
    if angle > 0:
        mujoco.mju_axisAngle2Quat(quat, rotvec / angle, angle)
    return quat


def _yaw_quat(yaw: float) -> np.ndarray:
    return np.array([np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)])
