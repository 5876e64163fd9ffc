"""How a PPO policy's verdict is read: its last policies on the same fresh boards, the verdict taken three ways.

- ``mode``: the most likely of the three verdicts (continue, pass, rework), as every evaluation, check and export
  reads the deterministic policy;
- ``factored-mode``: answer when p(answer now) >= 1/2, then the likelier answer (the mode of the "answer now?" x
  "which answer" factoring PPO samples from, ``robot_rl.policy.factored_verdict_logits``);
- ``sampled``: drawn from the verdict's distribution at every step, as PPO's collection draws it (seeded).

The pose is the deterministic one in all three. Then, for the episodes the mode reading leaves at the view without
a verdict (``stalls``): p(answer now) on each of their steps at the view (its highest and its median, per episode)
and how far the camera moves per step there. Why: PPO optimizes the sampled policy; a per-step "answer now?"
decision that the sampled policy takes at some step at the inspection view (p(answer now) below 1/2 on each) is
never taken by the deterministic one, which then times out at the view. The lead task's million-frame runs ended
with last policies failing that way while their training episodes' success (the run logs' ``train/success_rate``)
kept rising.

    python benchmarks/verdict_decoding.py --variant lead-encoder-1m  # results/verdict_decoding_lead-encoder-1m.json
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import torch
from harness import Benchmark, Variant
from protocols import FRESH_BOARD_ENVS, PRESETS, fresh_board_seeds, on_fresh_boards

from robot_rl import keys
from robot_rl.closed_loop import run_episodes
from robot_rl.policy import ActorHeads
from robot_rl.policy_io import load_actor
from robot_rl.tables import markdown_table

DECODINGS = ("mode", "factored-mode", "sampled")
SAMPLING_SEED = 0

BENCHMARK = Benchmark("verdict_decoding", __doc__, variants=(
    Variant("lead-encoder-1m", ("--runs", PRESETS["lead-encoder-1m"]["ppo_root"], "--seeds", "0", "1", "2", "--out",
                                "benchmarks/results/verdict_decoding_lead-encoder-1m.json"),
            "the lead start's million-frame PPO runs (bc_vs_scratch.py --variant lead-encoder-1m-bc makes them)"),
), common={"seeds": (None, "the PPO runs' seeds (folders bc-seedN under --runs)"), "boards": 100, "device": "cpu",
           "threads": 1, "out": None})


def _choose(logits: torch.Tensor, choice: torch.Tensor) -> torch.Tensor:
    """Verdict logits whose most likely verdict is ``choice`` (and nothing else)."""
    one_hot = torch.nn.functional.one_hot(choice, logits.shape[-1]).bool()
    return torch.where(one_hot, torch.zeros_like(logits), torch.full_like(logits, -1e9))


def decoded(decoding: str, logits: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """``logits`` (continue first) as the verdict logits whose mode is the verdict ``decoding`` reads."""
    if decoding == "mode":
        return logits
    if decoding == "factored-mode":
        answer_now = logits[..., 1:].logsumexp(-1) >= logits[..., 0]
        return _choose(logits, torch.where(answer_now, 1 + logits[..., 1:].argmax(-1), 0))
    if decoding == "sampled":  # drawn on the CPU, where the seeded generator lives, whatever the policy's device
        probs = logits.float().softmax(-1).reshape(-1, logits.shape[-1]).cpu()
        choice = torch.multinomial(probs, 1, generator=generator).reshape(logits.shape[:-1]).to(logits.device)
        return _choose(logits, choice)
    raise ValueError(f"verdict_decoding: unknown reading {decoding!r} (one of {', '.join(DECODINGS)})")


def reading(decoding: str, generator: torch.Generator):
    """The ``prepare`` hook of ``on_fresh_boards`` that makes an actor's deterministic verdict ``decoding``'s."""
    def prepare(actor: torch.nn.Module) -> None:
        for heads in [m for m in actor.modules() if isinstance(m, ActorHeads)]:
            forward = heads.forward

            def forward_decoded(features, forward=forward):
                loc, scale, logits = forward(features)
                return loc, scale, decoded(decoding, logits, generator)

            heads.forward = forward_decoded
    return prepare


ANSWER_NOW = "answer_now"  # written beside the actor's output: p(answer now) under the policy's verdict


def stall(rollout) -> dict | None:
    """One episode ([T] TensorDict with ``ANSWER_NOW``) that ends at the view without a verdict: its steps at the
    view (the camera localized when the policy acted), p(answer now) there (highest and median) and the camera's
    mean travel per step there (mm); None for any other episode."""
    localized = rollout.get((keys.NEXT, *keys.LOCALIZED)).reshape(-1)
    at_view = torch.cat([torch.zeros(1, dtype=torch.bool), localized[:-1]])
    if int(rollout.get(keys.VERDICT).reshape(-1)[-1]) != 0 or not at_view.any():
        return None
    p = rollout.get(ANSWER_NOW).reshape(-1)[at_view]
    camera = rollout.get((keys.NEXT, *keys.CAMERA_POSE))[:, :3]
    travel = (camera[1:] - camera[:-1]).norm(dim=-1)[at_view[1:]]
    return {"steps_at_view": int(at_view.sum()), "p_answer_max": round(float(p.max()), 4),
            "p_answer_median": round(float(p.median()), 4), "travel_mm_per_step": round(1000 * float(travel.mean()), 2)}


def stalls(checkpoint: Path, boards: int, device: str) -> dict:
    """The mode-read policy's episodes on ``on_fresh_boards``' boards that end at the view without a verdict: per
    episode, p(answer now) over its steps at the view (the camera localized when the policy acted), highest and
    median, and the camera's mean travel per step there (mm)."""
    actor, provenance, _ = load_actor(checkpoint, device, precision="auto")

    def policy(td):
        td = actor(td)
        return td.set(ANSWER_NOW, 1 - td.get((*keys.VERDICT_PARAMS, "logits")).float().softmax(-1)[..., 0])

    env = provenance.make_env(num_envs=FRESH_BOARD_ENVS, parallel=False, device=device,
                              episode_seeds=fresh_board_seeds(boards))
    try:
        rollouts = run_episodes(env, policy, boards)
    finally:
        env.close()
    found = [s for s in map(stall, rollouts) if s is not None]
    return {"episodes": found,
            "median_p_answer_max": statistics.median(e["p_answer_max"] for e in found) if found else None,
            "median_travel_mm_per_step": statistics.median(e["travel_mm_per_step"] for e in found) if found else None}


