"""TorchRL front-end: ``InspectionEnv`` emits TensorDicts keyed as in ``robot_rl.envs.keys``; ``make_env`` builds it.

Any registered task on any arm (``task=``, ``arm=``: names from ``robot_rl.envs.tasks`` and ``robot_rl.envs.arms``).

A native ``EnvBase`` rather than ``GymWrapper``: the action nests under ``"action"`` (pose + verdict), the
privileged state, step flags and reward terms get their own sub-TensorDicts with real specs, and no Gym/NumPy
conversion layer sits on the hot path. ``num_envs=N`` steps N tasks in one process (batch size ``[N]``): TorchRL
spends ~0.5 ms of Python per ``step`` call whatever the batch, as much as the simulation itself, so batching in
process nearly doubles the frames/s of a core. ``make_env`` also offers ``ParallelEnv`` workers.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.data import Bounded, Categorical, Composite, Unbounded
from torchrl.envs import EnvBase, ParallelEnv

from robot_rl.envs import keys
from robot_rl.envs.arms import ArmSpec
from robot_rl.envs.defaults import DEFAULT_ARM, DEFAULT_TASK
from robot_rl.envs.difficulty import Difficulty
from robot_rl.envs.gl_backend import render_on_device
from robot_rl.envs.randomization import Randomization
from robot_rl.envs.task import POSE_DIM, InspectionTask, RewardWeights, StepResult, Verdict
from robot_rl.envs.tasks import build_task, get_task

_NO_FLAGS = dict.fromkeys(keys.INFO_FLAGS, False)
_NO_TERMS = dict.fromkeys(keys.REWARD_TERM_NAMES, 0.0)


def _flag_spec() -> Categorical:
    return Categorical(2, shape=(1,), dtype=torch.bool)


class InspectionEnv(EnvBase):
    """An inspection task (``task``: a registered name or an ``InspectionTask`` class) as a TorchRL environment.

    Batch size ``[]`` by default, ``[num_envs]`` when ``num_envs`` is given (tasks stepped in this process).
    Boards: ``episode_seeds`` lists the boards to inspect, in order (task ``i`` of a batch takes
    ``episode_seeds[i::num_envs]``); once they are used up, or without them, boards come from the env's seeded
    stream (``set_seed``). Action: ``keys.POSE`` float32 [*B, 6] in [-1, 1]
    (clipped) and ``keys.VERDICT`` int64 [*B]. Output: ``pixels``, ``joint_state``, ``task/...`` (privileged),
    ``info/...``, ``reward_terms/...``, ``reward`` and the done flags. ``randomization`` (a name or a
    ``Randomization``) varies lights, colours, the camera mount and pixel noise per episode, from the episode seed.
    ``segmentation=True`` adds ``keys.SEGMENTATION``, the class mask of every image (privileged: for datasets).
    """

    batch_locked = True

    def __init__(self, difficulty: str | Difficulty = "default", image_size: int = 84,
                 reward_weights: RewardWeights | Mapping | None = None, num_envs: int | None = None,
                 device: str | torch.device = "cpu", seed: int | None = None,
                 episode_seeds: Sequence[int] | None = None, randomization: str | Randomization = "none",
                 arm: str | ArmSpec = DEFAULT_ARM, task: str | type[InspectionTask] = DEFAULT_TASK,
                 segmentation: bool = False, **task_overrides: Any):
        if num_envs is not None and num_envs < 1:
            raise ValueError(f"InspectionEnv: num_envs must be >= 1, got {num_envs}")
        super().__init__(device=device, batch_size=torch.Size([] if num_envs is None else [num_envs]))
        self.tasks = [build_task(task, difficulty, image_size, reward_weights, task_overrides, randomization, arm)
                      for _ in range(num_envs or 1)]
        for each in self.tasks:
            each.observe_segmentation = segmentation
        self.segmentation = segmentation
        self._last = [None] * len(self.tasks)  # last StepResult-like outputs, for partial resets and steps
        self._rng = np.random.default_rng(seed)
        seeds = [int(s) for s in episode_seeds or ()]
        self._seed_queues = [deque(seeds[i :: len(self.tasks)]) for i in range(len(self.tasks))]
        self._make_specs(image_size)

    @property
    def task(self):
        """The task of an unbatched env (the first task of a batched one)."""
        return self.tasks[0]

    def _make_specs(self, size: int) -> None:
        observation = Composite(
            {
                keys.PIXELS: Bounded(0, 255, (size, size, 3), dtype=torch.uint8),
                keys.JOINT_STATE: Bounded(*map(torch.from_numpy, self.task.scene.joint_state_bounds()),
                                          (self.task.scene.arm.joint_state_dim,), dtype=torch.float32),
                keys.TASK: Composite(
                    episode_seed=Unbounded((1,), dtype=torch.int64),
                    board_pose=Unbounded((4,), dtype=torch.float32),
                    defective=_flag_spec(),
                    defect_type=Categorical(len(self.task.defect_types), shape=(1,), dtype=torch.int64),
                    camera_pose=Unbounded((7,), dtype=torch.float32),
                ),
                keys.INFO: Composite({name: _flag_spec() for name in keys.INFO_FLAGS}),
                keys.REWARD_TERMS: Composite(
                    {name: Unbounded((1,), dtype=torch.float32) for name in keys.REWARD_TERM_NAMES}
                ),
            }
        )
        if self.segmentation:
            observation[keys.SEGMENTATION] = Bounded(0, 255, (size, size), dtype=torch.uint8)
        action = Composite(
            {
                keys.ACTION: Composite(
                    pose=Bounded(-1.0, 1.0, (POSE_DIM,), dtype=torch.float32),
                    verdict=Categorical(len(Verdict), shape=(), dtype=torch.int64),
                )
            }
        )
        done = Composite({name: _flag_spec() for name in (keys.DONE, keys.TERMINATED, keys.TRUNCATED)})
        reward = Composite({keys.REWARD: Unbounded((1,), dtype=torch.float32)})
        batch = self.batch_size
        self.observation_spec = observation.expand(batch).to(self.device)
        self.full_action_spec = action.expand(batch).to(self.device)
        self.full_done_spec = done.expand(batch).to(self.device)
        self.full_reward_spec = reward.expand(batch).to(self.device)

    def _set_seed(self, seed: int | None) -> None:
        self._rng = np.random.default_rng(seed)

    # -- reset and step ---------------------------------------------------------------------------------------
    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        n = len(self.tasks)
        mask = np.ones(n, bool)
        if tensordict is not None and "_reset" in tensordict.keys():
            mask = tensordict.get("_reset").reshape(n).cpu().numpy()
        for i in np.flatnonzero(mask):
            queue = self._seed_queues[i]
            seed = queue.popleft() if queue else int(self._rng.integers(2**31 - 1))
            observation = self.tasks[i].reset(seed)
            self._last[i] = StepResult(observation, 0.0, _NO_TERMS, False, False, _NO_FLAGS)
        return self._pack(self._last, with_reward=False)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        pose, verdict = tensordict.get(keys.POSE, None), tensordict.get(keys.VERDICT, None)
        if pose is None or verdict is None:
            raise KeyError(f"InspectionEnv.step needs {keys.POSE} and {keys.VERDICT} in the input tensordict")
        n = len(self.tasks)
        if pose.shape != (*self.batch_size, POSE_DIM) or verdict.shape != self.batch_size:
            raise ValueError(f"InspectionEnv.step: expected pose of shape {(*self.batch_size, POSE_DIM)} and verdict "
                             f"of shape {tuple(self.batch_size)}, got {tuple(pose.shape)} and {tuple(verdict.shape)}")
        pose = pose.detach().reshape(n, POSE_DIM).cpu().numpy()
        verdict = verdict.detach().reshape(n).cpu().numpy()
        stepping = tensordict.get("_step", None)
        stepping = np.ones(n, bool) if stepping is None else stepping.reshape(n).cpu().numpy()
        for i in np.flatnonzero(stepping):
            self._last[i] = self.tasks[i].step(pose[i], verdict[i])
        # Envs left out of a partial step report their last observation and nothing else.
        results = [r if stepping[i] else StepResult(r.observation, 0.0, _NO_TERMS, False, False, _NO_FLAGS)
                   for i, r in enumerate(self._last)]
        return self._pack(results)

    def _pack(self, results: list[StepResult], with_reward: bool = True) -> TensorDictBase:
        """One TensorDict for the batch: NumPy arrays are stacked first, then wrapped once per key."""
        privileged = [task.privileged() for task in self.tasks]

        def stack(values, dtype=None) -> torch.Tensor:
            array = np.stack(values) if dtype is None else np.asarray(values, dtype=dtype)
            return torch.from_numpy(array.reshape(*self.batch_size, *array.shape[1:]))

        data = {
            keys.PIXELS: stack([r.observation["pixels"] for r in results]),
            keys.JOINT_STATE: stack([r.observation["joint_state"] for r in results]),
            keys.TASK: {name: stack([p[name] for p in privileged]) for name in privileged[0]},
            keys.INFO: {name: stack([[r.flags[name]] for r in results], bool) for name in keys.INFO_FLAGS},
            keys.REWARD_TERMS: {name: stack([[r.terms[name]] for r in results], np.float32)
                                for name in keys.REWARD_TERM_NAMES},
            keys.TERMINATED: stack([[r.terminated] for r in results], bool),
            keys.TRUNCATED: stack([[r.truncated] for r in results], bool),
            keys.DONE: stack([[r.terminated or r.truncated] for r in results], bool),
        }
        if self.segmentation:
            data[keys.SEGMENTATION] = stack([r.observation["segmentation"] for r in results])
        if with_reward:
            data[keys.REWARD] = stack([[r.reward] for r in results], np.float32)
        return TensorDict(data, batch_size=self.batch_size, device=self.device)

    # -- extras -----------------------------------------------------------------------------------------------
    def render_scene(self, height: int = 360, width: int = 480, index: int = 0) -> np.ndarray:
        """Third-person camera image of task ``index``, uint8 [H, W, 3] (for videos)."""
        return self.tasks[index].render_scene(height, width)


def make_env(num_envs: int = 1, difficulty: str | Difficulty = "default", image_size: int = 84,
             seed: int | None = None, parallel: bool = True, device: str | torch.device = "cpu",
             episode_seeds: Sequence[int] | None = None, **env_kwargs: Any) -> EnvBase:
    """Builds the TorchRL PCB inspection env.

    One env has batch size ``[]``. Several (``num_envs > 1``) have batch size ``[num_envs]``: with
    ``parallel=True`` each runs in its own ``ParallelEnv`` worker process, started with ``spawn`` (a process forked
    after its parent rendered with Mesa hangs; each worker makes its own renderer on first use); with
    ``parallel=False`` they are stepped in this process. With ``seed``, env ``i`` draws its boards from seed
    ``seed + i`` (parallel) or all envs share one seeded stream (in process). ``episode_seeds`` are the boards
    to inspect first, dealt round-robin: env ``i`` takes ``episode_seeds[i::num_envs]``. ``env_kwargs`` go to
    ``InspectionEnv`` (task, arm, randomization, reward_weights, max_steps, ...).
    """
    if num_envs < 1:
        raise ValueError(f"make_env: num_envs must be >= 1, got {num_envs}")
    render_on_device(device)  # an env on a GPU renders there (EGL), in its worker processes too
    if "task" in env_kwargs:  # as a class: a worker process knows only the built-in names (and imports nothing)
        env_kwargs["task"] = get_task(env_kwargs["task"])
    create = partial(InspectionEnv, difficulty=difficulty, image_size=image_size, **env_kwargs)
    seeds = list(episode_seeds or ())
    if num_envs == 1:
        env = create(device=device, episode_seeds=seeds)
    elif parallel:
        per_worker = [{"episode_seeds": seeds[i::num_envs]} for i in range(num_envs)]
        env = ParallelEnv(num_envs, create, create_env_kwargs=per_worker, mp_start_method="spawn", device=device)
    else:
        env = create(num_envs=num_envs, device=device, episode_seeds=seeds)
    if seed is not None:
        env.set_seed(seed)
    return env


def proof_env(difficulty: str, image_size: int, arm: str | ArmSpec = DEFAULT_ARM,
              task: str | type[InspectionTask] = DEFAULT_TASK) -> InspectionEnv:
    """An env for its specs only (it never renders unless reset)."""
    return InspectionEnv(difficulty=difficulty, image_size=image_size, arm=arm, task=task)
