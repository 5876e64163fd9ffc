"""Several learners with torch.distributed (launched by ``torchrun``): DDP gradients, one collector per rank.

``torchrun --nproc_per_node=N -m robot_rl.cli finetune ...`` starts N ranks; each collects with its own envs
(seeded apart), computes its loss on its own batch, and DDP averages the gradients, so every rank holds the same
parameters after each step. NCCL on CUDA, gloo on CPU. Rank 0 alone logs, evaluates and writes checkpoints.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


@dataclass(frozen=True)
class Distributed:
    rank: int
    world_size: int
    local_rank: int

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def wrap(self, module: nn.Module) -> nn.Module:
        # Frozen BatchNorm statistics need no broadcast, and broadcasting them in every forward would make
        # rank 0's solo evaluations wait for the other ranks.
        device_ids = [self.local_rank] if torch.cuda.is_available() else None
        return DistributedDataParallel(module, device_ids=device_ids, broadcast_buffers=False)

    def barrier(self) -> None:
        dist.barrier()

    def close(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()


def setup(seed: int) -> tuple[Distributed | None, int]:
    """(process group or None, this rank's collection seed: ranks collect different boards). The rank's device is
    its compute context's (``robot_rl.compute``: this rank's GPU under ``torchrun``)."""
    group = from_environment()
    return group, seed + (group.rank * 1_000_003 if group is not None else 0)


def wrap(group: Distributed | None, module: nn.Module) -> nn.Module:
    """``module`` DDP-wrapped for the loss when there are several learners; itself otherwise."""
    return group.wrap(module) if group is not None else module


def wrap_critic(group: Distributed | None, critic):
    """The critic operator the loss runs: the same ``ValueOperator`` around a DDP-wrapped network, or itself."""
    from robot_rl.policy import rewrap_critic

    return critic if group is None else rewrap_critic(critic, group.wrap(critic.module))


def all_finite(group: Distributed | None):
    """A check that a loss is finite on every rank (``PPOLearner``'s ``check_finite``)."""

    def check(value: torch.Tensor) -> bool:
        # Every rank must take the same branch, or the ranks that call backward wait forever for the others.
        finite = torch.isfinite(value.detach()).all().float().reshape(1)
        if group is not None:
            dist.all_reduce(finite, op=dist.ReduceOp.MIN)
        return bool(finite.item())

    return check


def mean_over_ranks(group: Distributed | None):
    """``fn(scalar tensor) -> its mean over ranks`` (``PPOLearner``'s KL stop), or None with one learner."""
    if group is None:
        return None

    def mean(value: torch.Tensor) -> torch.Tensor:
        value = value.detach().float().reshape(1).clone()
        dist.all_reduce(value, op=dist.ReduceOp.SUM)
        return value[0] / group.world_size

    return mean


def from_environment() -> Distributed | None:
    """The process group that ``torchrun`` describes in the environment (WORLD_SIZE > 1), or None."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return None
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    if not dist.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        if torch.cuda.is_available():
            torch.cuda.set_device(local_rank)
        dist.init_process_group(backend, timeout=datetime.timedelta(minutes=30))
    return Distributed(rank=rank, world_size=world_size, local_rank=local_rank)
