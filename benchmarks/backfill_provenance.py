"""Gives results files written before ``results_file.write_results`` their date, commit, argv and wall time.

The date and commit come from git history: the commit that added the file and its commit date (and the last
commit that changed it, when another); a field says so. The command line is the one the project's docs gave for
the file (the scripts did not record it then), marked as such. A wall time the file does not hold is recorded as
not recorded. No measured value is changed; files that already carry a date and a commit are left as they are.

    python benchmarks/backfill_provenance.py            # every file under benchmarks/results/
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from robot_rl.io import write_json

RESULTS_DIR = Path(__file__).parent / "results"
# The command each file was made with, as the README documented it when the file landed.
COMMANDS = {
    "arms": "python benchmarks/arms.py",
    "arms_lead_inspect": "python benchmarks/arms.py --task lead-inspect --difficulties easy default hard "
                         "--out benchmarks/results/arms_lead_inspect.json",
    "bc_loss_ablation": "python benchmarks/bc_loss_ablation.py",
    "bc_quality": "python benchmarks/bc_quality.py",
    "bc_quality_rerun": "python benchmarks/bc_quality.py --out benchmarks/results/bc_quality_rerun.json",
    "bc_quality_lead_inspect": "python benchmarks/bc_quality.py --task lead-inspect --data data/demos-lead "
                               "--run-dir runs/bc-lead --out benchmarks/results/bc_quality_lead_inspect.json",
    "bc_quality_panda": "python benchmarks/bc_quality.py --arm panda --data data/demos-panda --run-dir runs/bc-panda "
                        "--out benchmarks/results/bc_quality_panda.json",
    "bc_quality_panda_velocities": "python benchmarks/bc_quality.py --arm panda --joint-velocities --data "
                                   "data/demos-panda --run-dir runs/bc-panda-vel "
                                   "--out benchmarks/results/bc_quality_panda_velocities.json",
    "bc_quality_panda_continue_head": "python benchmarks/bc_quality.py --arm panda --joint-velocities --joint-scaling "
                                      "demos --continue-head --data data/demos-panda --run-dir "
                                      "runs/bc-panda-continue-head "
                                      "--out benchmarks/results/bc_quality_panda_continue_head.json",
    "bc_quality_panda_timing": "python benchmarks/bc_quality.py --arm panda --joint-velocities --joint-scaling demos "
                               "--continue-head --timing-weight 10 --data data/demos-panda --run-dir "
                               "runs/bc-panda-timing --out benchmarks/results/bc_quality_panda_timing.json",
    "bc_quality_panda_timing_only": "python benchmarks/bc_quality.py --arm panda --joint-velocities --joint-scaling "
                                    "demos --timing-weight 10 --data data/demos-panda --run-dir "
                                    "runs/bc-panda-timing-only "
                                    "--out benchmarks/results/bc_quality_panda_timing_only.json",
    "bc_vs_scratch_cpu": "python benchmarks/bc_vs_scratch.py --preset cpu",
    "bc_vs_scratch_few": "python benchmarks/bc_vs_scratch.py --preset few",
    "bc_vs_scratch_lead-few": "python benchmarks/bc_vs_scratch.py --preset lead-few --arms bc",
    "collector_scaling": "python benchmarks/collector_scaling.py",
    "demo_decisions": "python benchmarks/demo_decisions.py --data data/demos data/demos-panda",
    "env_throughput": "python benchmarks/env_throughput.py",
    "env_throughput_before_tasks": "python benchmarks/env_throughput.py "
                                   "--out benchmarks/results/env_throughput_before_tasks.json",
    "env_throughput_before_tasks_2": "python benchmarks/env_throughput.py "
                                     "--out benchmarks/results/env_throughput_before_tasks_2.json",
    "env_throughput_rerun": "python benchmarks/env_throughput.py --out benchmarks/results/env_throughput_rerun.json",
    "env_throughput_rerun_2": "python benchmarks/env_throughput.py "
                              "--out benchmarks/results/env_throughput_rerun_2.json",
    "export_latency": "python benchmarks/export_latency.py",
    "few_demo_bc": "python benchmarks/few_demo_bc.py",
    "finetune_ablation": "python benchmarks/finetune_ablation.py",
    "finetune_stability": "python benchmarks/finetune_stability.py --part start; "
                          "python benchmarks/finetune_stability.py --part ppo",
    "lerobot_validation": "python benchmarks/lerobot_validation.py",
    "robustness": "python benchmarks/robustness.py",
    "robustness_12_epochs": "python benchmarks/robustness.py --arms default-12-epochs "
                            "--out benchmarks/results/robustness_12_epochs.json",
    "robustness_wide": "python benchmarks/robustness.py --arms wide-12-epochs "
                       "--out benchmarks/results/robustness_wide.json",
    "robustness_surfaces": "python benchmarks/robustness.py --arms surfaces-12-epochs "
                           "--out benchmarks/results/robustness_surfaces.json",
    "shifted_camera": "python benchmarks/shifted_camera.py",
    "verdict_probe": "python benchmarks/verdict_probe.py --checkpoint <each run's last.pt> --data <its demos>",
}
WALL_KEYS = ("wall_s", "wall_seconds", "wall_seconds_this_invocation")


def _git(*args: str) -> list[str]:
    out = subprocess.run(["git", *args], capture_output=True, text=True, check=True, cwd=RESULTS_DIR).stdout
    return out.split()


def git_history(path: Path) -> dict:
    """The commit that added ``path`` and its date; the last commit that changed it, when another."""
    added = _git("log", "--diff-filter=A", "--format=%H %cI", "--", path.name)[-2:]
    last = _git("log", "-1", "--format=%H %cI", "--", path.name)
    if not added:
        raise SystemExit(f"{path}: not in git history; commit it first")
    record = {"date": added[1], "commit": added[0],
              "provenance_source": "git history: the commit that added this file and its commit date (the script "
                                   "did not record them then)"}
    if last and last[0] != added[0]:
        record.update(last_changed_commit=last[0], last_changed_date=last[1])
    return record


def machine_of(data: dict) -> dict | None:
    """The file's machine, or the one its parts agree on."""
    if "machine" in data:
        return data["machine"]
    parts = [v["machine"] for v in data.values() if isinstance(v, dict) and "machine" in v]
    return parts[0] if parts and all(p == parts[0] for p in parts) else None


def backfill(path: Path) -> bool:
    """Adds the missing provenance fields to one file; False when it had them already."""
    data = json.loads(path.read_text())
    if "date" in data and "commit" in data:
        return False
    stem = path.stem
    head = {"benchmark": data.get("benchmark", stem), **git_history(path)}
    head["argv"] = data.get("argv") or COMMANDS[stem].split()
    if "argv" not in data:
        head["argv_source"] = "the command the docs gave for this file (the script did not record it then)"
    machine = machine_of(data)
    if machine is not None:
        head["machine"] = machine
    if not any(k in data for k in WALL_KEYS):
        head["wall_s"] = None
        head["wall_s_note"] = "not recorded by the script then (a part's seconds may be inside)"
    write_json(path, {**head, **{k: v for k, v in data.items() if k not in head}})
    return True


def main() -> int:
    changed = [p.name for p in sorted(RESULTS_DIR.glob("*.json")) if backfill(p)]
    print(f"backfilled {len(changed)} files: {', '.join(changed)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
