"""PPO's clipped loss for the composite (pose, verdict) action, with what fine-tuning a BC policy needs.

``ClipPPOLoss`` does the surrogate, value and entropy terms. What this subclass adds, and why (none of it is in
TorchRL, which knows nothing of what the action leaves mean):

- **Pose ignored on verdict steps** (``mask_verdict_pose``): a step that gives a verdict ends the episode and the
  arm does not move, so the sampled pose there is noise. Without the mask its log-prob joins the verdict's in one
  ratio, and one clip throttles both heads: a verdict whose probability must move far is clipped by the pose.
- **Verdict cross-entropy from the reward** (``verdict_ce_weight``): the verdict reward of a two-class decision
  (+1 correct, -1 wrong) reveals the right class, so every verdict step is a labelled example for the
  pass-vs-rework logits, with no extra labels. A policy-gradient step on a confidently wrong verdict moves its
  logits by about p(chosen), almost nothing; the cross-entropy moves them by (1 - p(right)). It acts on the two
  answer logits only, so it never pushes the policy to answer earlier (that is the surrogate's job), and only on
  verdicts given with the board localized (when the batch has the env's ``localized`` flag): learning to guess
  better from afar would make guessing pay and pull the policy away from inspecting.
- **'Continue' taught on every guess** (``guess_ce_weight``): on every step that gave a verdict with the board not
  localized (the env's ``localized`` flag for the frame's own state, privileged like the critic's), a
  cross-entropy toward 'continue': the guess's counterpart of the verdict cross-entropy. The reward prices a guess
  below a look, but a policy-gradient step on a confident guess moves its logits by about p(continue), almost
  nothing; the cross-entropy moves them by p(answer). It acts only where the sampled policy answered away from the
  view, never on the frames where it kept looking: taught on every frame away from the view, the same label
  outweighs the clipped surrogate near the view and the policy stops answering there too.
- **An optional KL anchor** toward the pretrained policy (DAPG-style, decaying to a floor),
  ``weight * KL(pretrained || current)`` on the pose and the verdict, or on the pose only (``anchor_verdict=False``).
  The trainer leaves it off by default: anchored to a partly working BC policy, PPO lifted less far.
  The current policy's distribution is caught in ``_get_cur_log_prob`` (TorchRL's documented extension point),
  so the anchor costs no extra forward pass.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase
from torch.distributions import Normal, kl_divergence
from torchrl.modules import ProbabilisticActor
from torchrl.objectives import ClipPPOLoss

from robot_rl import keys


@torch.no_grad()
def anchor_parameters(pretrained: ProbabilisticActor, batch: TensorDictBase, chunk: int = 1024) -> TensorDictBase:
    """The frozen pretrained policy's distribution parameters on ``batch`` (under ``keys.ANCHOR``), computed
    ``chunk`` frames at a time so a large batch of images never runs as one network call."""
    parts = []
    for start in range(0, batch.shape[0], chunk):
        frames = batch[start:start + chunk].select(*pretrained.det_part.in_keys).clone(False)
        params = pretrained.get_dist_params(frames)
        parts.append(TensorDict({
            keys.ANCHOR_POSE_LOC: params.get((*keys.POSE_PARAMS, "loc")).float(),
            keys.ANCHOR_POSE_SCALE: params.get((*keys.POSE_PARAMS, "scale")).float(),
            keys.ANCHOR_VERDICT_LOGITS: params.get((*keys.VERDICT_PARAMS, "logits")).float(),
        }, batch_size=params.batch_size))
    return torch.cat(parts)


def verdict_targets(verdict: torch.Tensor, verdict_reward: torch.Tensor) -> torch.Tensor:
    """The right answer of each verdict step as an index into (pass, rework): the chosen verdict if it was
    rewarded, the other one if it was penalized. ``verdict`` int64 [B] in {1, 2}, ``verdict_reward`` [B]."""
    chosen = verdict - 1
    return torch.where(verdict_reward > 0, chosen, 1 - chosen)


class FinetunePPOLoss(ClipPPOLoss):
    """``ClipPPOLoss`` plus the pose mask, the reward-derived verdict cross-entropy, the guesses' 'continue'
    cross-entropy and the KL anchor (see the module docstring). Reports ``loss_verdict_ce``, ``loss_guess_ce``,
    ``loss_anchor`` and ``anchor_kl`` when they are active.

    Inputs: what ``ClipPPOLoss`` reads, plus, when present, ``keys.ANCHOR`` (the start policy's distribution
    parameters and the iteration's anchor weight, written by ``PPOLearner.prepare``) and the env's
    ``("next", "info", "localized")`` and verdict reward term (the cross-entropy's labels) and the frame's own
    ``localized`` flag (the guess term's). Overrides: ``forward`` (the mask
    on the stored log-prob, the extra terms) and ``_get_cur_log_prob``, TorchRL's extension point for the current
    policy's log-prob (a private name, pinned by a test against ``ClipPPOLoss``), to apply the mask there and
    keep the distribution for the anchor and the cross-entropy without a second forward pass."""

    def __init__(self, *args, anchor_verdict: bool = True, mask_verdict_pose: bool = True,
                 verdict_ce_weight: float = 0.0, guess_ce_weight: float = 0.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.anchor_verdict = anchor_verdict
        self.mask_verdict_pose, self.verdict_ce_weight = mask_verdict_pose, verdict_ce_weight
        self.guess_ce_weight = guess_ce_weight
        self._current_dist = None
        self._pose_kept = None

    def _get_cur_log_prob(self, tensordict, params=None):
        log_prob, dist, is_composite = super()._get_cur_log_prob(tensordict, params=params)
        if params is None:  # the current policy (not a proximal/target copy)
            self._current_dist = dist
        if self._pose_kept is not None:
            log_prob.set(keys.POSE_LOG_PROB, log_prob.get(keys.POSE_LOG_PROB) * self._pose_kept)
        return log_prob, dist, is_composite

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        self._current_dist = None
        verdict = tensordict.get(keys.VERDICT)
        if self.mask_verdict_pose:
            # The stored log-prob gets the same mask, so the ratio of a verdict step is the verdict's alone.
            self._pose_kept = (verdict == 0).float()
            tensordict = tensordict.clone(False)
            tensordict.set(keys.POSE_LOG_PROB, tensordict.get(keys.POSE_LOG_PROB) * self._pose_kept)
        try:
            out = super().forward(tensordict)
        finally:
            self._pose_kept = None
        dist, self._current_dist = self._current_dist, None
        if dist is None:
            return out
        if self.verdict_ce_weight > 0:
            answered = verdict != 0
            localized = tensordict.get((keys.NEXT, *keys.LOCALIZED), None)
            if localized is not None:  # judge views of the board only: never learn to guess better from afar
                answered = answered & localized.reshape(verdict.shape)
            if answered.any():
                logits = dist.dists[keys.VERDICT].logits[answered][:, 1:]  # (pass, rework)
                reward = tensordict.get((keys.NEXT, *keys.reward_term("verdict"))).reshape(verdict.shape)
                targets = verdict_targets(verdict[answered], reward[answered])
                ce = torch.nn.functional.cross_entropy(logits.float(), targets, reduction="sum") / verdict.numel()
            else:
                ce = dist.dists[keys.VERDICT].logits.sum() * 0.0  # keeps the graph (DDP expects every parameter)
            out.set("loss_verdict_ce", self.verdict_ce_weight * ce)
        if self.guess_ce_weight > 0:
            out.set("loss_guess_ce", self.guess_ce_weight * self._guess_ce(dist, tensordict, verdict))
        if keys.ANCHOR in tensordict.keys():
            pose_kl, verdict_kl = (kl.mean() for kl in self._anchor_kl(dist, tensordict))
            out.set("anchor_kl", (pose_kl + verdict_kl).detach())  # KL to the start, both heads, for the logs
            weight = tensordict.get(keys.ANCHOR_WEIGHT).reshape(-1)[0]
            if weight > 0:
                out.set("loss_anchor", weight * (pose_kl + verdict_kl if self.anchor_verdict else pose_kl))
        return out

    @staticmethod
    def _guess_ce(dist, tensordict: TensorDictBase, verdict: torch.Tensor) -> torch.Tensor:
        """-log p(continue) summed over the guesses (a verdict given with the board not localized), per frame of
        the batch."""
        localized = tensordict.get(keys.LOCALIZED, None)
        if localized is None:
            raise KeyError(f"guess_ce_weight > 0 needs the env's {keys.LOCALIZED} flag on every frame")
        guesses = (verdict != 0) & ~localized.reshape(verdict.shape)
        log_p_continue = dist.dists[keys.VERDICT].logits.float().log_softmax(-1)[..., 0]
        return -(log_p_continue * guesses).sum() / verdict.numel()

    @staticmethod
    def _anchor_kl(dist, tensordict: TensorDictBase) -> tuple[torch.Tensor, torch.Tensor]:
        """KL(pretrained || current) per frame [B], of the pose (the pre-tanh Normals': tanh is a bijection) and
        of the verdict."""
        pose, verdict = dist.dists[keys.POSE], dist.dists[keys.VERDICT]
        current_normal = pose.root_dist
        anchor_normal = Normal(tensordict.get(keys.ANCHOR_POSE_LOC), tensordict.get(keys.ANCHOR_POSE_SCALE))
        pose_kl = kl_divergence(anchor_normal, Normal(current_normal.loc.float(), current_normal.scale.float()))
        # From log-softmax, not torch's Categorical KL: that one is inf wherever a probability underflows to 0,
        # which a confident BC verdict head (logit gaps near 100) reaches.
        anchor_log_p = tensordict.get(keys.ANCHOR_VERDICT_LOGITS).float().log_softmax(-1)
        current_log_p = verdict.logits.float().log_softmax(-1)
        verdict_kl = (anchor_log_p.exp() * (anchor_log_p - current_log_p)).sum(-1)
        return pose_kl.sum(-1), verdict_kl
