"""What every inspection task shares (dm_control's Task role): episode set-up, action mapping, observations, reward.

``InspectionTask`` runs an episode: it resets the arm, places the board, posts and lights, applies the action (a
camera-pose change through IK, or a verdict that ends the episode) and pays the reward terms. A task subclasses
it with what is its own: props added to the scene, their set-up from the episode seed, the defect labels, when
the camera counts as localized, the inspection point, its difficulty presets and its scripted expert
(``robot_rl.envs.tasks`` holds the built-in ones and the registry). Framework-free: the Gymnasium and TorchRL
environments are thin adapters over a task.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import IntEnum
from typing import ClassVar

import mujoco
import numpy as np

from robot_rl.envs import exposure, keys
from robot_rl.envs.arms import ArmSpec
from robot_rl.envs.defaults import DEFAULT_ARM
from robot_rl.envs.difficulty import Difficulty, pick_difficulty
from robot_rl.envs.ik import camera_ik
from robot_rl.envs.lens import Rectifier
from robot_rl.envs.perception import angle_between, camera_projection, geom_classes
from robot_rl.envs.randomization import Appearance, Randomization, get_randomization
from robot_rl.envs.rendering import PRETTY, shared_renderer
from robot_rl.envs.scene import BOARD_TOP, SCENE_CAMERA, WRIST_CAMERA, ArmScene, quat_from_rotvec

POSE_DIM = 6
MIN_IMAGE_SIZE, MAX_IMAGE_SIZE = 32, 224
# Pixel noise comes from a bank of unit-Gaussian frames drawn once per task: picking a frame per step is cheaper
# than drawing a fresh one (a sizeable part of a step at 224x224). Which frame, and the episode's std, follow the
# episode seed.
NOISE_BANK_FRAMES = 32


_NOISE_BANKS: dict[int, np.ndarray] = {}


def _noise_bank(size: int) -> np.ndarray:
    """The unit-Gaussian frames of this image size, shared by every task of the process (19 MB at 224x224)."""
    if size not in _NOISE_BANKS:
        bank = np.random.default_rng(0x0153).standard_normal((NOISE_BANK_FRAMES, size, size, 3), dtype=np.float32)
        bank.flags.writeable = False
        _NOISE_BANKS[size] = bank
    return _NOISE_BANKS[size]


class Verdict(IntEnum):
    CONTINUE = 0
    PASS = 1
    REWORK = 2


@dataclass(frozen=True)
class RewardWeights:
    """Weights of the reward terms (the reported terms are already multiplied by them)."""

    correct_verdict: float = 1.0
    wrong_verdict: float = -1.0
    localization: float = 0.5  # once, the first time the board is localized within the step budget
    collision: float = -0.3  # per control step in which the arm touches the table, board or a post
    shaping: float = 0.0  # potential-based: weight * (gamma * phi(s') - phi(s)), phi in [0, 1]
    guess: float = 0.0  # added once to a verdict given while the board is not localized (0: a guess pays as a look)
    dwell: float = 0.0  # per control step that ends at the inspection view without a verdict (0: waiting there costs
    # only discounting, so a policy sampled every step answers there while its deterministic mode may never)


@dataclass(frozen=True)
class TaskConfig:
    """Task constants. Lengths in metres, angles in radians, durations in control steps (10 Hz)."""

    image_size: int = 84  # wrist camera image is image_size x image_size
    max_steps: int = 80  # truncation limit
    localization_budget: int = 40  # the localization bonus is paid only within this many steps
    max_translation: float = 0.03  # camera translation per step at |action| = 1
    max_rotation: float = 0.15  # camera rotation per step at |action| = 1 (rotation vector, world frame)
    # The PCB task's inspection pose (another task defines its own view, see robot_rl.envs.tasks).
    inspection_height: float = 0.12  # camera height above the board when inspecting
    height_tolerance: float = 0.03
    centre_tolerance: float = 0.02  # distance of the board centre from the optical axis
    max_tilt: float = math.radians(15)  # angle between the optical axis and straight down
    shaping_gamma: float = 0.99  # discount of the potential-based shaping term
    shaping_distance: float = 0.5  # phi falls linearly from 1 at the inspection pose to 0 at this distance
    reward_weights: RewardWeights = field(default_factory=RewardWeights)

    def __post_init__(self) -> None:
        if not MIN_IMAGE_SIZE <= self.image_size <= MAX_IMAGE_SIZE:
            raise ValueError(f"TaskConfig.image_size must be in [{MIN_IMAGE_SIZE}, {MAX_IMAGE_SIZE}], "
                             f"got {self.image_size}")
        if self.max_steps < 1:
            raise ValueError(f"TaskConfig.max_steps must be >= 1, got {self.max_steps}")


@dataclass
class StepResult:
    """One control step: observation, reward (total and weighted terms), end flags, per-step info flags."""

    observation: dict[str, np.ndarray]
    reward: float
    terms: dict[str, float]
    terminated: bool
    truncated: bool
    flags: dict[str, bool]


def validate_action(pose, verdict) -> tuple[np.ndarray, int]:
    """Checks one action; returns the pose clipped to [-1, 1] (float64 [6]) and the verdict as an int.

    Out-of-range pose values are clipped. NaN or inf, a wrong shape or a non-numeric dtype raise ValueError or
    TypeError naming the culprit, before anything reaches MuJoCo.
    """
    pose = np.asarray(pose)
    if pose.dtype.kind not in "fiu":
        raise TypeError(f"action pose must be a real-valued array, got dtype {pose.dtype}")
    if pose.shape != (POSE_DIM,):
        raise ValueError(f"action pose must have shape ({POSE_DIM},), got {pose.shape}")
    if not np.isfinite(pose).all():
        raise ValueError(f"action pose contains NaN or inf: {pose.tolist()}")
    verdict_array = np.asarray(verdict)
    if verdict_array.dtype.kind not in "iu" or verdict_array.size != 1:
        raise TypeError(f"action verdict must be one integer (0 continue, 1 pass, 2 rework), got {verdict!r}")
    verdict_value = int(verdict_array.reshape(()))
    if verdict_value not in (v.value for v in Verdict):
        raise ValueError(f"action verdict must be 0 (continue), 1 (pass) or 2 (rework), got {verdict_value}")
    return np.clip(pose.astype(np.float64), -1.0, 1.0), verdict_value


class InspectionTask:
    """A 6-DoF arm moves its wrist camera to inspect something on a board and gives a verdict: pass or rework.

    ``reset(seed)`` sets the episode up from ``seed``; ``step(pose, verdict)`` applies one action. Observations are
    ``{"pixels": uint8 [H, W, 3], "joint_state": float32 [2 x arm joints]}``; ``privileged()`` returns the task
    state (board pose, defect label, camera pose) that the expert and metrics may read and the policy may not.
    ``arm``: a registered arm name, an ``ArmSpec`` or an ArmSpec JSON file (``envs.arms``).

    A subclass names the task (``name``, ``version``: bump it when its dynamics, rendering or rewards change),
    its ``difficulties`` (presets named as ``DIFFICULTY_NAMES``), ``defect_types`` ("none" first) and
    ``expert_class``, and implements the hooks below ``-- the task's own --`` (``defective`` and ``defect_index``
    follow from ``defect``).
    """

    name: ClassVar[str]
    version: ClassVar[int]
    difficulties: ClassVar[Mapping[str, Difficulty]]
    defect_types: ClassVar[tuple[str, ...]]
    expert_class: ClassVar[type]  # ``expert_class(task_config).act(camera_pose, board_pose, defective, joints)``
    # The inspection point in the board frame (m; z from the board's top): what the critic measures the camera
    # against, and what ``near_view`` is centred on.
    inspection_offset: ClassVar[tuple[float, float, float]]
    near_view_radius: ClassVar[float] = 0.05  # m

    @classmethod
    def near_view(cls, camera_pose, board_pose):
        """Frames [B] whose camera is near the inspection view, from torch tensors camera pose [B, 7] and board
        pose [B, 4]: where behaviour cloning also trains the pass/rework decision."""
        yaw = board_pose[..., 3]
        cos, sin = yaw.cos(), yaw.sin()
        ox, oy, oz = cls.inspection_offset
        dx = camera_pose[..., 0] - (board_pose[..., 0] + cos * ox - sin * oy)
        dy = camera_pose[..., 1] - (board_pose[..., 1] + sin * ox + cos * oy)
        dz = camera_pose[..., 2] - (board_pose[..., 2] + oz)
        return dx * dx + dy * dy + dz * dz < cls.near_view_radius ** 2

    def __init__(self, difficulty: str | Difficulty = "default", config: TaskConfig | None = None,
                 randomization: str | Randomization = "none", arm: str | ArmSpec = DEFAULT_ARM):
        self.difficulty = pick_difficulty(difficulty, self.difficulties, self.name)
        self.config = config or TaskConfig()
        self.randomization = get_randomization(randomization)
        self._randomized = not self.randomization.is_nominal  # once: reset is on the collection hot path
        self.scene = ArmScene(self.difficulty.num_posts, arm, self.add_props)
        self.ik = camera_ik(self.scene)
        self.bind_props(self.scene.model)
        size = self.config.image_size
        self.wrist_renderer = shared_renderer(WRIST_CAMERA, size, size)
        self.appearance = None  # this episode's drawn randomization (None when randomization is nominal)
        self._rectifier: Rectifier | None = None  # this episode's lens rectification (a rectifying cell only)
        self._exposure_gain: float | None = None  # the camera's exposure (a cell with auto-exposure only)
        self._frame_gain: float | None = None  # the exposure the latest wrist frame was taken at
        self._noise_bank = None
        if self.randomization.pixel_noise[1] > 0:
            self._noise_bank = _noise_bank(size)
            self._noise_frame = np.empty((size, size, 3), np.float32)
        self._noise_rng = np.random.default_rng(0)
        self._episode_seed = -1
        self._step_count = 0
        self._done = True
        self._localized_once = False
        self._last_observation: dict[str, np.ndarray] | None = None
        self._geom_classes: np.ndarray | None = None  # per geom, on first use of segmentation()
        # Whether observations carry the segmentation mask of their image (collect-demos --masks).
        self.observe_segmentation = False

    # -- the task's own ---------------------------------------------------------------------------------------
    def add_props(self, spec: mujoco.MjSpec) -> None:
        """Adds the task's geoms to the cell before it compiles (on the ``board`` body to move with the board)."""

    def bind_props(self, model: mujoco.MjModel) -> None:
        """Looks up the props in the compiled model, once."""

    def set_up_props(self, seed: int, defect: str | None) -> None:
        """Draws this episode's props and defect from ``seed`` (its own random streams) and writes them into the
        model. ``defect`` forces one of ``defect_types``."""
        raise NotImplementedError

    @property
    def defect(self) -> str:
        """This episode's defect, one of ``defect_types`` ("none": clean)."""
        raise NotImplementedError

    def localized(self) -> bool:
        """The camera is where the defect would be seen (a verdict counts as a success only then)."""
        raise NotImplementedError

    def inspection_point(self) -> np.ndarray:
        """Where the camera inspects from (m, world frame): the goal of the shaping potential."""
        raise NotImplementedError

    def inspection_target(self) -> np.ndarray:
        """What the camera looks at from ``inspection_point()`` (m, world frame): by default the board's top
        straight below it (a view from above). A task with a tilted view returns its own."""
        point = np.array(self.inspection_point(), np.float64)
        point[2] = BOARD_TOP
        return point

    def perception_targets(self) -> dict[str, np.ndarray]:
        """Labels of the current wrist image from privileged state, as ``robot_rl.envs.perception``'s
        ``PERCEPTION_TARGETS`` lists them: where the inspection target projects (pixels, in view), the camera's
        distance to it and tilt from the inspection view's axis, the offset to the inspection point in the camera
        frame, localized, the defect. Built from ``inspection_point()`` and ``inspection_target()``; a task may
        add entries (extend the dict). The image position uses the camera as rendered (its randomized mount
        included) and the image as the policy sees it (rectified in a rectifying cell), the pose labels the camera
        the arm controls, as ``localized()`` does."""
        size = self.config.image_size
        model, data = self.scene.model, self.scene.data
        target, viewpoint = self.inspection_target(), np.asarray(self.inspection_point(), np.float64)
        camera = self.scene.wrist_camera_id
        if self._rectifier is None:
            pixel, in_view = camera_projection(model, data, camera, target, size, size)
        else:  # where the rectified image shows it, in view only where the sensor saw it too
            pixel, in_view = camera_projection(model, data, camera, target, size, size,
                                               fovy=self._rectifier.rectified_fovy(model.cam_fovy[camera]))
            in_view = in_view and camera_projection(model, data, camera, target, size, size)[1]
        pos, rot = self.scene.camera_pose()
        view_axis = target - viewpoint
        if not np.linalg.norm(view_axis) > 0:
            view_axis = np.array([0.0, 0.0, -1.0])
        return {
            "point_pixel": pixel.astype(np.float32),
            "point_in_view": np.array([in_view]),
            "distance": np.array([np.linalg.norm(target - pos)], np.float32),
            "tilt": np.array([angle_between(-rot[:, 2], view_axis)], np.float32),
            "viewpoint_offset": (rot.T @ (viewpoint - pos)).astype(np.float32),
            "localized": np.array([self.localized()]),
            "defect_type": np.array([self.defect_index], np.int64),
        }

    def segmentation(self) -> np.ndarray:
        """The class of every pixel of the current wrist image (noise-free; rectified as the image is), uint8
        [H, W]: values index ``robot_rl.envs.perception.SEGMENTATION_CLASSES`` (background, table, board, parts,
        arm)."""
        if self._geom_classes is None:
            self._geom_classes = geom_classes(self.scene.model)
        mask = self._geom_classes[self.wrist_renderer.render_geom_ids(self.scene.model, self.scene.data)]
        return mask if self._rectifier is None else self._rectifier.mask(mask)

    @property
    def defective(self) -> bool:
        """This episode needs rework."""
        return self.defect != "none"

    @property
    def defect_index(self) -> int:
        """This episode's defect, an index into ``defect_types``."""
        return self.defect_types.index(self.defect)

    def board_pose(self) -> np.ndarray:
        """The board's centre x, y, top z (m) and yaw (rad), float64 [4]."""
        return np.array([*self.board_xy, BOARD_TOP, self.board_yaw])

    # -- episode ----------------------------------------------------------------------------------------------
    def reset(self, seed: int, defect: str | None = None) -> dict[str, np.ndarray]:
        """Starts the episode of board ``seed`` (``defect`` forces one of ``defect_types``)."""
        d = self.difficulty
        self.set_up_props(seed, defect)
        rng = np.random.default_rng([int(seed), 0x5CE7E])
        home = self.scene.home
        self.scene.reset(home + rng.uniform(-d.init_joint_noise, d.init_joint_noise, size=home.shape))
        self.board_xy = rng.uniform(*zip(d.board_x, d.board_y))
        self.board_yaw = float(rng.uniform(-d.board_max_yaw, d.board_max_yaw))
        self.scene.place_board(*self.board_xy, self.board_yaw)
        if d.num_posts:
            self.scene.place_posts(*self.board_xy, self.board_yaw, d.post_gap, d.post_height, rng)
        self.scene.set_lighting(rng, d.light_variation)
        if self._randomized:
            # Its own stream: the board, arm and lighting of a seed stay the same with or without randomization.
            visual_rng = np.random.default_rng([int(seed), 0xD0A1])
            self.apply_appearance(self.randomization.sample(visual_rng))
            self._noise_rng = visual_rng
        self.scene.forward()
        self.settle_exposure()
        self._episode_seed = int(seed)
        self._step_count = 0
        self._done = False
        self._localized_once = False
        self._potential = self._phi()
        self._last_observation = self._observe()
        return self._last_observation

    def step(self, pose, verdict) -> StepResult:
        """Applies one action: a camera-pose delta (moves the arm for one control period) or a verdict (ends)."""
        if self._done:
            raise RuntimeError(f"{type(self).__name__}.step called after the episode ended; call reset() first")
        pose, verdict = validate_action(pose, verdict)
        w = self.config.reward_weights
        terms = dict.fromkeys(keys.REWARD_TERM_NAMES, 0.0)
        flags = dict.fromkeys(("collision", "localized", "success", "unstable"), False)
        self._step_count += 1
        terminated = truncated = False
        if verdict != Verdict.CONTINUE:
            # The verdict judges the board as seen now; the arm does not move on this step.
            correct = (verdict == Verdict.REWORK) == self.defective
            terms["verdict"] = w.correct_verdict if correct else w.wrong_verdict
            flags["localized"] = self.localized()
            # Success needs the board inspected: a correct verdict given from elsewhere is a lucky guess (the
            # verdict term still pays it; the guess term, 0 by default, is what fine-tuning sets to take it back).
            flags["success"] = correct and flags["localized"]
            terms["guess"] = 0.0 if flags["localized"] else w.guess
            terminated = True
            observation = self._repeat_observation()
            next_potential = 0.0  # absorbing state: zero potential keeps the shaping policy-invariant
        else:
            outcome = self.scene.step(self._joint_targets(pose))
            flags["collision"], flags["unstable"] = outcome.collision, outcome.unstable
            if outcome.unstable:
                # Never emit NaN: end the episode on the last good observation.
                truncated = True
                observation = self._repeat_observation()
                next_potential = self._potential
            else:
                observation = self._observe()
                next_potential = self._phi()
                flags["localized"] = self.localized()
            terms["collision"] = w.collision if outcome.collision else 0.0
            terms["dwell"] = w.dwell if flags["localized"] else 0.0
            if flags["localized"] and not self._localized_once:
                self._localized_once = True
                if self._step_count <= self.config.localization_budget:
                    terms["localization"] = w.localization
        if w.shaping:
            terms["shaping"] = w.shaping * (self.config.shaping_gamma * next_potential - self._potential)
        self._potential = next_potential
        if not terminated and self._step_count >= self.config.max_steps:
            truncated = True
        self._done = terminated or truncated
        self._last_observation = observation
        return StepResult(observation, float(sum(terms.values())), terms, terminated, truncated, flags)

    # -- observations -----------------------------------------------------------------------------------------
    def _observe(self) -> dict[str, np.ndarray]:
        observation = {"pixels": self.camera_image(), "joint_state": self.scene.joint_state()}
        if self.observe_segmentation:
            observation["segmentation"] = self.segmentation()
        return observation

    def camera_image(self) -> np.ndarray:
        """The wrist camera's image of the current state as the policy sees it (pixel noise included)."""
        image = self.wrist_renderer.render(self.scene.model, self.scene.data)
        self._frame_gain = self._exposure_gain
        if self._exposure_gain is not None:  # this frame's metering sets the next frame's exposure
            self._exposure_gain = exposure.METERS[self.appearance.metering].next_gain(self._exposure_gain, image)
            self.scene.set_exposure(self._exposure_gain)
        if self.appearance is not None and self.appearance.pixel_noise > 0:
            noisy = self._noise_frame  # in place: a quarter of the time of the same arithmetic with temporaries
            np.multiply(self._noise_bank[self._noise_rng.integers(NOISE_BANK_FRAMES)], self.appearance.pixel_noise,
                        out=noisy)
            noisy += image
            noisy += 0.5  # rounds when cast
            image = np.clip(noisy, 0, 255, out=noisy).astype(np.uint8)
        if self._rectifier is not None:  # after the noise: the cell rectifies what its sensor took
            image = self._rectifier.image(image)
        return image

    def settle_exposure(self) -> None:
        """In a cell whose camera sets its own exposure, runs its exposure loop to the steady gain of the camera
        where it is now (at reset, before the first frame; for an encoder's still views)."""
        self._exposure_gain = self._frame_gain = None
        if self.appearance is None or not self.appearance.auto_exposure:
            return

        def render_at(gain: float) -> np.ndarray:
            self.scene.set_exposure(gain)
            return self.wrist_renderer.render(self.scene.model, self.scene.data)

        self._exposure_gain = exposure.settle(render_at, meter=exposure.METERS[self.appearance.metering])
        self.scene.set_exposure(self._exposure_gain)

    def apply_appearance(self, appearance: Appearance) -> None:
        """Shows the cell as ``appearance`` draws it (written into the model, after the lighting it scales) and, in
        a rectifying cell, resamples the wrist images from the lens as the cell measured it."""
        self.appearance = appearance
        self.scene.set_appearance(appearance)
        self._rectifier = None
        if appearance.rectified:
            nominal = self.scene.nominal_fovy
            self._rectifier = Rectifier(self.config.image_size, nominal,
                                        nominal + appearance.camera_fov + appearance.lens_error)

    def _repeat_observation(self) -> dict[str, np.ndarray]:
        # Fresh arrays: callers may keep and modify what they were given.
        return {name: value.copy() for name, value in self._last_observation.items()}

    def privileged(self) -> dict[str, np.ndarray]:
        """Task state for the expert and metrics (never a policy input); shapes as in robot_rl.envs.keys."""
        pos, quat = self.scene.camera_pose()[0], self.scene.camera_quat()
        return {
            "episode_seed": np.array([self._episode_seed], np.int64),
            "board_pose": self.board_pose().astype(np.float32),
            "defective": np.array([self.defective]),
            "defect_type": np.array([self.defect_index], np.int64),
            "camera_pose": np.concatenate([pos, quat]).astype(np.float32),
        }

    def _phi(self) -> float:
        """Shaping potential: 1 at the inspection point, falling linearly to 0 at ``shaping_distance``."""
        pos, _ = self.scene.camera_pose()
        return float(max(0.0, 1.0 - np.linalg.norm(pos - self.inspection_point()) / self.config.shaping_distance))

    # -- actions ----------------------------------------------------------------------------------------------
    def _joint_targets(self, pose: np.ndarray) -> np.ndarray:
        c = self.config
        target_pos = self.scene.camera_pose()[0] + pose[:3] * c.max_translation
        # The rotation part is a world-frame rotation vector: target = exp(w) * current.
        target_quat = np.empty(4)
        mujoco.mju_mulQuat(target_quat, quat_from_rotvec(pose[3:] * c.max_rotation), self.scene.camera_quat())
        return self.ik.solve(self.scene.qpos, target_pos, target_quat)

    # -- rendering and bookkeeping ----------------------------------------------------------------------------
    def render_scene(self, height: int = 360, width: int = 480) -> np.ndarray:
        """The third-person camera with shadows, uint8 [H, W, 3] (for videos)."""
        with self.lit_as_drawn():
            return shared_renderer(SCENE_CAMERA, height, width, PRETTY).render(self.scene.model, self.scene.data)

    @contextmanager
    def lit_as_drawn(self):
        """The lights as the episode drew them while the block runs (a third-person camera has no part in the
        wrist camera's exposure); the exposure returns after it."""
        gain = self._exposure_gain
        if gain is not None:
            self.scene.set_exposure(1.0)
        try:
            yield
        finally:
            if gain is not None:
                self.scene.set_exposure(gain)

    @contextmanager
    def exposure_kept(self):
        """The wrist camera's exposure as it is now, restored after the block (whose frames may run the camera's
        exposure loop: a video replaying an episode)."""
        gain, frame_gain = self._exposure_gain, self._frame_gain
        try:
            yield
        finally:
            self._exposure_gain, self._frame_gain = gain, frame_gain
            if gain is not None:
                self.scene.set_exposure(gain)

    @property
    def exposure_gain(self) -> float | None:
        """The exposure gain the latest wrist frame was taken at (its metering has set the next frame's); None when
        the camera's exposure is fixed."""
        return self._frame_gain

    @property
    def step_count(self) -> int:
        return self._step_count

    @property
    def episode_seed(self) -> int:
        return self._episode_seed


def expert_steps(task: InspectionTask, seed: int) -> Iterator[tuple[dict[str, np.ndarray], StepResult]]:
    """The task's own scripted expert through board ``seed``: each step's observation (the one acted on) and
    result, until the episode ends."""
    expert = task.expert_class(task.config)
    observation = task.reset(seed)
    for _ in range(task.config.max_steps):
        state = task.privileged()
        result = task.step(*expert.act(state["camera_pose"], state["board_pose"], state["defective"],
                                       observation["joint_state"]))
        yield observation, result
        if result.terminated or result.truncated:
            return
        observation = result.observation