def options(parser) -> None:
    parser.add_argument("--runs", type=Path, required=True, help="the folder holding the PPO runs bc-seedN")


def run(args) -> dict:
    if not args.seeds:
        raise SystemExit("verdict_decoding: --seeds: name the PPO runs' seeds")
    runs, rows, stalled = {}, [], {}
    for seed in args.seeds:
        checkpoint = args.runs / f"bc-seed{seed}" / "checkpoints" / "last.pt"
        if not checkpoint.is_file():
            raise SystemExit(f"verdict_decoding: {checkpoint}: no such checkpoint (a finished PPO run's last.pt)")
        runs[str(seed)] = {}
        for decoding in DECODINGS:
            generator = torch.Generator().manual_seed(SAMPLING_SEED)
            metrics = on_fresh_boards(checkpoint, args.boards, args.device, prepare=reading(decoding, generator))
            runs[str(seed)][decoding] = metrics
            rows.append({"seed": seed, "verdict read as": decoding, "success": f"{metrics['rate']:.0%}",
                         "guesses": metrics["guesses"], "timed out": metrics["timed_out"],
                         **{kind.replace("_", " "): n for kind, n in metrics["failures"].items()
                            if kind != "unstable"}})
        stalled[str(seed)] = stalls(checkpoint, args.boards, args.device)
    print(markdown_table(rows))
    return {"runs_folder": str(args.runs), "boards": args.boards, "sampling_seed": SAMPLING_SEED, "runs": runs,
            "stalls": stalled, "table": rows}


if __name__ == "__main__":
    sys.exit(BENCHMARK.main(run, options))
