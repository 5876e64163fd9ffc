"""What a BC policy's verdict head says where the expert would answer: localized and at rest.

Runs each checkpoint deterministically on fresh boards and, on every step whose outcome is localized with the arm
at rest (joint speed at most the expert's ``rest_speed``), reads the policy's probability of answering now,
1 - p(continue), for the observation of that outcome. The expert answers at rest once well inside the
localization tolerances (half of them); a policy whose probability stays below one half on such steps never
answers there (its mode is "continue"). Beside it, how many such steps there were and their joint speed.

With ``--data`` (each checkpoint's demos), on localized demo frames: the policy's median probability of answering
on the expert's verdict frames and on the frames it waited on, and how well a fresh MLP on the checkpoint's
frozen encoder features tells the two apart (fitted on 3/4 of the frames, accuracy on the rest): whether the
features hold what the verdict head did not learn.

    python benchmarks/verdict_probe.py --variant ur5e-panda   # bc_quality's recipe and Panda-velocities runs
"""

from __future__ import annotations

import statistics
import sys

import torch
from harness import Benchmark, Variant

from robot_rl import keys
from robot_rl.closed_loop import run_episodes
from robot_rl.envs.tasks import get_task
from robot_rl.policy import actor_network
from robot_rl.policy_io import load_actor
from robot_rl.pretrain.dataset import DemoDataset
from robot_rl.tables import markdown_table

FIRST_SEED = 32_000_000  # apart from BC's checks (10,000,000+) and the fresh-board evaluations (30,000,000+)

BENCHMARK = Benchmark("verdict_probe", __doc__, variants=(
    Variant("ur5e-panda", ("--checkpoint", "runs/bc-quality/checkpoints/last.pt",
                           "runs/bc-panda-vel/checkpoints/last.pt", "--data", "data/demos", "data/demos-panda",
                           "--out", "benchmarks/results/verdict_probe.json"),
            "the recipe's and the Panda-velocities policy's verdict heads (bc_quality's runs)"),
), common={"boards": (10, "fresh boards per checkpoint"), "out": "required"})


