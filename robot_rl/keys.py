"""Every TensorDict key of robot_rl in one import: the environment's (robot_rl.envs.keys) and the models'.

Environment keys are defined in robot_rl.envs.keys (the env package depends on nothing else of ours); the keys
that only models, losses and datasets write are defined here.
"""

from robot_rl.envs.keys import *  # noqa: F403
from robot_rl.envs.keys import ACTION

# Policy internals and outputs.
FEATURES = "features"  # float32 [F]: encoder output (image features + normalized joint state)
PARAMS = "params"  # distribution parameters: params/pose/{loc, scale}, params/verdict/logits
POSE_PARAMS = (PARAMS, "pose")
VERDICT_PARAMS = (PARAMS, "verdict")
# With tensordict's default (composite log-probs not aggregated) each log-prob sits next to its action leaf.
POSE_LOG_PROB = (ACTION, "pose_log_prob")
VERDICT_LOG_PROB = (ACTION, "verdict_log_prob")
STATE_VALUE = "state_value"

# Demonstration datasets.
EPISODE = "episode"  # int64 []: index of the episode in its dataset
STEP = "step"  # int64 []: index of the frame in its episode (0 = the reset observation)

# PPO fine-tuning.
ANCHOR = "anchor"  # the pretrained (frozen) policy's distribution parameters on the collected states
ANCHOR_POSE_LOC = (ANCHOR, "pose_loc")
ANCHOR_POSE_SCALE = (ANCHOR, "pose_scale")
ANCHOR_VERDICT_LOGITS = (ANCHOR, "verdict_logits")
ANCHOR_WEIGHT = (ANCHOR, "weight")  # float32 []: the anchor's weight this iteration (0 = its KL is only logged)
