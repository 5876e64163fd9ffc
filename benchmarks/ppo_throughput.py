"""PPO frames per second of the fine-tuning variants, from a BC checkpoint, with the CPU preset's PPO settings.

- ``frozen encoder``: features cached at collection, PPO epochs on the heads only (the preset's choice);
- ``end-to-end``: the encoder trained too (``--encoder-lr``), every PPO epoch re-running the ResNet on pixels.

Both use the privileged-state critic (no critic ResNet). Reports collection frames/s, and whole-iteration
frames/s (collection + GAE + PPO epochs), over timed iterations after one warm-up iteration. Writes
``benchmarks/results/ppo_throughput.json``.

    python benchmarks/ppo_throughput.py          # after bc_vs_scratch.py --preset cpu (reuses its BC run)
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from pathlib import Path

from bc_vs_scratch import PRESETS, RESULTS, ppo_config, prepare_bc
from timing import describe_machine

from robot_rl.finetune import trainer
from robot_rl.io import write_json
from robot_rl.tables import markdown_table

VARIANTS = {"frozen encoder (cached features)": {}, "end-to-end (encoder lr 1e-5)": {"encoder_lr": 1e-5}}


def _scalars(run_dir: Path, name: str) -> list[float]:
    path = run_dir / "logs" / "scalars" / "train" / f"{name}.csv"
    return [float(line.split(",")[1]) for line in path.read_text().splitlines() if line and line[0].isdigit()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=3, help="timed iterations per variant")
    parser.add_argument("--device", default="auto")
    args = parser.parse_args(argv)
    preset = PRESETS["cpu"]
    start = time.perf_counter()
    bc_dir, _ = prepare_bc(preset, args.device)
    root = Path(preset["bc"].run_dir).parent / "throughput"
    rows = []
    for name, overrides in VARIANTS.items():
        run_dir = root / name.split(" ")[0]
        shutil.rmtree(run_dir, ignore_errors=True)
        config = ppo_config(preset, "bc", 0, root, bc_dir, args.device, run_dir=str(run_dir), critic_warmup=0,
                            eval_every=0, eval_episodes=1, checkpoint_every=1000,
                            total_frames=preset["ppo"]["frames_per_batch"] * (args.iterations + 1), **overrides)
        run = trainer.PPORun(config)
        try:
            run.run(progress=False)
        finally:
            run.close()
        collect = _scalars(run_dir, "frames_per_s")[1:]  # the first iteration warms up
        iteration = [config.frames_per_batch / s for s in _scalars(run_dir, "iteration_seconds")[1:]]
        rows.append({"variant": name, "collection frames/s": round(statistics.median(collect), 1),
                     "PPO frames/s (collect + update)": round(statistics.median(iteration), 1),
                     "timed iterations": len(iteration), "frames per iteration": config.frames_per_batch,
                     "ppo epochs": config.ppo_epochs})
        print(rows[-1], file=sys.stderr)
    print(markdown_table(rows))
    out = RESULTS / "ppo_throughput.json"
    write_json(out, {"rows": rows, "machine": describe_machine(), "wall_seconds": round(time.perf_counter() - start)})
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
