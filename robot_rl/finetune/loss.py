"""PPO's clipped loss plus a decaying KL anchor toward the pretrained policy (DAPG-style), for composite actions.

The anchor is KL(pretrained || current), summed over the pose (the KL of two TanhNormals equals the KL of their
pre-tanh Normals: tanh is a bijection) and the verdict (categorical). The pretrained policy's parameters on a
batch are computed once per iteration (``anchor_parameters``); the current policy's come from the distribution
``ClipPPOLoss`` already builds, caught in ``_get_cur_log_prob`` (the extension point TorchRL documents there), so
the anchor costs no extra forward pass of the actor.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase
from torch.distributions import Categorical, Normal, kl_divergence
from torchrl.modules import ProbabilisticActor
from torchrl.objectives import ClipPPOLoss

from robot_rl import keys


@torch.no_grad()
def anchor_parameters(pretrained: ProbabilisticActor, batch: TensorDictBase) -> TensorDictBase:
    """The frozen pretrained policy's distribution parameters on ``batch`` (under ``keys.ANCHOR``)."""
    params = pretrained.module[0](batch.select(*pretrained.module[0].in_keys).clone(False))
    return TensorDict({
        keys.ANCHOR_POSE_LOC: params.get((*keys.POSE_PARAMS, "loc")).float(),
        keys.ANCHOR_POSE_SCALE: params.get((*keys.POSE_PARAMS, "scale")).float(),
        keys.ANCHOR_VERDICT_LOGITS: params.get((*keys.VERDICT_PARAMS, "logits")).float(),
    }, batch_size=batch.batch_size)


class AnchoredClipPPOLoss(ClipPPOLoss):
    """``ClipPPOLoss`` that also reports ``loss_anchor = weight * KL(pretrained || current)`` when the batch
    carries anchor parameters and ``anchor_weight > 0``."""

    def __init__(self, *args, anchor_weight: float = 0.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.anchor_weight = anchor_weight
        self._current_dist = None

    def _get_cur_log_prob(self, tensordict, params=None):
        log_prob, dist, is_composite = super()._get_cur_log_prob(tensordict, params=params)
        if params is None:  # the current policy (not a proximal/target copy)
            self._current_dist = dist
        return log_prob, dist, is_composite

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        self._current_dist = None
        out = super().forward(tensordict)
        if self.anchor_weight > 0 and keys.ANCHOR in tensordict.keys() and self._current_dist is not None:
            kl = self._anchor_kl(self._current_dist, tensordict)
            out.set("loss_anchor", self.anchor_weight * kl.mean())
            out.set("anchor_kl", kl.detach().mean())
        self._current_dist = None
        return out

    @staticmethod
    def _anchor_kl(dist, tensordict: TensorDictBase) -> torch.Tensor:
        pose, verdict = dist.dists[keys.POSE], dist.dists[keys.VERDICT]
        current_normal = pose.root_dist
        anchor_normal = Normal(tensordict.get(keys.ANCHOR_POSE_LOC), tensordict.get(keys.ANCHOR_POSE_SCALE))
        pose_kl = kl_divergence(anchor_normal, Normal(current_normal.loc, current_normal.scale)).sum(-1)
        verdict_kl = kl_divergence(Categorical(logits=tensordict.get(keys.ANCHOR_VERDICT_LOGITS)),
                                   Categorical(logits=verdict.logits))
        return pose_kl + verdict_kl
