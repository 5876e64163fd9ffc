"""Fine-tuning that lifts fast and stays up (issue 18), from the few preset's BC policy (150 easy demos, 64x64).

Two parts, both on the BC policy of ``bc_vs_scratch.py --preset few`` (reused):

- ``start``: what PPO's training episodes look like before any update. The BC policy on 100 fresh boards,
  deterministic, and with sampled actions under each verdict parametrization (``VERDICT_SAMPLING``): success,
  guesses (a verdict given without the board localized), timeouts, episode length. This is the measurement behind
  the factored verdict (``robot_rl.policy.factored_verdict_logits``). Then how far the first Adam steps of the
  PPO loss move the BC policy at each actor learning rate (approximate KL, clip fraction): behind the lr.
- ``ppo``: PPO variants (``VARIANTS``) with the same budget, seeds and check boards; per run: the check curve,
  frames to tau (two consecutive checks at or above it), the largest fall below the running best after tau,
  last.pt and best.pt on 100 fresh boards, and per-iteration diagnostics from the run's log (approximate KL, clip
  fraction, anchor weight and KL, entropy, explained variance, share of planned minibatch steps applied, sampled
  success and guesses). The "shipped" variant is the benchmark's own BC-arm run of that seed: reused, not repeated.

Finished runs are reused; each run's seconds are recorded. Writes ``benchmarks/results/finetune_stability.json``.

    python benchmarks/finetune_stability.py --part start             # about 2 minutes on 2 CPU cores
    python benchmarks/finetune_stability.py --part ppo --seeds 0     # about 15 minutes per variant and seed
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch
from harness import Benchmark, Variant
from protocols import (
    FRESH_BOARDS_SEED,
    PRESETS,
    RESULTS,
    bc_start,
    ci_cell,
    fresh_board_success,
    largest_fall_after,
    ppo_config,
    prepare_bc,
    run_bc_variant,
)
from timing import describe_machine, provenance

from robot_rl.checkpoints import load_checkpoint, policy_checkpoint
from robot_rl.closed_loop import evaluate_policy, held_out_seeds
from robot_rl.configs import FinetuneConfig
from robot_rl.envs.torchrl_env import proof_env
from robot_rl.options import resolve_device
from robot_rl.policy import actor_network, make_actor
from robot_rl.policy_io import checkpoint_policy_config
from robot_rl.run_logs import read_scalar
from robot_rl.tables import markdown_table

PRESET = PRESETS["few"]
OUT = RESULTS / "finetune_stability.json"

# How the verdict is sampled in PPO's training episodes: (answer temperature, continue floor).
VERDICT_SAMPLING = {
    "plain softmax (T 1)": (1.0, 0.0),
    "T 0.25": (0.25, 0.0),
    "T 0.25, continue floor 0.1": (0.25, 0.1),
    "T 0.1": (0.1, 0.0),
    "T 0.02 (verdict nearly deterministic)": (0.02, 0.0),
}
# The design before issue 18, and each lever of the shipped one switched off (or the anchor on) in turn.
BEFORE = {"lr": 1e-4, "answer_temperature": 1.0, "continue_floor": 0.0, "target_kl": 0.0, "anchor_weight": 1.0,
          "anchor_floor": 0.0, "guess_penalty": 0.0}
VARIANTS = {
    "shipped": {},
    "before (lr 1e-4, plain verdict, no KL stop, anchor decays to 0, env reward)": BEFORE,
    # The shipped design before the guess penalty: a verdict given off the board paid as much as an inspection.
    "no guess penalty (the env's reward)": {"guess_penalty": 0.0},
    "anchor 0.1, constant (env reward)": {"anchor_weight": 0.1, "anchor_decay": 1.0, "anchor_floor": 0.1,
                                          "guess_penalty": 0.0},
    "plain verdict (T 1, no continue floor)": {"answer_temperature": 1.0, "continue_floor": 0.0},
    "no KL stop": {"target_kl": 0.0},
    "DAPG anchor (1.0 x 0.95^k)": {"anchor_weight": 1.0},
}
DIAGNOSTICS = ("kl_approx", "clip_fraction", "anchor_weight", "anchor_kl", "entropy", "explained_variance",
               "loss_critic", "actor_update_fraction", "success_rate", "guess_rate", "lr_actor")

BENCHMARK = Benchmark("finetune_stability", __doc__, variants=(
    Variant("start", ("--part", "start"), "the BC start under each verdict sampling, and the first Adam steps"),
    Variant("ppo", ("--part", "ppo"), "the PPO variants from the few preset's BC policy, seed 0"),
), common={"seeds": ([0], "PPO seeds per variant"), "boards": (100, "fresh boards for the start and last/best"),
           "device": "auto"})


def sampled_start(bc_dir: Path, boards: int, device: str) -> list[dict]:
    """The BC policy on ``boards`` fresh boards: deterministic, then sampled under each ``VERDICT_SAMPLING``."""
    state = load_checkpoint(policy_checkpoint(bc_dir, "best"))  # the BC policy PPO starts from here
    demos = PRESET["demos"]
    proof = proof_env(demos.difficulty, demos.image_size)
    seeds = held_out_seeds(FRESH_BOARDS_SEED, boards, set())
    pose_min_scale = FinetuneConfig.pose_min_scale  # PPO samples the pose with its own (smaller) noise floor
    rows = []
    for name, (temperature, floor) in [("deterministic", (1.0, 0.0)), *VERDICT_SAMPLING.items()]:
        config = replace(checkpoint_policy_config(state), min_scale=pose_min_scale, answer_temperature=temperature,
                         continue_floor=floor)
        actor = make_actor(proof.observation_spec, proof.full_action_spec, config)
        actor.load_state_dict(state["actor"])
        torch.manual_seed(0)
        metrics, _ = evaluate_policy(actor.eval(), seeds, difficulty=demos.difficulty, image_size=demos.image_size,
                                     num_envs=8, deterministic=name == "deterministic", device=device)
        rows.append({"actions": name if name == "deterministic" else f"sampled, {name}",
                     "success": f"{metrics['success_rate']:.0%}",
                     "95% CI": "{:.0%}-{:.0%}".format(*metrics["success_ci95"]),
                     "guesses": metrics["guesses"], "timeouts": metrics["timed_out"],
                     "wrong at the board": metrics["verdicts_given"] - metrics["guesses"]
                     - round(metrics["success_rate"] * metrics["episodes"]),
                     "episode length": round(metrics["episode_length"], 1), "boards": metrics["episodes"]})
        print(rows[-1], file=sys.stderr)
    return rows


def first_steps(bc_dir: Path, root: Path, device: str, steps: int = 4) -> list[dict]:
    """How far Adam steps move the BC policy, by actor learning rate: one collected batch (the shipped sampling),
    then ``steps`` minibatch steps of the PPO loss from the BC heads; after each, the approximate KL to the
    collecting policy and PPO's clip fraction over the whole batch."""
    import copy
    import shutil
    from contextlib import closing

    from robot_rl.finetune.trainer import PPORun

    shutil.rmtree(root, ignore_errors=True)
    with closing(PPORun(ppo_config(PRESET, "bc", 0, root, bc_dir, device, run_dir=str(root), critic_warmup=0,
                                   eval_every=0, anchor_weight=0.0, anchor_floor=0.0))) as run:
        batch = next(iter(run.collector))
    flat = run.learner.prepare(batch, iteration=0)
    heads, loss = actor_network(run.actor).heads, run.learner.loss
    start = copy.deepcopy(heads.state_dict())
    rows = []
    for lr in (1e-4, 3e-5, 1e-5):
        heads.load_state_dict(start)
        optimizer = torch.optim.Adam(heads.parameters(), lr=lr)
        generator = torch.Generator().manual_seed(0)
        row = {"actor lr": lr}
        for step in range(1, steps + 1):
            minibatch = flat[torch.randperm(flat.shape[0], generator=generator)[:PRESET["ppo"]["minibatch_size"]]]
            out = loss(minibatch)
            optimizer.zero_grad()
            sum(v for k, v in out.items() if k.startswith("loss_") and k != "loss_critic").backward()
            optimizer.step()
            with torch.no_grad():
                whole = loss(flat)
            row[f"KL after step {step}"] = round(float(whole["kl_approx"]), 4)
            row[f"clip fraction after step {step}"] = round(float(whole["clip_fraction"]), 3)
        rows.append(row)
        print(row, file=sys.stderr)
    heads.load_state_dict(start)
    return rows


