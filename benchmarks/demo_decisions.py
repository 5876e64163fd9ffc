"""Where the expert decides in a demo dataset: frames at the board that it still waits on, against the verdict frame.

The scripted expert gives its verdict once the board is localized and the arm is nearly at rest (joint speed
below its ``rest_speed``); until then it answers "continue". A BC policy that reads the joint angles only sees
those waiting frames and the deciding frame alike (the same view, the same angles), so the more waiting frames an
arm's demos hold per verdict, the more "continue" the policy learns at the board. Per dataset: frames per
episode, localized frames the expert continued on, verdict frames, and the joint speed (rad/s, norm) on each.

    python benchmarks/demo_decisions.py --data data/demos data/demos-panda    # -> results/demo_decisions.json

``demo_decisions.json`` counts demos of the Panda's first camera mount (arm revision 1), which the Panda's BC
results were trained on; ``--variant panda-r2`` counts demos collected since its camera moved (revision 2).
"""

from __future__ import annotations

import sys

import torch
from harness import Benchmark, Variant

from robot_rl import keys
from robot_rl.dataset import DemoDataset
from robot_rl.envs.tasks import get_task
from robot_rl.tables import markdown_table

BENCHMARK = Benchmark("demo_decisions", __doc__, variants=(
    Variant("ur5e-panda", ("--data", "data/demos", "data/demos-panda"),
            "the README recipe's demos and the Panda's (bc_quality's recipe and panda variants make them)"),
    Variant("panda-r2", ("--data", "data/demos", "data/demos-panda", "--out",
                         "benchmarks/results/demo_decisions_panda-r2.json"),
            "the same, collected with the Panda's camera past its fingertips (arm revision 2)"),
), common={"out": None})


def describe(path: str) -> dict:
    dataset = DemoDataset.open(path)
    data = dataset.data
    localized = data[keys.LOCALIZED].reshape(-1)
    verdict = data[keys.EXPERT_VERDICT].reshape(-1)
    joint_state = data[keys.JOINT_STATE]
    joints = joint_state.shape[1] // 2
    speed = joint_state[:, joints:].norm(dim=1)
    waiting, deciding = localized & (verdict == 0), verdict > 0
    episodes = len(dataset.episodes)
    rest_speed = get_task(dataset.meta["env"]).expert_class().config.rest_speed
    return {
        "data": path, "arm": dataset.meta.get("arm", "ur5e_like"), "arm_sha256": dataset.meta.get("arm_sha256"),
        "task": dataset.meta["env"],
        "difficulty": dataset.meta.get("difficulty"), "episodes": episodes,
        "frames_per_episode": round(dataset.frames / episodes, 2),
        "waiting_frames_per_episode": round(int(waiting.sum()) / episodes, 2),
        "verdict_frames_per_episode": round(int(deciding.sum()) / episodes, 3),
        "waiting_per_verdict": round(int(waiting.sum()) / max(1, int(deciding.sum())), 2),
        "median_speed_waiting": round(float(speed[waiting].median()), 3) if waiting.any() else None,
        "median_speed_verdict": round(float(speed[deciding].median()), 3),
        "expert_rest_speed": rest_speed,
    }


def options(parser) -> None:
    parser.add_argument("--data", nargs="+", required=True, help="demo dataset folders")


def run(args) -> dict:
    torch.set_num_threads(1)
    rows = [describe(path) for path in args.data]
    print(markdown_table(rows, ["arm", "task", "episodes", "frames_per_episode", "waiting_frames_per_episode",
                                "verdict_frames_per_episode", "waiting_per_verdict", "median_speed_waiting",
                                "median_speed_verdict"]))
    return {"rows": rows}


if __name__ == "__main__":
    sys.exit(BENCHMARK.main(run, options))