def probe(checkpoint: str, boards: int) -> dict:
    actor, provenance, path = load_actor(checkpoint)
    network = actor_network(actor)
    rest_speed = get_task(provenance.task).expert_class().config.rest_speed
    env = provenance.make_env(num_envs=1, episode_seeds=list(range(FIRST_SEED, FIRST_SEED + boards)))
    steps, at_rest_answer, at_rest_speed, localized_steps = 0, [], [], 0

    def read(slot: int, step) -> None:
        nonlocal steps, localized_steps
        outcome = step.get(keys.NEXT)
        joint_state = outcome.get(keys.JOINT_STATE)
        speed = float(joint_state[joint_state.numel() // 2:].norm())
        steps += 1
        if not bool(outcome.get(keys.LOCALIZED)):
            return
        localized_steps += 1
        if speed > rest_speed:
            return
        with torch.no_grad():
            logits = network(outcome.get(keys.PIXELS)[None], joint_state[None])[2]
        at_rest_answer.append(1.0 - float(logits.softmax(-1)[0, 0]))
        at_rest_speed.append(speed)

    episodes = run_episodes(env, actor, boards, callback=read)
    env.close()
    answered = sum(int(e.get(keys.VERDICT)[-1]) > 0 for e in episodes)
    return {"checkpoint": str(path), "arm": provenance.arm, "task": provenance.task, "boards": boards,
            "seeds": [FIRST_SEED, FIRST_SEED + boards - 1], "steps": steps, "answered_episodes": answered,
            "localized_steps": localized_steps, "localized_at_rest_steps": len(at_rest_answer),
            "expert_rest_speed": rest_speed,
            "median_p_answer_at_rest": round(statistics.median(at_rest_answer), 3) if at_rest_answer else None,
            "max_p_answer_at_rest": round(max(at_rest_answer), 3) if at_rest_answer else None,
            "median_speed_at_rest": round(statistics.median(at_rest_speed), 3) if at_rest_speed else None}


@torch.no_grad()
def _features_and_answer_probability(network, data, frames: torch.Tensor, batch: int = 200):
    features, answer = [], []
    for start in range(0, len(frames), batch):
        rows = frames[start:start + batch]
        out = network.encoder(data[keys.PIXELS][rows], data[keys.JOINT_STATE][rows].float())
        features.append(out)
        answer.append(1.0 - network.heads(out)[2].softmax(-1)[:, 0])
    return torch.cat(features), torch.cat(answer)


def demo_frames(checkpoint: str, data_path: str, frames: int, fit_steps: int = 2000) -> dict:
    """The policy's answer probability on localized demo frames, and a fresh head on its frozen features."""
    actor, _, _ = load_actor(checkpoint)
    network = actor_network(actor).eval()
    data = DemoDataset.open(data_path).data
    generator = torch.Generator().manual_seed(0)
    localized = torch.nonzero(data[keys.LOCALIZED].reshape(-1)).reshape(-1)
    chosen = localized[torch.randperm(len(localized), generator=generator)[:frames]]
    features, answer = _features_and_answer_probability(network, data, chosen)
    label = (data[keys.EXPERT_VERDICT].reshape(-1)[chosen] > 0).long()
    fit = len(chosen) * 3 // 4
    torch.manual_seed(0)  # the head's initialization: the same figures on every run
    head = torch.nn.Sequential(torch.nn.Linear(features.shape[1], 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                               torch.nn.ReLU(), torch.nn.Linear(256, 2))
    optimizer = torch.optim.Adam(head.parameters(), lr=1e-3)
    weight = torch.tensor([1.0, float((label[:fit] == 0).sum()) / max(1, int(label[:fit].sum()))])  # balanced
    for _ in range(fit_steps):
        rows = torch.randint(0, fit, (256,), generator=generator)
        loss = torch.nn.functional.cross_entropy(head(features[rows]), label[rows], weight=weight)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        predicted = head(features[fit:]).argmax(-1)
    held_out = label[fit:]
    return {"demo_frames": len(chosen), "verdict_frames": int(label.sum()),
            "held_out_verdict_frames": int(held_out.sum()),
            "policy_median_p_answer_on_verdict_frames": round(float(answer[label == 1].median()), 3),
            "policy_median_p_answer_on_waiting_frames": round(float(answer[label == 0].median()), 3),
            "fresh_head_held_out_recall_verdict": round(float((predicted[held_out == 1] == 1).float().mean()), 3),
            "fresh_head_held_out_recall_waiting": round(float((predicted[held_out == 0] == 0).float().mean()), 3)}


def options(parser) -> None:
    parser.add_argument("--checkpoint", nargs="+", required=True, help="BC run folders or .pt files")
    parser.add_argument("--data", nargs="*", default=[],
                        help="each checkpoint's demos, in order: also probe localized demo frames")
    parser.add_argument("--frames", type=int, default=4000, help="localized demo frames probed with --data")


def run(args) -> dict | int:
    torch.set_num_threads(1)
    if args.data and len(args.data) != len(args.checkpoint):
        print(f"verdict_probe: --data: {len(args.data)} folders for {len(args.checkpoint)} checkpoints",
              file=sys.stderr)
        return 2
    rows = [probe(checkpoint, args.boards) for checkpoint in args.checkpoint]
    for row, data in zip(rows, args.data):
        row.update(data=data, **demo_frames(row["checkpoint"], data, args.frames))
    print(markdown_table(rows, ["checkpoint", "boards", "answered_episodes", "localized_steps",
                                "localized_at_rest_steps", "median_p_answer_at_rest", "max_p_answer_at_rest",
                                "median_speed_at_rest", *(["policy_median_p_answer_on_verdict_frames",
                                "policy_median_p_answer_on_waiting_frames", "fresh_head_held_out_recall_verdict",
                                "fresh_head_held_out_recall_waiting"] if args.data else [])]))
    return {"rows": rows}


if __name__ == "__main__":
    sys.exit(BENCHMARK.main(run, options))