def diagnostics(run_dir: Path) -> dict[str, list[float]]:
    """Per-iteration training scalars of a run (``train/<name>``), from its log."""
    return {name: [round(v, 5) for _, v in read_scalar(run_dir, f"train/{name}")] for name in DIAGNOSTICS}


def _row(result: dict) -> dict:
    fresh = result["fresh_boards"]
    return {"variant": result["variant"], "seed": result["seed"], "start": f"{result['curve'][0]['success_rate']:.0%}",
            "best check": f"{max(p['success_rate'] for p in result['curve']):.0%}",
            "frames to tau": result["frames_to_threshold"],
            "largest fall below best": f"{result['largest_fall_below_best']:.0%}",
            "last.pt (fresh)": ci_cell(fresh["last"]["rate"], fresh["last"]["ci95"]),
            "best.pt (fresh)": ci_cell(fresh["best"]["rate"], fresh["best"]["ci95"]),
            "last.pt guesses": fresh["last"]["guesses"]}


def options(parser) -> None:
    parser.add_argument("--part", choices=("start", "ppo"), default="ppo")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))


def run(args) -> dict:
    start = time.perf_counter()
    args.device = str(resolve_device(args.device))
    bc_dir, _ = prepare_bc(PRESET, args.device)
    # The part not run now is kept as the file holds it.
    result = json.loads(OUT.read_text())["metrics"] if OUT.is_file() else {}
    if args.part == "start":
        rows = sampled_start(bc_dir, args.boards, args.device)
        print(markdown_table(rows))
        steps = first_steps(bc_dir, Path(PRESET["bc"].run_dir).parent / "stability" / "first-steps", args.device)
        print(markdown_table(steps))
        result["start"] = {"rows": rows, "first_adam_steps": steps, **provenance(), "machine": describe_machine(),
                           "wall_s": round(time.perf_counter() - start)}
    else:
        root = Path(PRESET["bc"].run_dir).parent / "stability"
        reference, _, threshold = bc_start(PRESET, bc_dir, root, args.seeds[0], args.device)
        warmup = reference.critic_warmup * reference.frames_per_batch

        def report(run_dir: Path, curve: list[dict], reached: int | None) -> dict:
            return {"largest_fall_below_best": largest_fall_after(curve, reached if reached is not None else warmup),
                    "fresh_boards": fresh_board_success(run_dir, args.boards, args.device),
                    "diagnostics": diagnostics(run_dir)}

        runs = {(r["variant"], r["seed"]): r for r in result.get("ppo", {}).get("runs", []) if r["variant"] in VARIANTS}
        for name in args.variants:
            folder = root.parent if name == "shipped" else root / "".join(c if c.isalnum() else "-"
                                                                          for c in name.split(" (")[0])
            for seed in args.seeds:
                runs[(name, seed)] = {"variant": name, "seed": seed, **run_bc_variant(
                    PRESET, seed, folder, bc_dir, args.device, VARIANTS[name], threshold, report)}
                print(_row(runs[(name, seed)]), file=sys.stderr)
        ordered = sorted(runs.values(), key=lambda r: (list(VARIANTS).index(r["variant"]), r["seed"]))
        print(markdown_table([_row(r) for r in ordered]))
        result["ppo"] = {"threshold": threshold, "threshold_rule": "BC start + (1 - BC start) / 2, reached at the "
                         "first of two consecutive checks at or above it", "budget_frames": PRESET["bc_frames"],
                         "runs": ordered, "table": [_row(r) for r in ordered], **provenance(),
                         "machine": describe_machine(),
                         "wall_s": round(time.perf_counter() - start)}  # its last invocation's
    # Each part keeps its own provenance; the file's top level is this invocation's.
    done = [part for part in ("start", "ppo") if part in result]
    return {**{part: result[part] for part in done}, "wall_s": {part: result[part]["wall_s"] for part in done}}


if __name__ == "__main__":
    sys.exit(BENCHMARK.main(run, options))
