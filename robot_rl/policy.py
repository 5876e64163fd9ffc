"""The vision policy: ResNet18 encoder + joint state -> TanhNormal pose and categorical verdict.

Shapes, bounds and keys come from the environment's specs (``make_actor(env.observation_spec, ...)``), not
constants. The actor is one TorchRL ``ProbabilisticActor`` over a ``CompositeDistribution``; BC, PPO, evaluation
and export all load it from here. PPO fine-tuning values states with the privileged-state critic of
``robot_rl.finetune.critic``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from tensordict.nn import CompositeDistribution, TensorDictModule, TensorDictModuleBase, TensorDictSequential
from torch import nn
from torch.distributions import Categorical
from torchrl.data import Composite
from torchrl.modules import ProbabilisticActor, TanhNormal, ValueOperator

from robot_rl import keys
from robot_rl.configs import ActorArchitecture
from robot_rl.encoder import ObservationEncoder


@dataclass(frozen=True)
class PolicyConfig(ActorArchitecture):
    """Architecture of the actor: ``ActorArchitecture``'s options (their defaults live there) and the verdict's
    sampling settings."""

    # The verdict's "answer now?" decision (``factored_verdict_logits``): its temperature, and the least
    # probability of continuing. 1 and 0 = the plain 3-way softmax BC trains; PPO fine-tuning sets others.
    answer_temperature: float = 1.0
    continue_floor: float = 0.0
    # PPO's residual on a frozen policy (``ResidualActorHeads``): the largest change it may make to the pose's loc
    # (pre-tanh). 0 = none: PPO fine-tunes the heads themselves.
    residual_scale: float = 0.0
    # The share of the learned pose scale (above ``min_scale``) the distribution keeps. 1 = the scale BC learned;
    # BC fits it to the demonstrations' spread, which PPO's sampled episodes can afford only where the task forgives
    # (``FinetuneConfig.pose_scale_factor`` sets less).
    pose_scale_factor: float = 1.0

    @classmethod
    def of(cls, options: ActorArchitecture) -> PolicyConfig:
        """The architecture options of ``options`` (a ``BCConfig``, say), the verdict's sampling at its defaults."""
        return cls(**options.architecture())

    def __post_init__(self) -> None:
        for name, passed, rule in self.architecture_checks():
            if not passed:
                raise ValueError(f"PolicyConfig.{name} must be {rule}, got {getattr(self, name)!r}")
        if self.answer_temperature <= 0:
            raise ValueError(f"PolicyConfig.answer_temperature must be > 0, got {self.answer_temperature}")
        if not 0 <= self.continue_floor < 1:
            raise ValueError(f"PolicyConfig.continue_floor must be in [0, 1), got {self.continue_floor}")
        if not 0 <= self.residual_scale < 10:
            raise ValueError(f"PolicyConfig.residual_scale must be in [0, 10), got {self.residual_scale}")
        if not 0 < self.pose_scale_factor <= 1:
            raise ValueError(f"PolicyConfig.pose_scale_factor must be in (0, 1], got {self.pose_scale_factor}")


def _mlp(inputs: int, hidden: int, outputs: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, outputs))


def factored_verdict_logits(logits: torch.Tensor, answer_temperature: float,
                            continue_floor: float = 0.0) -> torch.Tensor:
    """Verdict logits [*B, 3] (continue, pass, rework) as "answer now?" x "which answer": log-probabilities
    [*B, 3] of

        p(answer now) = (1 - eps) * sigmoid(a / T),   p(pass | answer), p(rework | answer) = softmax(pass, rework)

    with ``a = logsumexp(pass, rework) - continue``, the plain softmax's answer-now logit, T the
    ``answer_temperature`` and eps the ``continue_floor``. T = 1, eps = 0 is that softmax exactly.

    Why (measured in README, "Fine-tuning design"): sampled every step, a BC head that answers with 5% a step ends
    half of all 15-step episodes early by chance, so most of PPO's training episodes are guesses. T < 1 sharpens
    when to answer (an unsure head stays unsure) and leaves which answer alone, so sampled episodes answer where
    the deterministic policy would. But a sure answer is then never questioned, also where BC answers too early;
    eps keeps "continue" sampled on a share of such steps, so PPO still sees what waiting would have given. The
    result is an ordinary Categorical over three verdicts: log-probs stay exact."""
    cont, answers = logits[..., :1], logits[..., 1:]
    answer_now = (answers.logsumexp(-1, keepdim=True) - cont) / answer_temperature
    log_continue, log_answer = nn.functional.logsigmoid(-answer_now), nn.functional.logsigmoid(answer_now)
    if continue_floor:
        log_continue = torch.logaddexp(torch.full_like(log_continue, math.log(continue_floor)),
                                       log_continue + math.log1p(-continue_floor))
        log_answer = log_answer + math.log1p(-continue_floor)
    return torch.cat([log_continue, log_answer + answers.log_softmax(-1)], dim=-1)


