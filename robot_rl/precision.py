"""Compute precision of the image encoder: bf16 where the hardware runs it natively, fp32 elsewhere.

ResNet18 dominates every stage's time (BC steps, PPO collection, evaluation, the video pass). bf16 autocast
speeds it up where the processor has bf16 instructions (x86 ``avx512_bf16`` / ``amx_bf16``, Arm ``bf16``, CUDA
GPUs that support it) and slows it down where it is emulated, so ``auto`` follows the hardware.

Only the encoder's forward runs in bf16: the heads (``robot_rl.policy.ActorHeads``) and the critic force fp32,
and master weights, optimizer state, losses, checkpoints and exports stay fp32, so an exported policy never depends
on the precision it was trained in. ``benchmarks/ppo_throughput.py`` measures both precisions on the machine it runs
on (and ``results/bc_throughput.json`` BC's).
"""

from __future__ import annotations

import contextlib
import platform
from functools import lru_cache
from pathlib import Path

import torch

from robot_rl.configs import PRECISIONS

# CPU flags (Linux /proc/cpuinfo) that mean bf16 matrix work runs natively: x86 AVX-512 BF16 or AMX, Arm BF16.
NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})


@lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The processor's feature flags as Linux reports them (x86 ``flags``, Arm ``Features``); empty elsewhere."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def native_bf16(device: torch.device) -> bool:
    """Whether ``device`` runs bf16 matrix products natively (not emulated, which is slower than fp32)."""
    if device.type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False)
    if device.type == "cpu":
        return bool(cpu_flags() & NATIVE_BF16_FLAGS)
    return False


def resolve_precision(name: str, device: torch.device | str) -> str:
    """``auto`` -> ``bf16`` where ``device`` runs it natively, else ``fp32``; ``fp32`` and ``bf16`` as given."""
    if name not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {name!r}")
    if name != "auto":
        return name
    return "bf16" if native_bf16(torch.device(device)) else "fp32"


def autocast(precision: str, device: torch.device | str):
    """A bf16 autocast context on ``device``'s type for ``bf16``; nothing for ``fp32``."""
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)


def describe(precision: str, device: torch.device | str) -> dict:
    """What a results file or run config records: the precision asked for, the one that ran, and why."""
    device = torch.device(device)
    return {"asked": precision, "ran": resolve_precision(precision, device), "device": device.type,
            "native_bf16": native_bf16(device), "cpu_bf16_flags": sorted(cpu_flags() & NATIVE_BF16_FLAGS),
            "machine": platform.machine()}
