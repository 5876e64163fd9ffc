"""The ``robot-rl`` command line: one subcommand per pipeline stage.

Each subcommand imports its stage lazily, so ``robot-rl --help`` stays fast. Bad input ends with a one-line
error naming the culprit and exit code 2.
"""

from __future__ import annotations

import argparse
import sys

from robot_rl.errors import UsageError


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _add_env_options(parser: argparse.ArgumentParser) -> None:
    from robot_rl.envs.difficulty import DIFFICULTIES

    parser.add_argument("--difficulty", choices=list(DIFFICULTIES), default="default", help="task difficulty")
    parser.add_argument("--image-size", type=int, default=84, help="wrist camera image side (pixels, 32-224)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the episode stream")


def _cmd_demo(args: argparse.Namespace) -> int:
    from robot_rl.demo import run_expert_demo
    from robot_rl.tables import markdown_table

    if not 32 <= args.image_size <= 224:
        raise UsageError(f"--image-size must be in [32, 224], got {args.image_size}")
    summaries = run_expert_demo(args.out, episodes=args.episodes, difficulty=args.difficulty,
                                image_size=args.image_size, seed=args.seed, frames_per_episode=args.frames)
    columns = ["episode", "episode_seed", "defect", "verdict", "success", "steps", "return", "collision_steps",
               "steps_to_localize"]
    print(markdown_table(summaries, columns))
    successes = sum(s["success"] for s in summaries)
    print(f"\nexpert success {successes}/{len(summaries)}; frames in {args.out}/frames/")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="robot-rl", description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = commands.add_parser("demo", help="roll out the scripted expert: PNG frames and episode metrics",
                               formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    _add_env_options(demo)
    demo.add_argument("--episodes", type=_positive_int, default=3, help="episodes to run")
    demo.add_argument("--frames", type=_positive_int, default=4, help="PNG frames written per episode")
    demo.add_argument("--out", default="runs/demo", help="output folder")
    demo.set_defaults(func=_cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except UsageError as err:
        print(f"robot-rl {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