class ActorHeads(nn.Module):
    """Features -> pose loc [*B, P], pose scale [*B, P] (min_scale + pose_scale_factor x the learned part) and
    verdict logits [*B, V] (factored as in ``factored_verdict_logits`` unless temperature 1 and floor 0)."""

    def __init__(self, features: int, hidden: int, pose_dim: int, verdicts: int, min_scale: float,
                 answer_temperature: float = 1.0, continue_floor: float = 0.0, continue_head: bool = False,
                 pose_scale_factor: float = 1.0):
        super().__init__()
        self.pose_dim, self.min_scale, self.pose_scale_factor = pose_dim, min_scale, pose_scale_factor
        self.answer_temperature, self.continue_floor = answer_temperature, continue_floor
        self.net = _mlp(features, hidden, 2 * pose_dim + verdicts - (1 if continue_head else 0))
        # Why "answer now?" may get an MLP of its own: with one MLP, p(answer now) = sigmoid(logsumexp(pass, rework)
        # - continue) moves with the pass-vs-rework logits, which BC's decision loss (weight 100) scales up, and
        # the shared hidden layers are shaped by losses that need no joint speed. A policy that must wait for an
        # arm still settling at the board (the Panda) never learned when to answer that way; with an MLP of its
        # own it did not learn it in 6 BC epochs either (README, "Arms"); BC's `timing_weight` asks for it directly.
        self.answer_now_net = _mlp(features, hidden, 1) if continue_head else None

    @torch.no_grad()
    def bias_answer_now(self, answer_logit: float) -> None:
        """Near-constant verdicts: p(answer now) = sigmoid(answer_logit) and the answers equally likely, whatever
        the features (their weights scaled by 0.01)."""
        last, pose = self.net[-1], 2 * self.pose_dim
        last.weight[pose:] *= 0.01
        last.bias[pose:] = 0.0
        if self.answer_now_net is not None:
            self.answer_now_net[-1].weight *= 0.01
            self.answer_now_net[-1].bias.fill_(answer_logit)
        else:  # answer-now logit = log(answers) - continue's bias
            last.bias[pose] = math.log(last.out_features - pose - 1) - answer_logit

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        # Always fp32, even under autocast: PPO's ratio compares these log-probs with those stored at collection
        # (which runs without autocast); bf16 heads would make a first-minibatch ratio differ from 1.
        with torch.autocast(features.device.type, enabled=False):
            out = self.net(features.float())
            if self.answer_now_net is not None:
                # "continue" written so that the 3-way softmax answers now with sigmoid(answer-now logit) exactly
                # and keeps softmax(pass, rework) for which answer.
                pose, answers = out.split([2 * self.pose_dim, out.shape[-1] - 2 * self.pose_dim], dim=-1)
                answer_now = self.answer_now_net(features.float())
                out = torch.cat([pose, answers.logsumexp(-1, keepdim=True) - answer_now, answers], dim=-1)
        loc, scale, logits = out.split([self.pose_dim, self.pose_dim, out.shape[-1] - 2 * self.pose_dim], dim=-1)
        if self.answer_temperature != 1.0 or self.continue_floor:
            logits = factored_verdict_logits(logits, self.answer_temperature, self.continue_floor)
        return loc, self.pose_scale_factor * nn.functional.softplus(scale) + self.min_scale, logits


class ResidualActorHeads(ActorHeads):
    """``ActorHeads`` plus a residual on the pose's loc: ``loc + residual_scale * tanh(residual(features))``, the
    residual MLP's last layer zero, so the policy starts as the heads alone. ``load_pretrained_weights`` freezes
    everything else: PPO trains the residual only, and the pose scale and the verdict stay the pretrained policy's.

    Why (ResiP, Ankile et al. 2024): PPO fine-tuning every head of a precise, few-demo policy can find that guessing
    the verdict pays sooner than a better approach (the lead task's PPO ended guessing); a bounded correction of the
    approach, with the verdict left as BC taught it, cannot trade localization for guesses. The base heads keep
    their parameter names, so a BC checkpoint loads into them as it is."""

    def __init__(self, features: int, hidden: int, pose_dim: int, verdicts: int, min_scale: float,
                 answer_temperature: float = 1.0, continue_floor: float = 0.0, continue_head: bool = False,
                 pose_scale_factor: float = 1.0, residual_scale: float = 0.1):
        super().__init__(features, hidden, pose_dim, verdicts, min_scale, answer_temperature, continue_floor,
                         continue_head, pose_scale_factor)
        self.residual_scale = residual_scale
        self.residual = _mlp(features, hidden, pose_dim)
        nn.init.zeros_(self.residual[-1].weight)
        nn.init.zeros_(self.residual[-1].bias)

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        loc, scale, logits = super().forward(features)
        with torch.autocast(features.device.type, enabled=False):
            correction = self.residual_scale * torch.tanh(self.residual(features.float()))
        return loc + correction, scale, logits


