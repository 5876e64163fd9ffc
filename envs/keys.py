"""TensorDict keys of robot_rl, defined once.

Everything that reads or writes environment data (env, expert, datasets, policy, losses, metrics) imports its keys
from here. Nested keys are tuples, as TensorDict expects.

| key               | dtype, shape       | meaning                                                      |
| ----------------- | ------------------ | ------------------------------------------------------------ |
| PIXELS            | uint8 [H, W, 3]    | wrist camera image, RGB, channels-last (as Gymnasium, TorchRL) |
| JOINT_STATE       | float32 [12]       | 6 joint angles (rad) then 6 joint velocities (rad/s)          |
| POSE              | float32 [6]        | action: camera-pose delta in [-1, 1] (3 translation, 3 rot.)  |
| VERDICT           | int64 []           | action: 0 continue, 1 pass, 2 rework                          |
| TASK / ...        | see below          | privileged task state: expert and metrics only, never policy |
| INFO / ...        | bool [1]           | per-step flags: collision, localized, success, unstable       |
| SEGMENTATION      | uint8 [H, W]       | class of each pixel of PIXELS (optional: demos collected with |
|                   |                    | --masks); privileged, never a policy input                    |
| PERCEPTION / ...  | see below          | perception targets of PIXELS (encoder pretraining views)      |
| REWARD_TERMS / .. | float32 [1]        | weighted reward terms; they sum to REWARD                     |
"""

from __future__ import annotations

# Observations the policy reads.
PIXELS = "pixels"
JOINT_STATE = "joint_state"
POLICY_OBSERVATIONS = (PIXELS, JOINT_STATE)

# The composite action.
ACTION = "action"
POSE = (ACTION, "pose")
VERDICT = (ACTION, "verdict")

# The scripted expert's own action, the label behaviour cloning learns from (it differs from the executed action
# when demonstrations are collected with action noise).
EXPERT = "expert"
EXPERT_POSE = (EXPERT, "pose")
EXPERT_VERDICT = (EXPERT, "verdict")

# Privileged task state (under its own sub-TensorDict).
TASK = "task"
EPISODE_SEED = (TASK, "episode_seed")  # int64 [1]: the seed the board was generated from
BOARD_POSE = (TASK, "board_pose")  # float32 [4]: board centre x, y, top-surface z (m), yaw (rad)
DEFECTIVE = (TASK, "defective")  # bool [1]: the board needs rework
DEFECT_TYPE = (TASK, "defect_type")  # int64 [1]: index into the task's defect_types (InspectionTask)
CAMERA_POSE = (TASK, "camera_pose")  # float32 [7]: wrist camera position (m) and orientation quaternion (wxyz)

# Privileged labels of the image (robot_rl.envs.perception): never policy inputs. The mask is optional in a demo
# dataset (collect-demos --masks); its values index perception.SEGMENTATION_CLASSES.
SEGMENTATION = "segmentation"  # uint8 [H, W]: background 0, table 1, board 2, parts 3, arm 4
PERCEPTION = "perception"  # InspectionTask.perception_targets(), entries as perception.PERCEPTION_TARGETS
POINT_PIXEL = (PERCEPTION, "point_pixel")  # float32 [2]: inspection target's column, row in the image (pixels)
POINT_IN_VIEW = (PERCEPTION, "point_in_view")  # bool [1]
VIEW_DISTANCE = (PERCEPTION, "distance")  # float32 [1]: camera to inspection target (m)
VIEW_TILT = (PERCEPTION, "tilt")  # float32 [1]: optical axis vs the inspection view's axis (rad)
VIEWPOINT_OFFSET = (PERCEPTION, "viewpoint_offset")  # float32 [3]: to the inspection point, camera frame (m)
VIEW_LOCALIZED = (PERCEPTION, "localized")  # bool [1]
VIEW_DEFECT = (PERCEPTION, "defect_type")  # int64 [1]

# Per-step information flags.
INFO = "info"
COLLISION = (INFO, "collision")
LOCALIZED = (INFO, "localized")
SUCCESS = (INFO, "success")
UNSTABLE = (INFO, "unstable")
INFO_FLAGS = ("collision", "localized", "success", "unstable")

# TorchRL conventions.
REWARD = "reward"
DONE = "done"
TERMINATED = "terminated"
TRUNCATED = "truncated"
NEXT = "next"

# Reward terms, each already multiplied by its weight.
REWARD_TERMS = "reward_terms"
REWARD_TERM_NAMES = ("verdict", "localization", "collision", "shaping", "guess", "dwell")


def reward_term(name: str) -> tuple[str, str]:
    """Nested key of one weighted reward term, e.g. ``("reward_terms", "collision")``."""
    if name not in REWARD_TERM_NAMES:
        raise KeyError(f"unknown reward term {name!r}; known: {', '.join(REWARD_TERM_NAMES)}")
    return (REWARD_TERMS, name)
