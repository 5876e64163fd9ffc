"""The camera's exposure loop at the inspection view: what a camera that sets its own exposure delivers when the
verdict is given, under each shift of the perturbation suite, against the same camera at a fixed exposure.

The scripted expert inspects ``--boards`` fresh boards in ``--cell`` (default ``rectified``: the cell whose
policies the deployed-exposure arm put on such a camera) nominally and under every shift of the suite, once with
the camera's exposure fixed and once with each camera that sets its own (``robot_rl.envs.exposure``: ``auto``
meters the centre's mean, ``highlights`` the highlights in the centre; each moves its gain part of the way each
frame). Per shift and camera, at the frame the expert answers on: the gain it was taken at, the centre's mean grey
level in the frame the policy gets (after the cell's noise and rectification; the loop meters the frame before
them), its highlights (the brightest channel's 99th percentile there), the share of the centre's pixels with a
channel at 250 or above (clipped: the parts' highlights), and the lowest gain of the frames taken on the way to the
view. Nothing is trained: this is what the camera hands a policy at the view, not what a policy makes of it.

    python benchmarks/exposure_loop.py      # writes benchmarks/results/exposure_loop.json (under a minute)
"""

from __future__ import annotations

import sys

import numpy as np
from harness import Benchmark, Variant
from protocols import FRESH_BOARDS_SEED, fresh_board_seeds

from robot_rl.envs import exposure
from robot_rl.envs.defaults import CAMERA_EXPOSURES
from robot_rl.envs.randomization import NONE, PERTURBATIONS, RANDOMIZATIONS, in_cell_of, with_exposure
from robot_rl.envs.task import expert_steps
from robot_rl.envs.tasks import build_task
from robot_rl.tables import markdown_table

CLIPPED = 250  # grey level from which a pixel counts as clipped

BENCHMARK = Benchmark("exposure_loop", __doc__, variants=(
    Variant("rectified", (), "the rectified cell's camera, fixed and setting its own exposure by either meter, "
                             "under the suite"),
), common={"out": None})


def options(parser) -> None:
    parser.add_argument("--cell", default="rectified", choices=sorted(RANDOMIZATIONS), help="the cell")
    parser.add_argument("--task", default="pcb-inspect", help="registered task")
    parser.add_argument("--boards", type=int, default=20, help="fresh boards per shift and camera")
    parser.add_argument("--image-size", type=int, default=84, help="wrist image side, pixels")


def at_the_view(args, setting) -> dict:
    """The expert through ``args.boards`` boards of ``setting``: medians over boards of the answered frame's gain,
    level (the centre's mean), highlight level (``exposure.highlight_level``) and clipped share, and of the lowest
    gain of the frames taken on the way."""
    task = build_task(args.task, "default", args.image_size, None, {}, randomization=setting)
    gains, lowest, levels, peaks, clipped = [], [], [], [], []
    for seed in fresh_board_seeds(args.boards):
        taken_at = []  # each frame's gain, from the first one after a move (the loop is settled at reset)
        for observation, result in expert_steps(task, seed):
            answered_on = observation["pixels"]  # at the last step: the frame the expert answered on
            if not (result.terminated or result.truncated):
                taken_at.append(task.exposure_gain)  # the gain of the frame this step took
        centre = exposure.centre(answered_on)
        levels.append(float(centre.mean()))
        peaks.append(exposure.highlight_level(answered_on))
        clipped.append(float((centre >= CLIPPED).any(axis=2).mean()))
        if taken_at and taken_at[-1] is not None:
            gains.append(taken_at[-1])
            lowest.append(min(taken_at))
    row = {"level": float(np.median(levels)), "highlight_level": float(np.median(peaks)),
           "clipped_share": float(np.median(clipped))}
    if gains:
        row |= {"gain": float(np.median(gains)), "gain_p10_p90": [float(np.percentile(gains, q)) for q in (10, 90)],
                "lowest_gain_on_the_way": float(np.median(lowest))}
    return row


def run(args) -> dict:
    cell = RANDOMIZATIONS[args.cell]
    rows = []
    for shift in (NONE, *PERTURBATIONS.values()):
        setting = in_cell_of(shift, cell)
        row = {"shift": "nominal" if shift is NONE else shift.name}
        for camera in CAMERA_EXPOSURES:
            seen = at_the_view(args, with_exposure(setting, camera))
            row |= {f"{camera}_{key}": value for key, value in seen.items()}
        rows.append(row)
        print(f"{row['shift']}: gain {row['auto_gain']:.2f} (highlights {row['highlights_gain']:.2f}), level "
              f"{row['fixed_level']:.0f} -> {row['auto_level']:.0f}", file=sys.stderr)
    print(markdown_table(rows, ["shift", "fixed_level", "fixed_highlight_level", "fixed_clipped_share", "auto_gain",
                                "auto_level", "auto_clipped_share", "highlights_gain", "highlights_highlight_level",
                                "highlights_clipped_share"]))
    return {"cell": args.cell, "task": args.task, "boards": args.boards, "image_size": args.image_size,
            "boards_from": FRESH_BOARDS_SEED, "clipped_from": CLIPPED, "target_level": exposure.TARGET_LEVEL,
            "highlight_target": exposure.HIGHLIGHT_LEVEL, "rows": rows}


if __name__ == "__main__":
    sys.exit(BENCHMARK.main(run, options))
