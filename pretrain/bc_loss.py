"""Behaviour-cloning loss for the composite (pose + verdict) action.

TorchRL's ``BCLoss`` compares one action tensor and runs the actor twice (sample, then distribution); this
action is a TensorDict of two leaves and the decision term needs the verdict logits, so the same terms (NLL of
the expert action under the policy's distribution) are computed here from one forward pass:

- ``loss_pose``: negative log-likelihood of the expert pose under the TanhNormal; targets are clamped inside
  (-1, 1) so atanh stays finite (the expert saturates at +-1 far from its goal).
- ``loss_pose_mode``: squared error of the deterministic pose (tanh of the location, what evaluation and export
  run) against the expert's. The likelihood alone is maximized by a wide TanhNormal centred on zero, which puts
  its mass at both saturations (-1 and +1, where the far-from-the-board expert actions are): a BC policy trained on
  it alone had a scale near 2 and a location near 0 on the first steps, so its deterministic pose never turned
  towards the board.
- ``loss_verdict``: cross-entropy of the expert verdict (continue / pass / rework) on every frame, the rare
  verdict frames (one per episode) weighted ``verdict_weight`` times a "continue" frame: unweighted, the
  deterministic policy's most likely verdict at the inspection pose stays "continue" and episodes time out.
- ``loss_decision``: on frames near the inspection view (the task's ``near_view``, from the stored privileged
  state: for the PCB task, the camera below 0.2 m above the board and within 3 cm of its centre), cross-entropy
  of pass-vs-rework against the defect label: the verdict the expert would give there. The expert decides on one
  frame per episode; this term teaches the defect classifier from every close view of every board without
  changing what the policy outputs.
- ``loss_timing`` (off unless ``timing_weight`` > 0): on the same close views, binary cross-entropy of the
  answer-now logit (``logsumexp(pass, rework) - continue``) against "the expert answered on this frame", the two
  classes weighted equally within the batch. Through ``loss_verdict`` alone, an arm that settles for many frames
  at the board before the expert answers (the Panda: about 12 waiting frames per verdict) kept p(answer now) at
  the weighted prior (~0.3) everywhere through 6 epochs and never answered (README, "Reading the joint velocities
  is not enough"); this term asks the timing question only where it is asked, at equal odds.
- ``loss_locate``: an auxiliary head on the encoder's features regresses where the board is relative to the
  camera (world-frame offset of its centre, from the stored privileged state, in decimetres). Pose actions are
  world-frame moves towards that point, so this gives the encoder a direct, dense signal for what the pose needs;
  through the action likelihood alone the policy stayed blind to the board for epochs and flew the mean path.
  The head is training-only: the policy, PPO and export never see it.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from tensordict import TensorDict, TensorDictBase
from torch import nn
from torchrl.modules import ProbabilisticActor

from robot_rl import keys
from robot_rl.envs.tasks.pcb_inspect import PcbInspectTask
from robot_rl.policy import actor_encoder

BATCH_KEYS = (keys.PIXELS, keys.JOINT_STATE, keys.EXPERT_POSE, keys.EXPERT_VERDICT, keys.DEFECTIVE,
              keys.CAMERA_POSE, keys.BOARD_POSE)


class BehaviourCloningLoss(nn.Module):
    """``forward(batch)`` -> TensorDict of ``loss_*`` terms (summed for the update) and detached metrics."""

    def __init__(self, actor: ProbabilisticActor, decision_weight: float = 1.0, verdict_weight: float = 1.0,
                 locate_weight: float = 0.0, mode_weight: float = 0.0, timing_weight: float = 0.0,
                 pose_clamp: float = 0.995,
                 near_view: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = PcbInspectTask.near_view):
        super().__init__()
        self.actor, self.decision_weight, self.pose_clamp = actor, decision_weight, pose_clamp
        self.verdict_weight, self.locate_weight, self.mode_weight = verdict_weight, locate_weight, mode_weight
        self.timing_weight = timing_weight
        self.near_view = near_view  # the task's: frames where the pass/rework decision is also trained
        encoder = actor_encoder(actor)
        self.locator = nn.Linear(encoder.output_shape()[0], 3) if locate_weight > 0 else None
        self._features: list[torch.Tensor] | None = None  # a list only while this loss runs the actor
        if self.locator is not None:
            # The features of the actor's own forward pass (no second encoder pass).
            encoder.register_forward_hook(self._keep_features)

    def _keep_features(self, module, inputs, output) -> None:
        if self._features is not None:
            self._features.append(output)

    def forward(self, batch: TensorDictBase) -> TensorDictBase:
        self._features = []
        try:
            dist = self.actor.get_dist(batch)  # also writes the distribution parameters into ``batch``
        finally:
            features, self._features = self._features, None
        expert_pose = batch.get(keys.EXPERT_POSE)
        expert_verdict = batch.get(keys.EXPERT_VERDICT)
        target = TensorDict({keys.POSE: expert_pose.clamp(-self.pose_clamp, self.pose_clamp),
                             keys.VERDICT: expert_verdict}, batch_size=batch.batch_size)
        log_prob = dist.log_prob(target)
        loss_pose = -log_prob.get(keys.POSE_LOG_PROB).mean()
        weights = torch.where(expert_verdict != 0, self.verdict_weight, 1.0)
        loss_verdict = -(weights * log_prob.get(keys.VERDICT_LOG_PROB)).sum() / weights.sum()

        logits = batch.get((*keys.VERDICT_PARAMS, "logits")).float()
        in_view = self.near_view(batch.get(keys.CAMERA_POSE), batch.get(keys.BOARD_POSE))
        defective = batch.get(keys.DEFECTIVE).reshape(-1).long()
        if in_view.any():
            decision_logits = logits[in_view][:, 1:]  # pass, rework
            loss_decision = F.cross_entropy(decision_logits, defective[in_view])
            decision_accuracy = (decision_logits.argmax(-1) == defective[in_view]).float().mean()
        else:
            loss_decision = logits.sum() * 0.0
            decision_accuracy = torch.tensor(float("nan"), device=logits.device)

        extra: dict[str, torch.Tensor] = {}
        if self.timing_weight > 0:
            extra |= _balanced_timing_terms(logits[in_view], expert_verdict[in_view], self.timing_weight)

        pose_mean = torch.tanh(batch.get((*keys.POSE_PARAMS, "loc")).float())
        if self.locator is not None:
            offset = (batch.get(keys.BOARD_POSE)[..., :3] - batch.get(keys.CAMERA_POSE)[..., :3]).float() * 10
            error = self.locator(features[-1].float()) - offset
            extra |= {"loss_locate": self.locate_weight * error.pow(2).sum(-1).mean(),
                      "locate_error_cm": error.detach().norm(dim=-1).mean() * 10}
        return TensorDict({
            **extra,
            "loss_pose": loss_pose,
            "loss_pose_mode": self.mode_weight * (pose_mean - expert_pose).pow(2).sum(-1).mean(),
            "loss_verdict": loss_verdict,
            "loss_decision": self.decision_weight * loss_decision,
            "pose_mae": (pose_mean - expert_pose).abs().mean().detach(),
            "verdict_accuracy": (logits.argmax(-1) == expert_verdict).float().mean().detach(),
            "decision_accuracy": decision_accuracy.detach(),
        }, batch_size=[])


def _balanced_timing_terms(logits: torch.Tensor, expert_verdict: torch.Tensor, weight: float) -> dict:
    """``loss_timing`` and its accuracy on close-view frames: the answer-now logit against "the expert answered
    here", answered and waiting frames weighted equally (each class's weights sum to 1/2)."""
    answer_now = logits[:, 1:].logsumexp(-1) - logits[:, 0]
    answered = (expert_verdict != 0).float()
    if answered.numel() == 0:
        zero = logits.sum() * 0.0
        return {"loss_timing": zero, "timing_accuracy": torch.tensor(float("nan"), device=logits.device)}
    positives = answered.sum().clamp(min=1.0)
    negatives = (1 - answered).sum().clamp(min=1.0)
    weights = torch.where(answered > 0, 0.5 / positives, 0.5 / negatives)
    loss = (weights * F.binary_cross_entropy_with_logits(answer_now, answered, reduction="none")).sum()
    accuracy = ((answer_now > 0).float() == answered).float().mean()
    return {"loss_timing": weight * loss, "timing_accuracy": accuracy.detach()}


def total_loss(losses: TensorDictBase) -> torch.Tensor:
    """Sum of the ``loss_*`` entries (TorchRL's convention for loss outputs)."""
    return sum(value for key, value in losses.items() if key.startswith("loss_"))
