"""Behaviour-cloning training throughput and memory, in fp32 and bf16.

1. Samples/s of a full BC step (sample rows from the memmapped demos, move them to the device, random-shift
   augmentation, actor forward, loss, backward, AdamW step) against a bare torchvision ResNet18 training step,
   at 84x84 and 224x224, in each precision (``--precision``: the encoder under bf16 autocast), the precisions
   alternated over ``--rounds`` rounds in one process (medians reported). Targets: the BC step costs at most 20%
   more than the bare network; bf16 BC >= 1.4x fp32 where the CPU runs bf16 natively. The bare network is also
   timed with NCHW input, so the gain of channels-last input shows on the same machine.
2. Peak resident memory of a BC run (each in a fresh process, its own VmHWM) on 120 and 1,200 demos (default
   boards, 84x84), next to the datasets' size on disk. Rows are read from the memmaps only when sampled.
   Missing datasets are collected first (into the folders given).

    python benchmarks/bc_throughput.py     # prints tables, writes benchmarks/results/bc_throughput.json
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torchvision
from harness import Benchmark, Variant

from robot_rl.artefact_files import DATASET_META
from robot_rl.precision import autocast, describe
from robot_rl.tables import markdown_table

BF16_TARGET = 1.4  # bf16 BC samples/s over fp32, where bf16 is native (fixed before the run)

BENCHMARK = Benchmark("bc_throughput", __doc__, variants=(
    Variant("all", (), "BC step samples/s against bare ResNet18, fp32 and bf16, then peak memory"),
), common={"threads": 2})


def bare_resnet(size: int, batch: int, steps: int, precision: str = "fp32", channels_last: bool = True) -> float:
    """Training images/s of a bare ResNet18 (random uint8 input converted on the fly, cross-entropy)."""
    net = torchvision.models.resnet18(weights=None)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
    images = torch.randint(0, 255, (batch, 3, size, size), dtype=torch.uint8)
    labels = torch.randint(0, 1000, (batch,))
    layout = torch.channels_last if channels_last else torch.contiguous_format

    def step():
        with autocast(precision, "cpu"):
            loss = torch.nn.functional.cross_entropy(net(images.float().contiguous(memory_format=layout)), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()

    step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return steps * batch / (time.perf_counter() - start)


def bc_step_rate(data: str, size: int, batch: int, steps: int, precision: str = "fp32") -> float:
    """Samples/s of the real BC training step on a dataset of ``size`` x ``size`` images."""
    from robot_rl.configs import BCConfig
    from robot_rl.pretrain import bc

    run_dir = f"/tmp/bc-throughput-{size}-{precision}"
    shutil.rmtree(run_dir, ignore_errors=True)
    run = bc.BCRun(BCConfig(data=data, run_dir=run_dir, batch_size=batch, eval_episodes=1, precision=precision))

    def step():
        batch_td = bc._to_device(run.train_buffer.sample(), run.device, run.config.shift_pad)
        loss = bc.total_loss(run.loss(batch_td))
        run.optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(run.actor.parameters(), run.config.grad_clip)
        run.optimizer.step()

    step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return steps * batch / (time.perf_counter() - start)


def one_round(size: int, data: str, precision: str, batch: int, steps: int) -> dict[str, float]:
    """One measurement of each figure at ``size`` and ``precision``."""
    return {"bare_resnet18_img_per_s": bare_resnet(size, batch, steps, precision),
            "bare_resnet18_nchw_img_per_s": bare_resnet(size, batch, steps, precision, channels_last=False),
            "bc_step_samples_per_s": bc_step_rate(data, size, batch, steps, precision)}


def peak_memory_of_training(data: str, steps: int) -> float:
    """Peak resident memory (MiB) of a fresh child process that opens ``data`` and runs ``steps`` BC steps.

    Read from the child's own VmHWM: ``getrusage`` in a child started from this process would report this
    process's high-water mark when it is higher (Linux carries it across fork and exec).
    """
    code = (
        "from pathlib import Path\n"
        "from robot_rl.pretrain import bc\n"
        "from robot_rl.configs import BCConfig\n"
        f"run = bc.BCRun(BCConfig(data={data!r}, run_dir='/tmp/bc-memory', batch_size=32, eval_episodes=1))\n"
        f"for _ in range({steps}):\n"
        "    b = bc._to_device(run.train_buffer.sample(), run.device, 4)\n"
        "    loss = bc.total_loss(run.loss(b)); run.optimizer.zero_grad(); loss.backward(); run.optimizer.step()\n"
        "status = Path('/proc/self/status').read_text().splitlines()\n"
        "print(next(int(line.split()[1]) for line in status if line.startswith('VmHWM:')) / 1024)\n"
    )
    shutil.rmtree("/tmp/bc-memory", ignore_errors=True)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    shutil.rmtree("/tmp/bc-memory", ignore_errors=True)
    return float(out.stdout.strip().splitlines()[-1])


def disk_mib(folder: str) -> float:
    """Space the dataset's files take on disk (allocated blocks: the memmaps are sparse past the last frame)."""
    return sum(p.stat().st_blocks * 512 for p in Path(folder).rglob("*") if p.is_file()) / 2**20


