"""Serving cost of the exported policy on the CPU: each export format against the eager actor.

For TorchScript, ``torch.export`` (the ``.pt2`` program run through ``.module()``), ONNX Runtime and the eager
``DeployedPolicy``: batch 1 latency (p50 / p99 over many single requests, and requests/s served one after the
other) and batch 32 throughput (frames/s). The policy is the default architecture at the given image size; its
weights come from ``--checkpoint`` when given, else a fresh initialization (weights do not change the cost).

    python benchmarks/export_latency.py     # prints a table, writes benchmarks/results/export_latency.json
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from harness import Benchmark, Variant

from robot_rl.export import (
    DeployedPolicy,
    deploy,
    deployed_policy,
    example_inputs,
    export_onnx,
    export_program,
    export_torchscript,
)
from robot_rl.tables import markdown_table

BENCHMARK = Benchmark("export_latency", __doc__, variants=(
    Variant("fresh-weights", (), "every export format against the eager actor, fresh 84x84 weights"),
), common={"threads": (2, "CPU threads of torch and ONNX Runtime"), "out": None})


def fresh_policy(image_size: int) -> DeployedPolicy:
    """The default architecture, freshly initialized, as the deployed (deterministic) program."""
    from robot_rl.envs.torchrl_env import InspectionEnv
    from robot_rl.policy import make_actor

    env = InspectionEnv(difficulty="easy", image_size=image_size)
    return deploy(make_actor(env.observation_spec, env.full_action_spec).eval())


def runners(policy: DeployedPolicy, image_size: int, folder: Path, threads: int) -> dict:
    """name -> callable(pixels uint8 numpy, joint_state float32 numpy) for each format."""
    inputs = example_inputs(image_size)
    export_torchscript(policy, inputs, folder / "policy.torchscript.pt")
    export_program(policy, inputs, folder / "policy.pt2")
    scripted = torch.jit.load(str(folder / "policy.torchscript.pt"))
    program = torch.export.load(folder / "policy.pt2").module()

    def torch_runner(module):
        def run(pixels, joints):
            with torch.inference_mode():
                return module(torch.from_numpy(pixels), torch.from_numpy(joints))
        return run

    found = {"eager": torch_runner(policy), "TorchScript": torch_runner(scripted),
             "torch.export": torch_runner(program)}
    try:
        import onnxruntime
    except ImportError:
        print("export_latency: onnxruntime is not installed (pip install 'robot_rl[onnx]'); ONNX skipped",
              file=sys.stderr)
        return found
    export_onnx(policy, inputs, folder / "policy.onnx")
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    session = onnxruntime.InferenceSession(str(folder / "policy.onnx"), options,
                                           providers=["CPUExecutionProvider"])
    found["ONNX Runtime"] = lambda pixels, joints: session.run(None, {"pixels": pixels, "joint_state": joints})
    return found


def time_calls(run, pixels: np.ndarray, joints: np.ndarray, calls: int, warmup: int) -> np.ndarray:
    """Seconds per call, each call timed on its own."""
    for _ in range(warmup):
        run(pixels, joints)
    seconds = np.empty(calls)
    for i in range(calls):
        start = time.perf_counter()
        run(pixels, joints)
        seconds[i] = time.perf_counter() - start
    return seconds


def options(parser) -> None:
    parser.add_argument("--checkpoint", default="", help="a BC or PPO run or .pt (default: fresh weights)")
    parser.add_argument("--image-size", type=int, default=84, help="image side without --checkpoint")
    parser.add_argument("--calls", type=int, default=500, help="timed batch-1 requests per format")
    parser.add_argument("--batch", type=int, default=32, help="frames per request of the throughput test")


def run(args) -> dict:
    if args.checkpoint:
        policy, provenance, _ = deployed_policy(args.checkpoint)
        image_size = provenance.image_size
    else:
        policy, image_size = fresh_policy(args.image_size), args.image_size
    rng = np.random.default_rng(0)

    def inputs(batch: int) -> tuple[np.ndarray, np.ndarray]:
        return (rng.integers(0, 256, (batch, image_size, image_size, 3), dtype=np.uint8),
                rng.uniform(-1, 1, (batch, 12)).astype(np.float32))

    rows = []
    with tempfile.TemporaryDirectory(prefix="export-latency-") as folder:
        for name, serve in runners(policy, image_size, Path(folder), args.threads).items():
            single = time_calls(serve, *inputs(1), calls=args.calls, warmup=20)
            batched = time_calls(serve, *inputs(args.batch), calls=max(10, args.calls // 25), warmup=3)
            rows.append({"format": name, "batch1_p50_ms": float(np.percentile(single, 50) * 1e3),
                         "batch1_p99_ms": float(np.percentile(single, 99) * 1e3),
                         "batch1_requests_per_s": float(1 / single.mean()),
                         f"batch{args.batch}_frames_per_s": float(args.batch / batched.mean())})
            print(f"{name}: p50 {rows[-1]['batch1_p50_ms']:.2f} ms", file=sys.stderr)
    print(markdown_table(rows))
    return {"image_size": image_size, "checkpoint": args.checkpoint or None, "threads": args.threads,
            "calls": args.calls, "batch": args.batch, "rows": rows}


if __name__ == "__main__":
    sys.exit(BENCHMARK.main(run, options))
