"""How a PPO policy's verdict is read: its last policies on the same fresh boards, the verdict taken three ways.

- ``mode``: the most likely of the three verdicts (continue, pass, rework), as every evaluation, check and export
  reads the deterministic policy;
- ``factored-mode``: answer when p(answer now) >= 1/2, then the likelier answer (the mode of the "answer now?" x
  "which answer" factoring PPO samples from, ``robot_rl.policy.factored_verdict_logits``);
- ``sampled``: drawn from the verdict's distribution at every step, as PPO's collection draws it (seeded).

The pose is the deterministic one in all three. Why: PPO optimizes the sampled policy; a per-step "answer now?"
decision that the sampled policy takes at some step at the inspection view (p(answer now) below 1/2 on each) is
never taken by the deterministic one, which then times out at the view. The lead task's million-frame runs ended
with last policies failing that way while their training episodes' success (the run logs' ``train/success_rate``)
kept rising.

    python benchmarks/verdict_decoding.py --variant lead-encoder-1m  # results/verdict_decoding_lead-encoder-1m.json
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from harness import Benchmark, Variant
from protocols import PRESETS, on_fresh_boards

from robot_rl.policy import ActorHeads
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


def options(parser) -> None:
    parser.add_argument("--runs", type=Path, required=True, help="the folder holding the PPO runs bc-seedN")


def run(args) -> dict:
    if not args.seeds:
        raise SystemExit("verdict_decoding: --seeds: name the PPO runs' seeds")
    runs, rows = {}, []
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
    print(markdown_table(rows))
    return {"runs_folder": str(args.runs), "boards": args.boards, "sampling_seed": SAMPLING_SEED, "runs": runs,
            "table": rows}


if __name__ == "__main__":
    sys.exit(BENCHMARK.main(run, options))