def ensure_dataset(folder: str, episodes: int, size: int) -> None:
    """Collects ``episodes`` expert demos at default difficulty into ``folder`` unless it holds a dataset."""
    if not Path(folder, DATASET_META).is_file():
        from robot_rl.configs import CollectConfig
        from robot_rl.pretrain.collect import collect_demos

        collect_demos(CollectConfig(out=folder, episodes=episodes, image_size=size, seed=0), progress=False)


def options(parser) -> None:
    parser.add_argument("--data-84", default="data/demos", help="84x84 demo dataset (large)")
    parser.add_argument("--data-84-small", default="data/demos-small",
                        help="84x84 demo dataset 10x smaller (memory comparison)")
    parser.add_argument("--data-224", default="data/demos-224", help="224x224 demo dataset")
    parser.add_argument("--batch", type=int, default=32, help="images per step")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per figure")
    parser.add_argument("--rounds", type=int, default=3, help="alternated rounds of every measurement")
    parser.add_argument("--skip-memory", action="store_true", help="throughput only")


def run(args) -> dict:
    torch.manual_seed(0)
    ensure_dataset(args.data_84, 1200, 84)
    ensure_dataset(args.data_224, 30, 224)
    precisions = ("fp32", "bf16")
    measured: dict[tuple, list[float]] = {}
    for _ in range(args.rounds):  # alternated, so drift and contention hit both precisions alike
        for size, data in ((84, args.data_84), (224, args.data_224)):
            for precision in precisions:
                for name, rate in one_round(size, data, precision, args.batch, args.steps).items():
                    measured.setdefault((size, precision, name), []).append(rate)
    rows = []
    for size in (84, 224):
        for precision in precisions:
            row = {"image": f"{size}x{size}", "precision": precision,
                   **{name: round(statistics.median(values), 1) for (s, p, name), values in measured.items()
                      if (s, p) == (size, precision)}}
            row["bc_overhead"] = round(row["bare_resnet18_img_per_s"] / row["bc_step_samples_per_s"] - 1, 3)
            row["channels_last_gain"] = round(row["bare_resnet18_img_per_s"] / row["bare_resnet18_nchw_img_per_s"], 3)
            rows.append(row)
    print(markdown_table(rows))
    speedups = {f"{size}x{size}": round(statistics.median(measured[(size, "bf16", "bc_step_samples_per_s")])
                                        / statistics.median(measured[(size, "fp32", "bc_step_samples_per_s")]), 3)
                for size in (84, 224)}
    native = describe("auto", "cpu")["native_bf16"]
    targets = {"bf16_bc_speedup_84": {"target": f">= {BF16_TARGET}x where bf16 is native",
                                      "value": speedups["84x84"], "native_bf16": native,
                                      "met": (speedups["84x84"] >= BF16_TARGET) if native else None}}
    print(f"bf16 / fp32 BC samples/s: {speedups}; target {targets['bf16_bc_speedup_84']}")

    from robot_rl.dataset import DemoDataset

    if not args.skip_memory:
        ensure_dataset(args.data_84_small, 120, 84)
    memory = [] if args.skip_memory else [
              {"dataset": data, "frames": DemoDataset.open(data).frames, "disk_mib": round(disk_mib(data), 1),
               "peak_rss_mib": round(peak_memory_of_training(data, steps=10))}
              for data in (args.data_84_small, args.data_84)]
    if memory:
        print("\n" + markdown_table(memory))
    return {"precision": describe("auto", "cpu"), "batch": args.batch, "rounds": args.rounds, "throughput": rows,
            "bf16_speedup": speedups, "targets": targets, "memory": memory}


if __name__ == "__main__":
    sys.exit(BENCHMARK.main(run, options))