class ActorNetwork(nn.Module):
    """Pixels and joint state -> distribution parameters (one encoder pass)."""

    def __init__(self, encoder: ObservationEncoder, heads: ActorHeads):
        super().__init__()
        self.encoder, self.heads = encoder, heads

    def forward(self, pixels: torch.Tensor, joint_state: torch.Tensor):
        return self.heads(self.encoder(pixels, joint_state))


def spec_leaf(spec: Composite, key):
    """One env's spec of ``key``: specs of batched envs carry the batch dims; networks see one env's shapes."""
    leaf = spec[key]
    return leaf[(0,) * len(spec.shape)] if spec.shape else leaf


def _encoder(observation_spec: Composite, config: PolicyConfig) -> ObservationEncoder:
    joints = spec_leaf(observation_spec, keys.JOINT_STATE)
    return ObservationEncoder(joints.space.low.float(), joints.space.high.float(), config.encoder_weights,
                              config.keypoints, config.joint_velocities)


def make_actor(observation_spec: Composite, action_spec: Composite,
               config: PolicyConfig | None = None) -> ProbabilisticActor:
    """The stochastic actor: writes ``keys.POSE``, ``keys.VERDICT`` and their log-probs (``POSE_LOG_PROB``,
    ``VERDICT_LOG_PROB``) from ``keys.PIXELS`` and ``keys.JOINT_STATE``. Deterministic mode gives tanh(loc)
    for the pose and the most likely verdict."""
    config = config or PolicyConfig()
    pose_spec, verdict_spec = spec_leaf(action_spec, keys.POSE), spec_leaf(action_spec, keys.VERDICT)
    encoder = _encoder(observation_spec, config)
    residual = {"residual_scale": config.residual_scale} if config.residual_scale else {}
    heads = (ResidualActorHeads if residual else ActorHeads)(
        encoder.output_shape()[0], config.hidden, pose_spec.shape[-1], verdict_spec.space.n, config.min_scale,
        config.answer_temperature, config.continue_floor, config.continue_head, config.pose_scale_factor, **residual)
    return PolicyActor(ActorNetwork(encoder, heads), pose_spec.space.low, pose_spec.space.high)


PARAM_KEYS = [(*keys.POSE_PARAMS, "loc"), (*keys.POSE_PARAMS, "scale"), (*keys.VERDICT_PARAMS, "logits")]


class PolicyActor(ProbabilisticActor):
    """The policy as TorchRL sees it: a ``ProbabilisticActor`` over a ``CompositeDistribution`` (TanhNormal pose,
    categorical verdict) that also names its parts, so no caller indexes TorchRL's module list or reads its
    distribution kwargs: ``network`` is the ``nn.Module`` computing the distribution parameters, ``pose_low`` and
    ``pose_high`` the TanhNormal's bounds (non-persistent buffers: checkpoints hold the weights only)."""

    def __init__(self, network: nn.Module, low: torch.Tensor, high: torch.Tensor,
                 in_keys=(keys.PIXELS, keys.JOINT_STATE)):
        module = network if isinstance(network, TensorDictModuleBase) else \
            TensorDictModule(network, in_keys=list(in_keys), out_keys=PARAM_KEYS)
        super().__init__(
            module,
            in_keys=[keys.PARAMS],
            out_keys=[keys.POSE, keys.VERDICT],
            distribution_class=CompositeDistribution,
            distribution_kwargs={
                "distribution_map": {"pose": TanhNormal, "verdict": Categorical},
                "name_map": {"pose": keys.POSE, "verdict": keys.VERDICT},
                "extra_kwargs": {"pose": {"low": low, "high": high}},
            },
            return_log_prob=True,
        )
        self.register_buffer("pose_low", torch.as_tensor(low).float(), persistent=False)
        self.register_buffer("pose_high", torch.as_tensor(high).float(), persistent=False)

    @property
    def network(self) -> nn.Module:
        """What writes the distribution parameters: the plain module given to ``__init__`` (or, when it was a
        TensorDict module, that module itself). The first of the two modules ``__init__`` hands TorchRL."""
        params = self[0]
        return params.module if type(params) is TensorDictModule else params


@torch.no_grad()
def set_continue_probability(actor: ProbabilisticActor, probability: float) -> None:
    """Biases a fresh verdict head so that 'continue' has ``probability`` (the answers share the rest equally)
    whatever the features, at the head's answer temperature: a freshly initialized 3-way head answers on two steps
    of three, so from-scratch episodes would end before the camera could find the board."""
    heads = actor_network(actor).heads
    # Answer-now logit a: the head continues with probability eps + (1 - eps) sigmoid(-a / T).
    floor = heads.continue_floor
    if probability <= floor:
        raise ValueError(f"set_continue_probability: {probability} is not above the head's continue floor {floor}")
    sigmoid_continue = (probability - floor) / (1 - floor)
    heads.bias_answer_now(heads.answer_temperature * math.log((1 - sigmoid_continue) / sigmoid_continue))


def load_pretrained_weights(actor: PolicyActor, state: dict) -> None:
    """A pretrained policy's weights into ``actor``, which has the same architecture or that architecture plus a
    residual (``ResidualActorHeads``): the residual keeps its zero start and everything else, the encoder included,
    is frozen (requires_grad is not stored in checkpoints: a resumed run calls this again); any other difference
    is a RuntimeError."""
    missing, unexpected = actor.load_state_dict(state, strict=False)
    heads = actor_network(actor).heads
    residual = isinstance(heads, ResidualActorHeads)
    if unexpected or any(not (residual and ".heads.residual." in name) for name in missing):
        raise RuntimeError(f"the pretrained weights do not fit the actor: missing {missing[:3]}, unexpected "
                           f"{unexpected[:3]}")
    if residual:
        for name, parameter in actor.named_parameters():
            parameter.requires_grad_(".heads.residual." in name)


def rewrap_actor(actor: PolicyActor, network: nn.Module) -> PolicyActor:
    """The same actor around another network module (e.g. its network wrapped in DistributedDataParallel)."""
    return PolicyActor(network, actor.pose_low, actor.pose_high)


def make_feature_actor(features: int, action_spec: Composite, config: PolicyConfig | None = None) -> ProbabilisticActor:
    """An actor whose observation is already a feature vector ``keys.FEATURES`` [*B, features]: the policy heads
    alone (for envs that emit features, e.g. the toy env of the PPO tests)."""
    config = config or PolicyConfig()
    pose_spec, verdict_spec = spec_leaf(action_spec, keys.POSE), spec_leaf(action_spec, keys.VERDICT)
    heads = ActorHeads(features, config.hidden, pose_spec.shape[-1], verdict_spec.space.n, config.min_scale,
                       config.answer_temperature, config.continue_floor, config.continue_head,
                       config.pose_scale_factor)
    return PolicyActor(heads, pose_spec.space.low, pose_spec.space.high, in_keys=(keys.FEATURES,))


def heads_actor(actor: ProbabilisticActor, heads: nn.Module | None = None) -> ProbabilisticActor:
    """The same policy reading cached ``keys.FEATURES`` instead of pixels: ``actor``'s heads (or ``heads``, e.g.
    a DDP wrapper of them) as a ProbabilisticActor. Shares parameters with ``actor``; with a frozen encoder PPO
    trains through it, so no PPO epoch runs the ResNet."""
    return PolicyActor(heads if heads is not None else actor_network(actor).heads, actor.pose_low, actor.pose_high,
                       in_keys=(keys.FEATURES,))


def feature_writing_actor(actor: ProbabilisticActor) -> ProbabilisticActor:
    """``actor`` as a collection policy that also writes ``keys.FEATURES`` (the encoder output) into each step,
    so the learner can reuse them. Shares parameters with ``actor``; samples the same actions."""
    network = actor_network(actor)
    encode = TensorDictModule(network.encoder, in_keys=[keys.PIXELS, keys.JOINT_STATE], out_keys=[keys.FEATURES])
    heads = TensorDictModule(network.heads, in_keys=[keys.FEATURES], out_keys=PARAM_KEYS)
    return PolicyActor(TensorDictSequential(encode, heads), actor.pose_low, actor.pose_high)


def rewrap_critic(critic: ValueOperator, network: nn.Module) -> ValueOperator:
    """The same critic (same keys) around another network module (e.g. its network wrapped in DDP)."""
    return ValueOperator(network, in_keys=list(critic.in_keys), out_keys=list(critic.out_keys))


def actor_network(actor: PolicyActor) -> ActorNetwork:
    """The plain ``nn.Module`` of a ``make_actor`` actor (pixels, joint state -> distribution parameters)."""
    return actor.network


def actor_encoder(actor: ProbabilisticActor) -> ObservationEncoder:
    return actor_network(actor).encoder
